/* The built-in environments (runtime/env/builtin_env.c, called in this
 * process) and the example environments etc/examples/envs/ (run as
 * programs; the Python one skipped when python3 is missing) on scripted
 * transcripts, against the rules of the built-in tasks worked by hand; a
 * start that carries a history is answered as if the episode had never
 * stopped. The examples are found under $RL_TEST_SRCDIR, else
 * $top_srcdir (what `make check` exports), else ".". */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "runtime/env/builtin_env.h"
#include "tests/unit/helpers.h"

static const char *srcdir(void)
{
	const char *s = getenv("RL_TEST_SRCDIR");

	if (!s || !*s)
		s = getenv("top_srcdir");
	return s && *s ? s : ".";
}

static char *dir;

static void make_dir(void)
{
	dir = tmp_dir();
}

static void remove_dir(void)
{
	remove_tree(dir);
	free(dir);
}

/* The rules worked by hand: calculator on 47+38 (85), guess with secret 7.
 * Any message not a digit or "=" calls the calculator (" c", "xy").
 * Each input is a transcript; the last start carries a history, and its
 * step is answered as if the episode had never stopped. */
static const char *calc_in =
    "{\"type\":\"start\",\"episode\":1,\"prompt\":\"47+38=\",\"problem\":\"47+38\","
    "\"expected_answer\":\"85\",\"metadata\":null,\"history\":[]}\n"
    "{\"type\":\"start\",\"episode\":2,\"prompt\":\"47+38=\",\"problem\":\"47+38\","
    "\"expected_answer\":\"85\",\"metadata\":null,\"history\":[]}\n"
    "{\"type\":\"step\",\"episode\":1,\"turn\":1,\"message\":\" c\"}\n"
    "{\"type\":\"step\",\"episode\":2,\"turn\":1,\"message\":\"86\"}\n"
    "{\"type\":\"step\",\"episode\":1,\"turn\":2,\"message\":\"85\\n\"}\n"
    "{\"type\":\"start\",\"episode\":3,\"prompt\":\"47+38=\",\"problem\":\"47+38\","
    "\"expected_answer\":\"85\",\"metadata\":{\"k\":1},\"history\":[{\"message\":\"calc\","
    "\"observation\":\"85\"}]}\n"
    "{\"type\":\"step\",\"episode\":3,\"turn\":2,\"message\":\"850\"}\n"
    "{\"type\":\"start\",\"episode\":4,\"prompt\":\"47+38=\",\"problem\":\"47+38\","
    "\"expected_answer\":\"85\",\"metadata\":null,\"history\":[]}\n"
    "{\"type\":\"end\",\"episode\":4}\n"
    "{\"type\":\"start\",\"episode\":7,\"prompt\":\"47+38=\",\"problem\":\"47+38\","
    "\"expected_answer\":\"85\",\"metadata\":null,\"history\":[]}\n"
    "{\"type\":\"step\",\"episode\":7,\"turn\":1,\"message\":\"=\"}\n"
    "{\"type\":\"start\",\"episode\":8,\"prompt\":\"47+38=\",\"problem\":\"47+38\","
    "\"expected_answer\":\"85\",\"metadata\":null,\"history\":[{\"message\":\"xy\","
    "\"observation\":\"85\"}]}\n"
    "{\"type\":\"step\",\"episode\":8,\"turn\":2,\"message\":\" = 85\"}\n";
/* An answer as the rules give it. */
struct want {
	long long id;
	const char *obs;
	double reward;
	bool done;
};

/* 86 against 85: one character in place of two; 850: two of three; "="
 * before any call shows nothing (0); after a call in its history, the
 * display rebuilt from it shows 85 */
static const struct want calc_out[] = {{1, "85", 0, false}, {2, "", 0.5, true},
                                       {1, "", 1, true},    {3, "", 2.0 / 3, true},
                                       {7, "", 0, true},    {8, "", 1, true}};

static const char *guess_in =
    "{\"type\":\"start\",\"episode\":5,\"prompt\":\"guess:\",\"problem\":\"guess\","
    "\"expected_answer\":\"7\",\"metadata\":null,\"history\":[]}\n"
    "{\"type\":\"step\",\"episode\":5,\"turn\":1,\"message\":\"5\"}\n"
    "{\"type\":\"step\",\"episode\":5,\"turn\":2,\"message\":\"what\"}\n"
    "{\"type\":\"step\",\"episode\":5,\"turn\":3,\"message\":\" 9 \"}\n"
    "{\"type\":\"start\",\"episode\":6,\"prompt\":\"guess:\",\"problem\":\"guess\","
    "\"expected_answer\":\"7\",\"metadata\":null,\"history\":[{\"message\":\"5\","
    "\"observation\":\"higher\"},{\"message\":\"8\",\"observation\":\"lower\"}]}\n"
    "{\"type\":\"step\",\"episode\":6,\"turn\":3,\"message\":\"6\"}\n"
    "{\"type\":\"step\",\"episode\":5,\"turn\":4,\"message\":\"7\"}\n"
    "{\"type\":\"step\",\"episode\":6,\"turn\":4,\"message\":\"7 is it\"}\n";
