/* Validation: one response per validation problem, sampled as in
 * training, and their mean reward.
 * defines: rl_trainer_validate */
#ifndef RL_TRAIN_VALIDATE_H
#define RL_TRAIN_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/train/metrics.h"
#include "runtime/train/trainer.h"

/* After step (0: before the first), in batches of grpo.val_batch_size
 * problems: m gets val_reward and the validation time (nothing when the
 * data has no validation problems); the first rank prints
 * logger.num_val_samples_to_print of them. Returns 0, -1 with err, or
 * RL_TRAIN_AGREED_FAILURE (score.h). Collective. */
int rl_trainer_validate(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                        size_t errlen);

#endif
