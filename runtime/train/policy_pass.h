/* The passes of the policy over a rollout's samples, whatever the
 * algorithm: logprobs (of the policy before the update, or of the frozen
 * reference), and the gradient of the loss over a global batch.
 * defines: rl_mb_token_budget, rl_policy_logprobs, rl_policy_gradients */
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
