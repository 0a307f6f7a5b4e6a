/* Loading stays linear in the size of the file, and a huge broken file
 * prints a bounded number of error lines. Not a timed test against a
 * clock: ten times the keys must cost less than thirty times the time of
 * the smaller file, measured in the same run (a quadratic step costs a
 * hundred times; a linear one ten). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/config/config.h"

/* N unknown keys under grpo:, or N env entries (env true). */
static char *config_text(size_t n, bool env, size_t *len)
{
	char *text = NULL;
	FILE *f = open_memstream(&text, len);
	cr_assert(f);
	fputs(env ? "policy:\n  model_name: m\ndata:\n  dataset_name: copy\nenv:\n" : "grpo:\n", f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, env ? "  e%zu:\n    timeout: 1\n" : "  k%zu: 1\n", i);
	fclose(f);
	return text;
}

/* CPU seconds to load text, the best of three (other processes on the
 * machine do not count in CPU time, and the best run drops the rest of the
 * noise); *errors: the errors it reported. */
static double load_seconds(const char *text, size_t len, size_t *errors)
{
	double best = 1e30;
	for (int rep = 0; rep < 3; rep++) {
		struct rl_config c;
		struct rl_diags d = {0};
		struct timespec a, b;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
		if (rl_config_load_text("big.yaml", text, len, NULL, NULL, 0, &c, &d) == 0)
			rl_config_free(&c);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
		double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
		best = s < best ? s : best;
		*errors = d.n;
		rl_diags_free(&d);
	}
	return best;
}

static void expect_linear(bool env)
{
	size_t len10, len100, e10, e100;
	/* 60000 envs of three nodes each stay under the parser's node limit */
	size_t big = env ? 60000 : 100000;
	char *t10 = config_text(big / 10, env, &len10), *t100 = config_text(big, env, &len100);
	double s10 = load_seconds(t10, len10, &e10);
	double s100 = load_seconds(t100, len100, &e100);
	/* every key of the big file was looked at: one error per unknown key
	 * and one for the missing model; no error for 100000 envs */
	cr_expect_eq(e100, env ? 0 : big + 1);
	cr_expect_eq(e10, env ? 0 : big / 10 + 1);
	/* a floor of 20 ms keeps a tiny s10 from making the bound meaningless */
	cr_expect_lt(s100, 30 * s10 + 0.02, "small: %.4f s, ten times the keys: %.4f s (%.1fx)",
	             s10, s100, s100 / s10);
	free(t10);
	free(t100);
}

Test(config_scale, many_keys_in_one_mapping_load_in_linear_time)
{
	expect_linear(false);
}

Test(config_scale, many_envs_load_in_linear_time)
{
	expect_linear(true);
}

Test(config_scale, a_broken_huge_file_prints_twenty_errors_and_a_count)
{
	size_t len;
	char *text = config_text(100000, false, &len);
	struct rl_config c;
	struct rl_diags d = {0};
	cr_assert_neq(rl_config_load_text("big.yaml", text, len, NULL, NULL, 0, &c, &d), 0);
	char *out = NULL;
	size_t out_len = 0;
	FILE *f = open_memstream(&out, &out_len);
	rl_diags_print(&d, f);
	fclose(f);
	size_t lines = 0;
	for (char *p = out; *p; p++)
		lines += *p == '\n';
	cr_expect_eq(lines, RL_DIAGS_PRINT_MAX + 1, "%zu lines", lines);
	cr_expect(strstr(out, "\n... and 99981 more errors\n"), "%s", out + out_len - 200);
	free(out);
	free(text);
	rl_diags_free(&d);
}
