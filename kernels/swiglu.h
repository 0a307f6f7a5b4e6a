/* SwiGLU gate of the Llama MLP: h = silu(gate) * up, elementwise.
 * defines: rl_swiglu_forward_cpu, rl_swiglu_backward_cpu, rl_swiglu_forward_cuda,
 * rl_swiglu_backward_cuda */
#ifndef RL_KERNELS_SWIGLU_H
#define RL_KERNELS_SWIGLU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int (*rl_swiglu_forward_fn)(float *h, const float *gate, const float *up, int64_t n,
                                    void *stream);
/* dgate and dup are added to. */
typedef int (*rl_swiglu_backward_fn)(float *dgate, float *dup, const float *dh, const float *gate,
                                     const float *up, int64_t n, void *stream);

int rl_swiglu_forward_cpu(float *h, const float *gate, const float *up, int64_t n, void *stream);
int rl_swiglu_backward_cpu(float *dgate, float *dup, const float *dh, const float *gate,
                           const float *up, int64_t n, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). */
int rl_swiglu_forward_cuda(float *h, const float *gate, const float *up, int64_t n, void *stream);
int rl_swiglu_backward_cuda(float *dgate, float *dup, const float *dh, const float *gate,
                            const float *up, int64_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif
