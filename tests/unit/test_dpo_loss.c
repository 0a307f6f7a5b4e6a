/* DPO's loss (Rafailov et al. 2023, eq. 7, as NeMo-RL's DPOLossFn weights
 * it): two pairs whose numbers are worked out by hand below, every option,
 * the gradient against central finite differences, and a split of the
 * step into micro-batches of one pair.
 *
 * The base case (every input a multiple of 1/16, so the floats hold the
 * literals exactly); the first token of each sequence is its prompt
 * (masked), the rest its response:
 *   seq  pair role      curr                 ref                  pi     ref    n  r = pi - ref
 *   0    0    chosen    -1, -0.5, -0.25      -1.25, -0.75, -0.5   -1.75  -2.5   3   0.75
 *   1    0    rejected  -2, -1               -1.5, -0.75          -3     -2.25  2  -0.75
 *   2    1    chosen    -0.5, -0.5           -0.25, -0.25         -1     -0.5   2  -0.5
 *   3    1    rejected  -1                   -1.5                 -1     -1.5   1   0.5
 * With beta = 0.5: pair 0's margin is 1.5, x = 0.75, -log sigmoid(0.75) =
 * log(1 + e^-0.75) = 0.386871006115; pair 1's margin is -1, x = -0.5,
 * log(1 + e^0.5) = 0.974076984180. Their mean is 0.680473995148; the
 * accuracy is 1/2, the rewards' means 0.125 (chosen), -0.125 (rejected),
 * the margin's 0.25. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/algo/dpo_loss.h"

#define NT 12
#define NS 4

struct fx {
	int32_t cu[NS + 1];
	float curr[NT], ref[NT];
	uint8_t tm[NT];
	double sm[NS];
};

static struct fx base_fx(void)
{
	return (struct fx){
	    .cu = {0, 4, 7, 10, 12},
	    /* the prompt rows hold garbage: they must not be read */
	    .curr = {99, -1, -0.5f, -0.25f, 99, -2, -1, 99, -0.5f, -0.5f, 99, -1},
	    .ref = {-7, -1.25f, -0.75f, -0.5f, -7, -1.5f, -0.75f, -7, -0.25f, -0.25f, -7, -1.5f},
	    .tm = {0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1},
	    .sm = {1, 1, 1, 1},
	};
}

static struct rl_loss_batch view(const struct fx *f, int first_seq, int n_seqs)
{
	int t0 = f->cu[first_seq];
	static int32_t cu[NS + 1];

	for (int s = 0; s <= n_seqs; s++)
		cu[s] = f->cu[first_seq + s] - t0;
	return (struct rl_loss_batch){
	    .n_tokens = f->cu[first_seq + n_seqs] - t0,
	    .n_seqs = n_seqs,
	    .cu_seqlens = cu,
	    .curr = f->curr + t0,
	    .ref = f->ref + t0,
	    .token_mask = f->tm + t0,
	    .sample_mask = f->sm + first_seq,
	};
}

static const struct rl_dpo_loss base_loss = {
    .beta = 0.5, .preference_loss_weight = 1, .sft_loss_weight = 0};

Test(dpo_loss, paper_formula_by_hand)
{
	struct fx f = base_fx();
	struct rl_loss_batch b = view(&f, 0, NS);
	struct rl_dpo_stats st = {0};
	double loss = rl_dpo_loss_compute(&base_loss, &b, 2, NULL, &st);

	cr_assert_float_eq(loss, 0.680473995148, 1e-11);
	cr_assert_float_eq(st.loss, 0.680473995148, 1e-11);
	cr_assert_float_eq(st.preference_loss, 0.680473995148, 1e-11);
	cr_assert_float_eq(st.sft_loss, 0.0, 1e-15);
	cr_assert_float_eq(st.accuracy, 0.5, 1e-15);
	cr_assert_float_eq(st.rewards_chosen_mean, 0.125, 1e-15);
	cr_assert_float_eq(st.rewards_rejected_mean, -0.125, 1e-15);
	cr_assert_float_eq(st.rewards_margin_mean, 0.25, 1e-15);
	cr_assert_float_eq(st.pairs, 2.0, 1e-15);
}

/* preference_average_log_probs: r_s / n_s. Pair 0: 0.75/3 - (-0.75/2) =
 * 0.625, x = 0.3125, log(1 + e^-0.3125) = 0.549054862271; pair 1: -0.5/2 -
 * 0.5/1 = -0.75, x = -0.375, log(1 + e^0.375) = 0.898123264140; mean
 * 0.723589063205. */
Test(dpo_loss, averaged_log_probs)
{
	struct fx f = base_fx();
	struct rl_loss_batch b = view(&f, 0, NS);
	struct rl_dpo_loss l = base_loss;
	struct rl_dpo_stats st = {0};

	l.preference_average_log_probs = true;
	double loss = rl_dpo_loss_compute(&l, &b, 2, NULL, &st);
	cr_assert_float_eq(loss, 0.723589063205, 1e-11);
	cr_assert_float_eq(st.rewards_chosen_mean, (0.25 - 0.25) / 2, 1e-15);
	cr_assert_float_eq(st.rewards_rejected_mean, (-0.375 + 0.5) / 2, 1e-15);
}

/* The SFT term: -pi of the chosen responses, 1.75 and 1, mean 1.375; with
 * weights 0.5 and 0.2 the loss is 0.5 * 0.680473995148 + 0.2 * 1.375 =
 * 0.615236997574. Averaged per token: 1.75 / 3 and 1 / 2, mean 13/24. */
Test(dpo_loss, sft_term)
{
	struct fx f = base_fx();
	struct rl_loss_batch b = view(&f, 0, NS);
	struct rl_dpo_loss l = base_loss;
	struct rl_dpo_stats st = {0};

	l.preference_loss_weight = 0.5;
	l.sft_loss_weight = 0.2;
	double loss = rl_dpo_loss_compute(&l, &b, 2, NULL, &st);
	cr_assert_float_eq(loss, 0.615236997574, 1e-11);
	cr_assert_float_eq(st.sft_loss, 1.375, 1e-15);
	cr_assert_float_eq(st.preference_loss, 0.680473995148, 1e-11);
	memset(&st, 0, sizeof st);
	l.sft_average_log_probs = true;
	rl_dpo_loss_compute(&l, &b, 2, NULL, &st);
	cr_assert_float_eq(st.sft_loss, 13.0 / 24.0, 1e-15);
}

/* A pair dropped (sample_mask 0, as NeMo-RL drops an overlong one) counts
 * in neither the sum nor the denominator, which the caller gives as 1. */
Test(dpo_loss, masked_pair)
{
	struct fx f = base_fx();
	struct rl_dpo_stats st = {0};
	float g[NT];

	f.sm[2] = f.sm[3] = 0;
	struct rl_loss_batch b = view(&f, 0, NS);
	double loss = rl_dpo_loss_compute(&base_loss, &b, 1, g, &st);
	cr_assert_float_eq(loss, 0.386871006115, 1e-11);
	cr_assert_float_eq(st.accuracy, 1.0, 1e-15);
	cr_assert_float_eq(st.pairs, 1.0, 1e-15);
	for (int t = f.cu[2]; t < NT; t++)
		cr_assert_eq(g[t], 0.0f);
	/* no valid pair at all: every term 0 */
	loss = rl_dpo_loss_compute(&base_loss, &b, 0, g, NULL);
	cr_assert_float_eq(loss, 0.0, 1e-15);
}

Test(dpo_loss, refuses_half_a_pair)
{
	struct fx f = base_fx();
	struct rl_loss_batch b = view(&f, 0, 3);

	cr_assert(isnan(rl_dpo_loss_compute(&base_loss, &b, 2, NULL, NULL)));
	b = view(&f, 0, NS);
	b.ref = NULL;
	cr_assert(isnan(rl_dpo_loss_compute(&base_loss, &b, 2, NULL, NULL)));
}

/* Central differences with a step of 1/1024, which the fp32 inputs (all
 * multiples of 1/16) hold exactly, on a loss summed in double: what is
 * left is the truncation error h^2 / 6 * f''', under 1e-7 for slopes of
 * order one, against gradients of order 0.1. */
static void check_gradient(const struct rl_dpo_loss *l)
{
	struct fx f = base_fx();
	struct rl_loss_batch b = view(&f, 0, NS);
	float g[NT];
	const float h = 1.0f / 1024;

	rl_dpo_loss_compute(l, &b, 2, g, NULL);
	for (int t = 0; t < NT; t++) {
		float x = f.curr[t];
		f.curr[t] = x + h;
		double up = rl_dpo_loss_compute(l, &b, 2, NULL, NULL);
		f.curr[t] = x - h;
		double down = rl_dpo_loss_compute(l, &b, 2, NULL, NULL);
		f.curr[t] = x;
		double fd = (up - down) / (2 * (double)h);
		cr_assert(fabs(fd - g[t]) < 1e-6, "dcurr[%d]: got %.9g, finite differences %.9g", t,
		          g[t], fd);
		if (f.tm[t])
			cr_assert(fabs(g[t]) > 1e-3, "dcurr[%d] is %.9g: no slope", t, g[t]);
	}
}

Test(dpo_loss, gradient_sum)
{
	check_gradient(&base_loss);
}

Test(dpo_loss, gradient_averaged_with_sft)
{
	struct rl_dpo_loss l = {.beta = 0.5,
	                        .preference_loss_weight = 0.5,
	                        .sft_loss_weight = 0.2,
	                        .preference_average_log_probs = true,
	                        .sft_average_log_probs = true};
	check_gradient(&l);
}

/* Any split into micro-batches of whole pairs gives the step's loss,
 * statistics and gradient: each share is divided by the step's pairs. */
Test(dpo_loss, split_into_pairs)
{
	struct fx f = base_fx();
	struct rl_loss_batch whole = view(&f, 0, NS);
	struct rl_dpo_stats a = {0}, s = {0};
	float g[NT], gs[NT];
	double la = rl_dpo_loss_compute(&base_loss, &whole, 2, g, &a);

	struct rl_loss_batch p0 = view(&f, 0, 2);
	double l0 = rl_dpo_loss_compute(&base_loss, &p0, 2, gs, &s);
	struct rl_loss_batch p1 = view(&f, 2, 2);
	double l1 = rl_dpo_loss_compute(&base_loss, &p1, 2, gs + f.cu[2], &s);
	cr_assert_float_eq(l0 + l1, la, 1e-15);
	cr_assert_float_eq(s.loss, a.loss, 1e-15);
	cr_assert_float_eq(s.accuracy, a.accuracy, 1e-15);
	cr_assert_float_eq(s.rewards_margin_mean, a.rewards_margin_mean, 1e-15);
	for (int t = 0; t < NT; t++)
		cr_assert_eq(gs[t], g[t], "dcurr[%d]", t);
}
