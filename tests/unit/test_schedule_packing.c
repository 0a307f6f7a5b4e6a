#define _GNU_SOURCE
/* The learning-rate schedule and the micro-batch plans against values
 * worked out by hand. */
#include <criterion/criterion.h>
#include <math.h>

#include "runtime/grpo/packing.h"
#include "runtime/grpo/schedule.h"

static struct rl_lr_schedule schedule(const char *type, int64_t warmup, int64_t decay)
{
	struct rl_lr_schedule s;
	char err[256];

	cr_assert_eq(rl_lr_schedule_init(&s, type, 1.0, 0.1, warmup, decay, 100, err, sizeof err),
	             0, "%s", err);
	return s;
}

Test(schedule, constant_without_warmup_is_flat)
{
	struct rl_lr_schedule s = schedule("constant", 0, 0);

	for (int k = 0; k < 5; k++)
		cr_expect_float_eq(rl_lr_at(&s, k), 1.0, 1e-15);
}

Test(schedule, linear_warmup_reaches_peak_on_its_last_step)
{
	struct rl_lr_schedule s = schedule("linear_warmup", 4, 0);
	const double want[6] = {0.25, 0.5, 0.75, 1.0, 1.0, 1.0};

	for (int k = 0; k < 6; k++)
		cr_expect_float_eq(rl_lr_at(&s, k), want[k], 1e-15, "step %d", k);
}

Test(schedule, cosine_after_warmup)
{
	/* warmup 2, decay to 0.1 by step 6: progress (k - 2) / 4 */
	struct rl_lr_schedule s = schedule("cosine", 2, 6);
	const double want[8] = {0.5,  1.0,
	                        1.0,  0.1 + 0.9 * 0.5 * (1 + cos(M_PI / 4)),
	                        0.55, 0.1 + 0.9 * 0.5 * (1 + cos(3 * M_PI / 4)),
	                        0.1,  0.1};

	for (int k = 0; k < 8; k++)
		cr_expect_float_eq(rl_lr_at(&s, k), want[k], 1e-12, "step %d", k);
}

Test(schedule, cosine_needs_steps_after_warmup)
{
	struct rl_lr_schedule s;
	char err[256];

	cr_expect_eq(rl_lr_schedule_init(&s, "cosine", 1, 0, 10, 10, 100, err, sizeof err), -1);
	cr_expect(strstr(err, "warmup"), "%s", err);
	cr_expect_eq(rl_lr_schedule_init(&s, "step", 1, 0, 0, 0, 100, err, sizeof err), -1);
}

/* NeMo-RL's grpo_math_1B.yaml: LinearLR(0.1 -> 1.0 over 50) then
 * ConstantLR(factor 1.0) from milestone 50; torch's LinearLR closed form is
 * base * (start + (end - start) * min(e, total) / total). */
Test(schedule, torch_linear_then_constant_as_nemo_rl_writes_it)
{
	struct rl_lr_schedule s;
	char err[256];
	const struct rl_lr_phase ph[2] = {{RL_PHASE_LINEAR, 0.1, 1.0, 50},
	                                  {RL_PHASE_CONSTANT, 1.0, 0, 10000000000}};
	const int64_t ms[1] = {50};
	const int64_t k[6] = {0, 1, 25, 49, 50, 1000};
	/* 5e-6 * 0.1, * 0.118, * 0.55, * 0.982, then the constant's factor 1 */
	const double want[6] = {5e-7, 5.9e-7, 2.75e-6, 4.91e-6, 5e-6, 5e-6};

	cr_assert_eq(rl_lr_schedule_torch(&s, 5e-6, ph, 2, ms, err, sizeof err), 0, "%s", err);
	for (int i = 0; i < 6; i++)
		cr_expect_float_eq(rl_lr_at(&s, k[i]), want[i], 1e-18, "step %lld",
		                   (long long)k[i]);
}

