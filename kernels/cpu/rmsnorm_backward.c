/* RMSNorm backward. With r = rstd and xhat = x r, the forward is
 * y = xhat w, so
 *   dx = r (dy w - xhat mean(dy w xhat)),   dweight = sum over rows of dy xhat.
 * Row sums are taken in double. dweight is reduced over a number of row
 * blocks that depends only on the shape, each block summed in double and the
 * blocks added in order, so the result does not depend on the thread count.
 * bf16 rows are read widened and dx rounded once per call (typed.h). */
#include <stddef.h>
#include <stdlib.h>

#include "kernels/cpu/typed.h"
#include "kernels/rmsnorm.h"

#define PAR_MIN (1L << 15)
/* Row blocks of the dweight reduction: at most MAX_BLOCKS, each of at least
 * BLOCK_MIN elements, so small inputs use one block and no threads. */
#define MAX_BLOCKS 64
#define BLOCK_MIN  (1L << 14)

RL_TYPED_BODY void backward_row(void *restrict dx, double *restrict dw_acc, const void *restrict dy,
                                const void *restrict x, const void *restrict w, float r, int dim,
                                const bool bf16)
{
	double s = 0.0;

#pragma omp simd reduction(+ : s)
	for (int i = 0; i < dim; i++)
		s += (double)rl_ld(dy, bf16, i) * (double)rl_ld(w, bf16, i) *
		     (double)rl_ld(x, bf16, i);

	/* xhat mean(dy w xhat) = x r^2 s / dim */
	float c = (float)((double)r * (double)r * s / dim);

#pragma omp simd
	for (int i = 0; i < dim; i++)
		rl_st_add(dx, bf16, i,
		          r * (rl_ld(dy, bf16, i) * rl_ld(w, bf16, i) - rl_ld(x, bf16, i) * c));
	if (dw_acc) {
#pragma omp simd
		for (int i = 0; i < dim; i++)
			dw_acc[i] +=
			    (double)rl_ld(dy, bf16, i) * (double)rl_ld(x, bf16, i) * (double)r;
	}
}

RL_TYPED_BODY void backward_block(long b, long nblk, double *acc, struct rl_buf dx,
                                  struct rl_cbuf dy, struct rl_cbuf x, struct rl_cbuf weight,
                                  const float *rstd, int rows, int dim, const bool bf16)
{
	int r0 = (int)(b * rows / nblk), r1 = (int)((b + 1) * rows / nblk);
	double *blk_acc = acc ? acc + (size_t)b * dim : NULL;
	size_t es = bf16 ? 2 : 4;

	for (int r = r0; r < r1; r++) {
		size_t off = (size_t)r * dim * es;

		backward_row((char *)dx.p + off, blk_acc, (const char *)dy.p + off,
		             (const char *)x.p + off, weight.p, rstd[r], dim, bf16);
	}
}

int rl_rmsnorm_backward_cpu(struct rl_buf dx, float *dweight, struct rl_cbuf dy, struct rl_cbuf x,
                            struct rl_cbuf weight, const float *rstd, int rows, int dim,
                            void *stream)
{
	(void)stream;
	if (!dx.p || !dy.p || !x.p || !weight.p || !rstd || rows < 0 || dim <= 0 ||
	    !rl_rmsnorm_types_ok(dx.t, x.t, weight.t) || dy.t != x.t)
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
		if (x.t == RL_BF16)
			backward_block(b, nblk, acc, dx, dy, x, weight, rstd, rows, dim, true);
		else
			backward_block(b, nblk, acc, dx, dy, x, weight, rstd, rows, dim, false);
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
