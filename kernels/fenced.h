/* The fenced backend (kernels/fenced.c): the CPU ops behind the CUDA
 * backend's memory rules, for testing without a GPU that the runtime never
 * touches backend memory from the host and never hands host memory to an
 * op. rlrun uses it in place of the CPU table when RL_OPS_FENCED=1.
 * defines: rl_ops_fenced, rl_fenced_untag, rl_fenced_tagged */
#ifndef RL_KERNELS_FENCED_H
#define RL_KERNELS_FENCED_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const struct rl_ops rl_ops_fenced;

/* The fenced table's memory is host memory under a tagged address: bit 54
 * set makes it non-canonical on x86-64 and outside the user half on arm64,
 * so no host memory carries it. */
#define RL_FENCED_TAG ((uintptr_t)1 << 54)

/* p is fenced memory: what a host-side user of buffers (MPI) must refuse. */
static inline bool rl_fenced_tagged(const void *p)
{
	return ((uintptr_t)p & RL_FENCED_TAG) != 0;
}

/* The host address behind a fenced pointer, for tests that look inside. */
void *rl_fenced_untag(const void *p);

#ifdef __cplusplus
}
#endif

#endif
