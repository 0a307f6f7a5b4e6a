/* SwiGLU gate of the Llama MLP: h = silu(gate) * up, elementwise.
 * defines: rl_swiglu_forward_cpu, rl_swiglu_backward_cpu, rl_swiglu_forward_cuda,
 * rl_swiglu_backward_cuda, rl_swiglu_types_ok */
#ifndef RL_KERNELS_SWIGLU_H
#define RL_KERNELS_SWIGLU_H

#include <stdint.h>

#include "kernels/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every buffer of one type, fp32 or bf16 (kernels/buf.h): computed in fp32,
 * each output rounded once to its type (dgate and dup once per call, after
 * the add). -1 for other types, before any work. */
typedef int (*rl_swiglu_forward_fn)(struct rl_buf h, struct rl_cbuf gate, struct rl_cbuf up,
                                    int64_t n, void *stream);
/* dgate and dup are added to. */
typedef int (*rl_swiglu_backward_fn)(struct rl_buf dgate, struct rl_buf dup, struct rl_cbuf dh,
                                     struct rl_cbuf gate, struct rl_cbuf up, int64_t n,
                                     void *stream);

static inline bool rl_swiglu_types_ok(enum rl_dtype a, enum rl_dtype b, enum rl_dtype c,
                                      enum rl_dtype d, enum rl_dtype e)
{
	return rl_act_type_ok(a) && b == a && c == a && d == a && e == a;
}

int rl_swiglu_forward_cpu(struct rl_buf h, struct rl_cbuf gate, struct rl_cbuf up, int64_t n,
                          void *stream);
int rl_swiglu_backward_cpu(struct rl_buf dgate, struct rl_buf dup, struct rl_cbuf dh,
                           struct rl_cbuf gate, struct rl_cbuf up, int64_t n, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). */
int rl_swiglu_forward_cuda(struct rl_buf h, struct rl_cbuf gate, struct rl_cbuf up, int64_t n,
                           void *stream);
int rl_swiglu_backward_cuda(struct rl_buf dgate, struct rl_buf dup, struct rl_cbuf dh,
                            struct rl_cbuf gate, struct rl_cbuf up, int64_t n, void *stream);

#ifdef __cplusplus
}
#endif

#endif
