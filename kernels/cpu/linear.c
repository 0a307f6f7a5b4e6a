/* Linear layer on OpenBLAS: one sgemm for the forward, one per weight-side
 * and input-side gradient, accumulating (beta = 1) into what the caller
 * zeroed. The bias gradient is a column sum taken in double over column
 * blocks, so no two threads touch one element.
 *
 * bf16 operands are the reference for the tensor cores: widened exactly to
 * fp32 (a bf16 x bf16 product is exact in fp32), multiplied by the same
 * sgemm, and rounded once where the contract rounds (linear.h). The weights
 * are widened a panel of rows at a time, so the scratch stays a few MiB
 * whatever the layer's size. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "kernels/cpu/typed.h"
#include "kernels/linear.h"
#include "kernels/vector.h"

#define PAR_MIN   (1L << 16)
#define COL_BLOCK 64
#define W_PANEL   (1L << 20) /* weight elements widened at a time, at most */

static int bad_shape(int n, int in_dim, int out_dim)
{
	return n < 0 || in_dim <= 0 || out_dim <= 0;
}

/* Rows of W widened at a time: whole panels of at most W_PANEL elements. */
static int panel_rows(int in_dim, int out_dim)
{
	long rows = W_PANEL / in_dim;

	return rows < 1 ? 1 : rows > out_dim ? out_dim : (int)rows;
}

static void forward_f32(float *y, int ldy, const float *x, const float *w, const float *bias, int n,
                        int in_dim, int out_dim)
{
	float beta = 0.0f;

	if (bias) {
		size_t row_bytes = (size_t)out_dim * sizeof(*y);

		for (int t = 0; t < n; t++)
			memcpy(y + (size_t)t * ldy, bias, row_bytes);
		beta = 1.0f;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out_dim, in_dim, 1.0f, x, in_dim, w,
	            in_dim, beta, y, ldy);
}

/* bf16 x, W (and bias): by panels of W's rows, into y's columns of the
 * panel, through fp32 scratch when y is bf16. */
static int forward_bf16(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w, struct rl_cbuf bias,
                        int n, int in_dim, int out_dim)
{
	const int rows = panel_rows(in_dim, out_dim);
	float *xs = NULL, *ws = malloc((size_t)rows * in_dim * sizeof(float));
	float *bs = malloc((size_t)rows * sizeof(float));
	float *tmp = y.t == RL_F32 ? NULL : malloc((size_t)n * rows * sizeof(float));
	const float *xf = rl_widened(x, (size_t)n * in_dim, &xs);
	int rc = -1;

	if (!xf || !ws || !bs || (y.t != RL_F32 && !tmp))
		goto out;
	for (int o0 = 0; o0 < out_dim; o0 += rows) {
		int pw = out_dim - o0 < rows ? out_dim - o0 : rows;

		rl_from_bf16_cpu(ws, (const uint16_t *)w.p + (size_t)o0 * in_dim,
		                 (int64_t)pw * in_dim, NULL);
		if (bias.p)
			rl_from_bf16_cpu(bs, (const uint16_t *)bias.p + o0, pw, NULL);
		if (y.t == RL_F32) {
			forward_f32((float *)y.p + o0, out_dim, xf, ws, bias.p ? bs : NULL, n,
			            in_dim, pw);
			continue;
		}
		forward_f32(tmp, pw, xf, ws, bias.p ? bs : NULL, n, in_dim, pw);
		for (int t = 0; t < n; t++)
			rl_to_bf16_cpu((uint16_t *)y.p + (size_t)t * out_dim + o0,
			               tmp + (size_t)t * pw, pw, NULL);
	}
	rc = 0;
out:
	free(xs);
	free(ws);
	free(bs);
	free(tmp);
	return rc;
}

int rl_linear_forward_cpu(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w, struct rl_cbuf bias,
                          int n, int in_dim, int out_dim, void *stream)
{
	(void)stream;
	if (!y.p || !x.p || !w.p || bad_shape(n, in_dim, out_dim) ||
	    !rl_linear_forward_types_ok(y, x, w, bias))
		return -1;
	if (n == 0)
		return 0;
	if (x.t == RL_BF16)
		return forward_bf16(y, x, w, bias, n, in_dim, out_dim);
	forward_f32(y.p, out_dim, x.p, w.p, bias.p, n, in_dim, out_dim);
	return 0;
}

