/* `rlrun train`: GRPO as NeMo-RL defines it, in one process.
 * defines: rl_train */
#ifndef RL_GRPO_TRAIN_H
#define RL_GRPO_TRAIN_H

#include <stddef.h>
#include <stdio.h>

#include "runtime/config/config.h"

/* Runs cfg to grpo.max_num_steps (or until the data's epochs run out),
 * writing logger.log_dir/metrics.jsonl and one progress line per step on
 * progress. Returns 0, or -1 with the reason in err. */
int rl_train(const struct rl_config *cfg, FILE *progress, char *err, size_t errlen);

#endif
