/* JSONL datasets: a line at a time with getline (lines of any length), each
 * parsed by jansson, every problem reported as FILE:LINE: so that a bad row in
 * a million-line file can be found with an editor. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "runtime/base/json.h"
#include "runtime/data/dataset.h"
#include "runtime/data/rows.h"

/* At most this many keys are listed when the wanted one is missing: enough
 * to spot "question" instead of "problem", short enough for one line. */
#define MAX_KEYS_LISTED 5

int rl_rows_fail(const struct rl_rows *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (l->lineno)
		n = snprintf(l->err, l->errlen, "%s:%zu: ", l->path, l->lineno);
	else
		n = snprintf(l->err, l->errlen, "%s: ", l->path);
	if (n < 0 || (size_t)n >= l->errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(l->err + n, l->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

size_t rl_utf8_check(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		unsigned char c = u[i];
		size_t len;
		uint32_t cp, min;

		if (c == 0)
			return i;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			len = 2, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3, cp = c & 0x0f, min = 0x800;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4, cp = c & 0x07, min = 0x10000;
		} else {
			return i; /* a continuation byte, 0xc0/0xc1 or 0xf5.. */
		}
		if (n - i < len)
			return i;
		for (size_t k = 1; k < len; k++) {
			if ((u[i + k] & 0xc0) != 0x80)
				return i;
			cp = (cp << 6) | (u[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += len;
	}
	return n;
}

int rl_rows_missing_field(const struct rl_rows *l, json_t *obj, const char *key)
{
	char list[512] = "";
	size_t used = 0, shown = 0, total = json_object_size(obj);
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v)
	{
		int w;

		if (shown == MAX_KEYS_LISTED)
			break;
		w = snprintf(list + used, sizeof list - used, "%s%s", shown ? ", " : "", k);
		if (w < 0 || (size_t)w >= sizeof list - used)
			break;
		used += (size_t)w;
		shown++;
	}
	if (total == 0)
		return rl_rows_fail(l, "no field '%s' (the object is empty)", key);
	if (shown < total)
		return rl_rows_fail(l, "no field '%s' (fields: %s, and %zu more)", key, list,
		                    total - shown);
	return rl_rows_fail(l, "no field '%s' (fields: %s)", key, list);
}

/* The shortest %.Ng that strtod reads back as the same double: what
 * Python's repr prints for most values, without its trailing ".0". */
static char *real_text(double v)
{
	char buf[64];

	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof buf, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	return strdup(buf);
}

/* 1 with *out set (NULL for no answer), 0 on a reported error. */
static int take_answer(const struct rl_rows *l, json_t *obj, const char *key, bool need, char **out)
{
	json_t *v = json_object_get(obj, key);
	char buf[32];

	*out = NULL;
	if (!v) {
		if (!need)
			return 1;
		rl_rows_missing_field(l, obj, key);
		return 0;
	}
	switch (json_typeof(v)) {
	case JSON_STRING:
		*out = strdup(json_string_value(v));
		break;
	case JSON_INTEGER:
		snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		*out = strdup(buf);
		break;
	case JSON_REAL:
		*out = real_text(json_real_value(v));
		break;
	case JSON_NULL:
		if (!need)
			return 1;
		/* fall through */
	default:
		rl_rows_fail(l, "field '%s' is %s, expected a string or a number", key,
		             rl_json_type_name(v));
		return 0;
	}
	if (!*out) {
		rl_rows_fail(l, "out of memory");
		return 0;
	}
	return 1;
}

/* The row's extra_env_info (NeMo-RL's key) as compact JSON text, keys
 * in the file's order: what the environment gets with the episode.
 * 1 with *out set (NULL for none), 0 on a reported error. */
#define METADATA_KEY "extra_env_info"
static int take_metadata(const struct rl_rows *l, json_t *obj, char **out)
{
	json_t *v = json_object_get(obj, METADATA_KEY);

	*out = NULL;
	if (!v || json_is_null(v))
		return 1;
	if (!json_is_object(v)) {
		rl_rows_fail(l,
		             "field '%s' is %s, expected an object (what the row gives its "
		             "environment)",
		             METADATA_KEY, rl_json_type_name(v));
		return 0;
	}
	*out = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!*out) {
		rl_rows_fail(l, "out of memory");
		return 0;
	}
	return 1;
}

/* The problem and answer of a prompt data set's row. */
struct prompt_keys {
	const char *input_key, *output_key;
	bool need_answer;
};

static int parse_prompt_row(const struct rl_rows *l, json_t *root, struct rl_example *ex, void *ctx)
{
	const struct prompt_keys *k = ctx;
	const char *problem;

	if (!rl_rows_take_string(l, root, k->input_key, &problem))
		return -1;
	if (!take_answer(l, root, k->output_key, k->need_answer, &ex->answer))
		return -1;
	if (!take_metadata(l, root, &ex->metadata)) {
		free(ex->answer);
		ex->answer = NULL;
		return -1;
	}
	ex->problem = strdup(problem);
	if (!ex->problem) {
		free(ex->answer);
		free(ex->metadata);
		ex->answer = ex->metadata = NULL;
		return rl_rows_fail(l, "out of memory");
	}
	return 0;
}

int rl_rows_take_string(const struct rl_rows *l, json_t *obj, const char *key, const char **out)
{
	json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (!v) {
		rl_rows_missing_field(l, obj, key);
		return 0;
	}
	if (!json_is_string(v)) {
		rl_rows_fail(l, "field '%s' is %s, expected a string", key, rl_json_type_name(v));
		return 0;
	}
	if (json_string_length(v) == 0) {
		rl_rows_fail(l, "field '%s' is empty", key);
		return 0;
	}
	*out = json_string_value(v);
	return 1;
}

/* Parses one non-blank line, a JSON object, and hands it to parse.
 * Returns 0 or -1 (reported). */
static int parse_line(const struct rl_rows *l, const char *line, size_t len, rl_row_parse parse,
                      void *ctx, struct rl_example *ex)
{
	size_t bad = rl_utf8_check(line, len);
	json_error_t jerr;
	json_t *root;
	int rc = -1;

	if (bad < len) {
		if (line[bad] == '\0')
			return rl_rows_fail(l, "a NUL byte at byte %zu of the line", bad + 1);
		return rl_rows_fail(l, "not valid UTF-8 at byte %zu of the line", bad + 1);
	}
	root = json_loadb(line, len, JSON_DECODE_ANY, &jerr);
	if (!root) {
		if (jerr.column > 0)
			return rl_rows_fail(l, "not valid JSON: %s (column %d)", jerr.text,
			                    jerr.column);
		return rl_rows_fail(l, "not valid JSON: %s", jerr.text);
	}
	if (!json_is_object(root))
		rl_rows_fail(l, "the line is %s, expected a JSON object", rl_json_type_name(root));
	else
		rc = parse(l, root, ex, ctx);
	json_decref(root);
	return rc;
}

static bool is_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

int rl_dataset_load_jsonl(const char *path, const char *input_key, const char *output_key,
                          bool need_answer, struct rl_dataset *ds, char *err, size_t errlen)
{
	struct prompt_keys k = {input_key, output_key, need_answer};

	return rl_rows_load(path, parse_prompt_row, &k, ds, err, errlen);
}

/* The roles a conversation may hold, as chat templates know them. */
static bool known_role(const char *r)
{
	return strcmp(r, "system") == 0 || strcmp(r, "user") == 0 || strcmp(r, "assistant") == 0 ||
	       strcmp(r, "tool") == 0;
}

/* A chat data set's row: row[key] is a list of {"role", "content"}
 * objects with string contents, at least one from the user and one from
 * the assistant. Fills ex->messages (a reference) and ex->problem (the
 * first user message, for messages and the validation table). */
static int parse_chat_row(const struct rl_rows *l, json_t *root, struct rl_example *ex, void *ctx)
{
	const char *key = ctx;
	json_t *msgs = json_object_get(root, key), *m;
	const char *first_user = NULL;
	bool assistant = false;
	size_t i;

	if (!msgs)
		return rl_rows_missing_field(l, root, key);
	if (!json_is_array(msgs))
		return rl_rows_fail(l, "field '%s' is %s, expected a list of messages", key,
		                    rl_json_type_name(msgs));
	json_array_foreach(msgs, i, m)
	{
		json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");

		if (!json_is_object(m))
			return rl_rows_fail(
			    l, "%s[%zu] is %s, expected an object with role and content", key, i,
			    rl_json_type_name(m));
		if (!json_is_string(role) || !known_role(json_string_value(role)))
			return rl_rows_fail(
			    l, "%s[%zu].role must be system, user, assistant or tool", key, i);
		if (!json_is_string(content))
			return rl_rows_fail(l, "%s[%zu].content is %s, expected a string", key, i,
			                    content ? rl_json_type_name(content) : "missing");
		if (!first_user && strcmp(json_string_value(role), "user") == 0)
			first_user = json_string_value(content);
		assistant |= strcmp(json_string_value(role), "assistant") == 0;
	}
	if (!first_user || !assistant)
		return rl_rows_fail(l, "field '%s' needs a user message and an assistant message",
		                    key);
	if (!(ex->problem = strdup(first_user)))
		return rl_rows_fail(l, "out of memory");
	ex->messages = json_incref(msgs);
	return 0;
}

int rl_dataset_load_chat(const char *path, const char *chat_key, struct rl_dataset *ds, char *err,
                         size_t errlen)
{
	return rl_rows_load(path, parse_chat_row, (void *)chat_key, ds, err, errlen);
}

int rl_rows_load(const char *path, rl_row_parse parse, void *ctx, struct rl_dataset *ds, char *err,
                 size_t errlen)
{
	struct rl_rows l = {.path = path, .err = err, .errlen = errlen};
	struct rl_dataset d = {0};
	size_t cap = 0, linecap = 0;
	char *line = NULL;
	ssize_t got;
	FILE *f;

	memset(ds, 0, sizeof *ds);
	f = fopen(path, "r");
	if (!f)
		return rl_rows_fail(&l, "cannot open: %s", strerror(errno));
	d.path = strdup(path);
	if (!d.path) {
		rl_rows_fail(&l, "out of memory");
		goto fail;
	}
	while ((got = getline(&line, &linecap, f)) != -1) {
		size_t len = (size_t)got;
		char *text = line;

		l.lineno++;
		if (len && text[len - 1] == '\n')
			len--;
		if (len && text[len - 1] == '\r')
			len--;
		if (l.lineno == 1 && len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
			text += 3, len -= 3;
		if (is_blank(text, len))
			continue;
		if (d.n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			struct rl_example *nex = NULL;

			if (ncap <= SIZE_MAX / sizeof *nex)
				nex = realloc(d.ex, ncap * sizeof *nex);
			if (!nex) {
				rl_rows_fail(&l, "out of memory");
				goto fail;
			}
			d.ex = nex;
			cap = ncap;
		}
		d.ex[d.n] = (struct rl_example){0};
		if (parse_line(&l, text, len, parse, ctx, &d.ex[d.n]))
			goto fail;
		d.n++;
	}
	if (ferror(f)) {
		l.lineno = 0;
		rl_rows_fail(&l, "cannot read: %s", strerror(errno));
		goto fail;
	}
	if (d.n == 0) {
		l.lineno = 0;
		rl_rows_fail(&l, "no examples (the file has no non-blank lines)");
		goto fail;
	}
	free(line);
	fclose(f);
	*ds = d;
	return 0;
fail:
	free(line);
	fclose(f);
	rl_dataset_free(&d);
	return -1;
}

void rl_dataset_free(struct rl_dataset *ds)
{
	for (size_t i = 0; i < ds->n; i++) {
		free(ds->ex[i].problem);
		free(ds->ex[i].answer);
		free(ds->ex[i].rejected);
		free(ds->ex[i].metadata);
		json_decref(ds->ex[i].messages);
	}
	free(ds->ex);
	free(ds->path);
	memset(ds, 0, sizeof *ds);
}
