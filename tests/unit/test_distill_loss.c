/* On-policy distillation's reverse-KL loss (runtime/algo/distill_loss.c):
 * a two-sequence case worked out by hand, the gradient against central
 * finite differences of the surrogate, the split into micro-batches, and
 * on a 3-token vocabulary, by enumerating every token, that the expected
 * gradient of the surrogate is the true reverse KL's gradient.
 *
 * The hand case. Token 0 is a prompt token (masked); sequence 0 owns
 * tokens 0..2, sequence 1 tokens 3..4. Every input is a multiple of 1/16,
 * so the floats hold the literals exactly. At the step's first update
 * curr = prev, so r = 1 and k = prev - ref:
 *   t   prev    ref     k
 *   1  -1.0    -1.5     0.5
 *   2  -0.25   -0.125  -0.125
 *   3  -2.0    -1.0    -1.0
 *   4  -0.75   -1.25    0.5
 * four tokens count: loss = (0.5 - 0.125 - 1.0 + 0.5) / 4 = -0.03125, the
 * mean reverse-KL estimate; d loss / d curr_t = k_t / 4 = 0.125, -0.03125,
 * -0.25, 0.125. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/algo/distill_loss.h"

#define MAXT 8

struct fx {
	int n_tokens, n_seqs;
	int32_t cu[4];
	float curr[MAXT], prev[MAXT], gen[MAXT], ref[MAXT];
	uint8_t tm[MAXT];
	double adv[3], sm[3];
};

static struct fx hand_fx(void)
{
	return (struct fx){
	    .n_tokens = 5,
	    .n_seqs = 2,
	    .cu = {0, 3, 5},
	    .curr = {-0.5f, -1.0f, -0.25f, -2.0f, -0.75f},
	    .prev = {-0.5f, -1.0f, -0.25f, -2.0f, -0.75f},
	    .gen = {-0.5f, -1.0f, -0.25f, -2.0f, -0.75f},
	    .ref = {-0.5f, -1.5f, -0.125f, -1.0f, -1.25f},
	    .tm = {0, 1, 1, 1, 1},
	    .sm = {1, 1},
	};
}

static struct rl_distill_loss make_loss(void)
{
	struct rl_distill_loss l;
	char err[256];

	cr_assert_eq(rl_distill_loss_init(&l, "reverse", 0.5, false, err, sizeof err), 0, "%s",
	             err);
	return l;
}

static struct rl_loss_batch view(const struct fx *f, int lo_seq, int hi_seq)
{
	int32_t t0 = f->cu[lo_seq];
	static int32_t cu[4];

	for (int s = lo_seq; s <= hi_seq; s++)
		cu[s - lo_seq] = f->cu[s] - t0;
	return (struct rl_loss_batch){
	    .n_tokens = f->cu[hi_seq] - t0,
	    .n_seqs = hi_seq - lo_seq,
	    .cu_seqlens = cu,
	    .curr = f->curr + t0,
	    .prev = f->prev + t0,
	    .gen = f->gen + t0,
	    .ref = f->ref + t0,
	    .token_mask = f->tm + t0,
	    .advantage = f->adv + lo_seq,
	    .sample_mask = f->sm + lo_seq,
	};
}

/* the whole step as one micro-batch, its own denominators */
static double run(const struct fx *f, float *dcurr, struct rl_loss_stats *st)
{
	struct rl_distill_loss l = make_loss();
	struct rl_loss_batch b = view(f, 0, f->n_seqs);
	struct rl_loss_norm n = {0};

	rl_loss_norm_add(&n, &b);
	return rl_distill_loss_compute(&l, &b, &n, dcurr, st);
}

static void expect_close(const char *what, double got, double want, double tol)
{
	cr_expect(fabs(got - want) <= tol, "%s: got %.17g, want %.17g", what, got, want);
}

Test(distill_loss, hand_case_at_the_first_update)
{
	struct fx f = hand_fx();
	struct rl_loss_stats st = {0};
	float g[MAXT];
	const float want_g[] = {0.0f, 0.125f, -0.03125f, -0.25f, 0.125f};

	expect_close("loss", run(&f, g, &st), -0.03125, 1e-15);
	expect_close("stats.loss", st.loss, -0.03125, 1e-15);
	expect_close("stats.kl (mean curr - ref)", st.kl, -0.03125, 1e-15);
	expect_close("stats.probs_ratio", st.probs_ratio, 1.0, 1e-15);
	expect_close("stats.token_mult_prob_error", st.token_mult_prob_error, 1.0, 1e-15);
	for (int t = 0; t < f.n_tokens; t++)
		cr_expect_eq(g[t], want_g[t], "dcurr[%d]: got %.9g, want %.9g", t, g[t], want_g[t]);
}

