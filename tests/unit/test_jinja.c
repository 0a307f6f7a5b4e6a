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
		} else { /* transformers raised: we must fail too, with its message when
			  * the template raised it (Python's own errors are worded apart) */
			const char *msg = json_string_value(json_object_get(c, "error"));
			const char *said =
			    msg ? msg : json_string_value(json_object_get(c, "python_error"));
			bool same = rc && (!msg || strstr(err, msg));

			cr_expect_neq(rc, 0, "%s: rendered, transformers raised %s", name, said);
			cr_expect(same, "%s: error [%s], transformers said [%s]", name, err, said);
			passed += same;
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

/* ---- the engine's own errors: written by hand, each with its place ---- */

static int render_text(const char *src, const char *vars_json, const struct rl_jinja_limits *lim,
                       char **out)
{
	struct rl_jinja *t = NULL;
	json_t *vars = json_loads(vars_json ? vars_json : "{}", 0, NULL);
	size_t len;
	int rc;

	*out = NULL;
	cr_assert_not_null(vars);
	rc = rl_jinja_compile(&t, src, strlen(src), "t.jinja", err, sizeof err);
	if (!rc)
		rc = rl_jinja_render(t, vars, 0, lim, out, &len, err, sizeof err);
	json_decref(vars);
	rl_jinja_free(t);
	return rc;
}

static void expect_error(const char *src, const char *vars, const char *want)
{
	char *out;

	cr_expect_eq(render_text(src, vars, NULL, &out), -1, "rendered [%s] as [%s]", src, out);
	cr_expect_str_eq(err, want, "template [%s]: [%s]", src, err);
	free(out);
}

Test(jinja, syntax_errors_name_the_place)
{
	expect_error(
	    "a\n{% if x %}b", NULL,
	    "t.jinja:2:4: this {% if %} is never closed: expected {% endif %} before the end");
	expect_error("{{ 'abc }}", NULL, "t.jinja:1:4: a string that is never closed");
	expect_error("x {{ a + }}", NULL, "t.jinja:1:10: unexpected '}}'");
	expect_error("{% endfor %}", NULL, "t.jinja:1:4: unexpected {% endfor %}");
	expect_error("{{ a ] }}", NULL, "t.jinja:1:6: a closing bracket with no opening one");
	expect_error("{# never closed", NULL, "t.jinja:1:1: a {# comment that is never closed");
	expect_error("{{ 1 < 2 < 3 }}", NULL,
	             "t.jinja:1:10: chained comparisons (a < b < c) are not supported");
	expect_error("{% break %}", NULL, "t.jinja:1:4: {% break %} outside a for loop");
	expect_error("{{ x $ y }}", NULL,
	             "t.jinja:1:6: a character that is not part of Jinja's syntax");
}

Test(jinja, what_the_subset_lacks_is_refused)
{
	expect_error("{% call m() %}x{% endcall %}", NULL,
	             "t.jinja:1:4: the {% call %} statement is not supported");
	expect_error("{% filter upper %}x{% endfilter %}", NULL,
	             "t.jinja:1:4: the {% filter %} statement is not supported");
	expect_error("{% include 'x' %}", NULL,
	             "t.jinja:1:4: the {% include %} statement is not supported");
	expect_error("{% raw %}{{ x }}{% endraw %}", NULL,
	             "t.jinja:1:1: {% raw %} is not supported");
	expect_error("{% set x | upper %}body{% endset %}", NULL,
	             "t.jinja:1:10: filtered {% set %} blocks are not supported");
	expect_error("{% for x in y recursive %}{% endfor %}", NULL,
	             "t.jinja:1:15: 'for ... recursive' is not supported");
	expect_error("{{ 'a b' | wordcount }}", NULL,
	             "t.jinja:1:12: the filter 'wordcount' is not supported");
	expect_error("\n  {{ 'x' | wordwrap }}", NULL,
	             "t.jinja:2:12: the filter 'wordwrap' is not supported");
	expect_error("{{ 1 is prime }}", NULL, "t.jinja:1:9: the test 'prime' is not supported");
	expect_error("{{ 'x'.zfill(3) }}", NULL,
	             "t.jinja:1:4: a string has no method 'zfill' in this engine");
	expect_error("{{ d | tojson(sort_keys=true) }}", "{\"d\": {}}",
	             "t.jinja:1:8: tojson: only the argument indent is supported (ensure_ascii, "
	             "separators and sort_keys must stay at their defaults)");
	expect_error("{{ 'É' | lower }}", NULL,
	             "t.jinja:1:10: upper() and lower() of non-ASCII text are not supported");
	expect_error("{{ namespace(a=1) }}", NULL,
	             "t.jinja:1:4: cannot print this value: its text is Python's object address, "
	             "which this engine does not imitate");
	expect_error("{{ 9223372036854775807 + 1 }}", NULL,
	             "t.jinja:1:24: an integer overflow (numbers past 64 bits are not supported)");
}

Test(jinja, runtime_errors_name_the_place)
{
	expect_error("{{ messages[0].role }}", "{\"messages\": []}",
	             "t.jinja:1:4: 'messages[0]' is undefined");
	expect_error("{{ x.y }}", NULL, "t.jinja:1:4: 'x' is undefined");
	expect_error("{{ 'a' + x }}", NULL, "t.jinja:1:8: 'x' is undefined");
	expect_error("{{ 'a' + 1 }}", NULL,
	             "t.jinja:1:8: '+' is not supported between a string and an integer");
	expect_error("{{ 1 // 0 }}", NULL, "t.jinja:1:6: division by zero");
	expect_error("{{ 0 ** -1 }}", NULL, "t.jinja:1:6: zero to a negative power");
	expect_error("{{ 10.0 ** 400 }}", NULL, "t.jinja:1:9: a power out of the floats' range");
	expect_error("{{ (-8.0) ** 0.5 }}", NULL, "t.jinja:1:11: a power out of the floats' range");
	expect_error("{% set a, b = [1] %}", NULL,
	             "t.jinja:1:4: cannot unpack 1 values into 2 names");
	expect_error(
	    "{% set x.y = 1 %}", "{\"x\": {}}",
	    "t.jinja:1:4: 'x' is not a namespace(): only a namespace's attributes can be set");
	expect_error("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", NULL,
	             "t.jinja:1:41: the macro m takes 1 argument");
	expect_error("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=2) }}", NULL,
	             "t.jinja:1:41: the macro m has no parameter b");
	expect_error("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", NULL,
	             "t.jinja:1:19: nested deeper than the limit of 256");
	expect_error("{{ raise_exception('no tools') }}", NULL,
	             "t.jinja:1:4: the template raised an error: no tools");
}

Test(jinja, limits_bound_an_untrusted_template)
{
	struct rl_jinja_limits lim = RL_JINJA_LIMITS_DEFAULT;
	char *out, *deep;
	size_t n = 300;

	/* a loop that would run for ever is stopped by the step limit */
	lim.max_steps = 10000;
	cr_expect_eq(render_text("{% for i in range(100000) %}{% for j in range(100000) %}"
	                         "{% endfor %}{% endfor %}",
	                         NULL, &lim, &out),
	             -1);
	cr_expect(strstr(err, "t.jinja:1:") && strstr(err, "more than 10000 steps"), "%s", err);
	/* output past the limit */
	lim = (struct rl_jinja_limits)RL_JINJA_LIMITS_DEFAULT;
	lim.max_output = 1000;
	cr_expect_eq(render_text("{% for i in range(2000) %}x{% endfor %}", NULL, &lim, &out), -1);
	cr_expect_str_eq(err, "t.jinja:1:27: the output is longer than the limit of 1000 bytes");
	/* memory: a string doubled until it does not fit */
	lim = (struct rl_jinja_limits)RL_JINJA_LIMITS_DEFAULT;
	lim.max_memory = 1 << 20;
	cr_expect_eq(render_text("{% set ns = namespace(s='x') %}{% for i in range(40) %}"
	                         "{% set ns.s = ns.s + ns.s %}{% endfor %}",
	                         NULL, &lim, &out),
	             -1);
	cr_expect(strstr(err, "out of memory (the render's memory limit is 1048576 bytes)"), "%s",
	          err);
	/* nesting: parentheses 300 deep are refused while parsing */
	deep = malloc(2 * n + 16);
	strcpy(deep, "{{ ");
	for (size_t i = 0; i < n; i++)
		strcat(deep, "(");
	strcat(deep, "1");
	for (size_t i = 0; i < n; i++)
		strcat(deep, ")");
	strcat(deep, " }}");
	cr_expect_eq(render_text(deep, NULL, NULL, &out), -1);
	cr_expect(strstr(err, "nested too deeply"), "%s", err);
	free(deep);
	/* and so are blocks 300 deep */
	deep = malloc(n * 24 + 16);
	deep[0] = '\0';
	for (size_t i = 0; i < n; i++)
		strcat(deep, "{% if 1 %}");
	for (size_t i = 0; i < n; i++)
		strcat(deep, "{% endif %}");
	cr_expect_eq(render_text(deep, NULL, NULL, &out), -1);
	cr_expect(strstr(err, "nested too deeply"), "%s", err);
	free(deep);
	/* a value nested 100000 deep is not printed, compared or dumped by
	 * recursion to the stack's end */
	cr_expect_eq(render_text("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
	                         "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x == ns.x }}{{ ns.x }}",
	                         NULL, NULL, &out),
	             -1);
	cr_expect_str_eq(err, "t.jinja:1:115: cannot print this value: a value nested too deeply");
	cr_expect_eq(render_text("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
	                         "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x | tojson }}",
	                         NULL, NULL, &out),
	             -1);
	cr_expect_str_eq(err, "t.jinja:1:104: tojson: a value nested too deeply");
	/* a NUL byte in the template */
	{
		struct rl_jinja *t;
		cr_expect_eq(rl_jinja_compile(&t, "a\0b", 3, "t.jinja", err, sizeof err), -1);
		cr_expect_str_eq(err, "t.jinja: the template holds a NUL byte");
	}
}
