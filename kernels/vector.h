/* Elementwise vector ops the model needs between the big ones: residual adds,
 * gradient scaling, the sum of squares behind global grad-norm clipping, and
 * the bf16 conversions of a bf16 run's weights.
 * defines: rl_add_cpu, rl_scale_cpu, rl_sum_squares_cpu, rl_round_bf16_cpu,
 * rl_to_bf16_cpu, rl_from_bf16_cpu, rl_add_cuda, rl_scale_cuda,
 * rl_sum_squares_cuda, rl_round_bf16_cuda, rl_to_bf16_cuda, rl_from_bf16_cuda */
#ifndef RL_KERNELS_VECTOR_H
#define RL_KERNELS_VECTOR_H

#include <stdint.h>

#include "kernels/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[i] += x[i]: y and x of one type, fp32 or bf16 (kernels/buf.h), the sum
 * in fp32 rounded once to y's type. */
typedef int (*rl_add_fn)(struct rl_buf y, struct rl_cbuf x, int64_t n, void *stream);
/* x[i] *= s. */
typedef int (*rl_scale_fn)(float *x, int64_t n, float s, void *stream);
/* *out += sum of x[i]^2, accumulated in double. */
typedef int (*rl_sum_squares_fn)(double *out, const float *x, int64_t n, void *stream);
/* y[i] = x[i] rounded to the nearest bf16, ties to even (rl_f32_to_bf16 in
 * kernels/dtype.h: a NaN stays a quiet NaN), held as the fp32 of the same
 * value. y may be x. */
typedef int (*rl_round_bf16_fn)(float *y, const float *x, int64_t n, void *stream);
/* The same rounding, stored as bf16 (the bit patterns, as kernels/dtype.h
 * has them), and back: y[i] = the fp32 of bf16 x[i], exact. */
typedef int (*rl_to_bf16_fn)(uint16_t *y, const float *x, int64_t n, void *stream);
typedef int (*rl_from_bf16_fn)(float *y, const uint16_t *x, int64_t n, void *stream);

int rl_add_cpu(struct rl_buf y, struct rl_cbuf x, int64_t n, void *stream);
int rl_scale_cpu(float *x, int64_t n, float s, void *stream);
int rl_sum_squares_cpu(double *out, const float *x, int64_t n, void *stream);
int rl_round_bf16_cpu(float *y, const float *x, int64_t n, void *stream);
int rl_to_bf16_cpu(uint16_t *y, const float *x, int64_t n, void *stream);
int rl_from_bf16_cpu(float *y, const uint16_t *x, int64_t n, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). Pointers are device
 * memory, out included: the sum is added to the double there, on stream,
 * without synchronising. The sum is the same bits on every run (a fixed
 * order of additions, a function of n), though not the CPU's order. */
int rl_add_cuda(struct rl_buf y, struct rl_cbuf x, int64_t n, void *stream);
int rl_scale_cuda(float *x, int64_t n, float s, void *stream);
int rl_sum_squares_cuda(double *out, const float *x, int64_t n, void *stream);
int rl_round_bf16_cuda(float *y, const float *x, int64_t n, void *stream);
int rl_to_bf16_cuda(uint16_t *y, const float *x, int64_t n, void *stream);
int rl_from_bf16_cuda(float *y, const uint16_t *x, int64_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif
