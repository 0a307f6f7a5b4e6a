/* The passes of the policy over a rollout's samples, whatever the
 * algorithm: logprobs (of the policy before the update, or of the frozen
 * reference), and the gradient of the loss over a global batch.
 * defines: rl_mb_token_budget, struct rl_scorer, rl_model_logprobs_pass,
 * rl_policy_logprobs, rl_policy_gradients */
#ifndef RL_TRAIN_POLICY_PASS_H
#define RL_TRAIN_POLICY_PASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/config/config.h"
#include "runtime/grpo/loss.h"
#include "runtime/grpo/rollout.h"
#include "runtime/train/trainer.h"

/* The most tokens one micro-batch holds: the packing budget, or the
 * micro-batch size times max_total_sequence_length without packing, where
 * a training micro-batch of an algorithm whose samples go in units
 * (rl_trainer_algo.unit: DPO's pairs) holds train_micro_batch_size units. */
int64_t rl_mb_token_budget(const struct rl_cfg_policy *p, bool training, int unit);

/* A model the logprob pass runs: the policy, with its own weights or the
 * reference's swapped in, or another model cut as the policy is (the
 * teacher of on-policy distillation: the same layout, its own
 * activation buffers, one per micro-batch a pipeline stage holds). */
struct rl_scorer {
	struct rl_model *model;
	void *weights; /* swapped in for the pass; NULL: the model's own */
	struct rl_acts **acts;
	int n_acts;
	bool invariant; /* generation's batch-invariant kernels */
};

/* Every sample of r the token logprobs of sc's model, written at byte
 * offset field of struct rl_sample (prev_lp, ref_lp), on every rank:
 * each data-parallel rank runs its share, cut into micro-batches as the
 * policy's passes are. Collective. */
int rl_model_logprobs_pass(struct rl_trainer *t, struct rl_rollout *r, const struct rl_scorer *sc,
                           size_t field, char *err, size_t errlen);
/* Every sample of r its logprobs (prev_lp, or with reference ref_lp), on
 * every rank: each data-parallel rank runs its share. Collective. */
int rl_policy_logprobs(struct rl_trainer *t, struct rl_rollout *r, bool reference, char *err,
                       size_t errlen);
/* The gradients of the loss over the global batch which[0..n) (zeroed
 * first), micro-batch by micro-batch, this data-parallel rank's share of
 * it; no reduction and no update. With the algorithm's unit > 1, n is a
 * multiple of it and each run of unit samples of which[] stays in one
 * micro-batch of one rank. stats gets this rank's share of the
 * loss statistics. */
int rl_policy_gradients(struct rl_trainer *t, struct rl_rollout *r, const int *which, int n,
                        struct rl_loss_stats *stats, char *err, size_t errlen);

#endif
