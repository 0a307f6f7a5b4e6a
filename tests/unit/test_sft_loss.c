/* NeMo-RL's NLLLossFn as SFT uses it, on numbers worked by hand: the mean
 * of -logprob over the tokens that count in the whole step, the gradient
 * against central finite differences, the split of a step into
 * micro-batches, and the padding that must not be read.
 *
 * The base case: sequence 0 owns tokens 0..2, sequence 1 tokens 3..5.
 * Token 0 and 3 are prompt tokens (mask 0). Every input is a multiple of
 * 1/16, so the floats hold the literals exactly.
 *   t      0     1      2       3     4     5
 *   curr  -0.5  -1.0   -0.3125 -2.0  -0.75 -1.5
 *   mask   0     1      1       0     1     1
 * valid tokens 4; loss = (1.0 + 0.3125 + 0.75 + 1.5) / 4 = 3.5625 / 4
 * = 0.890625; d loss / d curr = -1/4 on the four counted tokens, 0 else. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/algo/sft_loss.h"

#define T 6

static float curr[T] = {-0.5f, -1.0f, -0.3125f, -2.0f, -0.75f, -1.5f};
static uint8_t mask[T] = {0, 1, 1, 0, 1, 1};
static int32_t cu[3] = {0, 3, 6};
static double sm[2] = {1, 1};

static struct rl_loss_batch batch(const float *c, const double *smask)
{
	return (struct rl_loss_batch){.n_tokens = T,
	                              .n_seqs = 2,
	                              .cu_seqlens = cu,
	                              .curr = c,
	                              .token_mask = mask,
	                              .sample_mask = smask};
}

Test(sft_loss, mean_over_the_steps_tokens)
{
	struct rl_loss_batch b = batch(curr, sm);
	struct rl_loss_norm n = {.valid_tokens = 4, .valid_seqs = 2};
	struct rl_loss_stats st = {0};
	float g[T];

	double loss = rl_sft_loss_compute(&b, &n, g, &st);
	cr_assert_eq(loss, 0.890625, "loss %.9g", loss);
	cr_assert_eq(st.loss, 0.890625);
	const float want[T] = {0, -0.25f, -0.25f, 0, -0.25f, -0.25f};
	for (int t = 0; t < T; t++)
		cr_assert_eq(g[t], want[t], "dcurr[%d] = %g, want %g", t, g[t], want[t]);
}

/* A sample whose loss multiplier is 0 (NeMo-RL's overlong example) is out
 * of the sum and, through the caller's count, out of the denominator:
 * (1.0 + 0.3125) / 2 = 0.65625. */
Test(sft_loss, masked_sample_counts_nowhere)
{
	double only0[2] = {1, 0};
	struct rl_loss_batch b = batch(curr, only0);
	struct rl_loss_norm n = {.valid_tokens = 2, .valid_seqs = 1};
	float g[T];

	cr_assert_eq(rl_sft_loss_compute(&b, &n, g, NULL), 0.65625);
	cr_assert_eq(g[4], 0.0f);
	cr_assert_eq(g[5], 0.0f);
	cr_assert_eq(g[1], -0.5f);
}

/* Token-level over the step, not a mean of per-sequence means: with token
 * 3 counted too, sequence 1 has three tokens and the loss is
 * (1 + 0.3125 + 2 + 0.75 + 1.5) / 5 = 5.5625 / 5 = 1.1125, where the mean
 * of the two sequences' means would be (1.3125/2 + 4.25/3) / 2 =
 * 1.0364583. The same tokens as a step of two micro-batches, each given
 * the step's denominator, add up to the whole. */
Test(sft_loss, micro_batches_add_up_to_the_step)
{
	uint8_t m3[T] = {0, 1, 1, 1, 1, 1};
	struct rl_loss_batch whole = batch(curr, sm);
	whole.token_mask = m3;
	struct rl_loss_norm n = {.valid_tokens = 5, .valid_seqs = 2};
	double all = rl_sft_loss_compute(&whole, &n, NULL, NULL);
	cr_assert_float_eq(all, 1.1125, 1e-15);

	int32_t cu0[2] = {0, 3}, cu1[2] = {0, 3};
	struct rl_loss_batch b0 = {.n_tokens = 3,
	                           .n_seqs = 1,
	                           .cu_seqlens = cu0,
	                           .curr = curr,
	                           .token_mask = m3,
	                           .sample_mask = sm};
	struct rl_loss_batch b1 = {.n_tokens = 3,
	                           .n_seqs = 1,
	                           .cu_seqlens = cu1,
	                           .curr = curr + 3,
	                           .token_mask = m3 + 3,
	                           .sample_mask = sm + 1};
	struct rl_loss_stats st = {0};
	rl_sft_loss_compute(&b0, &n, NULL, &st);
	rl_sft_loss_compute(&b1, &n, NULL, &st);
	cr_assert_float_eq(st.loss, all, 1e-15);
	cr_assert(fabs(all - (1.3125 / 2 + 4.25 / 3) / 2) > 0.07);
}

/* d loss / d curr[t] against (L(curr + h) - L(curr - h)) / 2h, token by
 * token, with h = 1/64 (exact in a float near these values). The loss is
 * linear in curr, so the difference is exact up to the double sums'
 * rounding. */
Test(sft_loss, gradient_matches_finite_differences)
{
	float c[T], g[T];
	struct rl_loss_norm n = {.valid_tokens = 4, .valid_seqs = 2};
	const float h = 1.0f / 64;

	memcpy(c, curr, sizeof c);
	struct rl_loss_batch b = batch(c, sm);
	rl_sft_loss_compute(&b, &n, g, NULL);
	for (int t = 0; t < T; t++) {
		float keep = c[t];
		c[t] = keep + h;
		double up = rl_sft_loss_compute(&b, &n, NULL, NULL);
		c[t] = keep - h;
		double down = rl_sft_loss_compute(&b, &n, NULL, NULL);
		c[t] = keep;
		double fd = (up - down) / (2.0 * h);
		cr_assert_float_eq(fd, g[t], 1e-12, "token %d: fd %.12g, analytic %.12g", t, fd,
		                   g[t]);
	}
}

/* What does not count is not read (NaN in a prompt token and in the
 * packer's padding rows past the last sequence), and gets a zero gradient;
 * a step with no token that counts is 0, not NaN. */
Test(sft_loss, padding_unread_and_empty_step_is_zero)
{
	float c[T + 2];
	float g[T + 2];

	memcpy(c, curr, sizeof curr);
	c[0] = NAN;
	c[T] = c[T + 1] = NAN;
	g[T] = g[T + 1] = 7;
	struct rl_loss_batch b = batch(c, sm);
	b.n_tokens = T + 2;
	struct rl_loss_norm n = {.valid_tokens = 4, .valid_seqs = 2};
	cr_assert_eq(rl_sft_loss_compute(&b, &n, g, NULL), 0.890625);
	cr_assert_eq(g[0], 0.0f);
	cr_assert_eq(g[T], 0.0f);
	cr_assert_eq(g[T + 1], 0.0f);

	struct rl_loss_norm none = {0};
	uint8_t zero[T + 2] = {0};
	b.token_mask = zero;
	cr_assert_eq(rl_sft_loss_compute(&b, &none, g, NULL), 0.0);
	for (int t = 0; t < T + 2; t++)
		cr_assert_eq(g[t], 0.0f);
}
