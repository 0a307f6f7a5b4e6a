/* What a run does when it fails after its training began: a rank lost or
 * a collective stuck (the watchdog, runtime/comm), or a rank's own error.
 * The rank that found it records the failure in the checkpoint directory
 * and, while the job has failures left, requeues the Slurm job, which
 * resumes from the newest checkpoint as after a preemption
 * (checkpointing.requeue_on_failure, max_failure_restarts,
 * exclude_failed_nodes); otherwise it ends the job step, so that no hung
 * rank holds the allocation. Outside Slurm the launcher ends the run.
 *   CHECKPOINT_DIR/failures/job_J.start_R.json   one per start of job J
 *                                                that failed (checkpoint(5))
 * defines: struct rl_job_failure_policy, struct rl_job_failures, rl_job_failures_early,
 * rl_job_failures_open, rl_job_failure_handle, rl_job_failures_count */
#ifndef RL_JOB_FAILURE_H
#define RL_JOB_FAILURE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/comm/comm.h"

struct rl_job_failure_policy {
	const char *requeue; /* checkpointing.requeue_on_failure: auto, true or false */
	int64_t max_restarts;
	bool exclude_nodes;
	const char *checkpoint_dir; /* NULL: no checkpoints, so no requeue */
};

struct rl_job_failures {
	uint32_t job_id;  /* 0: not a Slurm job, nothing to do */
	uint32_t step_id; /* UINT32_MAX: no step of ours to end */
	int restart;      /* SLURM_RESTART_COUNT */
	bool requeue;     /* a failure requeues the job (while failures are left) */
	int64_t max_restarts;
	bool exclude_nodes;
	char dir[PATH_MAX]; /* CHECKPOINT_DIR/failures, "" without checkpoints */
};

/* Before the ranks meet (their world made by runtime/comm): what a
 * failure does until rl_job_failures_open knows the run's policy: under
 * Slurm it ends the job step, so that a rank hung in the setup (a task that
 * never came to MPI_Init, a stopped one) does not hold the allocation. */
void rl_job_failures_early(struct rl_job_failures *f);

/* Every rank, as training begins. requeueable: the job can be requeued,
 * as the first rank learned from slurmctld (the same on every rank). out
 * (the first rank's progress, NULL elsewhere): what a failure will do,
 * and which failure this start follows. */
void rl_job_failures_open(struct rl_job_failures *f, const struct rl_job_failure_policy *p,
                          bool requeueable, FILE *out);

/* rl_comm_failure_fn: on the rank that found the failure, records it and
 * requeues the job or ends its step (not a rank's own failure's, which
 * MPI_Abort ends), saying which on stderr; on a rank told by another,
 * nothing. Any thread; a few seconds at most (messages to
 * slurmctld). */
void rl_job_failure_handle(void *arg, const struct rl_comm_failure *cf);

/* This job's failures recorded so far (0 without checkpoints). */
int rl_job_failures_count(const struct rl_job_failures *f);

#endif
