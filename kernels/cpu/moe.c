/* Mixture-of-experts ops on the CPU: the grouped GEMM as one typed linear
 * op per non-empty group (OpenBLAS has no grouped call in Debian 12's
 * version; for fp32 that is the same one sgemm per group as before), and
 * the combine with its dot products taken in double, bf16 rows read
 * widened and written rounded once (typed.h). */
#include <stddef.h>

#include "kernels/cpu/typed.h"
#include "kernels/linear.h"
#include "kernels/moe.h"

int rl_grouped_linear_forward_cpu(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                  const int32_t *offsets, int groups, int in_dim, int out_dim,
                                  void *stream)
{
	return rl_grouped_linear_per_group(rl_linear_forward_cpu, y, x, w, offsets, groups, in_dim,
	                                   out_dim, stream);
}

int rl_grouped_linear_forward_invariant_cpu(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                            const int32_t *offsets, int groups, int in_dim,
                                            int out_dim, void *stream)
{
	return rl_grouped_linear_per_group(rl_linear_forward_invariant_cpu, y, x, w, offsets,
	                                   groups, in_dim, out_dim, stream);
}

int rl_grouped_linear_backward_cpu(struct rl_buf dx, float *dw, struct rl_cbuf dy, struct rl_cbuf x,
                                   struct rl_cbuf w, const int32_t *offsets, int groups, int in_dim,
                                   int out_dim, void *stream)
{
	return rl_grouped_linear_backward_per_group(rl_linear_backward_cpu, dx, dw, dy, x, w,
	                                            offsets, groups, in_dim, out_dim, stream);
}

static int combine_types_ok(enum rl_dtype a, enum rl_dtype b)
{
	return rl_act_type_ok(a) && b == a;
}

RL_TYPED_BODY void combine_forward(void *out, const void *y, const int32_t *slot,
                                   const float *weight, int n_tokens, int k, int dim,
                                   const bool bf16)
{
	for (int t = 0; t < n_tokens; t++) {
		size_t o = (size_t)t * dim;

		for (int c = 0; c < dim; c++) {
			float acc = 0.0f;

			for (int j = 0; j < k; j++) {
				size_t i = (size_t)t * k + j;

				if (slot[i] >= 0)
					acc +=
					    weight[i] * rl_ld(y, bf16, (size_t)slot[i] * dim + c);
			}
			rl_st(out, bf16, o + c, acc);
		}
	}
}

int rl_moe_combine_forward_cpu(struct rl_buf out, struct rl_cbuf y, const int32_t *slot,
                               const float *weight, int n_tokens, int k, int dim, int n_slots,
                               void *stream)
{
	(void)stream;
	if (!out.p || !slot || !weight || n_tokens < 0 || k <= 0 || dim <= 0 || n_slots < 0 ||
	    (!y.p && n_slots > 0) || !combine_types_ok(out.t, y.t))
		return -1;
	for (int64_t i = 0; i < (int64_t)n_tokens * k; i++)
		if (slot[i] < -1 || slot[i] >= n_slots)
			return -1;
	if (out.t == RL_BF16)
		combine_forward(out.p, y.p, slot, weight, n_tokens, k, dim, true);
	else
		combine_forward(out.p, y.p, slot, weight, n_tokens, k, dim, false);
	return 0;
}

RL_TYPED_BODY void combine_backward(void *dy, float *dweight, const void *dout, const void *y,
                                    const int32_t *slot, const float *weight, int n_tokens, int k,
                                    int dim, const bool bf16)
{
	for (int t = 0; t < n_tokens; t++) {
		size_t g = (size_t)t * dim;

		for (int j = 0; j < k; j++) {
			size_t i = (size_t)t * k + j;
			double dot = 0;

			if (slot[i] < 0) {
				dweight[i] = 0.0f;
				continue;
			}
			size_t row = (size_t)slot[i] * dim;

			for (int c = 0; c < dim; c++)
				dot += (double)rl_ld(dout, bf16, g + c) * rl_ld(y, bf16, row + c);
			dweight[i] = (float)dot;
			if (!dy)
				continue;
			for (int c = 0; c < dim; c++)
				rl_st_add(dy, bf16, row + c, weight[i] * rl_ld(dout, bf16, g + c));
		}
	}
}

int rl_moe_combine_backward_cpu(struct rl_buf dy, float *dweight, struct rl_cbuf dout,
                                struct rl_cbuf y, const int32_t *slot, const float *weight,
                                int n_tokens, int k, int dim, void *stream)
{
	(void)stream;
	if (!dweight || !dout.p || !y.p || !slot || !weight || n_tokens < 0 || k <= 0 || dim <= 0 ||
	    !combine_types_ok(y.t, dout.t) || (dy.p && dy.t != y.t))
		return -1;
	/* without n_slots only the lower bound can be checked */
	for (int64_t i = 0; i < (int64_t)n_tokens * k; i++)
		if (slot[i] < -1)
			return -1;
	if (y.t == RL_BF16)
		combine_backward(dy.p, dweight, dout.p, y.p, slot, weight, n_tokens, k, dim, true);
	else
		combine_backward(dy.p, dweight, dout.p, y.p, slot, weight, n_tokens, k, dim, false);
	return 0;
}
