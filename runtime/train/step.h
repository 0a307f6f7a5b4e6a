/* One GRPO step, in NeMo-RL's order.
 * defines: rl_trainer_step, rl_step_rollout_stats, rl_step_take_report,
 * rl_step_train_and_refit */
#ifndef RL_TRAIN_STEP_H
#define RL_TRAIN_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/train/metrics.h"
#include "runtime/train/trainer.h"

/* Step `step`: its rollout, rewards, advantages, logprobs and updates, and
 * the refit; fills *m. Returns 0, 1 when the data ran out (nothing done),
 * -1 with err, or RL_TRAIN_AGREED_FAILURE (score.h). Collective. */
int rl_trainer_step(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                    size_t errlen);

/* What a step reports of its rollout: rewards, lengths, tokens, and how
 * far generation's logprobs are from the policy's (prev_lp, filled). Any
 * algorithm that generates. */
void rl_step_rollout_stats(const struct rl_rollout *r, struct rl_step_metrics *m);
/* What the rollout source says of the rollout, in the step's metrics. */
void rl_step_take_report(const struct rl_rollout_report *rep, struct rl_step_metrics *m);
/* The end of a step that generated r (its logprobs in place): the updates
 * on it, the refit, and the step's time since t0 and its rate in *m. Any
 * algorithm that generates. Returns 0 or -1 with err. Collective. */
int rl_step_train_and_refit(struct rl_trainer *t, struct rl_rollout *r, int64_t step, double t0,
                            struct rl_step_metrics *m, char *err, size_t errlen);

#endif
