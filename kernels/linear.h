/* Linear layer in PyTorch's convention: weight is [out_dim, in_dim], so
 * y = x W^T + b. The CPU op is a cblas_sgemm call; the CUDA one, cuBLASLt.
 * The batch-invariant forward computes each y[t, o] with one fixed order of
 * its in_dim products, the same for every n and every row position, so a
 * token's outputs have the same bits in a decode step of one token and in
 * a training batch of thousands (OpenBLAS and cuBLASLt pick blockings by
 * shape, and their bits follow). Generation and the logprob pass use it
 * when generation logprobs must equal training's (policy.generation.
 * batch_invariant).
 * defines: rl_linear_forward_fn, rl_linear_backward_fn, rl_linear_forward_cpu,
 * rl_linear_backward_cpu, rl_linear_forward_invariant_cpu, rl_linear_forward_cuda,
 * rl_linear_backward_cuda, rl_linear_forward_invariant_cuda */
#ifndef RL_KERNELS_LINEAR_H
#define RL_KERNELS_LINEAR_H

#ifdef __cplusplus
extern "C" {
#endif

/* y [n, out_dim] = x [n, in_dim] W^T (+ bias [out_dim] when not NULL). */
typedef int (*rl_linear_forward_fn)(float *y, const float *x, const float *w, const float *bias,
                                    int n, int in_dim, int out_dim, void *stream);
/* Adds into each gradient that is not NULL: dx += dy W, dw += dy^T x,
 * dbias += column sums of dy. */
typedef int (*rl_linear_backward_fn)(float *dx, float *dw, float *dbias, const float *dy,
                                     const float *x, const float *w, int n, int in_dim, int out_dim,
                                     void *stream);

int rl_linear_forward_cpu(float *y, const float *x, const float *w, const float *bias, int n,
                          int in_dim, int out_dim, void *stream);
int rl_linear_backward_cpu(float *dx, float *dw, float *dbias, const float *dy, const float *x,
                           const float *w, int n, int in_dim, int out_dim, void *stream);
/* kernels/cpu/linear_invariant.c: y[t, o] = (the 8-lane sum of x[t, :]
 * W[o, :], in the order written there) + bias[o]. */
int rl_linear_forward_invariant_cpu(float *y, const float *x, const float *w, const float *bias,
                                    int n, int in_dim, int out_dim, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). fp32 products (no
 * TF32); the bias gradient is summed in a fixed order, so it has the same
 * bits on every run. */
int rl_linear_forward_cuda(float *y, const float *x, const float *w, const float *bias, int n,
                           int in_dim, int out_dim, void *stream);
int rl_linear_backward_cuda(float *dx, float *dw, float *dbias, const float *dy, const float *x,
                            const float *w, int n, int in_dim, int out_dim, void *stream);
/* kernels/cuda/linear_invariant.cu: fp32, no split of in_dim across blocks
 * or a blocking chosen by n; each element's sum in one fixed order. */
int rl_linear_forward_invariant_cuda(float *y, const float *x, const float *w, const float *bias,
                                     int n, int in_dim, int out_dim, void *stream);

#ifdef __cplusplus
}
#endif

#endif