/* A later update of the step: the student has moved (curr != prev); the
 * advantage stays k = prev - ref, weighed by r = exp(curr - prev), while
 * the reported KL is the student's now, curr - ref. */
Test(distill_loss, hand_case_after_an_update)
{
	struct fx f = hand_fx();
	struct rl_loss_stats st = {0};
	float g[MAXT];

	f.curr[1] = -0.875f; /* r = e^0.125 */
	f.curr[3] = -2.25f;  /* r = e^-0.25 */
	double r1 = exp(0.125), r3 = exp(-0.25);
	double want = (r1 * 0.5 - 0.125 + r3 * -1.0 + 0.5) / 4;
	double want_kl = ((-0.875 + 1.5) + (-0.25 + 0.125) + (-2.25 + 1.0) + (-0.75 + 1.25)) / 4;

	expect_close("loss", run(&f, g, &st), want, 1e-12);
	expect_close("stats.kl", st.kl, want_kl, 1e-12);
	expect_close("stats.probs_ratio", st.probs_ratio, (r1 + 1 + r3 + 1) / 4, 1e-12);
	expect_close("dcurr[1]", g[1], r1 * 0.5 / 4, 1e-7);
	expect_close("dcurr[3]", g[3], r3 * -1.0 / 4, 1e-7);
}

/* sample_mask 0 takes a sequence out of the loss and of the denominator */
Test(distill_loss, masked_sample)
{
	struct fx f = hand_fx();
	float g[MAXT];

	f.sm[1] = 0;
	expect_close("loss", run(&f, g, NULL), (0.5 - 0.125) / 2, 1e-15);
	cr_expect(g[3] == 0.0f && g[4] == 0.0f, "the masked sequence has a gradient");
	expect_close("dcurr[1]", g[1], 0.25, 1e-15);
}

/* the surrogate's value moves with curr as dcurr says, at r != 1 too */
Test(distill_loss, gradient_against_finite_differences)
{
	struct fx f = hand_fx();
	float g[MAXT];

	f.curr[1] = -0.875f;
	f.curr[2] = -0.5f;
	f.curr[3] = -2.25f;
	run(&f, g, NULL);
	for (int t = 0; t < f.n_tokens; t++) {
		float x = f.curr[t], xp = x + 1e-3f, xm = x - 1e-3f;

		f.curr[t] = xp;
		double lp = run(&f, NULL, NULL);
		f.curr[t] = xm;
		double lm = run(&f, NULL, NULL);
		f.curr[t] = x;
		double want = (lp - lm) / ((double)xp - (double)xm);
		/* central differences of r * k / 4: error h^2 / 6 * |f'''| < 1e-7 */
		cr_expect(fabs(g[t] - want) <= 1e-6, "dcurr[%d]: got %.9g, differences %.9g", t,
		          g[t], want);
	}
}

/* any split into micro-batches under the step's denominators sums to the
 * whole */
Test(distill_loss, micro_batches_sum_to_the_step)
{
	struct fx f = hand_fx();
	struct rl_distill_loss l = make_loss();
	struct rl_loss_batch whole = view(&f, 0, 2);
	struct rl_loss_norm n = {0};
	struct rl_loss_stats st = {0};
	float g[MAXT];

	f.curr[2] = -0.5f;
	rl_loss_norm_add(&n, &whole);
	double all = rl_distill_loss_compute(&l, &whole, &n, NULL, NULL);
	struct rl_loss_batch a = view(&f, 0, 1);
	double part = rl_distill_loss_compute(&l, &a, &n, g, &st);
	struct rl_loss_batch b = view(&f, 1, 2);
	part += rl_distill_loss_compute(&l, &b, &n, g + 3, &st);
	expect_close("sum of the parts", part, all, 1e-15);
	expect_close("stats.loss", st.loss, all, 1e-15);
	expect_close("dcurr[4] from the second part", g[4], 0.125, 1e-15);
}

/* A 3-token vocabulary: the student's logits z, the teacher's q. Drawing
 * y from p = softmax(z), the surrogate's gradient with respect to z is
 * dcurr(y) * (e_y - p) (d log p_y / d z = e_y - p). Its expectation, by
 * enumerating the three tokens, must be the gradient of the true reverse
 * KL, sum_y p_y (log p_y - log q_y), here by central differences of that
 * sum (no formula shared with the code); and the expected loss is the KL. */