static void bias_grad(float *dbias, const float *dy, int n, int out_dim)
{
	int nblk = (out_dim + COL_BLOCK - 1) / COL_BLOCK;

#pragma omp parallel for if ((long)n * out_dim >= PAR_MIN && nblk > 1) schedule(static)
	for (int b = 0; b < nblk; b++) {
		int c0 = b * COL_BLOCK;
		int len = out_dim - c0 < COL_BLOCK ? out_dim - c0 : COL_BLOCK;
		double acc[COL_BLOCK] = {0};

		for (int t = 0; t < n; t++) {
			const float *row = dy + (size_t)t * out_dim + c0;

#pragma omp simd
			for (int j = 0; j < len; j++)
				acc[j] += row[j];
		}
		for (int j = 0; j < len; j++)
			dbias[c0 + j] += (float)acc[j];
	}
}

/* dx [n, in] += dy [n, out] W [out, in] with bf16 dx, dy and W: the
 * product in fp32 by panels of W's rows (dy's columns), added to dx and
 * rounded once. dyf is dy widened. */
static int dx_bf16(uint16_t *dx, const float *dyf, const uint16_t *w, int n, int in_dim,
                   int out_dim)
{
	const int rows = panel_rows(in_dim, out_dim);
	size_t nx = (size_t)n * in_dim;
	float *ws = malloc((size_t)rows * in_dim * sizeof(float));
	float *acc = malloc(nx * sizeof(float));
	int rc = -1;

	if (!ws || !acc)
		goto out;
	for (int o0 = 0; o0 < out_dim; o0 += rows) {
		int pw = out_dim - o0 < rows ? out_dim - o0 : rows;

		rl_from_bf16_cpu(ws, w + (size_t)o0 * in_dim, (int64_t)pw * in_dim, NULL);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_dim, pw, 1.0f,
		            dyf + o0, out_dim, ws, in_dim, o0 ? 1.0f : 0.0f, acc, in_dim);
	}
#pragma omp parallel for if ((long)nx >= PAR_MIN) schedule(static)
	for (size_t i = 0; i < nx; i++)
		dx[i] = rl_f32_to_bf16(rl_bf16_to_f32(dx[i]) + acc[i]);
	rc = 0;
out:
	free(ws);
	free(acc);
	return rc;
}

int rl_linear_backward_cpu(struct rl_buf dx, float *dw, float *dbias, struct rl_cbuf dy,
                           struct rl_cbuf x, struct rl_cbuf w, int n, int in_dim, int out_dim,
                           void *stream)
{
	(void)stream;
	if (!dy.p || bad_shape(n, in_dim, out_dim) || (dx.p && !w.p) || (dw && !x.p) ||
	    !rl_linear_backward_types_ok(dx, dy, x, w))
		return -1;
	if (n == 0)
		return 0;

	float *dys = NULL, *xs = NULL;
	const float *dyf = rl_widened(dy, (size_t)n * out_dim, &dys);
	const float *xf = dw ? rl_widened(x, (size_t)n * in_dim, &xs) : NULL;
	int rc = -1;

	if (!dyf || (dw && !xf))
		goto out;
	/* dx [n, in] += dy [n, out] W [out, in] */
	if (dx.p && dx.t == RL_BF16 && dx_bf16(dx.p, dyf, w.p, n, in_dim, out_dim))
		goto out;
	if (dx.p && dx.t == RL_F32)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_dim, out_dim, 1.0f,
		            dyf, out_dim, w.p, in_dim, 1.0f, dx.p, in_dim);
	/* dW [out, in] += dy^T [out, n] x [n, in] */
	if (dw)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_dim, in_dim, n, 1.0f, dyf,
		            out_dim, xf, in_dim, 1.0f, dw, in_dim);
	if (dbias)
		bias_grad(dbias, dyf, n, out_dim);
	rc = 0;
out:
	free(dys);
	free(xs);
	return rc;
}
