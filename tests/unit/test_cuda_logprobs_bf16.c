/* The CUDA fused logprobs on bf16 h and W. Forward, plain and invariant:
 * against the CPU op on the same bf16 buffers (the fp32 op on the same
 * values), within test_cuda_logprobs.c's bound for two fp32 GEMM orders:
 * 1e-5 relative plus 2e-6 (1 + L_t), L_t = scale sum_k |h[t, k]| (|W| <= 1).
 * The invariant forward's logprobs also do not depend on the batch: each
 * row alone gives the batch's bits. Backward: against the gradients in
 * double (logprobs_bf16_ref.h) within test_logprobs_bf16.c's bounds, gamma
 * doubled once more for the tensor cores' truncating adds. The argument
 * checks run without a GPU. */
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
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/logprobs_bf16_ref.h"
#include "tests/unit/op_arg_checks.h"

Test(cuda_logprobs_bf16, bad_arguments)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	expect_logprobs_arg_checks(rl_lm_logprobs_forward_cuda, rl_lm_logprobs_backward_cuda);
	expect_logprobs_arg_checks(rl_lm_logprobs_forward_invariant_cuda,
	                           rl_lm_logprobs_backward_cuda);
#endif
}

Test(cuda_logprobs_bf16, matches_cpu_and_double)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	uint32_t seed = 81;
	struct lp16 c;

	lp16_make(&c, &seed, 37, 256, 3000, 1024);

	int n = c.s.n, dim = c.s.dim, vocab = c.s.vocab;
	size_t nh = (size_t)n * dim, nw = (size_t)vocab * dim;
	size_t wf = (size_t)rl_lm_logprobs_work_floats(&c.s, RL_BF16);
	float *lp = falloc(n), *lse = falloc(n), *work = falloc(wf);
	uint16_t *d_h = dev_upload_bytes(c.h, nh * 2), *d_w = dev_upload_bytes(c.w, nw * 2);
	int32_t *d_tgt = dev_upload_i32(c.tgt, (size_t)n);
	float *d_lp = dev_alloc((size_t)n * 4), *d_lse = dev_alloc((size_t)n * 4);
	float *d_work = dev_alloc(wf * 4);
	int bad = 0;

	for (int inv = 0; inv <= 1; inv++) {
		rl_lm_logprobs_forward_fn cf =
		    inv ? rl_lm_logprobs_forward_invariant_cpu : rl_lm_logprobs_forward_cpu;
		rl_lm_logprobs_forward_fn gf =
		    inv ? rl_lm_logprobs_forward_invariant_cuda : rl_lm_logprobs_forward_cuda;

		cr_assert_eq(
		    cf(lp, lse, rl_cbuf_bf16(c.h), rl_cbuf_bf16(c.w), c.tgt, &c.s, work, NULL), 0);
		cr_assert_eq(gf(d_lp, d_lse, rl_cbuf_bf16(d_h), rl_cbuf_bf16(d_w), d_tgt, &c.s,
		                d_work, NULL),
		             0);
		float *glp = dev_download_bytes(d_lp, (size_t)n * 4);
		float *glse = dev_download_bytes(d_lse, (size_t)n * 4);

		for (int t = 0; t < n; t++) {
			double L = 0;

			for (int k = 0; k < dim; k++)
				L += fabs(c.hf[(size_t)t * dim + k]);
			L *= c.s.logit_scale;
			double tol_lp = 1e-5 * fabs(lp[t]) + 2e-6 * (1 + L);
			double tol_lse = 1e-5 * fabs(lse[t]) + 2e-6 * (1 + L);

			if ((fabs(glp[t] - lp[t]) > tol_lp || fabs(glse[t] - lse[t]) > tol_lse) &&
			    bad++ < 5)
				cr_expect(0, "%s row %d: logprob %.9g / %.9g, lse %.9g / %.9g",
				          inv ? "invariant" : "plain", t, (double)glp[t],
				          (double)lp[t], (double)glse[t], (double)lse[t]);
		}
		if (inv) {
			/* each row alone: the batch's bits */
			for (int t = 0; t < n; t += 6) {
				struct rl_lm_logprobs_shape one = c.s;

				one.n = 1;
				cr_assert_eq(gf(d_lp, d_lse, rl_cbuf_bf16(d_h + (size_t)t * dim),
				                rl_cbuf_bf16(d_w), d_tgt + t, &one, d_work, NULL),
				             0);
				float *g1 = dev_download_bytes(d_lp, 4);

				if (memcmp(g1, &glp[t], 4) && bad++ < 5)
					cr_expect(0, "row %d alone: %.9g, in the batch %.9g", t,
					          (double)g1[0], (double)glp[t]);
				free(g1);
			}
		}
		free(glp);
		free(glse);
	}

	/* backward from the GPU's own lse */
	float *r = frand(&seed, (size_t)n, -1, 1), *dh0f;
	uint16_t *dh0 = lin16_bits(&seed, nh, -0.1f, 0.1f, &dh0f);
	float *zeros = calloc(nw, 4);
	uint16_t *d_dh = dev_upload_bytes(dh0, nh * 2);
	float *d_dw = dev_upload_bytes(zeros, nw * 4), *d_r = dev_upload_bytes(r, (size_t)n * 4);
	double *rdh = dalloc(nh), *mdh = dalloc(nh), *rdw = dalloc(nw), *mdw = dalloc(nw);

	cr_assert_eq(rl_lm_logprobs_forward_cuda(d_lp, d_lse, rl_cbuf_bf16(d_h), rl_cbuf_bf16(d_w),
	                                         d_tgt, &c.s, d_work, NULL),
	             0);
	cr_assert_eq(rl_lm_logprobs_backward_cuda(rl_buf_bf16(d_dh), d_dw, d_r, rl_cbuf_bf16(d_h),
	                                          rl_cbuf_bf16(d_w), d_tgt, d_lse, &c.s, d_work,
	                                          NULL),
	             0);
	uint16_t *gdh = dev_download_bytes(d_dh, nh * 2);
	float *gdw = dev_download_bytes(d_dw, nw * 4);

	lp16_reference(&c, r, dh0f, rdh, mdh, rdw, mdw);
	for (size_t i = 0; i < nh; i++) {
		double got = rl_bf16_to_f32(gdh[i]);
		double tol = 0x1p-8 * fabs(rdh[i]) +
		             (0x1p-8 + 4 * lin16_gamma(vocab + 1)) * (1 + 0x1p-8) * mdh[i] + 1e-38;

		if (fabs(got - rdh[i]) > tol && bad++ < 5)
			cr_expect(0, "dh[%zu]: %.9g, double says %.9g", i, got, rdh[i]);
	}
	for (size_t i = 0; i < nw; i++) {
		double tol = (0x1p-8 + 4 * lin16_gamma(n)) * mdw[i] + 1e-38;

		if (fabs(gdw[i] - rdw[i]) > tol && bad++ < 5)
			cr_expect(0, "dw[%zu]: %.9g, double says %.9g", i, (double)gdw[i], rdw[i]);
	}
	cr_expect(bad == 0, "%d off", bad);

	void *dev[] = {d_h, d_w, d_tgt, d_lp, d_lse, d_work, d_dh, d_dw, d_r};
	for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
		dev_free(dev[i]);
	void *host[] = {lp, lse, work, r, dh0f, dh0, zeros, rdh, mdh, rdw, mdw, gdh, gdw};
	for (size_t i = 0; i < sizeof host / sizeof *host; i++)
		free(host[i]);
	lp16_free(&c);
#endif
}