static double reverse_kl(const double *z, const double *lq)
{
	double m = fmax(z[0], fmax(z[1], z[2])), s = 0, kl = 0;

	for (int j = 0; j < 3; j++)
		s += exp(z[j] - m);
	for (int j = 0; j < 3; j++) {
		double lp = z[j] - m - log(s);
		kl += exp(lp) * (lp - lq[j]);
	}
	return kl;
}

Test(distill_loss, expected_gradient_is_the_reverse_kl_gradient)
{
	const double z[3] = {0.25, -0.5, 1.0};
	const double lq[3] = {log(0.5), log(0.3), log(0.2)};
	struct rl_distill_loss l = make_loss();
	double m = fmax(z[0], fmax(z[1], z[2])), s = 0, p[3], lp[3];
	double eg[3] = {0}, eloss = 0;

	for (int j = 0; j < 3; j++)
		s += exp(z[j] - m);
	for (int j = 0; j < 3; j++) {
		lp[j] = z[j] - m - log(s);
		p[j] = exp(lp[j]);
	}
	for (int y = 0; y < 3; y++) {
		/* one sampled token: its logprob under the student and the teacher */
		int32_t cu[2] = {0, 1};
		float curr = (float)lp[y], ref = (float)lq[y];
		uint8_t tm = 1;
		double adv = 0, sm = 1;
		float d;
		struct rl_loss_batch b = {.n_tokens = 1,
		                          .n_seqs = 1,
		                          .cu_seqlens = cu,
		                          .curr = &curr,
		                          .prev = &curr,
		                          .gen = &curr,
		                          .ref = &ref,
		                          .token_mask = &tm,
		                          .advantage = &adv,
		                          .sample_mask = &sm};
		struct rl_loss_norm n = {.valid_tokens = 1, .valid_seqs = 1};

		eloss += p[y] * rl_distill_loss_compute(&l, &b, &n, &d, NULL);
		for (int j = 0; j < 3; j++)
			eg[j] += p[y] * d * ((j == y) - p[j]);
	}
	/* the inputs pass through floats: 1e-7 relative on each logprob */
	expect_close("E[loss] against the KL", eloss, reverse_kl(z, lq), 1e-6);
	cr_expect(reverse_kl(z, lq) > 0.05, "a case where the KL is not small");
	for (int j = 0; j < 3; j++) {
		double zp[3] = {z[0], z[1], z[2]}, zm[3] = {z[0], z[1], z[2]}, h = 1e-5;

		zp[j] += h;
		zm[j] -= h;
		double want = (reverse_kl(zp, lq) - reverse_kl(zm, lq)) / (2 * h);
		expect_close("E[gradient] against d KL / dz", eg[j], want, 1e-6);
		cr_expect(fabs(want) > 1e-2, "dKL/dz[%d] is not small", j);
	}
}

Test(distill_loss, refusals_name_the_key)
{
	struct rl_distill_loss l;
	char err[512];

	cr_expect_eq(rl_distill_loss_init(&l, NULL, 0.5, false, err, sizeof err), 0,
	             "the default (reverse)");
	cr_expect_eq(rl_distill_loss_init(&l, "mixed", 0.5, false, err, sizeof err), -1);
	cr_expect(strstr(err, "loss_fn.kl_type: mixed is not implemented") != NULL, "%s", err);
	cr_expect_eq(rl_distill_loss_init(&l, "forward", 0.5, false, err, sizeof err), -1);
	cr_expect(strstr(err, "loss_fn.kl_type: forward is not implemented") != NULL, "%s", err);
	cr_expect_eq(rl_distill_loss_init(&l, "k3", 0.5, false, err, sizeof err), -1);
	cr_expect(strstr(err, "loss_fn.kl_type: must be reverse") != NULL, "%s", err);
	cr_expect_eq(rl_distill_loss_init(&l, "reverse", 1.5, false, err, sizeof err), -1);
	cr_expect(strstr(err, "loss_fn.mixed_kl_weight") != NULL, "%s", err);
	cr_expect_eq(rl_distill_loss_init(&l, "reverse", 0.5, true, err, sizeof err), -1);
	cr_expect(strstr(err, "loss_fn.zero_outside_topk: true is not implemented") != NULL, "%s",
	          err);
}