/* ConstantLR(factor 0.5, total_iters 3) then LinearLR(0.25 -> 1 over 2)
 * from milestone 4: the constant lifts to the base at its own step 3, and
 * the linear one starts at its own step 0 (torch's SequentialLR calls
 * step(0) on the scheduler that takes over). */
Test(schedule, torch_sequential_restarts_each_scheduler_at_its_milestone)
{
	struct rl_lr_schedule s;
	char err[256];
	const struct rl_lr_phase ph[2] = {{RL_PHASE_CONSTANT, 0.5, 0, 3},
	                                  {RL_PHASE_LINEAR, 0.25, 1.0, 2}};
	const int64_t ms[1] = {4};
	const double want[8] = {0.5, 0.5, 0.5, 1.0, 0.25, 0.625, 1.0, 1.0};

	cr_assert_eq(rl_lr_schedule_torch(&s, 1.0, ph, 2, ms, err, sizeof err), 0, "%s", err);
	for (int k = 0; k < 8; k++)
		cr_expect_float_eq(rl_lr_at(&s, k), want[k], 1e-15, "step %d", k);
}

/* CosineAnnealingLR(T_max 4, eta_min 0.2), torch's closed form
 * eta_min + (base - eta_min) * (1 + cos(pi e / T_max)) / 2, periodic past
 * T_max as torch's is: 0.2 + 0.4 * (1 + cos(pi/4)) = 0.882842712474619. */
Test(schedule, torch_cosine_annealing)
{
	struct rl_lr_schedule s;
	char err[256];
	const struct rl_lr_phase ph[1] = {{RL_PHASE_COSINE, 0, 0.2, 4}};
	const double want[7] = {1.0, 0.882842712474619, 0.6, 0.317157287525381,
	                        0.2, 0.317157287525381, 0.6};

	cr_assert_eq(rl_lr_schedule_torch(&s, 1.0, ph, 1, NULL, err, sizeof err), 0, "%s", err);
	for (int k = 0; k < 7; k++)
		cr_expect_float_eq(rl_lr_at(&s, k), want[k], 1e-14, "step %d", k);
}

/* Megatron's OptimizerParamScheduler: init + (max - init) * k / warmup while
 * k <= warmup, then the decay over (k - warmup) / (decay - warmup): cosine
 * 0.5 (1 + cos(pi r)), linear 1 - r, min_lr after. init 0.1, max 1, min 0,
 * warmup 4, decay 8. */
Test(schedule, megatron_warmup_from_init_then_cosine_or_linear)
{
	struct rl_lr_schedule c, l;
	char err[256];
	const double want_cos[10] = {
	    0.1, 0.325, 0.55, 0.775, 1.0, 0.853553390593274, 0.5, 0.146446609406726, 0.0, 0.0};
	const double want_lin[10] = {0.1, 0.325, 0.55, 0.775, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0};

	cr_assert_eq(rl_lr_schedule_init(&c, "cosine", 1.0, 0.0, 4, 8, 100, err, sizeof err), 0);
	cr_assert_eq(rl_lr_schedule_init(&l, "linear", 1.0, 0.0, 4, 8, 100, err, sizeof err), 0);
	rl_lr_schedule_warmup_from(&c, 0.1);
	rl_lr_schedule_warmup_from(&l, 0.1);
	for (int k = 0; k < 10; k++) {
		cr_expect_float_eq(rl_lr_at(&c, k), want_cos[k], 1e-14, "cosine step %d", k);
		cr_expect_float_eq(rl_lr_at(&l, k), want_lin[k], 1e-14, "linear step %d", k);
	}
}

static void expect_plan(const struct rl_microbatches *mb, int n, const int *start, const int *items,
                        int n_items)
{
	cr_assert_eq(mb->n, n, "micro-batches: %d, want %d", mb->n, n);
	for (int b = 0; b <= n; b++)
		cr_expect_eq(mb->start[b], start[b], "start[%d]", b);
	for (int i = 0; i < n_items; i++)
		cr_expect_eq(mb->items[i], items[i], "items[%d]", i);
}

