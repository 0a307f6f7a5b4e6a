/* Prompts through a chat template, as NeMo-RL's math data processor makes
 * them: for the real Llama 3.1/3.2, Qwen2.5 and Qwen3 templates, the text
 * transformers rendered (tests/fixtures/chat_templates/expected.json,
 * "math_processor": the system prompt alone, then the user's prompt alone
 * with the generation prompt; Qwen3's also with chat_template_kwargs
 * enable_thinking: false) must be ours byte for byte. Then what
 * policy.tokenizer.chat_template selects (default, null, a .jinja file, a
 * template), today's plain text for a model without a template, and a
 * template that fails being refused when the data is opened. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/chat/chat_template.h"
#include "runtime/data/prompt.h"
#include "tests/unit/helpers.h"

static char err[1024];

static json_t *fixture(void)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *path = NULL;
	json_error_t je;
	json_t *j;

	cr_assert_geq(asprintf(&path, "%s/tests/fixtures/chat_templates/expected.json", top), 0);
	j = json_load_file(path, 0, &je);
	cr_assert_not_null(j, "%s:%d: %s", path, je.line, je.text);
	free(path);
	return j;
}

static char *template_text(const char *file)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *path = NULL, *buf;
	FILE *f;
	long n;

	cr_assert_geq(asprintf(&path, "%s/tests/fixtures/chat_templates/%s", top, file), 0);
	f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	free(path);
	return buf;
}

/* a tokenizer directory holding tokenizer_config.json with this template */
static char *model_dir(const char *tmpl, const char *bos, const char *eos)
{
	char *dir = tmp_dir(), *path = NULL;
	json_t *cfg = json_pack("{s:s?, s:s?, s:s}", "bos_token", bos, "eos_token", eos,
	                        "chat_template", tmpl);

	cr_assert_geq(asprintf(&path, "%s/tokenizer_config.json", dir), 0);
	cr_assert_eq(json_dump_file(cfg, path, 0), 0);
	json_decref(cfg);
	free(path);
	return dir;
}

static void setup_time(void)
{
	json_t *all = fixture();
	char now[32];

	snprintf(now, sizeof now, "%lld",
	         (long long)json_integer_value(json_object_get(all, "now")));
	setenv("SOURCE_DATE_EPOCH", now, 1);
	setenv("TZ", "UTC", 1);
	tzset();
	json_decref(all);
}

Test(chat_prompt, nemo_rl_math_processor_as_transformers, .init = setup_time)
{
	json_t *all = fixture(), *cases = json_object_get(all, "math_processor"), *c;
	size_t i;

	cr_assert_geq(json_array_size(cases), 12);
	json_array_foreach(cases, i, c)
	{
		const char *file = json_string_value(json_object_get(c, "template"));
		char *tmpl = template_text(file);
		char *dir = model_dir(tmpl, json_string_value(json_object_get(c, "bos_token")),
		                      json_string_value(json_object_get(c, "eos_token")));
		struct rl_config cfg = {0};
		struct rl_prompt p;
		char *out;

		cfg.data.prompt_template = (char *)json_string_value(json_object_get(c, "prompt"));
		cfg.data.system_prompt =
		    (char *)json_string_value(json_object_get(c, "system_prompt"));
		cfg.policy.chat_template = "default";
		cfg.policy.tokenizer_name = dir;
		if (json_is_object(json_object_get(c, "kwargs")))
			cfg.policy.chat_template_kwargs =
			    json_dumps(json_object_get(c, "kwargs"), 0);
		cr_assert_eq(rl_prompt_load(&p, &cfg.data, err, sizeof err), 0, "%s", err);
		cr_assert_eq(rl_prompt_use_chat_template(&p, &cfg, err, sizeof err), 0, "%s: %s",
		             file, err);
		cr_assert_not_null(p.chat, "%s: the model's template was not taken", file);
		out = rl_prompt_render(&p, json_string_value(json_object_get(c, "problem")), err,
		                       sizeof err);
		cr_assert_not_null(out, "%s: %s", file, err);
		cr_expect_str_eq(out, json_string_value(json_object_get(c, "expected")),
		                 "%s case %zu", file, i);
		free(out);
		free(cfg.policy.chat_template_kwargs);
		rl_prompt_free(&p);
		remove_tree(dir);
		free(dir);
		free(tmpl);
	}
	json_decref(all);
}

/* one prompt rendered with policy.tokenizer.chat_template = spec over a
 * model whose template is model_tmpl (NULL: none) */
