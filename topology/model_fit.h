/* Whether a model can be cut as a layout says: the one rule behind
 * `rlrun plan`, the plugin, rlrun's own setup, the auto planner and the
 * model's cut itself (runtime/model/split.c), so that a layout the plan
 * accepts is one the run can take. Pure arithmetic on the model's sizes.
 * defines: struct rl_fit_layout, rl_model_fit_check */
#ifndef RL_MODEL_FIT_H
#define RL_MODEL_FIT_H

#include <stdbool.h>
#include <stddef.h>

#include "topology/planner.h"

/* A layout's sizes as the config gives them. */
struct rl_fit_layout {
	int tp, pp, cp, ep, etp;
	bool sequence_parallel;
	/* num_layers_in_first/last_pipeline_stage; 0: unset (even stages) */
	int first_stage_layers, last_stage_layers;
	/* the key the tensor size came from, for messages; NULL:
	 * policy.parallel.tensor (generation ranks have their own) */
	const char *tp_key;
};

/* Returns 0 when m can be cut as l says, else -1 with err naming the
 * config key, its value and the model's number, model (its config.json,
 * or a built-in name) in brackets. What the cut takes:
 * - tensor: whole attention heads and whole key/value heads on each rank
 *   (key/value heads are split, never replicated: n_kv_heads % tp), the
 *   dense MLP's intermediate size split evenly when the model has a dense
 *   layer (a mixture of experts' layers split their tokens, not their
 *   experts), and at least one vocabulary row per rank (the vocabulary may
 *   split unevenly);
 * - pipeline: Megatron's stages (the first and the last may have their own
 *   count, the stages between the same count, at least one layer each);
 * - expert: experts split evenly, and only a mixture of experts has any;
 *   expert tensor: the experts' intermediate size split evenly;
 * - context: not yet together with pipeline parallelism, with sequence
 *   parallelism under tp > 1, or with a mixture of experts. */
int rl_model_fit_check(const struct rl_plan_model *m, const struct rl_fit_layout *l,
                       const char *model, char *err, size_t errlen);

#endif
