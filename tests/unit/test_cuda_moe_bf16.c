/* The CUDA mixture-of-experts ops on bf16 buffers. The grouped GEMM (group
 * by group on bf16 cuBLASLt) against sums in double of the same bf16
 * values within linear_bf16_ref.h's bound, its slack of 2 for the tensor
 * cores; the combine against the CPU op on the same bf16 buffers: the
 * forward and dy to the bit (each step rounded alike on both, then one
 * rounding to bf16), dweight, a dot product in double summed in another
 * order, within 1e-6 of its terms' sizes. Argument and type checks run
 * without a GPU. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/moe.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/linear_bf16_ref.h"

Test(cuda_moe_bf16, types_refused_before_any_work)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	uint16_t h[8] = {0};
	float f[8] = {0}, wt[2] = {1, 1};
	const int32_t ok[3] = {0, 1, 2};
	int32_t slot[2] = {0, 1};

	cr_expect_eq(rl_grouped_linear_forward_cuda(rl_buf_bf16(h), rl_cbuf_bf16(h), rl_cbuf_f32(f),
	                                            ok, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cuda(rl_buf_f32(f), f, rl_cbuf_bf16(h),
	                                             rl_cbuf_bf16(h), rl_cbuf_bf16(h), ok, 2, 2, 2,
	                                             NULL),
	             -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cuda(rl_buf_bf16(h), rl_cbuf_f32(f), slot, wt, 1, 2, 4, 2, NULL),
	    -1);
	cr_expect_eq(rl_moe_combine_backward_cuda(rl_buf_bf16(h), f, rl_cbuf_f32(f),
	                                          rl_cbuf_bf16(h), slot, wt, 1, 2, 4, NULL),
	             -1);
#endif
}

Test(cuda_moe_bf16, matches_double_and_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	enum { G = 4, IN = 96, OUT = 160, N = 300 };
	const int32_t offsets[G + 1] = {0, 120, 120, 290, N};
	uint32_t seed = 97;
	float *xf, *wf, *dyf, *dx0f;
	uint16_t *x = lin16_bits(&seed, (size_t)N * IN, -1, 1, &xf);
	uint16_t *w = lin16_bits(&seed, (size_t)G * OUT * IN, -1, 1, &wf);
	uint16_t *dy = lin16_bits(&seed, (size_t)N * OUT, -1, 1, &dyf);
	uint16_t *dx0 = lin16_bits(&seed, (size_t)N * IN, -1, 1, &dx0f);
	float *zeros = calloc((size_t)G * OUT * IN, 4);
	uint16_t *d_x = dev_upload_bytes(x, (size_t)N * IN * 2);
	uint16_t *d_w = dev_upload_bytes(w, (size_t)G * OUT * IN * 2);
	uint16_t *d_dy = dev_upload_bytes(dy, (size_t)N * OUT * 2);
	uint16_t *d_dx = dev_upload_bytes(dx0, (size_t)N * IN * 2);
	uint16_t *d_y = dev_alloc((size_t)N * OUT * 2);
	float *d_dw = dev_upload_bytes(zeros, (size_t)G * OUT * IN * 4);
	int bad = 0;

	cr_assert_eq(rl_grouped_linear_forward_cuda(rl_buf_bf16(d_y), rl_cbuf_bf16(d_x),
	                                            rl_cbuf_bf16(d_w), offsets, G, IN, OUT, NULL),
	             0);
	cr_assert_eq(rl_grouped_linear_backward_cuda(rl_buf_bf16(d_dx), d_dw, rl_cbuf_bf16(d_dy),
	                                             rl_cbuf_bf16(d_x), rl_cbuf_bf16(d_w), offsets,
	                                             G, IN, OUT, NULL),
	             0);
	uint16_t *y = dev_download_bytes(d_y, (size_t)N * OUT * 2);
	uint16_t *dx = dev_download_bytes(d_dx, (size_t)N * IN * 2);
	float *dw = dev_download_bytes(d_dw, (size_t)G * OUT * IN * 4);

	for (int g = 0; g < G; g++) {
		for (int r = offsets[g]; r < offsets[g + 1]; r++) {
			for (int o = 0; o < OUT; o++) {
				double s = 0, m = 0;

				for (int k = 0; k < IN; k++) {
					double p = (double)xf[(size_t)r * IN + k] *
					           wf[((size_t)g * OUT + o) * IN + k];
					s += p;
					m += fabs(p);
				}
				if (!lin16_within(RL_BF16, rl_bf16_to_f32(y[(size_t)r * OUT + o]),
				                  s, m, IN, 2) &&
				    bad++ < 5)
					cr_expect(0, "y[%d][%d]", r, o);
			}
			for (int k = 0; k < IN; k++) {
				double s = dx0f[(size_t)r * IN + k], m = fabs(s);

				for (int o = 0; o < OUT; o++) {
					double p = (double)dyf[(size_t)r * OUT + o] *
					           wf[((size_t)g * OUT + o) * IN + k];
					s += p;
					m += fabs(p);
				}
				if (!lin16_within(RL_BF16, rl_bf16_to_f32(dx[(size_t)r * IN + k]),
				                  s, m, OUT + 1, 2) &&
				    bad++ < 5)
					cr_expect(0, "dx[%d][%d]", r, k);
			}
		}
		for (int o = 0; o < OUT; o++)
			for (int k = 0; k < IN; k++) {
				double s = 0, m = 0;

				for (int r = offsets[g]; r < offsets[g + 1]; r++) {
					double p = (double)dyf[(size_t)r * OUT + o] *
					           xf[(size_t)r * IN + k];
					s += p;
					m += fabs(p);
				}
				if (!lin16_within(RL_F32, dw[((size_t)g * OUT + o) * IN + k], s, m,
				                  N + 1, 2) &&
				    bad++ < 5)
					cr_expect(0, "dW[%d][%d][%d]", g, o, k);
			}
	}

	/* the combine: 100 tokens, top-2 over the 300 rows of y above */
	enum { T = 100, K = 2 };
	int32_t slot[T * K];
	float *wt = frand(&seed, T * K, 0, 1), dweight[T * K], gdweight[T * K];
	float *gf;
	uint16_t *gout = lin16_bits(&seed, (size_t)T * OUT, -1, 1, &gf);
	uint16_t out[T * OUT], *dyc = calloc((size_t)N * OUT, 2);

	for (int i = 0; i < T * K; i++)
		slot[i] = i % 7 == 6 ? -1 : (i * 7) % N; /* no slot twice: 7 is prime to 300 */
	int32_t *d_slot = dev_upload_i32(slot, T * K);
	float *d_wt = dev_upload(wt, T * K), *d_dweight = dev_alloc(T * K * 4);
	uint16_t *d_out = dev_alloc((size_t)T * OUT * 2),
	         *d_g = dev_upload_bytes(gout, T * OUT * 2);
	uint16_t *d_dyc = dev_upload_bytes(dyc, (size_t)N * OUT * 2);

	cr_assert_eq(rl_moe_combine_forward_cpu(rl_buf_bf16(out), rl_cbuf_bf16(y), slot, wt, T, K,
	                                        OUT, N, NULL),
	             0);
	cr_assert_eq(rl_moe_combine_forward_cuda(rl_buf_bf16(d_out), rl_cbuf_bf16(d_y), d_slot,
	                                         d_wt, T, K, OUT, N, NULL),
	             0);
	uint16_t *g_out = dev_download_bytes(d_out, (size_t)T * OUT * 2);

	cr_expect_arr_eq(g_out, out, sizeof out, "combine forward: the CPU's bits");
	cr_assert_eq(rl_moe_combine_backward_cpu(rl_buf_bf16(dyc), dweight, rl_cbuf_bf16(gout),
	                                         rl_cbuf_bf16(y), slot, wt, T, K, OUT, NULL),
	             0);
	cr_assert_eq(rl_moe_combine_backward_cuda(rl_buf_bf16(d_dyc), d_dweight, rl_cbuf_bf16(d_g),
	                                          rl_cbuf_bf16(d_y), d_slot, d_wt, T, K, OUT, NULL),
	             0);
	uint16_t *g_dyc = dev_download_bytes(d_dyc, (size_t)N * OUT * 2);
	float *g_dw = dev_download_bytes(d_dweight, T * K * 4);

	cr_expect_arr_eq(g_dyc, dyc, (size_t)N * OUT * 2, "combine dy: the CPU's bits");
	memcpy(gdweight, g_dw, sizeof gdweight);
	for (int i = 0; i < T * K; i++) {
		double m = 0;

		for (int c = 0; slot[i] >= 0 && c < OUT; c++)
			m += fabs((double)gf[(size_t)(i / K) * OUT + c] *
			          rl_bf16_to_f32(y[(size_t)slot[i] * OUT + c]));
		if (fabs(gdweight[i] - dweight[i]) > 1e-6 * m + 1e-30 && bad++ < 5)
			cr_expect(0, "dweight[%d]: %g, cpu %g", i, (double)gdweight[i],
			          (double)dweight[i]);
	}
	cr_expect(bad == 0, "%d off", bad);

	void *dev[] = {d_x, d_w, d_dy, d_dx, d_y, d_dw, d_slot, d_wt, d_dweight, d_out, d_g, d_dyc};
	for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
		dev_free(dev[i]);
	void *host[] = {x,  w,  dy, dx0, xf,   wf,  dyf,   dx0f,  zeros, y,
	                dx, dw, wt, gf,  gout, dyc, g_out, g_dyc, g_dw};
	for (size_t i = 0; i < sizeof host / sizeof *host; i++)
		free(host[i]);
#endif
}
