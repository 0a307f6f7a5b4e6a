/* The built-in tasks: problems determined by (seed, index), answers that an
 * independent reading of the problem confirms, and the checker's table. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/synthetic.h"

static void make(enum rl_task_kind k, uint64_t seed, uint64_t i, char **p, char **a)
{
	cr_assert_eq(rl_task_make(k, seed, i, p, a), 0);
}

Test(synthetic, names)
{
	enum rl_task_kind k;

	cr_expect_eq(rl_task_parse("arithmetic", &k), 0);
	cr_expect_eq(k, RL_TASK_ARITHMETIC);
	cr_expect_eq(rl_task_parse("sort", &k), 0);
	cr_expect_eq(k, RL_TASK_SORT);
	cr_expect_eq(rl_task_parse("copy", &k), 0);
	cr_expect_eq(k, RL_TASK_COPY);
	cr_expect_eq(rl_task_parse("jsonl", &k), -1);
}

Test(synthetic, arithmetic_answers_are_the_sums)
{
	int seen[10] = {0};

	for (uint64_t i = 0; i < 2000; i++) {
		char *p, *a;
		unsigned x, y;
		char tail;

		make(RL_TASK_ARITHMETIC, 42, i, &p, &a);
		cr_assert_eq(sscanf(p, "%u+%u%c", &x, &y, &tail), 3, "problem '%s'", p);
		cr_assert_eq(tail, '=');
		cr_assert_eq((unsigned)atoi(a), x + y, "%s%s", p, a);
		cr_assert(x + y < 10);
		seen[x + y]++;
		free(p);
		free(a);
	}
	for (int s = 0; s <= 8; s++)
		cr_expect_gt(seen[s], 0, "sum %d never drawn", s);
}

static int letter_counts_equal(const char *x, const char *y)
{
	int c[256] = {0};

	for (; *x; x++)
		c[(unsigned char)*x]++;
	for (; *y; y++)
		c[(unsigned char)*y]--;
	for (int i = 0; i < 256; i++)
		if (c[i])
			return 0;
	return 1;
}

Test(synthetic, copy_and_sort_answers)
{
	for (uint64_t i = 0; i < 500; i++) {
		char *p, *a, word[32];

		make(RL_TASK_COPY, 7, i, &p, &a);
		cr_assert_eq(sscanf(p, "copy:%31[a-z]=", word), 1, "'%s'", p);
		cr_expect_str_eq(a, word);
		free(p);
		free(a);

		make(RL_TASK_SORT, 7, i, &p, &a);
		cr_assert_eq(sscanf(p, "sort:%31[a-z]=", word), 1, "'%s'", p);
		cr_expect(letter_counts_equal(a, word), "%s -> %s", p, a);
		for (size_t j = 1; a[j]; j++)
			cr_expect_leq(a[j - 1], a[j], "%s -> %s not sorted", p, a);
		free(p);
		free(a);
	}
}

Test(synthetic, same_seed_same_problem_other_seed_other_stream)
{
	int differ = 0;

	for (uint64_t i = 0; i < 50; i++) {
		char *p1, *a1, *p2, *a2, *p3, *a3;

		make(RL_TASK_COPY, 1, i, &p1, &a1);
		make(RL_TASK_COPY, 1, i, &p2, &a2);
		make(RL_TASK_COPY, 2, i, &p3, &a3);
		cr_expect_str_eq(p1, p2);
		differ += strcmp(p1, p3) != 0;
		free(p1), free(a1), free(p2), free(a2), free(p3), free(a3);
	}
	cr_expect_gt(differ, 25, "seed 2 repeats seed 1's problems");
}

Test(synthetic, checker_table)
{
	/* characters in their place over the longer length, whitespace around
	 * the response ignored */
	cr_expect_float_eq(rl_task_score(RL_TASK_ARITHMETIC, "7", "7"), 1.0, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_ARITHMETIC, " 7\n", "7"), 1.0, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_ARITHMETIC, "77", "7"), 0.5, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_ARITHMETIC, "", "7"), 0.0, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_ARITHMETIC, "3", "7"), 0.0, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_ARITHMETIC, "7 7", "7"), 1.0 / 3, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_ARITHMETIC, "10", "10"), 1.0, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_SORT, "abc", "abc"), 1.0, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_SORT, "ab", "abc"), 2.0 / 3, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_SORT, "bac", "abc"), 1.0 / 3, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_COPY, "cab", "cab"), 1.0, 1e-15);
}

/* calculator: "A+B=" with A and B of three digits each, read back here
 * with sscanf; the answer is their sum's decimal digits, worked out here
 * from the problem's own text. */
