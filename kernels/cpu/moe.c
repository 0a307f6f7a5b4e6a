/* Mixture-of-experts ops on the CPU: the grouped GEMM as one sgemm per
 * non-empty group (OpenBLAS has no grouped call in Debian 12's version),
 * and the combine with its dot products taken in double. */
#include <stddef.h>

#include <cblas.h>

#include "kernels/linear.h"
#include "kernels/moe.h"

int rl_grouped_linear_forward_cpu(float *y, const float *x, const float *w, const int32_t *offsets,
                                  int groups, int in_dim, int out_dim, void *stream)
{
	(void)stream;
	if (!y || !x || !w || rl_grouped_linear_bad_groups(offsets, groups, in_dim, out_dim))
		return -1;
	for (int g = 0; g < groups; g++) {
		int rows = offsets[g + 1] - offsets[g];
		size_t r0 = (size_t)offsets[g];

		if (rows == 0)
			continue;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out_dim, in_dim, 1.0f,
		            x + r0 * (size_t)in_dim, in_dim, w + (size_t)g * out_dim * in_dim,
		            in_dim, 0.0f, y + r0 * (size_t)out_dim, out_dim);
	}
	return 0;
}

int rl_grouped_linear_forward_invariant_cpu(float *y, const float *x, const float *w,
                                            const int32_t *offsets, int groups, int in_dim,
                                            int out_dim, void *stream)
{
	return rl_grouped_linear_per_group(rl_linear_forward_invariant_cpu, y, x, w, offsets,
	                                   groups, in_dim, out_dim, stream);
}

int rl_grouped_linear_backward_cpu(float *dx, float *dw, const float *dy, const float *x,
                                   const float *w, const int32_t *offsets, int groups, int in_dim,
                                   int out_dim, void *stream)
{
	(void)stream;
	if (!dy || (dx && !w) || (dw && !x) ||
	    rl_grouped_linear_bad_groups(offsets, groups, in_dim, out_dim))
		return -1;
	for (int g = 0; g < groups; g++) {
		int rows = offsets[g + 1] - offsets[g];
		size_t r0 = (size_t)offsets[g], wg = (size_t)g * out_dim * in_dim;

		if (rows == 0)
			continue;
		/* dx_g [rows, in] += dy_g [rows, out] W_g [out, in] */
		if (dx)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, in_dim,
			            out_dim, 1.0f, dy + r0 * (size_t)out_dim, out_dim, w + wg,
			            in_dim, 1.0f, dx + r0 * (size_t)in_dim, in_dim);
		/* dW_g [out, in] += dy_g^T x_g */
		if (dw)
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_dim, in_dim, rows,
			            1.0f, dy + r0 * (size_t)out_dim, out_dim,
			            x + r0 * (size_t)in_dim, in_dim, 1.0f, dw + wg, in_dim);
	}
	return 0;
}

int rl_moe_combine_forward_cpu(float *out, const float *y, const int32_t *slot, const float *weight,
                               int n_tokens, int k, int dim, int n_slots, void *stream)
{
	(void)stream;
	if (!out || !slot || !weight || n_tokens < 0 || k <= 0 || dim <= 0 || n_slots < 0 ||
	    (!y && n_slots > 0))
		return -1;
	for (int64_t i = 0; i < (int64_t)n_tokens * k; i++)
		if (slot[i] < -1 || slot[i] >= n_slots)
			return -1;
	for (int t = 0; t < n_tokens; t++) {
		float *o = out + (size_t)t * dim;

		for (int c = 0; c < dim; c++)
			o[c] = 0.0f;
		for (int j = 0; j < k; j++) {
			size_t i = (size_t)t * k + j;

			if (slot[i] < 0)
				continue;
			const float *row = y + (size_t)slot[i] * dim;
			float wt = weight[i];
			for (int c = 0; c < dim; c++)
				o[c] += wt * row[c];
		}
	}
	return 0;
}

int rl_moe_combine_backward_cpu(float *dy, float *dweight, const float *dout, const float *y,
                                const int32_t *slot, const float *weight, int n_tokens, int k,
                                int dim, void *stream)
{
	(void)stream;
	if (!dweight || !dout || !y || !slot || !weight || n_tokens < 0 || k <= 0 || dim <= 0)
		return -1;
	/* without n_slots only the lower bound can be checked */
	for (int64_t i = 0; i < (int64_t)n_tokens * k; i++)
		if (slot[i] < -1)
			return -1;
	for (int t = 0; t < n_tokens; t++) {
		const float *g = dout + (size_t)t * dim;

		for (int j = 0; j < k; j++) {
			size_t i = (size_t)t * k + j;
			double dot = 0;

			if (slot[i] < 0) {
				dweight[i] = 0.0f;
				continue;
			}
			const float *row = y + (size_t)slot[i] * dim;
			for (int c = 0; c < dim; c++)
				dot += (double)g[c] * row[c];
			dweight[i] = (float)dot;
			if (!dy)
				continue;
			float *d = dy + (size_t)slot[i] * dim;
			for (int c = 0; c < dim; c++)
				d[c] += weight[i] * g[c];
		}
	}
	return 0;
}
