/* A step's plan as seen from one node: the config's spec, the global
 * layout, this node's placement and the GPUs Slurm gave it. Built the same
 * way by the plugin in slurmstepd and by `rlrun plan` for each node it
 * prints, so that `rlrun plan --env RANK` is exactly what the plugin sets.
 * defines: struct rl_node_inputs, struct rl_node_plan, rl_node_tasks_max,
 * rl_node_block, rl_node_plan_make, rl_node_plan_task_env, rl_node_plan_free */
#ifndef RL_PLAN_NODE_PLAN_H
#define RL_PLAN_NODE_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/config/config.h"
#include "runtime/model/hub.h"
#include "runtime/plan/job.h"
#include "runtime/plan/step_gpus.h"
#include "runtime/plan/task_env.h"
#include "topology/placement.h"
#include "topology/topology.h"

struct rl_node_inputs {
	const struct rl_config *cfg;
	const char *config_path; /* RL_CONFIG as the tasks get it; NULL: none */
	const struct rl_topo *topo;
	int world;
	int n_nodes;
	int node_id;
	int first_rank; /* the node's tasks are first_rank .. first_rank + n_local - 1 */
	int n_local;
	const char *slurm_step_gpus;      /* NULL when unset */
	const char *cuda_visible_devices; /* NULL when unset */
	const struct rl_hub_env *hub;     /* where hub names are: NULL, this process's env */
	/* the step's plan when another node already made it (it is the same on
	 * every node); NULL: make it from cfg */
	const struct rl_job_plan *job;
};

struct rl_node_plan {
	struct rl_job_plan job;
	struct rl_step_gpus gpus;
	struct rl_node_placement node;
	int node_id;
	int first_rank;
	char *config_path;
	const struct rl_topo *topo; /* borrowed */
};

/* Every node of a block-distributed step holds ceil(world / n_nodes) tasks
 * but the last ones: what the planner sizes a node for. */
int rl_node_tasks_max(int world, int n_nodes);
/* Node `node`'s tasks in a block-distributed step (srun -m block, the
 * default): first_rank .. first_rank + n_local - 1. */
void rl_node_block(int world, int n_nodes, int node, int *first_rank, int *n_local);

/* Returns 0, or -1 with err (an invalid layout for this world, more tasks
 * than GPUs, GPUs Slurm named that the node does not have, ...). */
int rl_node_plan_make(const struct rl_node_inputs *in, struct rl_node_plan *out, char *err,
                      size_t errlen);
int rl_node_plan_task_env(const struct rl_node_plan *p, int local_rank, struct rl_env *env);
void rl_node_plan_free(struct rl_node_plan *p);

#endif
