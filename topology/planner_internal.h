/* What the planner's files share and nobody else sees: the memory model
 * (planner_memory.c), the time model (planner_time.c) and the explanation
 * text (planner_explain.c), all called by planner.c's estimate and search.
 * Not installed.
 * defines: struct rl_plan_stage_mem, rl_plan_stage_memory,
 * rl_plan_layer_dense_params, rl_plan_layer_expert_params,
 * rl_plan_vocab_params, rl_plan_matmul_params, rl_plan_step_time,
 * rl_plan_link_bw, rl_plan_link_name,
 * rl_plan_explain_choice,
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

/* Bytes one pipeline stage needs, per GPU; total adds the reserve.
 * expert_params: the part of params that is experts. */
struct rl_plan_stage_mem {
	double params, expert_params, weights, grads, optimizer, activations, kv_cache, total;
};

/* One stage of a valid layout; first / last say whether it holds the
 * embedding / the LM head (both when pp = 1). */
void rl_plan_stage_memory(const struct rl_plan_job *job, int tp, int pp, int cp, int dp, bool first,
                          bool last, struct rl_plan_stage_mem *s);

/* One decoder layer's parameters on one rank, averaged over the layers
 * (dense and MoE ones alike): those every data-parallel replica holds
 * (attention, norms, the dense MLP or the router and shared expert) at
 * tensor parallel tp, and the experts at expert parallel ep x etp. */
double rl_plan_layer_dense_params(const struct rl_plan_model *m, int tp);
double rl_plan_layer_expert_params(const struct rl_plan_model *m, int ep, int etp);

/* The embedding's (or the LM head's) parameters on one of tp ranks. */
double rl_plan_vocab_params(const struct rl_plan_model *m, int tp);

/* The parameters that multiply a token's activations: all but the input
 * embedding, and of the experts only the ones a token goes to. */
double rl_plan_matmul_params(const struct rl_plan_model *m);

/* Fills e's t_* fields and its basis for a valid layout whose largest
 * stage is s (its params and expert_params per GPU). */
void rl_plan_step_time(const struct rl_plan_hw *hw, const struct rl_plan_job *job, int tp, int pp,
                       int cp, int dp, const struct rl_plan_stage_mem *s,
                       struct rl_plan_estimate *e);

/* Bytes/s per GPU, and the link's name, in a group whose ranks span
 * `span` consecutive ranks (NVLink, PCIe or the network). */
double rl_plan_link_bw(const struct rl_plan_hw *hw, double span);
const char *rl_plan_link_name(const struct rl_plan_hw *hw, double span);

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
