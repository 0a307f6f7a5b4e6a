/* A model's chat template: found in its files, rendered over a
 * conversation with the variables transformers gives it. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "runtime/chat/chat_template.h"
#include "runtime/chat/jinja.h"

/* tokenizer_config.json and chat_template.jinja of real models are tens of
 * kilobytes; a file past this is not one */
#define MAX_FILE (64u << 20)

struct rl_chat_template {
	struct rl_jinja *jinja;
	json_t *tokens; /* {"bos_token": "...", ...} */
	char *source;
};

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int64_t rl_chat_now(void)
{
	const char *s = getenv("SOURCE_DATE_EPOCH");
	char *end;
	long long v;

	if (s && *s) {
		errno = 0;
		v = strtoll(s, &end, 10);
		if (!errno && !*end && v >= 0)
			return v;
	}
	return (int64_t)time(NULL);
}

/* The whole of a file no larger than MAX_FILE; NULL with err, and
 * *missing set when it does not exist. */
static char *read_file(const char *path, size_t *len, bool *missing, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	char *buf;

	*missing = false;
	if (!f) {
		*missing = errno == ENOENT;
		fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_FILE) {
		fclose(f);
		fail(err, errlen, "%s: not a regular file of at most %u bytes", path, MAX_FILE);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		fclose(f);
		free(buf);
		fail(err, errlen, "%s: cannot read", path);
		return NULL;
	}
	fclose(f);
	buf[st.st_size] = '\0';
	*len = (size_t)st.st_size;
	return buf;
}

/* tokenizer_config.json of dir, or NULL (no error) when there is none */
static int load_config(const char *dir, json_t **cfg, char **path, char *err, size_t errlen)
{
	json_error_t je;
	size_t len;
	bool missing;
	char *text;

	*cfg = NULL;
	if (asprintf(path, "%s/tokenizer_config.json", dir) < 0) {
		*path = NULL;
		return fail(err, errlen, "out of memory");
	}
	text = read_file(*path, &len, &missing, err, errlen);
	if (!text)
		return missing ? 0 : -1;
	*cfg = json_loadb(text, len, 0, &je);
	free(text);
	if (!*cfg)
		return fail(err, errlen, "%s:%d:%d: %s", *path, je.line, je.column, je.text);
	if (!json_is_object(*cfg)) {
		json_decref(*cfg);
		*cfg = NULL;
		return fail(err, errlen, "%s: not a JSON object", *path);
	}
	return 0;
}

/* the special tokens as the template sees them: a string, or an added
 * token's {"content": ...}; null ones are left out, as transformers'
 * special_tokens_map leaves them */
static int special_tokens(const json_t *cfg, const char *path, json_t **out, char *err,
                          size_t errlen)
{
	static const char *const names[] = {"bos_token", "eos_token", "unk_token", "pad_token",
	                                    NULL};

	*out = json_object();
	if (!*out)
		return fail(err, errlen, "out of memory");
	for (int i = 0; cfg && names[i]; i++) {
		json_t *v = json_object_get(cfg, names[i]);

		if (json_is_object(v))
			v = json_object_get(v, "content");
		if (!v || json_is_null(v))
			continue;
		if (!json_is_string(v)) {
			json_decref(*out);
			*out = NULL;
			return fail(err, errlen, "%s: %s must be a string or {\"content\": string}",
			            path, names[i]);
		}
		json_object_set(*out, names[i], v);
	}
	return 0;
}

static int make(struct rl_chat_template **out, const char *text, size_t len, const char *source,
                const json_t *cfg, const char *cfg_path, char *err, size_t errlen)
{
	struct rl_chat_template *t = calloc(1, sizeof *t);

	if (!t || !(t->source = strdup(source))) {
		free(t);
		return fail(err, errlen, "out of memory");
	}
	if (special_tokens(cfg, cfg_path, &t->tokens, err, errlen) ||
	    rl_jinja_compile(&t->jinja, text, len, source, err, errlen)) {
		rl_chat_template_free(t);
		return -1;
	}
	*out = t;
	return 0;
}

