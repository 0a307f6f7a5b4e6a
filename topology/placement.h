/* Where the tasks of one node run: a GPU each, so that the stride-1 axes of
 * the layout (TP, then CP) stay inside an NVLink domain; the NIC nearest to
 * that GPU; a CPU set from the GPU's NUMA domain, split among the tasks that
 * share the domain. Only the GPUs Slurm gave the step are used.
 * defines: struct rl_task_place, struct rl_node_placement, rl_place_node */
#ifndef RL_PLACEMENT_H
#define RL_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>

#include "topology/layout.h"
#include "topology/topology.h"

struct rl_task_place {
	int gpu;   /* index into topo->gpus, -1 when tasks get no GPU */
	int nic;   /* index into topo->nics, -1 when none */
	int numa;  /* index into topo->numas */
	int *cpus; /* OS indexes of the hardware threads it may run on, ascending */
	int n_cpus;
};

struct rl_node_placement {
	int n_tasks;
	struct rl_task_place *tasks; /* by local rank */
	/* a layout the hardware cannot honour fully, e.g. a TP group split over
	 * two NVLink domains: the plan prints it, the job still runs */
	char warning[256];
};

/* Places the tasks with global ranks first_rank .. first_rank + n_tasks - 1
 * (Slurm's block distribution: a node holds consecutive ranks) on topo.
 * use_gpus: the backend needs one GPU per task. allowed: indexes into
 * topo->gpus that the step may use (NULL: all). GPUs fill NVLink domains in
 * the order of their first GPU, bus-id order inside; without GPUs, task i goes
 * to the (i * n / n_tasks)-th NUMA domain that has cores. Returns 0, or -1 with err
 * (more tasks than allowed GPUs, no cores, ...). */
int rl_place_node(const struct rl_topo *topo, const struct rl_layout *layout, int first_rank,
                  int n_tasks, bool use_gpus, const int *allowed, int n_allowed,
                  struct rl_node_placement *out, char *err, size_t errlen);
void rl_node_placement_free(struct rl_node_placement *p);

/* "0-3,8-11": the kernel's list format; a short buf keeps whole items only. */
void rl_cpulist_format(const int *cpus, int n, char *buf, size_t len);

#endif
