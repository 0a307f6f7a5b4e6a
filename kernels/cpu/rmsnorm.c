/* RMSNorm reference. The sum of squares is taken in double so that the
 * reference's own rounding is far below the tolerance the kernels get. */
#include <math.h>
#include <stddef.h>

#include "kernels/rmsnorm.h"

int rl_rmsnorm_forward_cpu(float *y, float *rstd, const float *x, const float *weight, int rows,
                           int dim, float eps, void *stream)
{
	(void)stream;
	if (!y || !x || !weight || rows < 0 || dim <= 0)
		return -1;

	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * (size_t)dim;
		float *yr = y + (size_t)r * (size_t)dim;
		double ss = 0.0;

		for (int i = 0; i < dim; i++)
			ss += (double)xr[i] * xr[i];
		/* Rounded to float once, as the kernels store it: y is computed
		 * from the saved rstd, which is what the backward pass sees. */
		float s = (float)(1.0 / sqrt(ss / dim + eps));

		for (int i = 0; i < dim; i++)
			yr[i] = xr[i] * s * weight[i];
		if (rstd)
			rstd[r] = s;
	}
	return 0;
}
