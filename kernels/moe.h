/* The ops of a mixture-of-experts layer: a grouped GEMM over the experts a
 * rank holds (one call for all of them, each expert's rows contiguous), and
 * the weighted combine of each token's expert outputs. Routing itself (the
 * softmax and the top-k) is the caller's, on the host: the token counts it
 * gives decide the shapes of everything else, so they are needed there
 * anyway. Permuting rows into expert order is the embedding gather.
 * defines: rl_grouped_linear_forward_fn, rl_grouped_linear_backward_fn,
 * rl_grouped_linear_types_ok, rl_grouped_linear_bad_groups,
 * rl_grouped_linear_per_group, rl_grouped_linear_backward_per_group,
 * rl_moe_combine_forward_fn, rl_moe_combine_backward_fn and their cpu and
 * cuda ops */
#ifndef RL_KERNELS_MOE_H
#define RL_KERNELS_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/linear.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows [offsets[g], offsets[g + 1]) of x [n, in_dim] go through weight g:
 * y[r, :] = x[r, :] W_g^T with W [groups, out_dim, in_dim] (each W_g in
 * PyTorch's linear layout). offsets is host memory, groups + 1 entries
 * from 0, non-decreasing; n = offsets[groups]. A group may be empty. */
typedef int (*rl_grouped_linear_forward_fn)(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                            const int32_t *offsets, int groups, int in_dim,
                                            int out_dim, void *stream);
/* Adds into each gradient that is not NULL: dx[r, :] += dy[r, :] W_g and
 * dW_g += dy_g^T x_g over group g's rows (an empty group adds nothing). */
typedef int (*rl_grouped_linear_backward_fn)(struct rl_buf dx, float *dw, struct rl_cbuf dy,
                                             struct rl_cbuf x, struct rl_cbuf w,
                                             const int32_t *offsets, int groups, int in_dim,
                                             int out_dim, void *stream);
/* Types: the linear layer's (linear.h), y of x's type: x, W, y (and dy,
 * dx) one activation type, dW fp32 (main_grad), each output rounded once;
 * a bf16 dx is rounded once per call, after its add. */
static inline bool rl_grouped_linear_types_ok(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w)
{
	return rl_act_type_ok(x.t) && w.t == x.t && (!y.p || y.t == x.t);
}

/* Whether the group arguments break that contract (offsets host memory):
 * the argument check every backend's grouped GEMM makes, 1 or 0. */
static inline int rl_grouped_linear_bad_groups(const int32_t *offsets, int groups, int in_dim,
                                               int out_dim)
{
	if (!offsets || groups <= 0 || in_dim <= 0 || out_dim <= 0 || offsets[0] != 0)
		return 1;
	for (int g = 0; g < groups; g++)
		if (offsets[g + 1] < offsets[g])
			return 1;
	return 0;
}
/* The grouped GEMM as one GEMM per group, each group's rows through linear
 * in turn (the batch-invariant twin on every backend: a row's result is
 * its group's GEMM alone, whatever the other groups hold). */
static inline int rl_grouped_linear_per_group(rl_linear_forward_fn linear, struct rl_buf y,
                                              struct rl_cbuf x, struct rl_cbuf w,
                                              const int32_t *offsets, int groups, int in_dim,
                                              int out_dim, void *stream)
{
	if (!y.p || !x.p || !w.p ||
	    rl_grouped_linear_bad_groups(offsets, groups, in_dim, out_dim) ||
	    !rl_grouped_linear_types_ok(y, x, w))
		return -1;
	for (int g = 0; g < groups; g++) {
		int rows = offsets[g + 1] - offsets[g];
		size_t r0 = (size_t)offsets[g];

		if (rows > 0 &&
		    linear(rl_buf_at(y, r0 * (size_t)out_dim), rl_cbuf_at(x, r0 * (size_t)in_dim),
		           rl_cbuf_at(w, (size_t)g * out_dim * in_dim), rl_cbuf_f32(NULL), rows,
		           in_dim, out_dim, stream))
			return -1;
	}
	return 0;
}

/* The backward as one typed linear backward per group (linear.h): what the
 * CPU op is, and the CUDA op's bf16 path. */
static inline int rl_grouped_linear_backward_per_group(
    rl_linear_backward_fn linear, struct rl_buf dx, float *dw, struct rl_cbuf dy, struct rl_cbuf x,
    struct rl_cbuf w, const int32_t *offsets, int groups, int in_dim, int out_dim, void *stream)
{
	if (!dy.p || (dx.p && !w.p) || (dw && !x.p) ||
	    rl_grouped_linear_bad_groups(offsets, groups, in_dim, out_dim) ||
	    !rl_linear_backward_types_ok(dx, dy, x, w))
		return -1;
	for (int g = 0; g < groups; g++) {
		int rows = offsets[g + 1] - offsets[g];
		size_t r0 = (size_t)offsets[g], wg = (size_t)g * out_dim * in_dim;

		if (rows > 0 &&
		    linear(rl_buf_at(dx, r0 * (size_t)in_dim), dw ? dw + wg : NULL, NULL,
		           rl_cbuf_at(dy, r0 * (size_t)out_dim), rl_cbuf_at(x, r0 * (size_t)in_dim),
		           rl_cbuf_at(w, wg), rows, in_dim, out_dim, stream))
			return -1;
	}
	return 0;
}
/* out[t, :] = sum over j < k, in order, of weight[t k + j] y[slot[t k + j], :]
 * for t < n_tokens (written, not added to); a slot of -1 adds nothing.
 * slot and weight are backend memory; slots lie in [-1, n_slots) and no
 * slot other than -1 appears twice. */
typedef int (*rl_moe_combine_forward_fn)(struct rl_buf out, struct rl_cbuf y, const int32_t *slot,
                                         const float *weight, int n_tokens, int k, int dim,
                                         int n_slots, void *stream);
/* The backward pass of the combine: dy[slot[i], :] += weight[i] dout[t, :]
 * (dy may be NULL; y may not, even when every slot is -1) and dweight[i] = dout[t, :] . y[slot[i],
 * :] (written; 0 where slot[i] is -1), for i = t k + j. Since no slot appears twice, no two tokens
 * add to one row of dy. */
typedef int (*rl_moe_combine_backward_fn)(struct rl_buf dy, float *dweight, struct rl_cbuf dout,
                                          struct rl_cbuf y, const int32_t *slot,
                                          const float *weight, int n_tokens, int k, int dim,
                                          void *stream);

/* The batch-invariant twin (linear.h): each group through the invariant
 * linear forward, so a row's outputs do not depend on how many rows its
 * expert got. */
int rl_grouped_linear_forward_invariant_cpu(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                            const int32_t *offsets, int groups, int in_dim,
                                            int out_dim, void *stream);
int rl_grouped_linear_forward_cpu(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                  const int32_t *offsets, int groups, int in_dim, int out_dim,
                                  void *stream);
int rl_grouped_linear_backward_cpu(struct rl_buf dx, float *dw, struct rl_cbuf dy, struct rl_cbuf x,
                                   struct rl_cbuf w, const int32_t *offsets, int groups, int in_dim,
                                   int out_dim, void *stream);
/* The cpu ops check every slot against [-1, n_slots) (the backward, which
 * has no n_slots, against -1 only) and fail on one outside. out and y (dy,
 * dout) share one activation type, fp32 or bf16; weight and dweight are
 * fp32 (the router's); each output rounded once (dy once per call, after
 * its add). */
int rl_moe_combine_forward_cpu(struct rl_buf out, struct rl_cbuf y, const int32_t *slot,
                               const float *weight, int n_tokens, int k, int dim, int n_slots,
                               void *stream);
int rl_moe_combine_backward_cpu(struct rl_buf dy, float *dweight, struct rl_cbuf dout,
                                struct rl_cbuf y, const int32_t *slot, const float *weight,
                                int n_tokens, int k, int dim, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). The fp32 grouped GEMM
 * is one launch over every group's tiles, fp32 products, and its weight
 * gradient sums each group's rows in a fixed order (no atomics), so a
 * repeated call gives the same bits; bf16 goes group by group through the
 * typed linear ops (bf16 cuBLASLt). The slots are device memory and not
 * checked (as the embedding's ids): an out-of-range slot is undefined. */
int rl_grouped_linear_forward_invariant_cuda(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                             const int32_t *offsets, int groups, int in_dim,
                                             int out_dim, void *stream);
int rl_grouped_linear_forward_cuda(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                   const int32_t *offsets, int groups, int in_dim, int out_dim,
                                   void *stream);
int rl_grouped_linear_backward_cuda(struct rl_buf dx, float *dw, struct rl_cbuf dy,
                                    struct rl_cbuf x, struct rl_cbuf w, const int32_t *offsets,
                                    int groups, int in_dim, int out_dim, void *stream);
int rl_moe_combine_forward_cuda(struct rl_buf out, struct rl_cbuf y, const int32_t *slot,
                                const float *weight, int n_tokens, int k, int dim, int n_slots,
                                void *stream);
int rl_moe_combine_backward_cuda(struct rl_buf dy, float *dweight, struct rl_cbuf dout,
                                 struct rl_cbuf y, const int32_t *slot, const float *weight,
                                 int n_tokens, int k, int dim, void *stream);

#ifdef __cplusplus
}
#endif

#endif
