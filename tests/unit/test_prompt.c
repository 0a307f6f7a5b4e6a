/* Prompt templates: renders written out by hand (Python's str.format
 * semantics, NeMo-RL's cot.txt), and every error with its source and
 * line:column. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/data/prompt.h"
#include "tests/unit/helpers.h"

static char err[1024];

static char *render_inline(const char *tmpl, const char *system, const char *problem)
{
	struct rl_cfg_data cfg = {.prompt_template = (char *)tmpl, .system_prompt = (char *)system};
	struct rl_prompt p;
	char *out;

	cr_assert_eq(rl_prompt_load(&p, &cfg, err, sizeof err), 0, "%s", err);
	out = rl_prompt_render(&p, problem, err, sizeof err);
	cr_assert_not_null(out);
	rl_prompt_free(&p);
	return out;
}

static void expect_render(const char *tmpl, const char *system, const char *problem,
                          const char *want)
{
	char *got = render_inline(tmpl, system, problem);

	cr_expect_str_eq(got, want, "template \"%s\"", tmpl ? tmpl : "(none)");
	free(got);
}

static void expect_load_error(const struct rl_cfg_data *cfg, const char *want)
{
	struct rl_prompt p;

	cr_assert_eq(rl_prompt_load(&p, cfg, err, sizeof err), -1, "loaded");
	cr_expect_str_eq(err, want);
	cr_expect_null(p.template_text);
	cr_expect_null(p.system_text);
	cr_expect_null(p.source);
}

static void expect_template_error(const char *tmpl, const char *want)
{
	struct rl_cfg_data cfg = {.prompt_template = (char *)tmpl};

	expect_load_error(&cfg, want);
}

Test(prompt, default_is_the_problem)
{
	struct rl_cfg_data cfg = {0};
	struct rl_prompt p;
	char *out;

	cr_assert_eq(rl_prompt_load(&p, &cfg, err, sizeof err), 0, "%s", err);
	cr_expect_str_eq(p.template_text, "{}");
	cr_expect_null(p.system_text);
	out = rl_prompt_render(&p, "What is 2+2?", err, sizeof err);
	cr_expect_str_eq(out, "What is 2+2?");
	free(out);
	rl_prompt_free(&p);
}

Test(prompt, fields)
{
	expect_render("Q: {}\nA:", NULL, "2+2", "Q: 2+2\nA:");
	expect_render("Q: {problem}\nA:", NULL, "2+2", "Q: 2+2\nA:");
	expect_render("{}|{problem}|{}", NULL, "x", "x|x|x");
	expect_render("{problem}", NULL, "", "");
	/* braces in the problem are text, not fields */
	expect_render("<{}>", NULL, "{problem} }{ {{", "<{problem} }{ {{>");
	/* non-ASCII around a field */
	expect_render("\xc3\xa9{}\xe2\x82\xac", NULL, "\xf0\x9f\x98\x80",
	              "\xc3\xa9\xf0\x9f\x98\x80\xe2\x82\xac");
}

Test(prompt, escapes)
{
	/* Python: "{{}}".format("p") == "{}", "{{{}}}".format("p") == "{p}",
	 * "a}}b{{c {}".format("p") == "a}b{c p" */
	expect_render("{{}} {}", NULL, "p", "{} p");
	expect_render("{{{}}}", NULL, "p", "{p}");
	expect_render("a}}b{{c {}", NULL, "p", "a}b{c p");
	expect_render("{{problem}} {problem}", NULL, "p", "{problem} p");
}

/* NeMo-RL's examples/prompts/cot.txt, as the file holds it (two
 * backslashes, doubled braces), with the newline an editor adds. */
