/* The Slurm job a run belongs to, as its controller sees it: when it must
 * end, whether it can be requeued, and the requeue itself (libslurm).
 * defines: struct rl_slurm_job, rl_slurm_job_from_env, rl_slurm_job_query,
 * rl_slurm_job_requeue, rl_slurm_job_exclude_nodes, rl_slurm_job_end_step,
 * rl_slurm_job_done */
#ifndef RL_JOB_SLURM_JOB_H
#define RL_JOB_SLURM_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct rl_slurm_job {
	uint32_t id;       /* SLURM_JOB_ID; 0: not a Slurm job */
	uint32_t step_id;  /* SLURM_STEP_ID; UINT32_MAX: not in a step */
	bool known;        /* the controller answered the last query */
	bool batch;        /* submitted with sbatch: only those can be requeued */
	bool requeue;      /* --requeue, or JobRequeue=1 and not --no-requeue */
	time_t end_time;   /* when Slurm ends the job: its start plus the time
	                      limit, or the end of a preemption's grace time */
	int restart_count; /* SLURM_RESTART_COUNT: times it was requeued */
	char why[256];     /* why !known, for a warning */
};

/* Only what the environment says: SLURM_JOB_ID and SLURM_RESTART_COUNT
 * (0 when unset); the rest unknown. Asks no one. */
void rl_slurm_job_from_env(struct rl_slurm_job *j);

/* rl_slurm_job_from_env, then asks the controller
 * (when the job has an id) for the rest. Never fails: what it cannot learn
 * stays unknown, with the reason in why. Call again to see a changed end
 * time (a preemption moves it to the end of the grace time). */
void rl_slurm_job_query(struct rl_slurm_job *j);

/* Asks Slurm to requeue the job. The job's steps are then ended, so the
 * caller's work must already be durable. Fails with the reason in err:
 * not a batch job, not requeueable, or the controller's own error. */
int rl_slurm_job_requeue(const struct rl_slurm_job *j, char *err, size_t errlen);

/* Adds nodes (n names; empty ones skipped) to the job's excluded nodes,
 * which Slurm lets the job's owner change while the job is pending (after
 * its requeue). list gets the new list. Fails with the reason in err. */
int rl_slurm_job_exclude_nodes(const struct rl_slurm_job *j, const char *const *nodes, int n,
                               char *list, size_t listlen, char *err, size_t errlen);

/* Ends the job step this process belongs to (SIGKILL to every task of it,
 * this one included): a step whose rank hangs would otherwise hold the
 * allocation until its time limit. Fails with the reason in err. */
int rl_slurm_job_end_step(const struct rl_slurm_job *j, char *err, size_t errlen);

/* Releases what libslurm holds, if it was used. */
void rl_slurm_job_done(void);

#endif
