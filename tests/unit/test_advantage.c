/* GRPO advantages against hand-computed tables. */
#include <math.h>
#include <stddef.h>

#include <criterion/criterion.h>

#include "runtime/grpo/advantage.h"

static void expect_table(const char *what, const double *got, const double *want, int n)
{
	for (int i = 0; i < n; i++)
		cr_expect(fabs(got[i] - want[i]) <= 1e-12 * fabs(want[i]) + 1e-15,
		          "%s[%d]: got %.17g, want %.17g", what, i, got[i], want[i]);
}

static const struct rl_opt_float unset = {.set = false, .value = 0.0};

Test(advantage, leave_one_out_normalized)
{
	const double r[4] = {1, 0, 0, 0};
	/* sample 0: the others are all 0, so baseline 0 and std 0 (no division).
	 * samples 1..3: others {1, 0, 0}: mean 1/3, squared deviations 4/9 +
	 * 1/9 + 1/9 = 2/3 over n - 1 = 2: std = 1/sqrt(3), advantage
	 * (0 - 1/3) * sqrt(3) = -1/sqrt(3). */
	const double want_a[4] = {1, -1 / sqrt(3), -1 / sqrt(3), -1 / sqrt(3)};
	const double want_b[4] = {0, 1.0 / 3, 1.0 / 3, 1.0 / 3};
	const double want_s[4] = {0, 1 / sqrt(3), 1 / sqrt(3), 1 / sqrt(3)};
	double a[4], b[4], s[4];

	rl_grpo_advantages(r, 1, 4, true, true, &unset, &unset, a, b, s);
	expect_table("advantage", a, want_a, 4);
	expect_table("baseline", b, want_b, 4);
	expect_table("std", s, want_s, 4);
}

Test(advantage, equal_rewards_are_zero)
{
	const double r[4] = {1, 1, 1, 1}, zero[4] = {0, 0, 0, 0}, ones[4] = {1, 1, 1, 1};
	double a[4], b[4], s[4];

	for (int loo = 0; loo < 2; loo++)
		for (int norm = 0; norm < 2; norm++) {
			rl_grpo_advantages(r, 1, 4, loo, norm, NULL, NULL, a, b, s);
			expect_table("advantage", a, zero, 4);
			expect_table("baseline", b, ones, 4);
			expect_table("std", s, zero, 4);
		}
}

/* Seven rewards of 0.7 average to 0.7 + 1e-16 in floating point; the
 * eighth sample's others must still have a std of exactly 0, or its
 * normalized advantage is 1e15 instead of 0.1 - 0.7. */
Test(advantage, equal_others_leave_no_rounding_std)
{
	double r[8], a[8], b[8], s[8];

	for (int i = 0; i < 7; i++)
		r[i] = 0.7;
	r[7] = 0.1;
	rl_grpo_advantages(r, 1, 8, true, true, &unset, &unset, a, b, s);
	cr_expect_eq(s[7], 0.0, "std of seven equal rewards: %.17g", s[7]);
	cr_expect_eq(b[7], 0.7, "baseline: %.17g", b[7]);
	cr_expect(fabs(a[7] - (0.1 - 0.7)) < 1e-15, "advantage %.17g", a[7]);
	for (int i = 0; i < 7; i++)
		cr_expect(fabs(a[i]) < 10, "advantage %d: %.17g", i, a[i]);
}

Test(advantage, group_of_one)
{
	const double r[2] = {0.7, -2}, zero[2] = {0, 0};
	double a[2], b[2], s[2];

	for (int loo = 0; loo < 2; loo++) {
		rl_grpo_advantages(r, 2, 1, loo, true, NULL, NULL, a, b, s);
		expect_table("advantage", a, zero, 2);
		expect_table("baseline", b, r, 2);
		expect_table("std", s, zero, 2);
	}
}

Test(advantage, group_of_two_leave_one_out)
{
	/* one other sample: baseline is that reward, std 0, no normalization */
	const double r[2] = {3, 1}, want_a[2] = {2, -2}, want_b[2] = {1, 3}, zero[2] = {0, 0};
	double a[2], b[2], s[2];

	rl_grpo_advantages(r, 1, 2, true, true, NULL, NULL, a, b, s);
	expect_table("advantage", a, want_a, 2);
	expect_table("baseline", b, want_b, 2);
	expect_table("std", s, zero, 2);
}

