/* LM-head token log-probabilities, walked over the vocabulary in chunks:
 * logprob, lse and both gradients against the full [n, vocab] log-softmax
 * in double, for chunk sizes that do and do not divide the vocabulary, the
 * gradients also against finite differences (gradcheck.h); large logits,
 * NaN and bad arguments. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/logprobs.h"
#include "tests/unit/gradcheck.h"
#include "tests/unit/op_arg_checks.h"
#include "tests/unit/ops_test_util.h"

struct lp_ctx {
	float *logprob, *lse, *h, *w, *r, *work;
	int32_t *tgt;
	struct rl_lm_logprobs_shape s;
};

static double lp_loss(void *p)
{
	struct lp_ctx *c = p;

	cr_assert_eq(rl_lm_logprobs_forward_cpu(c->logprob, c->lse, rl_cbuf_f32(c->h),
	                                        rl_cbuf_f32(c->w), c->tgt, &c->s, c->work, NULL),
	             0);
	return gc_dot(c->logprob, c->r, (size_t)c->s.n);
}

/* The full [n, vocab] log-softmax in double, and the gradients of
 * sum(logprob * r) with respect to h and W. */
static void lp_ref(const struct lp_ctx *c, double *logprob, double *lse, double *dh, double *dw)
{
	int n = c->s.n, dim = c->s.dim, vocab = c->s.vocab;
	double *z = dalloc((size_t)vocab);

	for (int t = 0; t < n; t++) {
		double mx = -INFINITY, sum = 0.0;

		for (int v = 0; v < vocab; v++) {
			double s = 0.0;

			for (int k = 0; k < dim; k++)
				s += (double)c->h[(size_t)t * dim + k] * c->w[(size_t)v * dim + k];
			z[v] = c->s.logit_scale * s;
			mx = fmax(mx, z[v]);
		}
		for (int v = 0; v < vocab; v++)
			sum += exp(z[v] - mx);
		lse[t] = mx + log(sum);
		logprob[t] = z[c->tgt[t]] - lse[t];
		for (int v = 0; v < vocab; v++) {
			double d =
			    c->s.logit_scale * c->r[t] * ((v == c->tgt[t]) - exp(z[v] - lse[t]));

			for (int k = 0; k < dim; k++) {
				dh[(size_t)t * dim + k] += d * c->w[(size_t)v * dim + k];
				dw[(size_t)v * dim + k] += d * c->h[(size_t)t * dim + k];
			}
		}
	}
	free(z);
}

static void lp_case(uint32_t *seed, int n, int dim, int vocab, int chunk, float scale, int fd)
{
	struct lp_ctx c = {
	    .s = {.n = n, .dim = dim, .vocab = vocab, .chunk = chunk, .logit_scale = scale}};
	size_t nh = (size_t)n * dim, nw = (size_t)vocab * dim;

	c.h = frand(seed, nh, -1, 1);
	c.w = frand(seed, nw, -1, 1);
	c.r = frand(seed, (size_t)n, -1, 1);
	c.logprob = falloc((size_t)n);
	c.lse = falloc((size_t)n);
	/* exactly what the header asks for, so ASan sees any overrun */
	c.work = falloc((size_t)rl_lm_logprobs_work_floats(&c.s, RL_F32));
	c.tgt = malloc((size_t)n * sizeof(*c.tgt));
	cr_assert_not_null(c.tgt);
	for (int t = 0; t < n; t++)
		c.tgt[t] = (int32_t)(gc_rng(seed) % (uint32_t)vocab);
	c.tgt[0] = 0;             /* the first chunk's first entry */
	c.tgt[n - 1] = vocab - 1; /* the last chunk's last entry */

	double *lp_want = dalloc((size_t)n), *lse_want = dalloc((size_t)n);
	double *dh_ref = dalloc(nh), *dw_ref = dalloc(nw);

	lp_ref(&c, lp_want, lse_want, dh_ref, dw_ref);
	lp_loss(&c);
	close_all("logprob", c.logprob, lp_want, (size_t)n, 1e-5, 1e-5);
	close_all("lse", c.lse, lse_want, (size_t)n, 1e-5, 1e-5);

	float *dh = frand(seed, nh, -1, 1), *dw = frand(seed, nw, -1, 1);
	float *dh0 = fdup(dh, nh), *dw0 = fdup(dw, nw);

	cr_assert_eq(rl_lm_logprobs_backward_cpu(rl_buf_f32(dh), dw, c.r, rl_cbuf_f32(c.h),
	                                         rl_cbuf_f32(c.w), c.tgt, c.lse, &c.s, c.work,
	                                         NULL),
	             0);
	gc_sub(dh, dh0, nh);
	gc_sub(dw, dw0, nw);
	close_all("logprobs dh", dh, dh_ref, nh, 1e-4, 1e-5 * absmax(dh_ref, nh));
	close_all("logprobs dw", dw, dw_ref, nw, 1e-4, 1e-5 * absmax(dw_ref, nw));
	if (fd) {
		gc_check("logprobs dh", c.h, nh, dh, lp_loss, &c, NULL);
		gc_check("logprobs dw", c.w, nw, dw, lp_loss, &c, NULL);
	}

	/* one gradient at a time */
	memset(dh0, 0, nh * sizeof(float));
	memset(dw0, 0, nw * sizeof(float));
	cr_assert_eq(rl_lm_logprobs_backward_cpu(rl_buf_f32(dh0), NULL, c.r, rl_cbuf_f32(c.h),
	                                         rl_cbuf_f32(c.w), c.tgt, c.lse, &c.s, c.work,
	                                         NULL),
	             0);
	cr_assert_eq(rl_lm_logprobs_backward_cpu(rl_buf_f32(NULL), dw0, c.r, rl_cbuf_f32(c.h),
	                                         rl_cbuf_f32(c.w), c.tgt, c.lse, &c.s, c.work,
	                                         NULL),
	             0);
	close_all("logprobs dh alone", dh0, dh_ref, nh, 1e-4, 1e-5 * absmax(dh_ref, nh));
	close_all("logprobs dw alone", dw0, dw_ref, nw, 1e-4, 1e-5 * absmax(dw_ref, nw));

	free(c.h);
	free(c.w);
	free(c.r);
	free(c.logprob);
	free(c.lse);
	free(c.work);
	free(c.tgt);
	free(lp_want);
	free(lse_want);
	free(dh_ref);
	free(dw_ref);
	free(dh);
	free(dw);
	free(dh0);
	free(dw0);
}

