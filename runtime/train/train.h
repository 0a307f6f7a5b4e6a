/* `rlrun train`: GRPO as NeMo-RL defines it, on one rank or many; the
 * trainer room's one door.
 * defines: rl_train_check, rl_train_watch_failures, rl_train */
#ifndef RL_TRAIN_TRAIN_H
#define RL_TRAIN_TRAIN_H

#include <stddef.h>
#include <stdio.h>

#include "runtime/comm/dist.h"
#include "runtime/config/config.h"

/* Refuses, by name, every option this release cannot honour: before any
 * work starts, and before the ranks meet (every rank sees the same). */
int rl_train_check(const struct rl_config *cfg, char *err, size_t errlen);

/* Before the ranks meet (rl_dist_init): a failure in their setup ends the
 * Slurm job step (runtime/job/failure.h), until rl_train knows the run's
 * policy (the requeue). */
void rl_train_watch_failures(void);

/* rl_train's return when setup failed on some rank and every rank knows:
 * they can exit without aborting. err holds the reason on the first rank
 * that failed and is empty on the others. */
#define RL_TRAIN_AGREED_FAILURE (-2)

/* rl_train's return when the run stopped early on a signal or ahead of the
 * job's end time, as every rank agreed, with its checkpoint durable and
 * the Slurm job requeued (when it is one). */
#define RL_TRAIN_STOPPED 1

/* Runs cfg to grpo.max_num_steps (or until the data's epochs run out),
 * writing logger.log_dir/metrics.jsonl and one progress line per step on
 * progress. dist: the run's ranks (NULL: this process alone); only the
 * first rank writes. Returns 0, RL_TRAIN_STOPPED, RL_TRAIN_AGREED_FAILURE, or -1 with the
 * reason in err (with several ranks, the others may be waiting for this
 * one). */
int rl_train(const struct rl_config *cfg, struct rl_dist *dist, FILE *progress, char *err,
             size_t errlen);

#endif
