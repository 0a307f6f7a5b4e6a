/* The GPUs Slurm gave a step on one node, as its environment names them.
 * defines: struct rl_step_gpus, rl_step_gpus_parse, rl_step_gpus_free */
#ifndef RL_PLAN_STEP_GPUS_H
#define RL_PLAN_STEP_GPUS_H

#include <stddef.h>

#include "topology/topology.h"

struct rl_step_gpus {
	int n;        /* -1: Slurm said nothing, every GPU of the node is usable */
	int *gpu;     /* indexes into topo->gpus */
	char **token; /* what CUDA_VISIBLE_DEVICES names that GPU by, for the task */
};

/* From SLURM_STEP_GPUS (Slurm's indexes, in PCI bus order on the node) or,
 * without it, CUDA_VISIBLE_DEVICES (indexes, or PCI bus ids "0000:07:00.0");
 * each may be NULL. A GPU that is not on the node is an error naming the
 * variable. */
int rl_step_gpus_parse(const struct rl_topo *topo, const char *slurm_step_gpus,
                       const char *cuda_visible_devices, struct rl_step_gpus *out, char *err,
                       size_t errlen);
void rl_step_gpus_free(struct rl_step_gpus *g);

#endif
