/* Training the policy on a rollout: one optimizer update per global batch.
 * defines: rl_policy_train */
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

#endif
