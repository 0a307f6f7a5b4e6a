/* The rewards of a step's samples, each scored once in the run: a
 * data-parallel rank's share is on every rank of its model replica
 * (tensor, context and pipeline ranks alike), which split it; then every
 * reward goes to every rank. Scored on each of them, a sample could get
 * two rewards (a program that times out, or is killed, on one rank only)
 * and the replica's ranks would train on different advantages.
 * defines: rl_trainer_score */
#ifndef RL_TRAIN_SCORE_H
#define RL_TRAIN_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/grpo/rollout.h"
#include "runtime/train/trainer.h"

/* Every sample of r its reward, on every training rank (r holds every
 * sample, and this rank's scoring share its response text).
 * *reward_failures is added the whole rollout's failures. Returns 0, -1
 * with err, or RL_TRAIN_AGREED_FAILURE (train.h; err on the first rank)
 * when a reward program failed on every sample: every rank returns it.
 * Collective. */
int rl_trainer_score(struct rl_trainer *t, struct rl_rollout *r, int64_t *reward_failures,
                     char *err, size_t errlen);

#endif
