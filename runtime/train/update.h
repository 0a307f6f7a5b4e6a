/* Training the policy on a rollout: one optimizer update per global batch.
 * defines: rl_policy_train, rl_policy_update */
#ifndef RL_TRAIN_UPDATE_H
#define RL_TRAIN_UPDATE_H

#include <stddef.h>

#include "runtime/grpo/rollout.h"
#include "runtime/train/metrics.h"
#include "runtime/train/trainer.h"

/* r's samples in global batches of policy.train_global_batch_size,
 * consecutive as NeMo-RL cuts them, one clipped AdamW update each; m gets
 * the means of their loss statistics, the last update's grad_norm and lr.
 * Collective. */
int rl_policy_train(struct rl_trainer *t, struct rl_rollout *r, struct rl_step_metrics *m,
                    char *err, size_t errlen);

/* The update after a gradient pass (rl_policy_gradients): the gradients
 * reduced over the ranks, clipped to policy.max_grad_norm, one AdamW step
 * at the schedule's rate, the frozen routers put back, and the run's first
 * update's gradient dump (which records loss). *grad_norm gets the norm
 * before clipping. Collective. */
int rl_policy_update(struct rl_trainer *t, double loss, double *grad_norm, char *err,
                     size_t errlen);

#endif
