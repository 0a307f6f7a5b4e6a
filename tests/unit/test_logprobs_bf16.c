/* The fused LM-head logprobs on bf16 h and W (real 2-byte storage), on the
 * CPU and fenced tables.
 *
 * Forward: logprob and lse are fp32 and bf16 products are exact in fp32, so
 * the bf16 op, plain and batch-invariant, is the fp32 op on the same values
 * to the bit (the fp32 op is held to double by test_logprobs.c).
 *
 * Backward: each chunk's dlogits are rounded to bf16 before the products
 * (logprobs.h), so against the gradients in double, with dlogits = scale d
 * ([v == target] - softmax) taken exactly, each term of a sum moves by at
 * most 2^-8 of itself, and the fp32 sums add gamma(k) of their terms'
 * sizes (linear_bf16_ref.h); dh is then rounded once more to bf16:
 *	|dW - r| <= (2^-8 + 2 gamma(n)) mag
 *	|dh - r| <= 2^-8 |r| + (2^-8 + 2 gamma(vocab + 1)) (1 + 2^-8) mag
 * where mag sums the terms' sizes (the old dh's included), the factor 2 on
 * gamma covering the softmax's own fp32 error, far below 2^-8. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/fenced.h"
#include "kernels/logprobs.h"
#include "kernels/ops.h"
#include "tests/unit/linear_bf16_ref.h"
#include "tests/unit/logprobs_bf16_ref.h"
#include "tests/unit/ops_test_util.h"

static float *work_for(const struct lp16 *c, enum rl_dtype t)
{
	return falloc((size_t)rl_lm_logprobs_work_floats(&c->s, t));
}

Test(logprobs_bf16, forward_is_the_fp32_op_on_the_same_values)
{
	static const int chunks[] = {1000, 64, 7};
	uint32_t seed = 61;

	for (size_t k = 0; k < sizeof chunks / sizeof *chunks; k++) {
		struct lp16 c;

		lp16_make(&c, &seed, 23, 40, 300, chunks[k]);
		for (int inv = 0; inv <= 1; inv++) {
			rl_lm_logprobs_forward_fn f =
			    inv ? rl_lm_logprobs_forward_invariant_cpu : rl_lm_logprobs_forward_cpu;
			float *lp = falloc(23), *lse = falloc(23), *lp32 = falloc(23);
			float *lse32 = falloc(23), *w16 = work_for(&c, RL_BF16);
			float *w32 = work_for(&c, RL_F32);

			cr_assert_eq(f(lp, lse, rl_cbuf_bf16(c.h), rl_cbuf_bf16(c.w), c.tgt, &c.s,
			               w16, NULL),
			             0);
			cr_assert_eq(f(lp32, lse32, rl_cbuf_f32(c.hf), rl_cbuf_f32(c.wf), c.tgt,
			               &c.s, w32, NULL),
			             0);
			cr_expect_arr_eq(lp, lp32, 23 * 4, "%s chunk %d: logprob",
			                 inv ? "invariant" : "plain", chunks[k]);
			cr_expect_arr_eq(lse, lse32, 23 * 4, "%s chunk %d: lse",
			                 inv ? "invariant" : "plain", chunks[k]);
			free(lp);
			free(lse);
			free(lp32);
			free(lse32);
			free(w16);
			free(w32);
		}
		lp16_free(&c);
	}
}

static void check_backward(rl_lm_logprobs_backward_fn bwd, const struct rl_ops *T, int fenced)
{
	uint32_t seed = 71;
	struct lp16 c;

	lp16_make(&c, &seed, 19, 48, 211, 50);

	int n = c.s.n, dim = c.s.dim, vocab = c.s.vocab;
	size_t nh = (size_t)n * dim, nw = (size_t)vocab * dim;
	float *r = frand(&seed, (size_t)n, -1, 1), *dh0f, *lp = falloc(n), *lse = falloc(n);
	uint16_t *dh = lin16_bits(&seed, nh, -0.1f, 0.1f, &dh0f);
	float *dw = calloc(nw, 4), *work = work_for(&c, RL_BF16);
	double *rdh = dalloc(nh), *mdh = dalloc(nh), *rdw = dalloc(nw), *mdw = dalloc(nw);
	int bad = 0;

	cr_assert_not_null(dw);
	cr_assert_eq(rl_lm_logprobs_forward_cpu(lp, lse, rl_cbuf_bf16(c.h), rl_cbuf_bf16(c.w),
	                                        c.tgt, &c.s, work, NULL),
	             0);
	if (!fenced) {
		cr_assert_eq(bwd(rl_buf_bf16(dh), dw, r, rl_cbuf_bf16(c.h), rl_cbuf_bf16(c.w),
		                 c.tgt, lse, &c.s, work, NULL),
		             0);
	} else {
		/* the same call with every buffer on the fenced table */
		size_t wf = (size_t)rl_lm_logprobs_work_floats(&c.s, RL_BF16);
		void *d_dh = T->alloc(nh * 2), *d_h = T->alloc(nh * 2), *d_w = T->alloc(nw * 2);
		float *d_dw = T->alloc(nw * 4), *d_r = T->alloc((size_t)n * 4);
		float *d_lse = T->alloc((size_t)n * 4), *d_work = T->alloc(wf * 4);
		int32_t *d_tgt = T->alloc((size_t)n * 4);

		cr_assert(T->from_host(d_dh, dh, nh * 2, NULL) == 0 &&
		          T->from_host(d_h, c.h, nh * 2, NULL) == 0 &&
		          T->from_host(d_w, c.w, nw * 2, NULL) == 0 &&
		          T->from_host(d_dw, dw, nw * 4, NULL) == 0 &&
		          T->from_host(d_r, r, (size_t)n * 4, NULL) == 0 &&
		          T->from_host(d_lse, lse, (size_t)n * 4, NULL) == 0 &&
		          T->from_host(d_tgt, c.tgt, (size_t)n * 4, NULL) == 0);
		/* the fp32 op's work is too small for bf16's: refused */
		struct rl_lm_logprobs_shape s32 = c.s;
		float *small = T->alloc((size_t)rl_lm_logprobs_work_floats(&s32, RL_F32) * 4);

		cr_expect_eq(bwd(rl_buf_bf16(d_dh), d_dw, d_r, rl_cbuf_bf16(d_h), rl_cbuf_bf16(d_w),
		                 d_tgt, d_lse, &c.s, small, NULL),
		             -1, "an fp32-sized work for bf16");
		cr_assert_eq(bwd(rl_buf_bf16(d_dh), d_dw, d_r, rl_cbuf_bf16(d_h), rl_cbuf_bf16(d_w),
		                 d_tgt, d_lse, &c.s, d_work, NULL),
		             0);
		/* and the CPU's bits from the same start */
		uint16_t *cdh = malloc(nh * 2);
		float *cdw = calloc(nw, 4);

		cr_assert(cdh && cdw);
		memcpy(cdh, dh, nh * 2);
		cr_assert_eq(rl_lm_logprobs_backward_cpu(rl_buf_bf16(cdh), cdw, r,
		                                         rl_cbuf_bf16(c.h), rl_cbuf_bf16(c.w),
		                                         c.tgt, lse, &c.s, work, NULL),
		             0);
		cr_assert(T->to_host(dh, d_dh, nh * 2, NULL) == 0 &&
		          T->to_host(dw, d_dw, nw * 4, NULL) == 0);
		cr_expect_arr_eq(dh, cdh, nh * 2, "fenced dh differs from the CPU's");
		cr_expect_arr_eq(dw, cdw, nw * 4, "fenced dW differs from the CPU's");
		free(cdh);
		free(cdw);
		void *d[] = {d_dh, d_h, d_w, d_dw, d_r, d_lse, d_work, d_tgt, small};
		for (size_t i = 0; i < sizeof d / sizeof *d; i++)
			T->release(d[i]);
	}

	lp16_reference(&c, r, dh0f, rdh, mdh, rdw, mdw);
	for (size_t i = 0; i < nh; i++) {
		double got = rl_bf16_to_f32(dh[i]);
		double tol = 0x1p-8 * fabs(rdh[i]) +
		             (0x1p-8 + 2 * lin16_gamma(vocab + 1)) * (1 + 0x1p-8) * mdh[i] + 1e-38;

		if (fabs(got - rdh[i]) > tol && bad++ < 5)
			cr_expect(0, "dh[%zu]: %.9g, double says %.9g (mag %g)", i, got, rdh[i],
			          mdh[i]);
	}
	for (size_t i = 0; i < nw; i++) {
		double tol = (0x1p-8 + 2 * lin16_gamma(n)) * mdw[i] + 1e-38;

		if (fabs(dw[i] - rdw[i]) > tol && bad++ < 5)
			cr_expect(0, "dw[%zu]: %.9g, double says %.9g (mag %g)", i, (double)dw[i],
			          rdw[i], mdw[i]);
	}
	cr_expect(bad == 0, "%s backward: %d off", fenced ? "fenced" : "cpu", bad);

	void *b[] = {r, dh0f, lp, lse, dh, dw, work, rdh, mdh, rdw, mdw};
	for (size_t i = 0; i < sizeof b / sizeof *b; i++)
		free(b[i]);
	lp16_free(&c);
}

Test(logprobs_bf16, backward_within_the_rounding_of_dlogits)
{
	check_backward(rl_lm_logprobs_backward_cpu, &rl_ops_cpu, 0);
}

Test(logprobs_bf16, fenced_backward_equals_cpu_and_checks_work)
{
	check_backward(rl_ops_fenced.lm_logprobs_backward, &rl_ops_fenced, 1);
}
