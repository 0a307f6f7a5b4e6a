/* One task's environment: what the plugin sets with spank_setenv and what
 * `rlrun plan --env RANK` prints, from the same function.
 * defines: struct rl_env, rl_job_task_env, rl_axis_env_name, rl_env_get, rl_env_free */
#ifndef RL_PLAN_TASK_ENV_H
#define RL_PLAN_TASK_ENV_H

#include <stddef.h>

#include "runtime/plan/job.h"
#include "runtime/plan/step_gpus.h"
#include "topology/placement.h"
#include "topology/topology.h"

/* "NAME=VALUE" strings, in the order they are set. */
struct rl_env {
	char **vars;
	size_t n;
};

/* The environment of local task local_rank of a node whose first global
 * rank is first_rank: RL_CONFIG (when config_path is not NULL), RL_RANK,
 * RL_WORLD_SIZE, RL_LOCAL_RANK, RL_NODE_RANK, RL_ROLE (training or generation),
 * RL_{TP,PP,CP,EP,DP}_{RANK,SIZE} (a generation rank's TP and DP among the
 * generation ranks), RL_LAYOUT, RL_PLAN, RL_CPUS, and for GPU tasks CUDA_VISIBLE_DEVICES with
 * CUDA_DEVICE_ORDER, NCCL_IB_HCA when an InfiniBand NIC is near. Returns 0,
 * or -1 when out of memory. */
int rl_job_task_env(const struct rl_job_plan *plan, const struct rl_topo *topo,
                    const struct rl_node_placement *node, const struct rl_step_gpus *gpus,
                    int node_rank, int first_rank, int local_rank, const char *config_path,
                    struct rl_env *env);
/* "RL_TP_RANK" for (RL_AXIS_TP, "RANK"): the names the plugin exports. */
void rl_axis_env_name(enum rl_axis a, const char *what, char *buf, size_t len);

const char *rl_env_get(const struct rl_env *env, const char *name);
void rl_env_free(struct rl_env *env);

#endif
