/* Stopping a run before its last step, so that it loses nothing: when the
 * job says so (job/watch.h: a signal, or the job's end time near), a
 * checkpoint is made durable (or, when the time left is too short, the
 * newest one is kept), and the job asks Slurm to requeue it. The next
 * start resumes from that checkpoint.
 * defines: rl_trainer_stop */
#ifndef RL_TRAIN_STOP_H
#define RL_TRAIN_STOP_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/job/watch.h"
#include "runtime/train/metrics.h"
#include "runtime/train/trainer.h"

/* Stops the run after step done, for reason (rl_job_stop_due's): the
 * checkpoint of that step (saved: the newest step whose save has begun;
 * m: done's metrics), then the requeue. 0 when the run stopped as it
 * should (with several ranks, every rank returns the same), -1 on an
 * error (err), RL_TRAIN_AGREED_FAILURE when the requeue failed (the first
 * rank's err says why). Collective. */
int rl_trainer_stop(struct rl_trainer *t, struct rl_job_watch *w, int reason, int64_t done,
                    int64_t saved, const struct rl_step_metrics *m, char *err, size_t errlen);

#endif