Test(synthetic, calculator_answers_are_three_digit_sums)
{
	int low = 1000, high = 0, carries = 0;

	for (uint64_t i = 0; i < 2000; i++) {
		char *p, *a, want[16];
		unsigned x, y;
		char tail;
		int used = 0;

		make(RL_TASK_CALCULATOR, 42, i, &p, &a);
		cr_assert_eq(sscanf(p, "%u+%u%c%n", &x, &y, &tail, &used), 3, "problem '%s'", p);
		cr_assert_eq(tail, '=');
		cr_assert_eq((size_t)used, strlen(p), "'%s' goes on after '='", p);
		cr_assert(x >= 100 && x <= 999 && y >= 100 && y <= 999, "'%s'", p);
		/* the prompt is written as the arithmetic task writes it */
		snprintf(want, sizeof want, "%u+%u=", x, y);
		cr_assert_str_eq(p, want);
		snprintf(want, sizeof want, "%u", x + y);
		cr_assert_str_eq(a, want, "%s%s", p, a);
		low = (int)x < low ? (int)x : low;
		high = (int)y > high ? (int)y : high;
		carries += x % 10 + y % 10 >= 10;
		free(p);
		free(a);
	}
	cr_expect(low <= 101, "nothing below %d drawn", low);
	cr_expect(high >= 998, "nothing above %d drawn", high);
	/* 45% of uniform pairs carry in the units */
	cr_expect(carries > 700 && carries < 1100, "%d carries in 2000", carries);
}

Test(synthetic, guess_secret_is_a_digit_from_seed_and_index)
{
	int seen[10] = {0}, differ = 0;

	for (uint64_t i = 0; i < 1000; i++) {
		char *p, *a, *p2, *a2, *p3, *a3;

		make(RL_TASK_GUESS, 5, i, &p, &a);
		cr_assert_str_eq(p, "guess:");
		cr_assert(strlen(a) == 1 && a[0] >= '0' && a[0] <= '9', "secret '%s'", a);
		seen[a[0] - '0']++;
		make(RL_TASK_GUESS, 5, i, &p2, &a2);
		cr_expect_str_eq(a, a2, "(5, %llu) twice", (unsigned long long)i);
		make(RL_TASK_GUESS, 6, i, &p3, &a3);
		differ += strcmp(a, a3) != 0;
		free(p), free(a), free(p2), free(a2), free(p3), free(a3);
	}
	for (int d = 0; d < 10; d++)
		cr_expect(seen[d] > 50 && seen[d] < 150, "digit %d drawn %d times in 1000", d,
		          seen[d]);
	/* another seed: a different digit 9 times in 10 */
	cr_expect_gt(differ, 800, "seed 6 repeats seed 5's secrets");
}

Test(synthetic, calculator_same_seed_same_problem)
{
	int differ = 0;

	for (uint64_t i = 0; i < 50; i++) {
		char *p1, *a1, *p2, *a2, *p3, *a3;

		make(RL_TASK_CALCULATOR, 1, i, &p1, &a1);
		make(RL_TASK_CALCULATOR, 1, i, &p2, &a2);
		make(RL_TASK_CALCULATOR, 2, i, &p3, &a3);
		cr_expect_str_eq(p1, p2);
		cr_expect_str_eq(a1, a2);
		differ += strcmp(p1, p3) != 0;
		free(p1), free(a1), free(p2), free(a2), free(p3), free(a3);
	}
	cr_expect_gt(differ, 45, "seed 2 repeats seed 1's problems");
}

Test(synthetic, multi_turn_tasks)
{
	enum rl_task_kind k;

	cr_assert_eq(rl_task_parse("calculator", &k), 0);
	cr_expect_eq(k, RL_TASK_CALCULATOR);
	cr_expect(rl_task_multi_turn(k));
	cr_assert_eq(rl_task_parse("guess", &k), 0);
	cr_expect_eq(k, RL_TASK_GUESS);
	cr_expect(rl_task_multi_turn(k));
	cr_expect(!rl_task_multi_turn(RL_TASK_ARITHMETIC));
	cr_expect(!rl_task_multi_turn(RL_TASK_COPY));
	cr_expect(!rl_task_multi_turn(RL_TASK_SORT));
	/* the final answer's score is the same rule as arithmetic's */
	cr_expect_float_eq(rl_task_score(RL_TASK_CALCULATOR, "857", "857"), 1.0, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_CALCULATOR, "847", "857"), 2.0 / 3, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_CALCULATOR, "85", "857"), 2.0 / 3, 1e-15);
	cr_expect_float_eq(rl_task_score(RL_TASK_CALCULATOR, "1357", "1357"), 1.0, 1e-15);
}
