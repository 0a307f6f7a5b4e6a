/* What ties a run to its Slurm job: when to stop before the last step, on
 * a signal (stop_signal.h) or ahead of the job's end time, as every rank
 * agrees at a step boundary; whether a checkpoint still fits in the time
 * left; and the requeue after it, so that the next start resumes. The
 * checkpoint itself is the trainer's. A step and a save must fit in the
 * time left: Slurm's GraceTime (preemption) or KillWait (time limit and
 * scancel) for a signal; for the end time, the run stops by itself early
 * enough.
 * defines: struct rl_job_watch, RL_STOP_DEADLINE, rl_job_watch_open, rl_job_stop_due,
 * rl_job_save_fits, rl_job_requeue */
#ifndef RL_JOB_WATCH_H
#define RL_JOB_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/comm/comm.h"
#include "runtime/job/slurm_job.h"

/* rl_job_stop_due's reason when the job's end time is near; otherwise the
 * number of the signal caught */
#define RL_STOP_DEADLINE 1000

struct rl_job_watch {
	bool main;               /* the first rank: it asks slurmctld, and speaks */
	FILE *out;               /* where it speaks (the progress lines); NULL: nowhere */
	struct rl_slurm_job job; /* the first rank's view; the others leave it unknown */
	double job_queried;      /* rl_now() of the last query */
	double longest_step;     /* seconds: the longest step of this process, set by the caller */
};

/* The first rank (main) learns the job's end time and says on out what a
 * signal (SIGTERM, or signal_name: checkpointing.signal) will do. Not
 * collective. */
void rl_job_watch_open(struct rl_job_watch *w, bool main, FILE *out, const char *signal_name);

/* At a step boundary: whether to stop, as every rank of world (NULL: one
 * process) agrees: a signal any rank caught, or the first rank's view of
 * the time left, which must hold another step and a save (the last one
 * took last_save_s; 0: none yet). ran_a_step: this process ran a step
 * already (a time limit too short for one step must not requeue the job
 * forever). 0, a signal number or RL_STOP_DEADLINE. Collective. */
int rl_job_stop_due(struct rl_job_watch *w, struct rl_comm *world, bool ran_a_step,
                    double last_save_s);

/* The first rank, stopping for reason after step done of total: says
 * why, and whether a save of step done (saved: the newest step whose save
 * has begun) ends before Slurm kills the job, given that the last one took
 * last_save_s. */
bool rl_job_save_fits(struct rl_job_watch *w, int reason, int64_t done, int64_t total,
                      int64_t saved, double last_save_s);

/* The first rank, once the stop's checkpoint is durable (newest: its
 * step, 0 for none): says which steps will be redone, and asks Slurm to
 * requeue the job (nothing to requeue outside Slurm). Returns 0, or -1
 * with err when the requeue failed (saying how to resume). */
int rl_job_requeue(struct rl_job_watch *w, int64_t newest, int64_t done, char *err, size_t errlen);

#endif