Test(logprobs, chunks_against_full_softmax)
{
	static const int chunks[] = {1, 7, 64, 300, 1000};
	uint32_t seed = 0xfeedu;

	/* 300 = 42 * 7 + 6 = 4 * 64 + 44; 1000 > vocab is clamped */
	for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		lp_case(&seed, 13, 24, 300, chunks[i], 1.0f, 1);
		lp_case(&seed, 13, 24, 300, chunks[i], 1.0f / 0.7f, 1);
	}
	lp_case(&seed, 1, 1, 1, 1, 1.0f, 0); /* vocab 1: logprob 0, gradient 0 */
	lp_case(&seed, 2, 5, 3, 2, 2.0f, 1);
	lp_case(&seed, 50, 64, 1000, 700, 1.0f, 0); /* threaded rows, short last chunk */
}

/* The vocabulary cut in two, as two tensor-parallel ranks hold it: each
 * slice's lse combined by logsumexp is the whole one's, the slice holding a
 * target gives its logit (target -1 elsewhere gives 0), and the backward of
 * each slice with the whole lse adds up to the whole backward. */
Test(logprobs, vocabulary_slices_add_up)
{
	enum { N = 9, DIM = 16, VOCAB = 37, CUT = 19 };
	uint32_t seed = 0xabcdu;
	struct lp_ctx c = {
	    .s = {.n = N, .dim = DIM, .vocab = VOCAB, .chunk = 8, .logit_scale = 1.3f}};
	size_t nh = (size_t)N * DIM, nw = (size_t)VOCAB * DIM;

	c.h = frand(&seed, nh, -1, 1);
	c.w = frand(&seed, nw, -1, 1);
	c.r = frand(&seed, N, -1, 1);
	c.tgt = malloc(N * sizeof(*c.tgt));
	cr_assert_not_null(c.tgt);
	for (int t = 0; t < N; t++)
		c.tgt[t] = (int32_t)(gc_rng(&seed) % VOCAB);
	c.tgt[0] = CUT - 1;
	c.tgt[1] = CUT;

	double lp_want[N], lse_want[N], *dh_want = dalloc(nh), *dw_want = dalloc(nw);
	lp_ref(&c, lp_want, lse_want, dh_want, dw_want);

	float lp[2][N], lse[2][N], *work = falloc((size_t)N * 8);
	float *dh = falloc(nh), *dw = falloc(nw);
	int32_t tgt[2][N];
	const int start[2] = {0, CUT}, rows[2] = {CUT, VOCAB - CUT};

	memset(dh, 0, nh * sizeof(float));
	memset(dw, 0, nw * sizeof(float));
	for (int r = 0; r < 2; r++) {
		struct rl_lm_logprobs_shape s = c.s;

		s.vocab = rows[r];
		for (int t = 0; t < N; t++) {
			int local = c.tgt[t] - start[r];
			tgt[r][t] = local >= 0 && local < rows[r] ? local : -1;
		}
		cr_assert_eq(rl_lm_logprobs_forward_cpu(lp[r], lse[r], rl_cbuf_f32(c.h),
		                                        rl_cbuf_f32(c.w + (size_t)start[r] * DIM),
		                                        tgt[r], &s, work, NULL),
		             0);
		for (int t = 0; t < N; t++)
			if (tgt[r][t] < 0)
				cr_expect_eq(lp[r][t], 0.0f, "slice %d token %d", r, t);
	}
	float lse_all[N];
	for (int t = 0; t < N; t++) {
		double mx = fmax(lse[0][t], lse[1][t]);
		int owner = tgt[0][t] >= 0 ? 0 : 1;

		lse_all[t] = (float)(mx + log(exp(lse[0][t] - mx) + exp(lse[1][t] - mx)));
		cr_expect(fabs(lse_all[t] - lse_want[t]) <= 1e-5 * (1 + fabs(lse_want[t])),
		          "lse %d: %g, want %g", t, lse_all[t], lse_want[t]);
		double lp_all = (double)lp[owner][t] + lse[owner][t] - lse_all[t];
		cr_expect(fabs(lp_all - lp_want[t]) <= 1e-5 * (1 + fabs(lp_want[t])),
		          "logprob %d: %g, want %g", t, lp_all, lp_want[t]);
	}
	for (int r = 0; r < 2; r++) {
		struct rl_lm_logprobs_shape s = c.s;

		s.vocab = rows[r];
		cr_assert_eq(rl_lm_logprobs_backward_cpu(
		                 rl_buf_f32(dh), dw + (size_t)start[r] * DIM, c.r, rl_cbuf_f32(c.h),
		                 rl_cbuf_f32(c.w + (size_t)start[r] * DIM), tgt[r], lse_all, &s,
		                 work, NULL),
		             0);
	}
	close_all("sliced dh", dh, dh_want, nh, 1e-4, 1e-5 * absmax(dh_want, nh));
	close_all("sliced dw", dw, dw_want, nw, 1e-4, 1e-5 * absmax(dw_want, nw));
	free(c.h);
	free(c.w);
	free(c.r);
	free(c.tgt);
	free(work);
	free(dh);
	free(dw);
	free(dh_want);
	free(dw_want);
}

