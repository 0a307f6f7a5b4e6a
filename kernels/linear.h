/* Linear layer in PyTorch's convention: weight is [out_dim, in_dim], so
 * y = x W^T + b. The CPU op is cblas_sgemm; the CUDA one, cuBLASLt.
 * The batch-invariant forward computes each y[t, o] with one fixed order of
 * its in_dim products, the same for every n and every row position, so a
 * token's outputs have the same bits in a decode step of one token and in
 * a training batch of thousands (OpenBLAS and cuBLASLt pick blockings by
 * shape, and their bits follow). Generation and the logprob pass use it
 * when generation logprobs must equal training's (policy.generation.
 * batch_invariant).
 *
 * Types (kernels/buf.h). x, W and the bias share one type, fp32 or bf16;
 * the product is accumulated in fp32 and rounded once, to y's type, after
 * the bias (round to nearest even, rl_f32_to_bf16). y is x's type, or fp32
 * under bf16 inputs (logits) when there is no bias. In the backward dy, x
 * and W share one type and dx has it; dx += dy W is rounded once to dx's
 * type after the add (cuBLASLt's beta = 1 on a bf16 C). dW and dbias are
 * always fp32 (Megatron's main_grad): bf16 products are exact in fp32, so
 * every backend differs from another only in the order of its fp32 sums.
 * Any other combination returns -1 before any work.
 * defines: rl_linear_forward_fn, rl_linear_backward_fn, rl_linear_forward_types_ok,
 * rl_linear_backward_types_ok,
 * rl_linear_forward_cpu, rl_linear_backward_cpu,
 * rl_linear_forward_invariant_cpu, rl_linear_forward_cuda,
 * rl_linear_backward_cuda, rl_linear_forward_invariant_cuda */
#ifndef RL_KERNELS_LINEAR_H
#define RL_KERNELS_LINEAR_H

#include "kernels/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y [n, out_dim] = x [n, in_dim] W^T (+ bias [out_dim] when bias.p is not
 * NULL). */
typedef int (*rl_linear_forward_fn)(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                    struct rl_cbuf bias, int n, int in_dim, int out_dim,
                                    void *stream);
/* Adds into each gradient that is not NULL: dx += dy W, dw += dy^T x,
 * dbias += column sums of dy. */
typedef int (*rl_linear_backward_fn)(struct rl_buf dx, float *dw, float *dbias, struct rl_cbuf dy,
                                     struct rl_cbuf x, struct rl_cbuf w, int n, int in_dim,
                                     int out_dim, void *stream);

/* The type rules above: true when a forward (dw NULL: dx.t is y's type,
 * dy the inputs' type) or a backward may take these types. Shared by every
 * backend, so they refuse the same calls. */
static inline bool rl_linear_forward_types_ok(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                              struct rl_cbuf bias)
{
	if (!rl_act_type_ok(x.t) || w.t != x.t || (bias.p && bias.t != x.t))
		return false;
	if (y.t == x.t)
		return true;
	return y.t == RL_F32 && !bias.p;
}

static inline bool rl_linear_backward_types_ok(struct rl_buf dx, struct rl_cbuf dy,
                                               struct rl_cbuf x, struct rl_cbuf w)
{
	return rl_act_type_ok(dy.t) && (!x.p || x.t == dy.t) && (!w.p || w.t == dy.t) &&
	       (!dx.p || dx.t == dy.t);
}

int rl_linear_forward_cpu(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w, struct rl_cbuf bias,
                          int n, int in_dim, int out_dim, void *stream);
int rl_linear_backward_cpu(struct rl_buf dx, float *dw, float *dbias, struct rl_cbuf dy,
                           struct rl_cbuf x, struct rl_cbuf w, int n, int in_dim, int out_dim,
                           void *stream);
/* kernels/cpu/linear_invariant.c: y[t, o] = (the 8-lane sum of x[t, :]
 * W[o, :], in the order written there) + bias[o], then rounded to y's
 * type; bf16 inputs are read exactly, so the order and the bits of the sum
 * are those of the fp32 values they hold. */
int rl_linear_forward_invariant_cpu(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                    struct rl_cbuf bias, int n, int in_dim, int out_dim,
                                    void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). fp32 products (no
 * TF32) on fp32 inputs, bf16 tensor cores on bf16 ones; the bias gradient
 * is summed in a fixed order, so it has the same bits on every run. */
int rl_linear_forward_cuda(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w, struct rl_cbuf bias,
                           int n, int in_dim, int out_dim, void *stream);
int rl_linear_backward_cuda(struct rl_buf dx, float *dw, float *dbias, struct rl_cbuf dy,
                            struct rl_cbuf x, struct rl_cbuf w, int n, int in_dim, int out_dim,
                            void *stream);
/* kernels/cuda/linear_invariant.cu: no split of in_dim across blocks or a
 * blocking chosen by n; each element's sum in one fixed order of fp32
 * fmaf, bf16 inputs widened exactly on load. */
int rl_linear_forward_invariant_cuda(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                     struct rl_cbuf bias, int n, int in_dim, int out_dim,
                                     void *stream);

#ifdef __cplusplus
}
#endif

#endif
