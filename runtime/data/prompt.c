/* Prompt templates: loaded and validated once, rendered per example. The
 * renderer trusts the validation, so a template that got past rl_prompt_load
 * cannot fail later for anything but memory. */
#define _GNU_SOURCE
#include <errno.h>
#include <strings.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "runtime/chat/chat_template.h"
#include "runtime/data/dataset.h"
#include "runtime/data/prompt.h"
#include "runtime/model/hub.h"

#define INLINE_TEMPLATE "data.prompt_template"
#define INLINE_SYSTEM   "data.system_prompt"

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

/* 1-based line and column (in characters) of byte offset `at` of valid
 * UTF-8 text s. */
static void line_col(const char *s, size_t at, size_t *line, size_t *col)
{
	*line = 1, *col = 1;
	for (size_t i = 0; i < at; i++) {
		if (s[i] == '\n')
			(*line)++, *col = 1;
		else if (((unsigned char)s[i] & 0xc0) != 0x80)
			(*col)++;
	}
}

/* The whole file, NUL-terminated, one trailing newline removed. */
static char *read_text(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	size_t len = 0, cap = 4096, got, bad, line, col;
	char *buf, *nbuf;

	if (!f) {
		fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(cap);
	while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += got;
		if (len == cap - 1) {
			nbuf = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
			if (!nbuf) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nbuf;
			cap *= 2;
		}
	}
	if (!buf) {
		fclose(f);
		fail(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	if (ferror(f)) {
		fail(err, errlen, "%s: cannot read: %s", path, strerror(errno));
		goto fail;
	}
	fclose(f);
	f = NULL;
	buf[len] = '\0';
	bad = rl_utf8_check(buf, len);
	if (bad < len) {
		line_col(buf, bad, &line, &col);
		fail(err, errlen, "%s:%zu:%zu: %s", path, line, col,
		     buf[bad] ? "not valid UTF-8" : "a NUL byte");
		goto fail;
	}
	if (len && buf[len - 1] == '\n') {
		buf[--len] = '\0';
		if (len && buf[len - 1] == '\r')
			buf[--len] = '\0';
	}
	return buf;
fail:
	if (f)
		fclose(f);
	free(buf);
	return NULL;
}

/* Checks the str.format syntax described in prompt.h. */
static int validate(const char *t, const char *source, char *err, size_t errlen)
{
	size_t fields = 0, line, col;
	const char *bad = NULL, *why = NULL;
	int flen = 0;

	for (const char *c = t; *c && !bad; c++) {
		if (*c == '{' && c[1] == '{') {
			c++;
		} else if (*c == '}' && c[1] == '}') {
			c++;
		} else if (*c == '}') {
			bad = c, why = "a single '}' (write }} for a literal brace)";
		} else if (*c == '{') {
			const char *end = strchr(c + 1, '}');

			if (!end) {
				bad = c,
				why = "a '{' with no closing '}' (write {{ for a literal brace)";
			} else if (end == c + 1 ||
			           (end - c - 1 == 7 && !strncmp(c + 1, "problem", 7))) {
				fields++;
				c = end;
			} else {
				bad = c, flen = (int)(end - c + 1);
			}
		}
	}
	if (bad) {
		line_col(t, (size_t)(bad - t), &line, &col);
		if (why)
			return fail(err, errlen, "%s:%zu:%zu: %s", source, line, col, why);
		return fail(err, errlen,
		            "%s:%zu:%zu: unknown field %.*s; the problem is {} or {problem}, and "
		            "{{ and }} are literal braces",
		            source, line, col, flen, bad);
	}
	if (fields == 0)
		return fail(err, errlen,
		            "%s: the template has no {} or {problem}, so the problem would not "
		            "appear in the prompt",
		            source);
	return 0;
}

/* Loads one of FILE_PATH / INLINE (named INLINE_NAME) into *out (NULL when
 * neither is set). */
static int pick(const char *file_path, const char *file_key, const char *inline_text,
                const char *inline_name, char **out, char **source, char *err, size_t errlen)
{
	*out = NULL;
	if (file_path && inline_text)
		return fail(err, errlen, "%s and %s are both set; set one of them", file_key,
		            inline_name);
	if (file_path) {
		*out = read_text(file_path, err, errlen);
		if (!*out) {
			/* the key too: the path alone may not say which file it was */
			char *msg = strdup(err);
			if (msg)
				snprintf(err, errlen, "%s: %s", file_key, msg);
			free(msg);
			return -1;
		}
	} else if (inline_text) {
		size_t len = strlen(inline_text), bad = rl_utf8_check(inline_text, len), line, col;

		if (bad < len) {
			line_col(inline_text, bad, &line, &col);
			return fail(err, errlen, "%s:%zu:%zu: not valid UTF-8", inline_name, line,
			            col);
		}
		*out = strdup(inline_text);
		if (!*out)
			return fail(err, errlen, "%s: out of memory", inline_name);
	}
	if (source) {
		*source = strdup(file_path ? file_path : inline_name);
		if (!*source) {
			free(*out);
			*out = NULL;
			return fail(err, errlen, "%s: out of memory", inline_name);
		}
	}
	return 0;
}

int rl_prompt_load(struct rl_prompt *p, const struct rl_cfg_data *cfg, char *err, size_t errlen)
{
	struct rl_prompt q = {0};

	memset(p, 0, sizeof *p);
	if (pick(cfg->prompt_file, "data.prompt_file", cfg->prompt_template, INLINE_TEMPLATE,
	         &q.template_text, &q.source, err, errlen))
		goto fail;
	if (!q.template_text) {
		q.template_text = strdup("{}");
		if (!q.template_text) {
			fail(err, errlen, "%s: out of memory", INLINE_TEMPLATE);
			goto fail;
		}
	}
	if (validate(q.template_text, q.source, err, errlen))
		goto fail;
	if (pick(cfg->system_prompt_file, "data.system_prompt_file", cfg->system_prompt,
	         INLINE_SYSTEM, &q.system_text, NULL, err, errlen))
		goto fail;
	if (q.system_text && !q.system_text[0]) {
		free(q.system_text);
		q.system_text = NULL;
	}
	*p = q;
	return 0;
fail:
	rl_prompt_free(&q);
	return -1;
}

/* Writes the expansion of validated template t into out (when not NULL) and
 * returns its length. */
static size_t expand(const char *t, const char *problem, size_t plen, char *out)
{
	size_t n = 0;

	for (const char *c = t; *c; c++) {
		if (*c == '{' && c[1] != '{') {
			if (out)
				memcpy(out + n, problem, plen);
			n += plen;
			c = strchr(c, '}');
			continue;
		}
		if ((*c == '{' || *c == '}') && c[1] == *c)
			c++;
		if (out)
			out[n] = *c;
		n++;
	}
	return n;
}

/* The plain text: system prompt, separator, expanded template */
static char *render_plain(const struct rl_prompt *p, const char *problem, size_t system_len,
                          size_t sep_len)
{
	size_t plen = strlen(problem), body = expand(p->template_text, problem, plen, NULL);
	size_t head = p->system_text ? system_len + sep_len : 0;
	char *out;

	if (body > SIZE_MAX - head - 1)
		return NULL;
	out = malloc(head + body + 1);
	if (!out)
		return NULL;
	if (p->system_text) {
		memcpy(out, p->system_text, system_len);
		memcpy(out + system_len, RL_PROMPT_SYSTEM_SEPARATOR, sep_len);
	}
	expand(p->template_text, problem, plen, out + head);
	out[head + body] = '\0';
	return out;
}

/* one message through the chat template */
static char *render_turn(const struct rl_prompt *p, const char *role, const char *content,
                         bool add_generation_prompt, size_t *len, char *err, size_t errlen)
{
	json_t *messages = json_pack("[{s:s, s:s}]", "role", role, "content", content);
	char *out = NULL;

	if (!messages) {
		fail(err, errlen, "out of memory");
		return NULL;
	}
	if (rl_chat_template_apply(p->chat, messages, p->chat_vars, add_generation_prompt, &out,
	                           len, err, errlen))
		out = NULL;
	json_decref(messages);
	return out;
}

char *rl_prompt_user_text(const struct rl_prompt *p, const char *problem)
{
	struct rl_prompt plain = *p;

	plain.system_text = NULL;
	return render_plain(&plain, problem, 0, 0);
}

char *rl_prompt_render(const struct rl_prompt *p, const char *problem, char *err, size_t errlen)
{
	char *user, *sys = NULL, *out;
	size_t ulen, slen = 0;

	if (!p->chat) {
		out = render_plain(p, problem, p->system_text ? strlen(p->system_text) : 0,
		                   strlen(RL_PROMPT_SYSTEM_SEPARATOR));
		if (!out)
			fail(err, errlen, "out of memory");
		return out;
	}
	/* NeMo-RL's math processor: [system] alone, then [user] alone with
	 * the generation prompt, the texts concatenated */
	{
		struct rl_prompt plain = *p;

		plain.system_text = NULL;
		user = render_plain(&plain, problem, 0, 0);
	}
	if (!user) {
		fail(err, errlen, "out of memory");
		return NULL;
	}
	out = render_turn(p, "user", user, true, &ulen, err, errlen);
	free(user);
	if (!out)
		return NULL;
	if (!p->system_text)
		return out;
	sys = render_turn(p, "system", p->system_text, false, &slen, err, errlen);
	if (!sys || !(user = malloc(slen + ulen + 1))) {
		if (sys)
			fail(err, errlen, "out of memory");
		free(sys);
		free(out);
		return NULL;
	}
	memcpy(user, sys, slen);
	memcpy(user + slen, out, ulen + 1);
	free(sys);
	free(out);
	return user;
}

/* The template policy.tokenizer.chat_template names, or NULL (no error)
 * when prompts stay plain text. */
static int resolve_chat_in(const struct rl_config *cfg, const char *dir,
                           struct rl_chat_template **out, char *err, size_t errlen);

static int resolve_chat(const struct rl_config *cfg, struct rl_chat_template **out, char *err,
                        size_t errlen)
{
	const char *name = cfg->policy.tokenizer_name;
	char *dir = NULL;
	int rc;

	*out = NULL;
	/* a built-in model has no files; a hub name is its cached snapshot */
	if (name && strncmp(name, "builtin:", 8) &&
	    !(dir = rl_hub_resolve(name, "policy.tokenizer.name", NULL, err, errlen)))
		return -1;
	rc = resolve_chat_in(cfg, dir, out, err, errlen);
	free(dir);
	return rc;
}

static int resolve_chat_in(const struct rl_config *cfg, const char *dir,
                           struct rl_chat_template **out, char *err, size_t errlen)
{
	const char *spec = cfg->policy.chat_template;
	size_t n;

	if (!spec)
		return rl_chat_template_from_text(
		    out, RL_CHAT_PASSTHROUGH, "policy.tokenizer.chat_template (null: passthrough)",
		    dir, err, errlen);
	if (!strcasecmp(spec, "default"))
		return dir ? rl_chat_template_load_model(out, dir, err, errlen) : 0;
	n = strlen(spec);
	if (n > 6 && !strcmp(spec + n - 6, ".jinja")) {
		char *text = read_text(spec, err, errlen);
		int rc;

		if (!text) {
			size_t l = strlen(err);
			snprintf(err + l, errlen - l, " (policy.tokenizer.chat_template)");
			return -1;
		}
		rc = rl_chat_template_from_text(out, text, spec, dir, err, errlen);
		free(text);
		return rc;
	}
	return rl_chat_template_from_text(out, spec, "policy.tokenizer.chat_template", dir, err,
	                                  errlen);
}

int rl_prompt_chat_template_applies(const struct rl_config *cfg, bool *applies, char *err,
                                    size_t errlen)
{
	struct rl_chat_template *t;

	if (resolve_chat(cfg, &t, err, errlen))
		return -1;
	*applies = t != NULL;
	rl_chat_template_free(t);
	return 0;
}

int rl_prompt_use_chat_template(struct rl_prompt *p, const struct rl_config *cfg, char *err,
                                size_t errlen)
{
	char *sample;

	rl_chat_template_free(p->chat);
	json_decref(p->chat_vars);
	p->chat = NULL, p->chat_vars = NULL;
	if (resolve_chat(cfg, &p->chat, err, errlen))
		return -1;
	if (!p->chat)
		return 0;
	if (cfg->policy.chat_template_kwargs) {
		json_error_t je;

		p->chat_vars = json_loads(cfg->policy.chat_template_kwargs, 0, &je);
		if (!json_is_object(p->chat_vars)) {
			fail(err, errlen,
			     "policy.tokenizer.chat_template_kwargs: not a mapping (%s)", je.text);
			rl_chat_template_free(p->chat);
			json_decref(p->chat_vars);
			p->chat = NULL, p->chat_vars = NULL;
			return -1;
		}
	}
	/* a template that raises on these prompts says so now */
	sample = rl_prompt_render(p, "1 + 1", err, errlen);
	if (!sample) {
		rl_chat_template_free(p->chat);
		json_decref(p->chat_vars);
		p->chat = NULL, p->chat_vars = NULL;
		return -1;
	}
	free(sample);
	return 0;
}

void rl_prompt_free(struct rl_prompt *p)
{
	rl_chat_template_free(p->chat);
	json_decref(p->chat_vars);
	free(p->template_text);
	free(p->system_text);
	free(p->source);
	memset(p, 0, sizeof *p);
}
