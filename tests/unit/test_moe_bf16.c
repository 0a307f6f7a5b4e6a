/* The mixture-of-experts ops on bf16 buffers, on the CPU and fenced tables:
 * the grouped GEMM against sums in double of the same bf16 values within
 * linear_bf16_ref.h's bound, group by group (an empty group included); the
 * combine, forward and backward, = the fp32 op on the same values with
 * each output rounded once, to the bit (one loop order on both); the
 * fenced table = the CPU's bits, and it refuses a bf16 buffer handed over
 * as fp32. */
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
#include "kernels/moe.h"
#include "kernels/ops.h"
#include "tests/unit/linear_bf16_ref.h"
#include "tests/unit/ops_test_util.h"

#define G   3
#define IN  24
#define OUT 40

static const int32_t offsets[G + 1] = {0, 5, 5, 12}; /* the middle group empty */

/* y of table T (host memory for the CPU's, fenced for the fenced one's,
 * copied back) from the same bf16 x and W; and the backward's dx (from
 * dx0) and dW (from 0) */
static void grouped(const struct rl_ops *T, int fenced, const uint16_t *x, const uint16_t *w,
                    const uint16_t *dy, const uint16_t *dx0, uint16_t *y, uint16_t *dx, float *dw)
{
	size_t nx = 12 * IN, ny = 12 * OUT, nw = (size_t)G * OUT * IN;
	void *bx = (void *)x, *bw = (void *)w, *bdy = (void *)dy, *by = y, *bdx = dx, *bdw = dw;

	memcpy(dx, dx0, nx * 2);
	memset(dw, 0, nw * 4);
	if (fenced) {
		bx = T->alloc(nx * 2), bw = T->alloc(nw * 2), bdy = T->alloc(ny * 2);
		by = T->alloc(ny * 2), bdx = T->alloc(nx * 2), bdw = T->alloc(nw * 4);
		cr_assert(T->from_host(bx, x, nx * 2, NULL) == 0 &&
		          T->from_host(bw, w, nw * 2, NULL) == 0 &&
		          T->from_host(bdy, dy, ny * 2, NULL) == 0 &&
		          T->from_host(bdx, dx0, nx * 2, NULL) == 0 &&
		          T->zero(bdw, nw * 4, NULL) == 0);
		/* W handed over as fp32: twice its bytes */
		cr_expect_eq(T->grouped_linear_forward(rl_buf_bf16(by), rl_cbuf_bf16(bx),
		                                       (struct rl_cbuf){bw, RL_F32}, offsets, G, IN,
		                                       OUT, NULL),
		             -1);
	}
	cr_assert_eq(T->grouped_linear_forward(rl_buf_bf16(by), rl_cbuf_bf16(bx), rl_cbuf_bf16(bw),
	                                       offsets, G, IN, OUT, NULL),
	             0);
	cr_assert_eq(T->grouped_linear_backward(rl_buf_bf16(bdx), bdw, rl_cbuf_bf16(bdy),
	                                        rl_cbuf_bf16(bx), rl_cbuf_bf16(bw), offsets, G, IN,
	                                        OUT, NULL),
	             0);
	if (fenced) {
		cr_assert(T->to_host(y, by, ny * 2, NULL) == 0 &&
		          T->to_host(dx, bdx, nx * 2, NULL) == 0 &&
		          T->to_host(dw, bdw, nw * 4, NULL) == 0);
		void *d[] = {bx, bw, bdy, by, bdx, bdw};
		for (size_t i = 0; i < sizeof d / sizeof *d; i++)
			T->release(d[i]);
	}
}

Test(moe_bf16, grouped_linear_per_group_near_double_and_fenced_equal)
{
	uint32_t seed = 91;
	float *xf, *wf, *dyf, *dx0f;
	uint16_t *x = lin16_bits(&seed, 12 * IN, -1, 1, &xf);
	uint16_t *w = lin16_bits(&seed, (size_t)G * OUT * IN, -1, 1, &wf);
	uint16_t *dy = lin16_bits(&seed, 12 * OUT, -1, 1, &dyf);
	uint16_t *dx0 = lin16_bits(&seed, 12 * IN, -1, 1, &dx0f);
	uint16_t y[12 * OUT], dx[12 * IN], fy[12 * OUT], fdx[12 * IN];
	float *dw = falloc((size_t)G * OUT * IN), *fdw = falloc((size_t)G * OUT * IN);
	int bad = 0;

	grouped(&rl_ops_cpu, 0, x, w, dy, dx0, y, dx, dw);
	for (int g = 0; g < G; g++) {
		for (int r = offsets[g]; r < offsets[g + 1]; r++) {
			for (int o = 0; o < OUT; o++) {
				double s = 0, m = 0;

				for (int k = 0; k < IN; k++) {
					double p = (double)xf[r * IN + k] *
					           wf[((size_t)g * OUT + o) * IN + k];
					s += p;
					m += fabs(p);
				}
				if (!lin16_within(RL_BF16, rl_bf16_to_f32(y[r * OUT + o]), s, m, IN,
				                  1) &&
				    bad++ < 5)
					cr_expect(0, "y[%d][%d] (group %d)", r, o, g);
			}
			for (int k = 0; k < IN; k++) {
				double s = dx0f[r * IN + k], m = fabs(s);

				for (int o = 0; o < OUT; o++) {
					double p = (double)dyf[r * OUT + o] *
					           wf[((size_t)g * OUT + o) * IN + k];
					s += p;
					m += fabs(p);
				}
				if (!lin16_within(RL_BF16, rl_bf16_to_f32(dx[r * IN + k]), s, m,
				                  OUT + 1, 1) &&
				    bad++ < 5)
					cr_expect(0, "dx[%d][%d] (group %d)", r, k, g);
			}
		}
		for (int o = 0; o < OUT; o++)
			for (int k = 0; k < IN; k++) {
				double s = 0, m = 0;

				for (int r = offsets[g]; r < offsets[g + 1]; r++) {
					double p = (double)dyf[r * OUT + o] * xf[r * IN + k];
					s += p;
					m += fabs(p);
				}
				double got = dw[((size_t)g * OUT + o) * IN + k];

				if (!lin16_within(RL_F32, got, s, m, 8, 1) && bad++ < 5)
					cr_expect(0, "dW[%d][%d][%d]: %g, double %g", g, o, k, got,
					          s);
			}
	}
	cr_expect(bad == 0, "%d off", bad);

	grouped(&rl_ops_fenced, 1, x, w, dy, dx0, fy, fdx, fdw);
	cr_expect_arr_eq(fy, y, sizeof y, "fenced y");
	cr_expect_arr_eq(fdx, dx, sizeof dx, "fenced dx");
	cr_expect_arr_eq(fdw, dw, (size_t)G * OUT * IN * 4, "fenced dW");

	void *b[] = {x, w, dy, dx0, xf, wf, dyf, dx0f, dw, fdw};
	for (size_t i = 0; i < sizeof b / sizeof *b; i++)
		free(b[i]);
}

Test(moe_bf16, combine_rounds_the_fp32_op)
{
	uint32_t seed = 93;
	const int n = 6, k = 3, dim = 20, n_slots = 14;
	int32_t slot[18] = {0, 5, -1, 1, 6, 11, 2, -1, 12, 3, 7, 13, 4, 8, -1, 9, 10, -1};
	float *yf, *gf, *dyf, *wt = frand(&seed, (size_t)n * k, 0, 1);
	uint16_t *y = lin16_bits(&seed, (size_t)n_slots * dim, -2, 2, &yf);
	uint16_t *g = lin16_bits(&seed, (size_t)n * dim, -1, 1, &gf);
	uint16_t *dy = lin16_bits(&seed, (size_t)n_slots * dim, -1, 1, &dyf);
	uint16_t out[6 * 20];
	float out32[6 * 20], dw[18], dw32[18];

	cr_assert_eq(rl_moe_combine_forward_cpu(rl_buf_bf16(out), rl_cbuf_bf16(y), slot, wt, n, k,
	                                        dim, n_slots, NULL),
	             0);
	cr_assert_eq(rl_moe_combine_forward_cpu(rl_buf_f32(out32), rl_cbuf_f32(yf), slot, wt, n, k,
	                                        dim, n_slots, NULL),
	             0);
	for (int i = 0; i < n * dim; i++)
		cr_expect_eq(out[i], rl_f32_to_bf16(out32[i]), "out[%d]", i);
	cr_assert_eq(rl_moe_combine_backward_cpu(rl_buf_bf16(dy), dw, rl_cbuf_bf16(g),
	                                         rl_cbuf_bf16(y), slot, wt, n, k, dim, NULL),
	             0);
	cr_assert_eq(rl_moe_combine_backward_cpu(rl_buf_f32(dyf), dw32, rl_cbuf_f32(gf),
	                                         rl_cbuf_f32(yf), slot, wt, n, k, dim, NULL),
	             0);
	cr_expect_arr_eq(dw, dw32, sizeof dw, "dweight: the fp32 op's");
	for (int i = 0; i < n_slots * dim; i++)
		cr_expect_eq(dy[i], rl_f32_to_bf16(dyf[i]), "dy[%d]", i);
	cr_expect_eq(rl_moe_combine_forward_cpu(rl_buf_bf16(out), rl_cbuf_f32(yf), slot, wt, n, k,
	                                        dim, n_slots, NULL),
	             -1, "y of another type");

	void *b[] = {wt, y, g, dy, yf, gf, dyf};
	for (size_t i = 0; i < sizeof b / sizeof *b; i++)
		free(b[i]);
}