Test(logprobs, large_logits_do_not_overflow)
{
	/* logits of +-2000: exp would overflow without the running max */
	const float h[2] = {1000, -1000}, w[3] = {2, 1, -2};
	const int32_t tgt[2] = {0, 2};
	struct rl_lm_logprobs_shape s = {
	    .n = 2, .dim = 1, .vocab = 3, .chunk = 1, .logit_scale = 1.0f};
	float lp[2], lse[2], work[2];

	cr_assert_eq(rl_lm_logprobs_forward_cpu(lp, lse, rl_cbuf_f32(h), rl_cbuf_f32(w), tgt, &s,
	                                        work, NULL),
	             0);
	/* row 0: logits 2000, 1000, -2000; row 1: -2000, -1000, 2000 */
	cr_expect(fabsf(lse[0] - 2000.0f) < 1e-3f && fabsf(lse[1] - 2000.0f) < 1e-3f, "lse %g %g",
	          (double)lse[0], (double)lse[1]);
	cr_expect(fabsf(lp[0]) < 1e-6f && fabsf(lp[1]) < 1e-6f, "logprob %g %g", (double)lp[0],
	          (double)lp[1]);
}

Test(logprobs, nan_propagates)
{
	/* a NaN in one row of W makes that logit NaN for every token, and with
	 * it every lse: the NaN must not vanish in the running maximum */
	const float h[2] = {1, -1}, w[4] = {0.5f, NAN, -1, 2};
	const int32_t tgt[2] = {0, 3};
	struct rl_lm_logprobs_shape s = {
	    .n = 2, .dim = 1, .vocab = 4, .chunk = 3, .logit_scale = 1.0f};
	float lp[2], lse[2], work[6];

	cr_assert_eq(rl_lm_logprobs_forward_cpu(lp, lse, rl_cbuf_f32(h), rl_cbuf_f32(w), tgt, &s,
	                                        work, NULL),
	             0);
	cr_expect(isnan(lse[0]) && isnan(lse[1]) && isnan(lp[0]) && isnan(lp[1]),
	          "lse %g %g, logprob %g %g", (double)lse[0], (double)lse[1], (double)lp[0],
	          (double)lp[1]);
}

Test(logprobs, bad_arguments)
{
	float v[8] = {0}, g[8], work[8];
	int32_t tgt[2] = {0, 1};
	struct rl_lm_logprobs_shape s = {
	    .n = 2, .dim = 2, .vocab = 2, .chunk = 2, .logit_scale = 1.0f};

	cr_expect_eq(rl_lm_logprobs_forward_cpu(g, g + 2, rl_cbuf_f32(v), rl_cbuf_f32(v), tgt, &s,
	                                        work, NULL),
	             0);
	tgt[1] = 2;
	cr_expect_eq(rl_lm_logprobs_forward_cpu(g, g + 2, rl_cbuf_f32(v), rl_cbuf_f32(v), tgt, &s,
	                                        work, NULL),
	             -1);
	tgt[1] = -2;
	cr_expect_eq(rl_lm_logprobs_forward_cpu(g, g + 2, rl_cbuf_f32(v), rl_cbuf_f32(v), tgt, &s,
	                                        work, NULL),
	             -1);
	tgt[1] = 1;
	expect_logprobs_arg_checks(rl_lm_logprobs_forward_cpu, rl_lm_logprobs_backward_cpu);
}
