/* DAPO's dynamic sampling, the pure part: which prompt groups of a round
 * are kept (those whose rewards are not all equal: a group of equal
 * rewards has advantage 0 everywhere and no gradient), and the batch they
 * fill across a step's rounds, in the order they were generated, as
 * NeMo-RL's dynamic_sampling fills its batch_cache. The rounds themselves
 * (prompts, generation, rewards) are the trainer's.
 * defines: struct rl_ds_batch, rl_ds_group_kept, rl_ds_begin, rl_ds_take, rl_ds_full,
 * rl_ds_free, rl_round_seed */
#ifndef RL_GRPO_DYNAMIC_SAMPLING_H
#define RL_GRPO_DYNAMIC_SAMPLING_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/grpo/rollout.h"

/* The step's batch being filled, and what the rounds so far dropped. */
struct rl_ds_batch {
	struct rl_rollout r; /* r.n_groups groups; the first `filled` hold samples */
	int filled;
	int rounds;             /* rounds taken (NeMo-RL's dynamic_sampling_num_gen_batches) */
	int64_t dropped_groups; /* groups whose rewards were all equal */
	/* samples of kept groups that came after the batch was full (NeMo-RL's
	 * dynamic_sampling_num_discarded_valid_samples) */
	int64_t discarded_valid_samples;
	/* every generated sample's reward (shaped), whatever became of it */
	double reward_sum, reward_sq;
	int64_t n_generated;
};

/* Whether a group of n rewards is kept: not all equal, which is NeMo-RL's
 * std != 0 (its std is 0 exactly when they are equal). */
bool rl_ds_group_kept(const double *rewards, int n);

/* An empty batch of n_groups groups of group_size: 0, or -1 out of memory. */
int rl_ds_begin(struct rl_ds_batch *b, int n_groups, int group_size);

/* One round r (its group_size the batch's) taken in: each group judged by
 * judge[g * group_size + i] (the rewards before shaping), a kept one moved
 * into the batch while there is room (its samples, prompt, problem and
 * answer leave r, which is still to be freed), counted as discarded after.
 * Returns how many of r's groups were kept. */
int rl_ds_take(struct rl_ds_batch *b, struct rl_rollout *r, const double *judge);

static inline bool rl_ds_full(const struct rl_ds_batch *b)
{
	return b->filled == b->r.n_groups;
}

void rl_ds_free(struct rl_ds_batch *b);

/* The sampling seed of round `round` of a step: round 0's is the step's
 * (rl_step_seed), so that a step that needs one round samples as plain
 * GRPO does; the others, the step's seed mixed with the round, depend on
 * nothing else either, so a resumed run redraws them. */
uint64_t rl_round_seed(uint64_t seed, int64_t step, int round);

#endif