Test(prompt, nemo_rl_cot_file)
{
	char *dir = tmp_dir();
	char *path = write_file(dir, "cot.txt",
	                        "Think step-by-step to solve the following problem. Output your "
	                        "answer inside of \\\\boxed{{}} tags.:\n{}\n");
	struct rl_cfg_data cfg = {.prompt_file = path};
	struct rl_prompt p;
	char *out;

	cr_assert_eq(rl_prompt_load(&p, &cfg, err, sizeof err), 0, "%s", err);
	cr_expect_str_eq(p.source, path);
	out = rl_prompt_render(&p, "What is 2+2?", err, sizeof err);
	/* What Python's open(path).read().format("What is 2+2?") gives, less
	 * the trailing newline. */
	cr_expect_str_eq(out,
	                 "Think step-by-step to solve the following problem. Output your answer "
	                 "inside of \\\\boxed{} tags.:\nWhat is 2+2?");
	free(out);
	rl_prompt_free(&p);
	free(path);
	remove_tree(dir);
	free(dir);
}

Test(prompt, one_trailing_newline_removed)
{
	char *dir = tmp_dir();
	char *a = write_file(dir, "a.txt", "X {}\n\n");
	char *b = write_file(dir, "b.txt", "X {}\r\n");
	char *c = write_file(dir, "c.txt", "X {}");
	const char *paths[] = {a, b, c}, *want[] = {"X p\n", "X p", "X p"};

	for (int i = 0; i < 3; i++) {
		struct rl_cfg_data cfg = {.prompt_file = (char *)paths[i]};
		struct rl_prompt p;
		char *out;

		cr_assert_eq(rl_prompt_load(&p, &cfg, err, sizeof err), 0, "%s", err);
		out = rl_prompt_render(&p, "p", err, sizeof err);
		cr_expect_str_eq(out, want[i], "file %d", i);
		free(out);
		rl_prompt_free(&p);
	}
	free(a);
	free(b);
	free(c);
	remove_tree(dir);
	free(dir);
}

Test(prompt, system_prompt)
{
	char *dir = tmp_dir(), *sys = write_file(dir, "sys.txt", "You are a careful solver.\n");
	struct rl_cfg_data cfg = {.system_prompt_file = sys, .prompt_template = "Problem: {}"};
	struct rl_prompt p;
	char *out;

	expect_render("Problem: {problem}", "Be brief.", "1+1", "Be brief.\n\nProblem: 1+1");
	expect_render(NULL, "Be brief.", "1+1", "Be brief.\n\n1+1");
	/* an empty system prompt is none */
	expect_render("{}", "", "1+1", "1+1");

	cr_assert_eq(rl_prompt_load(&p, &cfg, err, sizeof err), 0, "%s", err);
	cr_expect_str_eq(p.system_text, "You are a careful solver.");
	cr_expect_str_eq(p.source, "data.prompt_template");
	out = rl_prompt_render(&p, "1+1", err, sizeof err);
	cr_expect_str_eq(out, "You are a careful solver.\n\nProblem: 1+1");
	free(out);
	rl_prompt_free(&p);
	free(sys);
	remove_tree(dir);
	free(dir);
}

Test(prompt, system_prompt_braces_are_text)
{
	/* NeMo-RL does not format the system prompt. */
	expect_render("{}", "Answer in \\boxed{}.", "q", "Answer in \\boxed{}.\n\nq");
}

Test(prompt, both_set)
{
	struct rl_cfg_data a = {.prompt_file = "t.txt", .prompt_template = "{}"};
	struct rl_cfg_data b = {.system_prompt_file = "s.txt", .system_prompt = "hi"};

	expect_load_error(&a, "data.prompt_file and data.prompt_template are both set; set one of "
	                      "them");
	expect_load_error(&b,
	                  "data.system_prompt_file and data.system_prompt are both set; set one "
	                  "of them");
}

