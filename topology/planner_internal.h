/* What the planner's files share and nobody else sees: the memory model
 * (planner_memory.c), the time model (planner_time.c) and the explanation
 * text (planner_explain.c), all called by planner.c's estimate and search.
 * Not installed.
 * defines: struct rl_plan_stage_mem, rl_plan_stage_memory,
 * rl_plan_matmul_params, rl_plan_step_time, rl_plan_explain_choice,
 * rl_plan_explain_nofit, PLAN_GIB, PLAN_RESERVE_FRACTION, PLAN_RESERVE_BYTES,
 * PLAN_TIE_FRACTION */
#ifndef RL_PLANNER_INTERNAL_H
#define RL_PLANNER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "topology/planner.h"

#define PLAN_GIB (1024.0 * 1024.0 * 1024.0)

/* Memory no formula counts: the CUDA context, cuBLAS workspaces and NCCL
 * buffers (about fixed) and the caching allocator's fragmentation (grows
 * with what is allocated). */
#define PLAN_RESERVE_FRACTION 0.10
#define PLAN_RESERVE_BYTES    (2.0 * PLAN_GIB)

/* Estimates this close to the fastest are ties; the model is not better
 * than that, and a smaller layout is then the safer choice. */
#define PLAN_TIE_FRACTION 0.01

/* Bytes one pipeline stage needs, per GPU; total adds the reserve. */
struct rl_plan_stage_mem {
	double params, weights, grads, optimizer, activations, kv_cache, total;
};

/* One stage of a valid layout; first / last say whether it holds the
 * embedding / the LM head (both when pp = 1). */
void rl_plan_stage_memory(const struct rl_plan_job *job, int tp, int pp, int cp, int dp, bool first,
                          bool last, struct rl_plan_stage_mem *s);

/* The parameters that multiply activations (all but the input embedding). */
double rl_plan_matmul_params(const struct rl_plan_model *m);

/* Fills e's t_* fields for a valid layout whose largest stage holds
 * stage_params parameters per GPU. */
void rl_plan_step_time(const struct rl_plan_hw *hw, const struct rl_plan_job *job, int tp, int pp,
                       int cp, int dp, double stage_params, struct rl_plan_estimate *e);

/* The lines rl_plan_auto writes about its choice: memory and time of best,
 * why each runner-up lost, how many layouts were tried. Truncates to len;
 * buf may be NULL when len is 0. */
void rl_plan_explain_choice(char *buf, size_t len, const struct rl_plan_hw *hw,
                            const struct rl_plan_estimate *best,
                            const struct rl_plan_estimate *runners, int n_runners, int n_valid,
                            int n_unfit, int n_invalid, const char *first_invalid);

/* The error when nothing fits: what the leanest layout e needs, and the
 * switches that could close the gap. */
void rl_plan_explain_nofit(char *buf, size_t len, const struct rl_plan_hw *hw,
                           const struct rl_plan_job *job, const struct rl_plan_estimate *e);

#endif
