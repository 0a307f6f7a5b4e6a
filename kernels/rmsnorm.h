/* RMSNorm: a plain C reference and a CUDA kernel behind one signature, so the
 * op table can hold either and the tests can compare them value for value.
 * defines: rl_rmsnorm_forward_fn, rl_rmsnorm_forward_cpu, rl_rmsnorm_forward_cuda,
 * rl_rmsnorm_backward_fn, rl_rmsnorm_backward_cpu, rl_rmsnorm_backward_cuda,
 * rl_rmsnorm_types_ok */
#ifndef RL_KERNELS_RMSNORM_H
#define RL_KERNELS_RMSNORM_H

#include "kernels/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[r, :] = x[r, :] * rstd[r] * weight[:], rstd[r] = 1 / sqrt(mean(x[r, :]^2) + eps);
 * x, y and weight of one type, fp32 or bf16 (kernels/buf.h), the sums in
 * fp32 or better and y rounded once to its type; rstd is fp32 whatever the
 * type (the saved statistic). x and y are rows x dim, row-major;
 * weight is dim floats. rstd (rows floats) is saved for the backward pass; it
 * may be NULL. stream is a cudaStream_t for the CUDA op (NULL: the default
 * stream) and is ignored by the CPU op; pointers are host memory for the CPU
 * op and device memory for the CUDA op, which returns without synchronising.
 * Returns 0, or -1 on bad arguments (rows < 0, dim <= 0, a NULL pointer other
 * than rstd, types that differ or are not an activation type) and, for
 * CUDA, on a launch error. rows == 0 does nothing. */
typedef int (*rl_rmsnorm_forward_fn)(struct rl_buf y, float *rstd, struct rl_cbuf x,
                                     struct rl_cbuf weight, int rows, int dim, float eps,
                                     void *stream);

/* From dy and the forward's saved rstd, adds dx += d(loss)/dx and
 * dweight += d(loss)/dweight (dweight may be NULL: Qwen3's per-head norms
 * share one weight across heads and still want it; NULL is for frozen ones).
 * dx, dy, x and weight share the forward's type, dx rounded once per add;
 * dweight is fp32 (main_grad). */
typedef int (*rl_rmsnorm_backward_fn)(struct rl_buf dx, float *dweight, struct rl_cbuf dy,
                                      struct rl_cbuf x, struct rl_cbuf weight, const float *rstd,
                                      int rows, int dim, void *stream);

/* The type rule both directions share: one activation type for all. */
static inline bool rl_rmsnorm_types_ok(enum rl_dtype y, enum rl_dtype x, enum rl_dtype w)
{
	return rl_act_type_ok(x) && y == x && w == x;
}

/* Accumulates in double: it is the reference the kernels are held to. */
int rl_rmsnorm_forward_cpu(struct rl_buf y, float *rstd, struct rl_cbuf x, struct rl_cbuf weight,
                           int rows, int dim, float eps, void *stream);

int rl_rmsnorm_backward_cpu(struct rl_buf dx, float *dweight, struct rl_cbuf dy, struct rl_cbuf x,
                            struct rl_cbuf weight, const float *rstd, int rows, int dim,
                            void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). */
int rl_rmsnorm_forward_cuda(struct rl_buf y, float *rstd, struct rl_cbuf x, struct rl_cbuf weight,
                            int rows, int dim, float eps, void *stream);
/* Deterministic: dweight is summed over fixed row chunks into scratch, then
 * the chunks in order. Returns -1 also when that scratch cannot be had. */
int rl_rmsnorm_backward_cuda(struct rl_buf dx, float *dweight, struct rl_cbuf dy, struct rl_cbuf x,
                             struct rl_cbuf weight, const float *rstd, int rows, int dim,
                             void *stream);

#ifdef __cplusplus
}
#endif

#endif