static char *render_with(const char *spec, const char *model_tmpl, bool *applies)
{
	char *dir = model_tmpl ? model_dir(model_tmpl, "<s>", "</s>") : tmp_dir(), *out;
	struct rl_config cfg = {0};
	struct rl_prompt p;

	cfg.data.prompt_template = "Q: {}";
	cfg.data.system_prompt = "SYS";
	cfg.policy.chat_template = (char *)spec;
	cfg.policy.tokenizer_name = dir;
	cr_assert_eq(rl_prompt_load(&p, &cfg.data, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_prompt_use_chat_template(&p, &cfg, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_prompt_chat_template_applies(&cfg, applies, err, sizeof err), 0, "%s", err);
	cr_expect_eq(*applies, p.chat != NULL);
	out = rl_prompt_render(&p, "2+2", err, sizeof err);
	cr_assert_not_null(out, "%s", err);
	rl_prompt_free(&p);
	remove_tree(dir);
	free(dir);
	return out;
}

#define TURNS                                                                                      \
	"{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"                         \
	"{% if add_generation_prompt %}<gen>{% endif %}"

Test(chat_prompt, what_the_key_selects)
{
	bool applies;
	char *out;

	/* default: the model's template */
	out = render_with("default", TURNS, &applies);
	cr_expect_str_eq(out, "<system>SYS<user>Q: 2+2<gen>");
	cr_expect(applies);
	free(out);
	/* default on a model without one: today's plain text, special tokens added */
	out = render_with("default", NULL, &applies);
	cr_expect_str_eq(out, "SYS\n\nQ: 2+2");
	cr_expect(!applies);
	free(out);
	/* null: NeMo-RL's passthrough, over the model's own */
	out = render_with(NULL, TURNS, &applies);
	cr_expect_str_eq(out, "SYSQ: 2+2");
	cr_expect(applies);
	free(out);
	/* the template itself, with the model's special tokens */
	out = render_with("{{ bos_token }}{{ messages[0].content | upper }}|", TURNS, &applies);
	cr_expect_str_eq(out, "<s>SYS|<s>Q: 2+2|");
	free(out);
}

Test(chat_prompt, a_jinja_file)
{
	char *dir = tmp_dir(), *path = write_file(dir, "t.jinja", "[{{ messages[0].role }}]\n"),
	     *out;
	bool applies;

	out = render_with(path, TURNS, &applies);
	cr_expect_str_eq(out, "[system][user]"); /* Jinja drops the file's last newline */
	free(out);
	remove_tree(dir);
	free(path);
	free(dir);
}

Test(chat_prompt, errors_are_found_when_the_data_opens)
{
	char *dir = model_dir("{% if messages[0].role == 'system' %}"
	                      "{{ raise_exception('System role not supported') }}{% endif %}",
	                      NULL, NULL);
	struct rl_config cfg = {0};
	struct rl_prompt p;
	char *want = NULL;

	cfg.data.prompt_template = "{}";
	cfg.data.system_prompt = "S";
	cfg.policy.chat_template = "default";
	cfg.policy.tokenizer_name = dir;
	cr_assert_eq(rl_prompt_load(&p, &cfg.data, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_prompt_use_chat_template(&p, &cfg, err, sizeof err), -1);
	cr_assert_geq(
	    asprintf(&want,
	             "%s/tokenizer_config.json:1:41: the template raised an error: System "
	             "role not supported",
	             dir),
	    0);
	cr_expect_str_eq(err, want);
	cr_expect_null(p.chat);
	rl_prompt_free(&p);
	free(want);
	/* a template that does not parse, named as the config gives it */
	cfg.policy.chat_template = "{% for m in messages %}";
	cr_assert_eq(rl_prompt_load(&p, &cfg.data, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_prompt_use_chat_template(&p, &cfg, err, sizeof err), -1);
	cr_expect_str_eq(err, "policy.tokenizer.chat_template:1:4: this {% for %} is never closed: "
	                      "expected {% endfor %} before the end");
	rl_prompt_free(&p);
	/* a .jinja file that is not there names the key */
	cfg.policy.chat_template = "/nonexistent/t.jinja";
	cr_assert_eq(rl_prompt_load(&p, &cfg.data, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_prompt_use_chat_template(&p, &cfg, err, sizeof err), -1);
	cr_expect_str_eq(err, "/nonexistent/t.jinja: cannot open: No such file or directory "
	                      "(policy.tokenizer.chat_template)");
	rl_prompt_free(&p);
	remove_tree(dir);
	free(dir);
}

/* null's template is NeMo-RL's passthrough, as its chat_templates.py has it */
Test(chat_prompt, passthrough_is_nemo_rls)
{
	char *text = template_text("nemo-rl-passthrough_prompt_response.jinja");

	cr_expect_str_eq(RL_CHAT_PASSTHROUGH, text);
	free(text);
}
