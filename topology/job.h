/* A step's plan: from the numbers every node of the step sees alike (task
 * counts, the config's parallel sizes, the model's shape) to the layout, and
 * from the layout and one node's topology to each local task's environment.
 * The plugin, `rlrun plan` and rlrun itself all come through here, so the
 * three cannot disagree.
 * defines: struct rl_job_spec, struct rl_job_plan, struct rl_step_gpus,
 * struct rl_env, rl_job_plan_make, rl_job_generation_rank, rl_job_task_axis, rl_plan_hw_from_topo,
 * rl_step_gpus_parse, rl_job_task_env, rl_axis_env_name, rl_layout_print_groups, rl_env_* */
#ifndef RL_JOB_H
#define RL_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "topology/layout.h"
#include "topology/placement.h"
#include "topology/planner.h"
#include "topology/topology.h"

struct rl_job_spec {
	int world; /* tasks in the step */
	int n_nodes;
	int tasks_per_node;      /* the most tasks any node holds */
	bool use_gpus;           /* policy.backend is cuda: one GPU per task */
	bool autoplan;           /* policy.parallel: auto */
	int tp, pp, cp, ep, etp; /* the config's sizes when not autoplan */
	bool sequence_parallel;
	/* non-colocated generation: the step's last generation_ranks tasks
	 * generate, as generation_tp-way tensor parallel replicas; the layout
	 * covers the tasks before them (0: every task trains and generates) */
	int generation_ranks, generation_tp;
	bool have_model; /* job below is filled: memory estimates, and what auto needs */
	struct rl_plan_job job;
};

struct rl_job_plan {
	struct rl_job_spec spec;
	struct rl_layout layout; /* the training ranks' */
	bool have_hw;            /* hw describes the node's GPUs */
	struct rl_plan_hw hw;
	bool have_estimate;
	struct rl_plan_estimate estimate;
	char explain[2048]; /* the auto planner's reasons; "" for fixed sizes */
	char summary[256];  /* RL_PLAN: one line, the same on every node */
};

/* What the planner assumes about a node's GPUs and links, from its
 * topology. Returns 0, or -1 with err when the GPU is not in the table (the
 * planner cannot guess its memory). */
int rl_plan_hw_from_topo(const struct rl_topo *topo, int n_nodes, int tasks_per_node,
                         struct rl_plan_hw *hw, char *err, size_t errlen);

/* Decides the sizes (the config's, or the auto planner's on topo's GPUs)
 * and the layout. topo may be NULL when !spec->autoplan. Returns 0, or -1
 * with err. */
int rl_job_plan_make(const struct rl_job_spec *spec, const struct rl_topo *topo,
                     struct rl_job_plan *plan, char *err, size_t errlen);

/* Whether rank generates (non-colocated): the ranks past layout.world. */
bool rl_job_generation_rank(const struct rl_job_plan *plan, int rank);
/* rank's place on axis a as RL_<AXIS>_RANK/SIZE give it: in the training
 * layout, or for a generation rank its TP and DP among the generation
 * ranks (every other axis 0 of 1). Returns rl_job_generation_rank. */
bool rl_job_task_axis(const struct rl_job_plan *plan, int rank, enum rl_axis a, int *axis_rank,
                      int *axis_size);

/* The GPUs Slurm gave the step on this node. */
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

/* The groups of every axis, one line each ("tp 4 groups of 2: [0,1] ..."),
 * each line started with prefix. */
void rl_layout_print_groups(const struct rl_layout *l, FILE *out, const char *prefix);

const char *rl_env_get(const struct rl_env *env, const char *name);
void rl_env_free(struct rl_env *env);

#endif
