/* DAPO's pure parts against numbers worked by hand: reward scaling, the
 * overlong penalty of the DAPO paper (section 3.4), their order, and which
 * groups dynamic sampling keeps across rounds. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/grpo/dynamic_sampling.h"
#include "runtime/grpo/reward_shaping.h"

#define EPS 1e-12

Test(dapo, overlong_penalty_follows_the_paper)
{
	/* L_max = 20, L_cache = 8: no penalty up to 20 - 8 = 12 tokens, then
	 * (12 - |y|) / 8, then -1 beyond 20 */
	const struct {
		int64_t len;
		double want;
	} t[] = {{1, 0},       {10, 0},  {12, 0},  {13, -0.125}, {16, -0.5},
	         {19, -0.875}, {20, -1}, {21, -1}, {400, -1}};
	for (size_t i = 0; i < sizeof t / sizeof *t; i++)
		cr_expect(fabs(rl_overlong_penalty(t[i].len, 20, 8, 1.0) - t[i].want) < EPS,
		          "|y| = %lld: got %g, want %g", (long long)t[i].len,
		          rl_overlong_penalty(t[i].len, 20, 8, 1.0), t[i].want);
	/* the penalty factor scales it all: 0.5 x (12 - 16) / 8 = -0.25 */
	cr_expect(fabs(rl_overlong_penalty(16, 20, 8, 0.5) + 0.25) < EPS);
	cr_expect(fabs(rl_overlong_penalty(25, 20, 8, 0.5) + 0.5) < EPS);
	/* the paper's numbers: L_max 20480, L_cache 4096; 18432 tokens is
	 * halfway into the buffer */
	cr_expect(fabs(rl_overlong_penalty(18432, 20480, 4096, 1.0) + 0.5) < EPS);
	cr_expect(rl_overlong_penalty(16384, 20480, 4096, 1.0) == 0.0);
	/* a buffer the whole length: every token counts, 5 of 20 -> -0.25 */
	cr_expect(fabs(rl_overlong_penalty(5, 20, 20, 1.0) + 0.25) < EPS);
}

Test(dapo, reward_scaling_clamps_then_maps)
{
	const struct rl_cfg_reward_scaling c = {true, 0.0, 1.0, -1.0, 1.0};
	const double in[] = {0, 1, 0.25, 0.5, 2, -3}, want[] = {-1, 1, -0.5, 0, 1, -1};

	for (size_t i = 0; i < sizeof in / sizeof *in; i++)
		cr_expect(fabs(rl_reward_scale(in[i], &c) - want[i]) < EPS, "%g: got %g, want %g",
		          in[i], rl_reward_scale(in[i], &c), want[i]);
	/* a reversed target: [2, 6] onto [10, 0]; 3 is a quarter in: 7.5 */
	const struct rl_cfg_reward_scaling d = {true, 2.0, 6.0, 10.0, 0.0};
	cr_expect(fabs(rl_reward_scale(3, &d) - 7.5) < EPS);
	cr_expect(fabs(rl_reward_scale(7, &d) - 0.0) < EPS);
}

static void sample(struct rl_rollout *r, int i, double reward, int response_len, bool truncated)
{
	r->s[i].reward = reward;
	r->s[i].prompt_len = 3;
	r->s[i].len = 3 + response_len;
	r->s[i].truncated = truncated;
}

Test(dapo, scaling_comes_before_shaping)
{
	struct rl_cfg_grpo g = {0};
	struct rl_rollout r;
	double unshaped[4];

	g.reward_scaling = (struct rl_cfg_reward_scaling){true, 0.0, 1.0, -1.0, 1.0};
	g.reward_shaping.enabled = true;
	g.reward_shaping.max_response_length = (struct rl_opt_int){true, 20};
	g.reward_shaping.overlong_buffer_length = (struct rl_opt_int){true, 8};
	g.reward_shaping.overlong_buffer_penalty = (struct rl_opt_float){true, 1.0};
	cr_assert(rl_rollout_alloc(&r, 1, 4) == 0);
	sample(&r, 0, 1.0, 10, false); /* 1 -> 1, no penalty */
	sample(&r, 1, 0.0, 16, false); /* 0 -> -1, then -0.5 */
	sample(&r, 2, 1.0, 14, false); /* 1 -> 1, then (12 - 14) / 8 = -0.25 */
	sample(&r, 3, 0.5, 30, true);  /* 0.5 -> 0, then -1 */
	rl_grpo_shape_rewards(&r, &g, unshaped);
	const double want[4] = {1, -1.5, 0.75, -1}, want_unshaped[4] = {1, -1, 1, 0};
	for (int i = 0; i < 4; i++) {
		cr_expect(fabs(r.s[i].reward - want[i]) < EPS, "sample %d: got %g, want %g", i,
		          r.s[i].reward, want[i]);
		cr_expect(fabs(unshaped[i] - want_unshaped[i]) < EPS,
		          "unshaped %d: got %g, want %g", i, unshaped[i], want_unshaped[i]);
	}
	/* the stop-properly factor replaces the overlong penalty: only the
	 * truncated sample changes, 0.8 x 0.25 */
	g.reward_scaling.enabled = false;
	g.reward_shaping.stop_properly_penalty_coef = (struct rl_opt_float){true, 0.25};
	sample(&r, 0, 0.8, 30, true);
	sample(&r, 1, 0.8, 19, false);
	rl_grpo_shape_rewards(&r, &g, NULL);
	cr_expect(fabs(r.s[0].reward - 0.2) < EPS, "truncated: got %g", r.s[0].reward);
	cr_expect(fabs(r.s[1].reward - 0.8) < EPS, "not truncated: got %g", r.s[1].reward);
	/* both off: the rewards stay as they are */
	g.reward_shaping.enabled = false;
	sample(&r, 2, 0.3, 30, true);
	rl_grpo_shape_rewards(&r, &g, unshaped);
	cr_expect(r.s[2].reward == 0.3 && unshaped[2] == 0.3);
	rl_rollout_free(&r);
}