Test(packing, first_fit_decreasing)
{
	/* by length: 8(#2) 7(#4) 5(#0) 4(#5) 3(#1) 2(#3) into 10 each:
	 * 8 -> bin 0, 7 -> bin 1, 5 -> bin 2, 4 -> bin 2, 3 -> bin 1, 2 -> bin 0 */
	const int len[6] = {5, 3, 8, 2, 7, 4};
	const int start[4] = {0, 2, 4, 6}, items[6] = {2, 3, 4, 1, 0, 5};
	struct rl_microbatches mb;

	cr_assert_eq(rl_pack_ffd(len, 6, 10, 1, &mb), 0);
	expect_plan(&mb, 3, start, items, 6);
	rl_microbatches_free(&mb);
}

Test(packing, rounded_lengths_and_ties_by_position)
{
	/* rounded to 4: 8 4 8 4 8 4; the 8s in order 0, 2, 4 each open a bin of
	 * 12, and the 4s fill them in order */
	const int len[6] = {5, 3, 8, 2, 7, 4};
	const int start[4] = {0, 2, 4, 6}, items[6] = {0, 1, 2, 3, 4, 5};
	struct rl_microbatches mb;

	cr_assert_eq(rl_pack_ffd(len, 6, 12, 4, &mb), 0);
	expect_plan(&mb, 3, start, items, 6);
	rl_microbatches_free(&mb);
}

Test(packing, an_item_that_fits_only_unrounded_fills_a_micro_batch)
{
	/* capacity 16, rounded to 64 (the built-in tiny run with micro-batches
	 * of one sequence): 16, 9 and 12 each alone; 3 as 16 too */
	const int len[4] = {9, 16, 3, 12};
	const int start[5] = {0, 1, 2, 3, 4}, items[4] = {0, 1, 2, 3};
	struct rl_microbatches mb;

	cr_assert_eq(rl_pack_ffd(len, 4, 16, 64, &mb), 0);
	expect_plan(&mb, 4, start, items, 4);
	rl_microbatches_free(&mb);
}

Test(packing, an_item_over_capacity_is_refused)
{
	const int len[2] = {3, 11};
	struct rl_microbatches mb;

	cr_expect_eq(rl_pack_ffd(len, 2, 10, 1, &mb), -1);
}

Test(packing, fixed_counts)
{
	const int start[4] = {0, 2, 4, 5}, items[5] = {0, 1, 2, 3, 4};
	struct rl_microbatches mb;

	cr_assert_eq(rl_pack_fixed(5, 2, &mb), 0);
	expect_plan(&mb, 3, start, items, 5);
	rl_microbatches_free(&mb);
}

/* DPO's pairs: units planned by first-fit-decreasing over their summed
 * lengths, read back as samples. Pairs (lengths 3+4, 5+5, 1+2) under a
 * budget of 10: the 10 fills micro-batch 0, the 7 and the 3 share
 * micro-batch 1 (in that order); so samples 2, 3 | 0, 1, 4, 5. */
Test(packing, units_stay_together)
{
	const int pair_len[3] = {3 + 4, 5 + 5, 1 + 2};
	const int start[3] = {0, 2, 6}, items[6] = {2, 3, 0, 1, 4, 5};
	struct rl_microbatches units, mb;

	cr_assert_eq(rl_pack_ffd(pair_len, 3, 10, 1, &units), 0);
	cr_assert_eq(rl_microbatches_expand(&units, 2, &mb), 0);
	expect_plan(&mb, 2, start, items, 6);
	rl_microbatches_free(&units);
	rl_microbatches_free(&mb);
	/* a unit of 1 is the plan itself */
	const int fstart[4] = {0, 2, 4, 5}, fitems[5] = {0, 1, 2, 3, 4};
	cr_assert_eq(rl_pack_fixed(5, 2, &units), 0);
	cr_assert_eq(rl_microbatches_expand(&units, 1, &mb), 0);
	expect_plan(&mb, 3, fstart, fitems, 5);
	rl_microbatches_free(&units);
	rl_microbatches_free(&mb);
}
