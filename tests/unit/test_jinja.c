/* The chat-template engine against transformers: every case of
 * tests/fixtures/chat_templates/expected.json (written by
 * tests/fixtures/make_chat_fixtures.py with transformers' own
 * render_jinja_template) rendered by our engine must be the same text, byte
 * for byte: the real templates of Llama 3.1, Llama 3.2, Qwen2.5 and Qwen3
 * over conversations with and without system prompts, generation prompts,
 * thinking and tools, and small templates that each pin one rule
 * (whitespace control, scoping, operators, filters, tests, methods, how
 * values print). Then the engine's own errors: each names the template,
 * the line and the column, and what the subset lacks is refused. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/chat/jinja.h"

static char err[1024];

static char *fixture(const char *file)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *path = NULL;

	cr_assert_geq(asprintf(&path, "%s/tests/fixtures/chat_templates/%s", top, file), 0);
	return path;
}

static char *slurp(const char *file, size_t *len)
{
	char *path = fixture(file), *buf = NULL;
	FILE *f = fopen(path, "rb");

	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	*len = (size_t)ftell(f);
	rewind(f);
	buf = malloc(*len + 1);
	cr_assert_eq(fread(buf, 1, *len, f), *len);
	buf[*len] = '\0';
	fclose(f);
	free(path);
	return buf;
}

/* the variables transformers gives a template: messages, tools, documents,
 * add_generation_prompt, then the extra ones */
static json_t *variables_of(json_t *c)
{
	json_t *vars = json_object(), *extra = json_object_get(c, "variables");

	if (json_object_get(c, "messages")) {
		json_object_set(vars, "messages", json_object_get(c, "messages"));
		json_object_set_new(vars, "tools", json_deep_copy(json_object_get(c, "tools")));
		json_object_set_new(vars, "documents", json_null());
		json_object_set(vars, "add_generation_prompt",
		                json_object_get(c, "add_generation_prompt"));
	}
	json_object_update(vars, extra);
	return vars;
}

Test(jinja, renders_as_transformers_does)
{
	char *path = fixture("expected.json");
	json_error_t je;
	json_t *all = json_load_file(path, 0, &je), *cases, *c;
	size_t i, passed = 0;
	int64_t now;

	cr_assert_not_null(all, "%s:%d: %s", path, je.line, je.text);
	setenv("TZ", "UTC", 1);
	tzset();
	now = json_integer_value(json_object_get(all, "now"));
	cases = json_object_get(all, "cases");
	cr_assert_gt(json_array_size(cases), 100);
	json_array_foreach(cases, i, c)
	{
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *file = json_string_value(json_object_get(c, "template"));
		json_t *want = json_object_get(c, "expected"), *vars = variables_of(c);
		struct rl_jinja *t = NULL;
		char *src, *out = NULL;
		size_t len, olen = 0;
		int rc;

		if (file) {
			src = slurp(file, &len);
		} else {
			src = strdup(json_string_value(json_object_get(c, "source")));
			len = strlen(src);
		}
		rc = rl_jinja_compile(&t, src, len, file ? file : name, err, sizeof err);
		cr_expect_eq(rc, 0, "%s: %s", name, err);
		if (!rc)
			rc = rl_jinja_render(t, vars, now, NULL, &out, &olen, err, sizeof err);
		if (want) {
			cr_expect_eq(rc, 0, "%s: %s", name, err);
			if (!rc) {
				cr_expect(olen == json_string_length(want) &&
				              !memcmp(out, json_string_value(want), olen),
				          "%s: rendered\n[%s]\nexpected\n[%s]", name, out,
				          json_string_value(want));
				passed += olen == json_string_length(want) &&
				          !memcmp(out, json_string_value(want), olen);
			}
		} else { /* transformers raised: we must fail too, with its message */
			const char *msg = json_string_value(json_object_get(c, "error"));
			cr_expect_neq(rc, 0, "%s: rendered, transformers raised %s", name, msg);
			cr_expect(rc && strstr(err, msg), "%s: error [%s], transformers said [%s]",
			          name, err, msg);
			passed += rc && strstr(err, msg);
		}
		free(out);
		free(src);
		json_decref(vars);
		rl_jinja_free(t);
	}
	cr_log_info("%zu of %zu cases as transformers renders them", passed,
	            json_array_size(cases));
	json_decref(all);
	free(path);
}