Test(dapo, a_group_is_kept_when_its_rewards_differ)
{
	const double same[3] = {0.7, 0.7, 0.7}, near[3] = {0.7, 0.7, 0.70000001}, one[1] = {1.0},
	             zeros[2] = {0, 0}, mixed[2] = {0, 1};

	cr_expect(!rl_ds_group_kept(same, 3));
	cr_expect(rl_ds_group_kept(near, 3));
	cr_expect(!rl_ds_group_kept(one, 1));
	cr_expect(!rl_ds_group_kept(zeros, 2));
	cr_expect(rl_ds_group_kept(mixed, 2));
}

/* A round of 3 groups of 2, named "round.group", rewards as given. */
static void make_round(struct rl_rollout *r, int round, const double rewards[6])
{
	cr_assert(rl_rollout_alloc(r, 3, 2) == 0);
	for (int g = 0; g < 3; g++) {
		cr_assert(asprintf(&r->prompts[g], "%d.%d", round, g) > 0);
		r->problems[g] = strdup(r->prompts[g]);
	}
	for (int i = 0; i < 6; i++) {
		r->s[i].reward = rewards[i];
		r->s[i].ids = calloc(4, sizeof *r->s[i].ids);
		r->s[i].ids[0] = round * 100 + i;
		r->s[i].len = 4;
		r->s[i].prompt_len = 2;
	}
}

Test(dapo, the_batch_fills_across_rounds_in_order)
{
	struct rl_ds_batch b;
	struct rl_rollout one;

	cr_assert(rl_ds_begin(&b, 2, 2) == 0);
	/* round 1: {1, 1} and {0, 0} have no spread; {0, 1} is kept */
	const double r1[6] = {1, 1, 0, 1, 0, 0};
	make_round(&one, 1, r1);
	cr_expect(rl_ds_take(&b, &one, r1) == 1);
	cr_expect(!rl_ds_full(&b) && b.filled == 1 && b.dropped_groups == 2);
	cr_expect(one.prompts[1] == NULL && one.s[2].ids == NULL, "the kept group left the round");
	rl_rollout_free(&one);
	/* round 2: {1, 0} fills the batch, {0.5, 0.5} is dropped, {0, 1}
	 * comes too late: 2 samples discarded */
	const double r2[6] = {1, 0, 0.5, 0.5, 0, 1};
	make_round(&one, 2, r2);
	cr_expect(rl_ds_take(&b, &one, r2) == 2);
	rl_rollout_free(&one);
	cr_expect(rl_ds_full(&b));
	cr_expect(b.rounds == 2, "rounds %d", b.rounds);
	cr_expect(b.dropped_groups == 3, "dropped %lld", (long long)b.dropped_groups);
	cr_expect(b.discarded_valid_samples == 2, "discarded %lld",
	          (long long)b.discarded_valid_samples);
	/* every generated sample's reward: (3 + 3) / 12 */
	cr_expect(b.n_generated == 12 && fabs(b.reward_sum / 12 - 0.5) < EPS);
	/* the batch: round 1's group 1, then round 2's group 0 */
	cr_expect_str_eq(b.r.prompts[0], "1.1");
	cr_expect_str_eq(b.r.prompts[1], "2.0");
	cr_expect_str_eq(b.r.problems[1], "2.0");
	const int want_id[4] = {102, 103, 200, 201};
	const double want_reward[4] = {0, 1, 1, 0};
	for (int i = 0; i < 4; i++) {
		cr_expect(b.r.s[i].ids && b.r.s[i].ids[0] == want_id[i], "sample %d", i);
		cr_expect(b.r.s[i].group == i / 2, "sample %d's group %d", i, b.r.s[i].group);
		cr_expect(b.r.s[i].reward == want_reward[i], "sample %d", i);
	}
	rl_ds_free(&b);
}

Test(dapo, groups_are_judged_by_what_the_caller_gives)
{
	/* shaped rewards that differ only by their lengths' penalties, raw
	 * rewards all 0: the group is dropped */
	struct rl_ds_batch b;
	struct rl_rollout one;
	const double shaped[6] = {-0.1, -0.3, 0, 1, 1, 1}, raw[6] = {0, 0, 0, 1, 1, 1};

	cr_assert(rl_ds_begin(&b, 1, 2) == 0);
	make_round(&one, 1, shaped);
	cr_expect(rl_ds_take(&b, &one, raw) == 1);
	cr_expect_str_eq(b.r.prompts[0], "1.1");
	cr_expect(b.dropped_groups == 2);
	rl_rollout_free(&one);
	rl_ds_free(&b);
}

Test(dapo, round_seeds)
{
	/* round 0 samples as the plain step does; the others differ from it
	 * and from each other, and depend on (seed, step, round) only */
	cr_expect(rl_round_seed(42, 7, 0) == rl_step_seed(42, 7));
	cr_expect(rl_round_seed(42, 7, 1) == rl_round_seed(42, 7, 1));
	cr_expect(rl_round_seed(42, 7, 1) != rl_round_seed(42, 7, 0));
	cr_expect(rl_round_seed(42, 7, 1) != rl_round_seed(42, 7, 2));
	cr_expect(rl_round_seed(42, 7, 1) != rl_round_seed(42, 8, 1));
	cr_expect(rl_round_seed(42, 7, 1) != rl_round_seed(43, 7, 1));
	/* not the next step's seed either */
	cr_expect(rl_round_seed(42, 7, 1) != rl_step_seed(42, 8));
}