Test(advantage, group_mean_and_std)
{
	/* mean 3; sample variance (4 + 1 + 0 + 9) / 3 = 14/3 */
	const double r[4] = {1, 2, 3, 6};
	const double want_raw[4] = {-2, -1, 0, 3};
	const double want_norm[4] = {-2 / sqrt(14.0 / 3), -1 / sqrt(14.0 / 3), 0,
	                             3 / sqrt(14.0 / 3)};
	const double want_b[4] = {3, 3, 3, 3};
	const double want_s[4] = {sqrt(14.0 / 3), sqrt(14.0 / 3), sqrt(14.0 / 3), sqrt(14.0 / 3)};
	double a[4], b[4], s[4];

	rl_grpo_advantages(r, 1, 4, false, false, NULL, NULL, a, b, s);
	expect_table("advantage", a, want_raw, 4);
	expect_table("baseline", b, want_b, 4);
	expect_table("std", s, want_s, 4);
	rl_grpo_advantages(r, 1, 4, false, true, NULL, NULL, a, NULL, NULL);
	expect_table("normalized", a, want_norm, 4);
}

Test(advantage, leave_one_out_unnormalized)
{
	/* others of 1: {2, 3, 6} mean 11/3; of 2: {1, 3, 6} mean 10/3;
	 * of 3: {1, 2, 6} mean 3; of 6: {1, 2, 3} mean 2 */
	const double r[4] = {1, 2, 3, 6};
	const double want_a[4] = {1 - 11.0 / 3, 2 - 10.0 / 3, 0, 4};
	/* sample std of {1, 2, 3}: sqrt(2 / 2) = 1; of {2, 3, 6}: mean 11/3,
	 * squares (25 + 4 + 49) / 9 / 2 = 78 / 18 */
	const double want_s0 = sqrt(78.0 / 18), want_s3 = 1;
	double a[4], s[4];

	rl_grpo_advantages(r, 1, 4, true, false, NULL, NULL, a, NULL, s);
	expect_table("advantage", a, want_a, 4);
	expect_table("std[0]", &s[0], &want_s0, 1);
	expect_table("std[3]", &s[3], &want_s3, 1);
}

Test(advantage, clipping)
{
	const double r[4] = {1, 0, 0, 0};
	const struct rl_opt_float lo = {.set = true, .value = -0.5},
	                          hi = {.set = true, .value = 0.8};
	const struct rl_opt_float lo_off = {.set = false, .value = 100}; /* value ignored */
	const double both[4] = {0.8, -0.5, -0.5, -0.5};
	const double high_only[4] = {0.8, -1 / sqrt(3), -1 / sqrt(3), -1 / sqrt(3)};
	const double low_only[4] = {1, -0.5, -0.5, -0.5};
	double a[4];

	rl_grpo_advantages(r, 1, 4, true, true, &lo, &hi, a, NULL, NULL);
	expect_table("both", a, both, 4);
	rl_grpo_advantages(r, 1, 4, true, true, &lo_off, &hi, a, NULL, NULL);
	expect_table("high only", a, high_only, 4);
	rl_grpo_advantages(r, 1, 4, true, true, &lo, NULL, a, NULL, NULL);
	expect_table("low only", a, low_only, 4);
}

Test(advantage, several_groups)
{
	/* sample std of two values a, b: |a - b| / sqrt(2).
	 * group 0 {0, 1, 2}: others {1, 2} mean 1.5 std 1/sqrt2 -> -1.5 sqrt2;
	 *   {0, 2} mean 1 std sqrt2 -> 0; {0, 1} mean 0.5 std 1/sqrt2 -> 1.5 sqrt2.
	 * group 1 {5, 5, 5}: 0.
	 * group 2 {1, 0, 1}: others {0, 1} mean 0.5 std 1/sqrt2 -> 0.5 sqrt2;
	 *   {1, 1} mean 1 std 0 -> -1 unnormalized; last as the first. */
	const double r[9] = {0, 1, 2, 5, 5, 5, 1, 0, 1};
	const double want_a[9] = {-1.5 * sqrt(2), 0,  1.5 * sqrt(2), 0, 0, 0,
	                          1 / sqrt(2),    -1, 1 / sqrt(2)};
	const double want_b[9] = {1.5, 1, 0.5, 5, 5, 5, 0.5, 1, 0.5};
	const double want_s[9] = {1 / sqrt(2), sqrt(2),     1 / sqrt(2), 0,          0,
	                          0,           1 / sqrt(2), 0,           1 / sqrt(2)};
	double a[9], b[9], s[9];

	rl_grpo_advantages(r, 3, 3, true, true, NULL, NULL, a, b, s);
	expect_table("advantage", a, want_a, 9);
	expect_table("baseline", b, want_b, 9);
	expect_table("std", s, want_s, 9);
}
