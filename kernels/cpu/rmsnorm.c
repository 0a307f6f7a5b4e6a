/* RMSNorm reference. The sum of squares is taken in double so that the
 * reference's own rounding is far below the tolerance the kernels get. bf16
 * rows are read widened and y is rounded once (kernels/cpu/typed.h). */
#include <math.h>
#include <stddef.h>

#include "kernels/cpu/typed.h"
#include "kernels/rmsnorm.h"

RL_TYPED_BODY void forward(void *y, float *rstd, const void *x, const void *weight, int rows,
                           int dim, float eps, const bool bf16)
{
	for (int r = 0; r < rows; r++) {
		size_t off = (size_t)r * (size_t)dim;
		double ss = 0.0;

		for (int i = 0; i < dim; i++) {
			double v = rl_ld(x, bf16, off + i);

			ss += v * v;
		}
		/* Rounded to float once, as the kernels store it: y is computed
		 * from the saved rstd, which is what the backward pass sees. */
		float s = (float)(1.0 / sqrt(ss / dim + eps));

		for (int i = 0; i < dim; i++)
			rl_st(y, bf16, off + i,
			      rl_ld(x, bf16, off + i) * s * rl_ld(weight, bf16, i));
		if (rstd)
			rstd[r] = s;
	}
}

int rl_rmsnorm_forward_cpu(struct rl_buf y, float *rstd, struct rl_cbuf x, struct rl_cbuf weight,
                           int rows, int dim, float eps, void *stream)
{
	(void)stream;
	if (!y.p || !x.p || !weight.p || rows < 0 || dim <= 0 ||
	    !rl_rmsnorm_types_ok(y.t, x.t, weight.t))
		return -1;
	if (x.t == RL_BF16)
		forward(y.p, rstd, x.p, weight.p, rows, dim, eps, true);
	else
		forward(y.p, rstd, x.p, weight.p, rows, dim, eps, false);
	return 0;
}