Test(prompt, unknown_field)
{
	expect_template_error("line one\nabc {answer} d",
	                      "data.prompt_template:2:5: unknown field {answer}; the problem is {} "
	                      "or {problem}, and {{ and }} are literal braces");
	/* columns count characters, not bytes */
	expect_template_error("\xc3\xa9\xc3\xa9{0}",
	                      "data.prompt_template:1:3: unknown field {0}; "
	                      "the problem is {} or {problem}, and {{ and }} "
	                      "are literal braces");
	expect_template_error("{problem:>5}",
	                      "data.prompt_template:1:1: unknown field {problem:>5}; "
	                      "the problem is {} or {problem}, and {{ and }} are "
	                      "literal braces");
	expect_template_error("{ problem}", "data.prompt_template:1:1: unknown field { problem}; "
	                                    "the problem is {} or {problem}, and {{ and }} are "
	                                    "literal braces");
}

Test(prompt, lone_braces)
{
	expect_template_error("{} a}b", "data.prompt_template:1:5: a single '}' (write }} for a "
	                                "literal brace)");
	/* Python: "{{}".format() -> "Single '}' encountered" */
	expect_template_error("{}\n{{}", "data.prompt_template:2:3: a single '}' (write }} for a "
	                                 "literal brace)");
	expect_template_error("{}\nx\n  {", "data.prompt_template:3:3: a '{' with no closing '}' "
	                                    "(write {{ for a literal brace)");
	expect_template_error("{problem", "data.prompt_template:1:1: a '{' with no closing '}' "
	                                  "(write {{ for a literal brace)");
}

Test(prompt, no_field)
{
	expect_template_error("Solve it.", "data.prompt_template: the template has no {} or "
	                                   "{problem}, so the problem would not appear in the "
	                                   "prompt");
	expect_template_error("{{}}", "data.prompt_template: the template has no {} or {problem}, "
	                              "so the problem would not appear in the prompt");
}

Test(prompt, file_errors)
{
	char *dir = tmp_dir(), *want = NULL;
	char *bad = write_file(dir, "bad.txt", "Solve:\n  {question}\n");
	char *utf = write_file(dir, "utf.txt", "ok {}\nab\xff\n");
	char *missing = NULL;
	struct rl_cfg_data cfg = {.prompt_file = bad};

	cr_assert_geq(asprintf(&want,
	                       "%s:2:3: unknown field {question}; the problem is {} or {problem}, "
	                       "and {{ and }} are literal braces",
	                       bad),
	              0);
	expect_load_error(&cfg, want);
	free(want);

	cfg.prompt_file = utf;
	cr_assert_geq(asprintf(&want, "data.prompt_file: %s:2:3: not valid UTF-8", utf), 0);
	expect_load_error(&cfg, want);
	free(want);

	cr_assert_geq(asprintf(&missing, "%s/none.txt", dir), 0);
	cfg.prompt_file = missing;
	cr_assert_geq(asprintf(&want,
	                       "data.prompt_file: %s: cannot open: No such file or directory",
	                       missing),
	              0);
	expect_load_error(&cfg, want);
	free(want);

	cfg = (struct rl_cfg_data){.system_prompt_file = missing};
	cr_assert_geq(
	    asprintf(&want, "data.system_prompt_file: %s: cannot open: No such file or directory",
	             missing),
	    0);
	expect_load_error(&cfg, want);
	free(want);

	free(bad);
	free(utf);
	free(missing);
	remove_tree(dir);
	free(dir);
}

Test(prompt, long_file)
{
	/* Longer than the first read buffer. */
	char *dir = tmp_dir(), *text = malloc(20001), *path, *out;
	struct rl_cfg_data cfg = {0};
	struct rl_prompt p;

	memset(text, 'a', 20000);
	memcpy(text + 10000, "{}", 2);
	text[20000] = '\0';
	path = write_file(dir, "long.txt", text);
	cfg.prompt_file = path;
	cr_assert_eq(rl_prompt_load(&p, &cfg, err, sizeof err), 0, "%s", err);
	out = rl_prompt_render(&p, "P", err, sizeof err);
	cr_assert_eq(strlen(out), 19999);
	cr_expect_eq(out[10000], 'P');
	cr_expect_eq(out[9999], 'a');
	cr_expect_eq(out[10001], 'a');
	free(out);
	rl_prompt_free(&p);
	free(text);
	free(path);
	remove_tree(dir);
	free(dir);
}
