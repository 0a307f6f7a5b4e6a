/* RMSNorm: a plain C reference and a CUDA kernel behind one signature, so the
 * op table can hold either and the tests can compare them value for value.
 * defines: rl_rmsnorm_forward_fn, rl_rmsnorm_forward_cpu, rl_rmsnorm_forward_cuda,
 * rl_rmsnorm_backward_fn, rl_rmsnorm_backward_cpu, rl_rmsnorm_backward_cuda */
#ifndef RL_KERNELS_RMSNORM_H
#define RL_KERNELS_RMSNORM_H

#ifdef __cplusplus
extern "C" {
#endif

/* y[r, :] = x[r, :] * rstd[r] * weight[:], rstd[r] = 1 / sqrt(mean(x[r, :]^2) + eps);
 * fp32 in, fp32 out, fp32 accumulation. x and y are rows x dim, row-major;
 * weight is dim floats. rstd (rows floats) is saved for the backward pass; it
 * may be NULL. stream is a cudaStream_t for the CUDA op (NULL: the default
 * stream) and is ignored by the CPU op; pointers are host memory for the CPU
 * op and device memory for the CUDA op, which returns without synchronising.
 * Returns 0, or -1 on bad arguments (rows < 0, dim <= 0, a NULL pointer other
 * than rstd) and, for CUDA, on a launch error. rows == 0 does nothing. */
typedef int (*rl_rmsnorm_forward_fn)(float *y, float *rstd, const float *x, const float *weight,
                                     int rows, int dim, float eps, void *stream);

/* From dy and the forward's saved rstd, adds dx += d(loss)/dx and
 * dweight += d(loss)/dweight (dweight may be NULL: Qwen3's per-head norms
 * share one weight across heads and still want it; NULL is for frozen ones). */
typedef int (*rl_rmsnorm_backward_fn)(float *dx, float *dweight, const float *dy, const float *x,
                                      const float *weight, const float *rstd, int rows, int dim,
                                      void *stream);

/* Accumulates in double: it is the reference the kernels are held to. */
int rl_rmsnorm_forward_cpu(float *y, float *rstd, const float *x, const float *weight, int rows,
                           int dim, float eps, void *stream);

int rl_rmsnorm_backward_cpu(float *dx, float *dweight, const float *dy, const float *x,
                            const float *weight, const float *rstd, int rows, int dim,
                            void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). */
int rl_rmsnorm_forward_cuda(float *y, float *rstd, const float *x, const float *weight, int rows,
                            int dim, float eps, void *stream);
/* Deterministic: dweight is summed over fixed row chunks into scratch, then
 * the chunks in order. Returns -1 also when that scratch cannot be had. */
int rl_rmsnorm_backward_cuda(float *dx, float *dweight, const float *dy, const float *x,
                             const float *weight, const float *rstd, int rows, int dim,
                             void *stream);

#ifdef __cplusplus
}
#endif

#endif
