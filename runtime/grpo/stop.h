/* Stopping a run before its last step, so that it loses nothing: on a
 * signal (rl_stop_signal) or ahead of the Slurm job's end time, every rank
 * agrees at a step boundary, a checkpoint is made durable (or, when the
 * time left is too short, the newest one is kept), and the job asks Slurm
 * to requeue it. The next start resumes from that checkpoint.
 * defines: struct rl_stop, RL_STOP_DEADLINE, rl_stop_open, rl_stop_due,
 * rl_stop_run */
#ifndef RL_GRPO_STOP_H
#define RL_GRPO_STOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/grpo/metrics.h"
#include "runtime/grpo/slurm_job.h"

struct rl_trainer;

/* rl_stop_due's reason when the job's end time is near; otherwise the
 * number of the signal caught */
#define RL_STOP_DEADLINE 1000

struct rl_stop {
	struct rl_slurm_job job; /* the first rank's view; the others leave it unknown */
	double job_queried;      /* rl_now() of the last query */
	double longest_step;     /* seconds: the longest step of this process, set by the caller */
};

/* With checkpointing on: the first rank learns the job's end time and
 * says what a signal will do. Not collective. */
void rl_stop_open(struct rl_stop *s, struct rl_trainer *t);

/* At a step boundary, with steps up to done finished: whether to stop, as
 * every rank agrees (a signal any rank caught, or the first rank's view of
 * the time left). 0, a signal number or RL_STOP_DEADLINE. Collective. */
int rl_stop_due(struct rl_stop *s, struct rl_trainer *t, int64_t done);

/* Stops the run after step done: the checkpoint of that step (saved: the
 * newest step whose save has begun; m: done's metrics), then the requeue.
 * 0 when the run stopped as it should (with several ranks, every rank
 * returns the same), -1 on an error (err), RL_TRAIN_AGREED_FAILURE when the
 * requeue failed (the first rank's err says why). Collective. */
int rl_stop_run(struct rl_stop *s, struct rl_trainer *t, int reason, int64_t done, int64_t saved,
                const struct rl_step_metrics *m, char *err, size_t errlen);

#endif
