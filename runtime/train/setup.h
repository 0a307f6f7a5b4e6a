/* Building a run from its config: the backend, the model cut for this
 * rank and its tokenizer, the frozen reference, the optimizer and its
 * schedule, the loss, the data, the reward, the rollout source, and what
 * a generation rank needs to serve.
 * defines: rl_trainer_setup, rl_trainer_open_metrics,
 * rl_trainer_tensorboard_dir, rl_trainer_free */
#ifndef RL_TRAIN_SETUP_H
#define RL_TRAIN_SETUP_H

#include <stddef.h>
#include <stdio.h>

#include "runtime/comm/dist.h"
#include "runtime/config/config.h"
#include "runtime/train/trainer.h"

/* dist: the run's ranks, or NULL for one process; only the first rank
 * writes the metrics and the progress lines. A generation rank
 * (dist->generation) gets only the model, the tokenizer and the sampling
 * settings. Holds no collective. */
int rl_trainer_setup(struct rl_trainer *t, const struct rl_config *cfg, struct rl_dist *dist,
                     FILE *progress, char *err, size_t errlen);
/* After a resume (or none): the first rank's metrics.jsonl, continued
 * after the resumed step, or started afresh with an earlier run's kept. */
int rl_trainer_open_metrics(struct rl_trainer *t, char *err, size_t errlen);
/* logger.tensorboard.log_dir, or NeMo-RL's <logger.log_dir>/tensorboard
 * (the caller frees it; NULL when out of memory). */
char *rl_trainer_tensorboard_dir(const struct rl_config *c);
void rl_trainer_free(struct rl_trainer *t);

#endif
