/* Backend memory by what it holds: every allocation of the runtime goes
 * through rl_ops_alloc with its kind, so a run can say how many bytes its
 * weights, gradients, optimizer state, reference weights, activations and
 * KV cache hold on this rank, on any backend (the CPU's included), from the
 * allocations themselves rather than from a model of them. The counts are
 * the process's: every model and table in it.
 * defines: enum rl_mem_kind, rl_mem_kind_name, rl_ops_alloc, rl_ops_release,
 * struct rl_mem_use, rl_mem_use_read */
#ifndef RL_KERNELS_MEMORY_USE_H
#define RL_KERNELS_MEMORY_USE_H

#include <stddef.h>

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

enum rl_mem_kind {
	RL_MEM_WEIGHTS,     /* the weights the passes read */
	RL_MEM_GRADS,       /* their gradients (main_grad) */
	RL_MEM_OPTIMIZER,   /* the optimizer's state: moments, fp32 masters */
	RL_MEM_REFERENCE,   /* another model's weights held beside (the KL's reference) */
	RL_MEM_ACTIVATIONS, /* what a pass keeps and its scratch */
	RL_MEM_KV_CACHE,    /* generation's paged KV cache */
	RL_MEM_KINDS
};

/* "weights", "grads", "optimizer", "reference", "activations", "kv_cache":
 * the names of the metrics (mem_NAME_bytes). */
const char *rl_mem_kind_name(enum rl_mem_kind kind);

/* ops->alloc(bytes), counted under kind while it lives. NULL when the
 * backend or the bookkeeping is out of memory (nothing counted). */
void *rl_ops_alloc(const struct rl_ops *ops, enum rl_mem_kind kind, size_t bytes);
/* ops->release(p), no longer counted. NULL is a no-op; p must come from
 * rl_ops_alloc (a pointer it does not know is released uncounted). */
void rl_ops_release(const struct rl_ops *ops, void *p);

/* Bytes by kind, as the caller asked for them (the backend may round up):
 * live now, and the most ever live at once. */
struct rl_mem_use {
	size_t live[RL_MEM_KINDS];
	size_t peak[RL_MEM_KINDS];
};

void rl_mem_use_read(struct rl_mem_use *out);

#ifdef __cplusplus
}
#endif

#endif
