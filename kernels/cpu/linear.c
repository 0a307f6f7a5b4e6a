/* Linear layer on OpenBLAS: one sgemm for the forward, one per weight-side
 * and input-side gradient, accumulating (beta = 1) into what the caller
 * zeroed. The bias gradient is a column sum taken in double over column
 * blocks, so no two threads touch one element. */
#include <stddef.h>
#include <string.h>

#include <cblas.h>

#include "kernels/linear.h"

#define PAR_MIN   (1L << 16)
#define COL_BLOCK 64

static int bad_shape(int n, int in_dim, int out_dim)
{
	return n < 0 || in_dim <= 0 || out_dim <= 0;
}

int rl_linear_forward_cpu(float *y, const float *x, const float *w, const float *bias, int n,
                          int in_dim, int out_dim, void *stream)
{
	(void)stream;
	if (!y || !x || !w || bad_shape(n, in_dim, out_dim))
		return -1;
	if (n == 0)
		return 0;

	float beta = 0.0f;

	if (bias) {
		size_t row_bytes = (size_t)out_dim * sizeof(*y);

		for (int t = 0; t < n; t++)
			memcpy(y + (size_t)t * out_dim, bias, row_bytes);
		beta = 1.0f;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out_dim, in_dim, 1.0f, x, in_dim, w,
	            in_dim, beta, y, out_dim);
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

int rl_linear_backward_cpu(float *dx, float *dw, float *dbias, const float *dy, const float *x,
                           const float *w, int n, int in_dim, int out_dim, void *stream)
{
	(void)stream;
	if (!dy || bad_shape(n, in_dim, out_dim) || (dx && !w) || (dw && !x))
		return -1;
	if (n == 0)
		return 0;

	/* dx [n, in] += dy [n, out] W [out, in] */
	if (dx)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_dim, out_dim, 1.0f, dy,
		            out_dim, w, in_dim, 1.0f, dx, in_dim);
	/* dW [out, in] += dy^T [out, n] x [n, in] */
	if (dw)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_dim, in_dim, n, 1.0f, dy,
		            out_dim, x, in_dim, 1.0f, dw, in_dim);
	if (dbias)
		bias_grad(dbias, dy, n, out_dim);
	return 0;
}
