/* RMSNorm backward. With r = rstd and xhat = x r, the forward is
 * y = xhat w, so
 *   dx = r (dy w - xhat mean(dy w xhat)),   dweight = sum over rows of dy xhat.
 * Row sums are taken in double. dweight is reduced over a number of row
 * blocks that depends only on the shape, each block summed in double and the
 * blocks added in order, so the result does not depend on the thread count. */
#include <stddef.h>
#include <stdlib.h>

#include "kernels/rmsnorm.h"

#define PAR_MIN (1L << 15)
/* Row blocks of the dweight reduction: at most MAX_BLOCKS, each of at least
 * BLOCK_MIN elements, so small inputs use one block and no threads. */
#define MAX_BLOCKS 64
#define BLOCK_MIN  (1L << 14)

static void backward_row(float *restrict dx, double *restrict dw_acc, const float *restrict dy,
                         const float *restrict x, const float *restrict w, float r, int dim)
{
	double s = 0.0;

#pragma omp simd reduction(+ : s)
	for (int i = 0; i < dim; i++)
		s += (double)dy[i] * (double)w[i] * (double)x[i];

	/* xhat mean(dy w xhat) = x r^2 s / dim */
	float c = (float)((double)r * (double)r * s / dim);

#pragma omp simd
	for (int i = 0; i < dim; i++)
		dx[i] += r * (dy[i] * w[i] - x[i] * c);
	if (dw_acc) {
#pragma omp simd
		for (int i = 0; i < dim; i++)
			dw_acc[i] += (double)dy[i] * (double)x[i] * (double)r;
	}
}

int rl_rmsnorm_backward_cpu(float *dx, float *dweight, const float *dy, const float *x,
                            const float *weight, const float *rstd, int rows, int dim, void *stream)
{
	(void)stream;
	if (!dx || !dy || !x || !weight || !rstd || rows < 0 || dim <= 0)
		return -1;
	if (rows == 0)
		return 0;

	long elems = (long)rows * dim;
	long nblk = elems / BLOCK_MIN;
	double *acc = NULL;

	nblk = nblk < 1 ? 1 : nblk > MAX_BLOCKS ? MAX_BLOCKS : nblk;
	if (nblk > rows)
		nblk = rows;
	if (dweight) {
		acc = calloc((size_t)nblk * (size_t)dim, sizeof(*acc));
		if (!acc)
			return -1;
	}

#pragma omp parallel for if (elems >= PAR_MIN && nblk > 1) schedule(static)
	for (long b = 0; b < nblk; b++) {
		int r0 = (int)(b * rows / nblk), r1 = (int)((b + 1) * rows / nblk);
		double *blk_acc = acc ? acc + (size_t)b * dim : NULL;

		for (int r = r0; r < r1; r++) {
			size_t off = (size_t)r * dim;

			backward_row(dx + off, blk_acc, dy + off, x + off, weight, rstd[r], dim);
		}
	}

	if (dweight) {
		for (long b = 1; b < nblk; b++) {
			const double *a = acc + (size_t)b * dim;

			for (int i = 0; i < dim; i++)
				acc[i] += a[i];
		}
		for (int i = 0; i < dim; i++)
			dweight[i] += (float)acc[i];
		free(acc);
	}
	return 0;
}