static const struct want guess_out[] = {{5, "higher", 0, false}, {5, "digit", 0, false},
                                        {5, "lower", 0, false},  {6, "higher", 0, false},
                                        {5, "", 1, true},        {6, "", 1, true}};

/* The answer lines in text are want's n answers, in order. */
static void check_answers(const char *text, const struct want *want, size_t n_want)
{
	const char *at = text;
	size_t k = 0;

	for (; at && *at; k++) {
		const char *nl = strchr(at, '\n');
		json_t *o = json_loadb(at, nl ? (size_t)(nl - at) : strlen(at), 0, NULL);

		cr_assert_not_null(o, "not JSON: %s", at);
		cr_assert_lt(k, n_want, "more answers than turns: %s", at);
		cr_expect_eq(json_integer_value(json_object_get(o, "episode")), want[k].id,
		             "answer %zu", k);
		cr_expect_str_eq(json_string_value(json_object_get(o, "observation")), want[k].obs,
		                 "answer %zu", k);
		cr_expect(fabs(json_number_value(json_object_get(o, "reward")) - want[k].reward) <
		              1e-12,
		          "answer %zu: reward", k);
		cr_expect_eq(json_is_true(json_object_get(o, "done")), want[k].done,
		             "answer %zu: done", k);
		json_decref(o);
		at = nl ? nl + 1 : NULL;
	}
	cr_expect_eq(k, n_want, "%zu answers, not %zu", k, n_want);
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* The built-in environment name on input, in this process. */
static char *builtin(const char *name, const char *input, int *rc, char **err_text)
{
	char *out_text = NULL;
	size_t out_len = 0, err_len = 0;
	FILE *in = fmemopen((void *)input, strlen(input), "r");
	FILE *out = open_memstream(&out_text, &out_len);
	FILE *err = open_memstream(err_text, &err_len);

	cr_assert(in && out && err);
	*rc = rl_env_builtin_run(name, in, out, err);
	fclose(in);
	fclose(out);
	fclose(err);
	return out_text;
}

/* The built-in environment name plays input as want says. */
static void plays(const char *name, const char *input, const struct want *want, size_t n_want)
{
	int rc;
	char *err, *out = builtin(name, input, &rc, &err);

	cr_expect_eq(rc, 0, "%s", err);
	check_answers(out, want, n_want);
	free(out);
	free(err);
}

Test(env_builtin, calculator)
{
	plays("calculator", calc_in, calc_out, N_OF(calc_out));
}

Test(env_builtin, guess)
{
	plays("guess", guess_in, guess_out, N_OF(guess_out));
}

Test(env_builtin, a_bad_line_names_its_number)
{
	int rc;
	char *err, *out = builtin("guess",
	                          "{\"type\":\"start\",\"episode\":1,\"expected_answer\":\"3\"}\n"
	                          "\n{\"type\":\"step\",\"episode\":1,\"message\":\"1\"}\n"
	                          "{\"type\":\"step\",\"episode\":1,\"message\":2}\n",
	                          &rc, &err);

	cr_expect_eq(rc, -1);
	cr_expect_str_eq(err, "rlrun env guess: stdin line 4: a step needs a string \"message\"\n");
	cr_expect_str_eq(
	    out, "{\"episode\":1,\"observation\":\"higher\",\"reward\":0.0,\"done\":false}\n");
	free(out);
	free(err);
}

/* An example program run on input; its stdout returned, NULL when it did
 * not exit 0. */
static char *run_example(const char *interp, const char *file, const char *input)
{
	char in_path[128], cmd[1024], *text = NULL;
	size_t len = 0, got;
	char buf[4096];
	FILE *f, *out, *p;

	snprintf(in_path, sizeof in_path, "%s/input", dir);
	f = fopen(in_path, "w");
	cr_assert_not_null(f);
	fputs(input, f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "%s '%s/etc/examples/envs/%s' < '%s'", interp, srcdir(), file,
	         in_path);
	out = open_memstream(&text, &len);
	p = popen(cmd, "r");
	cr_assert(out && p);
	while ((got = fread(buf, 1, sizeof buf, p)) > 0)
		fwrite(buf, 1, got, out);
	int status = pclose(p);

	fclose(out);
	cr_expect_eq(status, 0, "%s exited with %d", cmd, status);
	return text;
}

TestSuite(env_examples, .init = make_dir, .fini = remove_dir, .timeout = 60);

Test(env_examples, calculator_py)
{
	if (system("command -v python3 >/dev/null 2>&1") != 0) {
		cr_skip_test("python3 is not installed: etc/examples/envs/calculator.py not run");
	}
	char *out = run_example("python3", "calculator.py", calc_in);

	check_answers(out, calc_out, N_OF(calc_out));
	free(out);
}

Test(env_examples, guess_sh)
{
	char *out = run_example("sh", "guess.sh", guess_in);

	check_answers(out, guess_out, N_OF(guess_out));
	free(out);
}