/* tokenizer_config.json's chat_template: a string, or named templates */
static const char *config_template(const json_t *cfg, const char *path, char *err, size_t errlen,
                                   bool *bad)
{
	json_t *v = json_object_get(cfg, "chat_template"), *e;
	size_t i;

	*bad = false;
	if (!v || json_is_null(v))
		return NULL;
	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
		{
			json_t *name = json_object_get(e, "name"),
			       *tmpl = json_object_get(e, "template");
			if (json_is_string(name) && !strcmp(json_string_value(name), "default") &&
			    json_is_string(tmpl))
				return json_string_value(tmpl);
		}
		*bad = true;
		fail(err, errlen,
		     "%s: chat_template lists named templates but none is named \"default\"; "
		     "give the one to use as policy.tokenizer.chat_template",
		     path);
		return NULL;
	}
	*bad = true;
	fail(err, errlen, "%s: chat_template must be a string or a list of {name, template}", path);
	return NULL;
}

int rl_chat_template_load_model(struct rl_chat_template **out, const char *dir, char *err,
                                size_t errlen)
{
	char *cfg_path = NULL, *file_path = NULL, *text = NULL;
	json_t *cfg = NULL;
	const char *tmpl;
	size_t len;
	bool missing, bad;
	int rc = -1;

	*out = NULL;
	if (load_config(dir, &cfg, &cfg_path, err, errlen))
		goto done;
	if (asprintf(&file_path, "%s/chat_template.jinja", dir) < 0) {
		file_path = NULL;
		fail(err, errlen, "out of memory");
		goto done;
	}
	text = read_file(file_path, &len, &missing, err, errlen);
	if (text) {
		rc = make(out, text, len, file_path, cfg, cfg_path, err, errlen);
		goto done;
	}
	if (!missing)
		goto done;
	rc = 0;
	if (!cfg)
		goto done;
	tmpl = config_template(cfg, cfg_path, err, errlen, &bad);
	if (bad)
		rc = -1;
	else if (tmpl)
		rc = make(out, tmpl, strlen(tmpl), cfg_path, cfg, cfg_path, err, errlen);
done:
	json_decref(cfg);
	free(cfg_path);
	free(file_path);
	free(text);
	return rc;
}

int rl_chat_template_from_text(struct rl_chat_template **out, const char *text, const char *origin,
                               const char *dir, char *err, size_t errlen)
{
	char *cfg_path = NULL;
	json_t *cfg = NULL;
	int rc;

	*out = NULL;
	if (dir && load_config(dir, &cfg, &cfg_path, err, errlen)) {
		free(cfg_path);
		return -1;
	}
	rc = make(out, text, strlen(text), origin, cfg, cfg_path ? cfg_path : origin, err, errlen);
	json_decref(cfg);
	free(cfg_path);
	return rc;
}

int rl_chat_template_apply(const struct rl_chat_template *t, const json_t *messages,
                           const json_t *extra, bool add_generation_prompt, char **out, size_t *len,
                           char *err, size_t errlen)
{
	json_t *vars = json_object();
	int rc;

	*out = NULL;
	if (!vars)
		return fail(err, errlen, "out of memory");
	if (!json_is_array(messages)) {
		json_decref(vars);
		return fail(err, errlen, "the messages must be a JSON array");
	}
	/* transformers: special tokens, then the caller's variables, then these */
	json_object_update(vars, t->tokens);
	if (extra && json_object_update(vars, (json_t *)extra)) {
		json_decref(vars);
		return fail(err, errlen, "the template's variables must be a JSON object");
	}
	json_object_set(vars, "messages", (json_t *)messages);
	if (!json_object_get(vars, "tools"))
		json_object_set_new(vars, "tools", json_null());
	if (!json_object_get(vars, "documents"))
		json_object_set_new(vars, "documents", json_null());
	json_object_set_new(vars, "add_generation_prompt", json_boolean(add_generation_prompt));
	rc = rl_jinja_render(t->jinja, vars, rl_chat_now(), NULL, out, len, err, errlen);
	json_decref(vars);
	return rc;
}

const char *rl_chat_template_source(const struct rl_chat_template *t)
{
	return t->source;
}

const char *rl_chat_template_special(const struct rl_chat_template *t, const char *name)
{
	return json_string_value(json_object_get(t->tokens, name));
}

void rl_chat_template_free(struct rl_chat_template *t)
{
	if (!t)
		return;
	rl_jinja_free(t->jinja);
	json_decref(t->tokens);
	free(t->source);
	free(t);
}
