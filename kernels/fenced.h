/* The fenced backend (kernels/fenced.c): the CPU ops behind the CUDA
 * backend's memory rules, for testing without a GPU that the runtime never
 * touches backend memory from the host and never hands host memory to an
 * op. rlrun uses it in place of the CPU table when RL_OPS_FENCED=1.
 * defines: rl_ops_fenced, rl_fenced_untag */
#ifndef RL_KERNELS_FENCED_H
#define RL_KERNELS_FENCED_H

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const struct rl_ops rl_ops_fenced;

/* The host address behind a fenced pointer, for tests that look inside. */
void *rl_fenced_untag(const void *p);

#ifdef __cplusplus
}
#endif

#endif
