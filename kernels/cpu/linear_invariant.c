/* The batch-invariant linear forward on the CPU. Every output is one
 * eight-lane dot product in the order of lanes.h, then the bias. Nothing
 * about the call (n, the row's place, the thread count) reaches that order,
 * so a token's outputs have the same bits in every batch.
 *
 * Blocking is for the caches only: a panel of W's rows (outputs) stays hot
 * while every row of x streams past it, 2 x rows by 4 W rows at a time, so
 * a decode step reads W once.
 *
 * bf16 operands are widened exactly (x whole, W a panel at a time) and go
 * through the same blocks, so their sums are the fp32 sums of the same
 * values in the same order; a bf16 y is each sum (+ bias) rounded once. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/lanes.h"
#include "kernels/cpu/typed.h"
#include "kernels/linear.h"
#include "kernels/vector.h"

/* outputs per panel: 64 rows of W, 448 KiB at in_dim 1792 */
#define PANEL 64
#define MR    2
#define NR    4

/* y[r, o] for r < mr rows of x and o < nr rows of W; mr <= MR, nr <= NR.
 * The eight accumulators are named, not an array, so that they stay in
 * registers; rows and columns past mr and nr read row 0 and column 0 again
 * and are not written. */
__attribute__((target_clones("avx2", "default"))) static void
block(float *y, size_t ldy, const float *x, size_t ldx, const float *w, size_t ldw, int mr, int nr,
      int dim, const float *bias)
{
	const float *x0 = x, *x1 = x + (mr > 1 ? ldx : 0);
	const float *w0 = w, *w1 = w + (nr > 1 ? ldw : 0), *w2 = w + (nr > 2 ? 2 * ldw : 0),
	            *w3 = w + (nr > 3 ? 3 * ldw : 0);
	rl_v8 a00 = {0}, a01 = {0}, a02 = {0}, a03 = {0}, a10 = {0}, a11 = {0}, a12 = {0},
	      a13 = {0};
	const int kv = dim - dim % 8;

	for (int k = 0; k < kv; k += 8) {
		const rl_v8 p0 = rl_load8(x0 + k), p1 = rl_load8(x1 + k);
		rl_v8 q = rl_load8(w0 + k);

		a00 += p0 * q;
		a10 += p1 * q;
		q = rl_load8(w1 + k);
		a01 += p0 * q;
		a11 += p1 * q;
		q = rl_load8(w2 + k);
		a02 += p0 * q;
		a12 += p1 * q;
		q = rl_load8(w3 + k);
		a03 += p0 * q;
		a13 += p1 * q;
	}

	const rl_v8 acc[MR][NR] = {{a00, a01, a02, a03}, {a10, a11, a12, a13}};
	const float *xr[MR] = {x0, x1}, *wc[NR] = {w0, w1, w2, w3};

	for (int r = 0; r < mr; r++) {
		for (int c = 0; c < nr; c++) {
			float s = rl_lanes_finish(acc[r][c], xr[r], wc[c], kv, dim);

			y[(size_t)r * ldy + c] = bias ? s + bias[c] : s;
		}
	}
}

static int bad_call(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w, struct rl_cbuf bias, int n,
                    int in_dim, int out_dim)
{
	return !y.p || !x.p || !w.p || n < 0 || in_dim <= 0 || out_dim <= 0 ||
	       !rl_linear_forward_types_ok(y, x, w, bias);
}

static void forward_f32(float *y, const float *x, const float *w, const float *bias, int n,
                        int in_dim, int out_dim)
{
	const int panels = (out_dim + PANEL - 1) / PANEL;
	const size_t ld = (size_t)in_dim;

#pragma omp parallel for schedule(dynamic, 1) if ((long)n * out_dim * in_dim >= (1L << 18))
	for (int p = 0; p < panels; p++) {
		const int o0 = p * PANEL, o1 = o0 + PANEL < out_dim ? o0 + PANEL : out_dim;

		for (int r = 0; r < n; r += MR) {
			const int mr = n - r < MR ? n - r : MR;

			for (int o = o0; o < o1; o += NR) {
				const int nr = o1 - o < NR ? o1 - o : NR;

				block(y + (size_t)r * (size_t)out_dim + o, (size_t)out_dim,
				      x + (size_t)r * ld, ld, w + (size_t)o * ld, ld, mr, nr,
				      in_dim, bias ? bias + o : NULL);
			}
		}
	}
}

/* One panel of bf16 W's rows [o0, o0 + pw): widened into ws (and the bias
 * into bs), the blocks into tmp [MR, PANEL], each row stored to y. */
static void panel_bf16(struct rl_buf y, const float *xf, const uint16_t *w, const uint16_t *bias,
                       int n, int in_dim, int out_dim, int o0, int pw, float *ws, float *tmp)
{
	const size_t ld = (size_t)in_dim;
	float bs[PANEL];

	rl_from_bf16_cpu(ws, w + (size_t)o0 * ld, (int64_t)pw * in_dim, NULL);
	if (bias)
		rl_from_bf16_cpu(bs, bias + o0, pw, NULL);
	for (int r = 0; r < n; r += MR) {
		const int mr = n - r < MR ? n - r : MR;

		for (int o = 0; o < pw; o += NR) {
			const int nr = pw - o < NR ? pw - o : NR;

			block(tmp + o, PANEL, xf + (size_t)r * ld, ld, ws + (size_t)o * ld, ld, mr,
			      nr, in_dim, bias ? bs + o : NULL);
		}
		for (int i = 0; i < mr; i++) {
			size_t at = (size_t)(r + i) * (size_t)out_dim + (size_t)o0;

			if (y.t == RL_BF16)
				for (int j = 0; j < pw; j++)
					((uint16_t *)y.p)[at + j] =
					    rl_f32_to_bf16(tmp[i * PANEL + j]);
			else
				memcpy((float *)y.p + at, tmp + i * PANEL,
				       (size_t)pw * sizeof(float));
		}
	}
}

static int forward_bf16(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w, struct rl_cbuf bias,
                        int n, int in_dim, int out_dim)
{
	const int panels = (out_dim + PANEL - 1) / PANEL;
	float *xs;
	const float *xf = rl_widened(x, (size_t)n * in_dim, &xs);
	int failed = 0;

	if (!xf)
		return -1;
#pragma omp parallel if ((long)n * out_dim * in_dim >= (1L << 18))
	{
		float *ws = malloc((size_t)PANEL * in_dim * sizeof(float));
		float *tmp = malloc((size_t)MR * PANEL * sizeof(float));

		if (!ws || !tmp) {
#pragma omp atomic write
			failed = 1;
		}
#pragma omp for schedule(dynamic, 1)
		for (int p = 0; p < panels; p++) {
			const int o0 = p * PANEL, pw = out_dim - o0 < PANEL ? out_dim - o0 : PANEL;

			if (ws && tmp)
				panel_bf16(y, xf, w.p, bias.p, n, in_dim, out_dim, o0, pw, ws, tmp);
		}
		free(ws);
		free(tmp);
	}
	free(xs);
	return failed ? -1 : 0;
}

int rl_linear_forward_invariant_cpu(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                    struct rl_cbuf bias, int n, int in_dim, int out_dim,
                                    void *stream)
{
	(void)stream;
	if (bad_call(y, x, w, bias, n, in_dim, out_dim))
		return -1;
	if (n == 0)
		return 0;
	if (x.t == RL_BF16)
		return forward_bf16(y, x, w, bias, n, in_dim, out_dim);
	forward_f32(y.p, x.p, w.p, bias.p, n, in_dim, out_dim);
	return 0;
}
