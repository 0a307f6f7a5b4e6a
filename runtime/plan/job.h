/* A step's plan: from the numbers every node of the step sees alike (task
 * counts, the config's parallel sizes, the model's shape) to the sizes and
 * the layout. The plugin, `rlrun plan` and rlrun itself all come through
 * here, so the three cannot disagree.
 * defines: struct rl_job_spec, struct rl_job_plan, rl_job_plan_make,
 * rl_job_generation_rank, rl_job_task_axis */
#ifndef RL_PLAN_JOB_H
#define RL_PLAN_JOB_H

#include <stdbool.h>
#include <stddef.h>

#include "topology/layout.h"
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
	int first_stage_layers, last_stage_layers; /* 0: even stages */
	/* non-colocated generation: the step's last generation_ranks tasks
	 * generate, as generation_tp-way tensor parallel replicas; the layout
	 * covers the tasks before them (0: every task trains and generates) */
	int generation_ranks, generation_tp;
	bool have_model; /* job below is filled: memory estimates, and what auto needs */
	struct rl_plan_job job;
	/* have_model: the config.json read (or the built-in name), for
	 * messages; else why it could not be read */
	char model_src[512];
	char model_error[768];
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

/* Decides the sizes (the config's, or the auto planner's on topo's GPUs)
 * and the layout, and when the model's shape is known checks that the
 * model takes that layout (topology/model_fit.h), the training ranks' and
 * the generation ranks' tensor size. topo may be NULL when
 * !spec->autoplan. Returns 0, or -1 with err. */
int rl_job_plan_make(const struct rl_job_spec *spec, const struct rl_topo *topo,
                     struct rl_job_plan *plan, char *err, size_t errlen);

/* Whether rank generates (non-colocated): the ranks past layout.world. */
bool rl_job_generation_rank(const struct rl_job_plan *plan, int rank);
/* rank's place on axis a as RL_<AXIS>_RANK/SIZE give it: in the training
 * layout, or for a generation rank its TP and DP among the generation
 * ranks (every other axis 0 of 1). Returns rl_job_generation_rank. */
bool rl_job_task_axis(const struct rl_job_plan *plan, int rank, enum rl_axis a, int *axis_rank,
                      int *axis_size);

#endif
