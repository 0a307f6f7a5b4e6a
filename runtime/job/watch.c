/* Slurm's signal comes while a step runs; the step finishes (its
 * collectives cannot be left half done), then every rank agrees at the
 * boundary. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/base/clock.h"
#include "runtime/base/plural.h"
#include "runtime/job/stop_signal.h"
#include "runtime/job/watch.h"

/* Between looks at the job's end time: a changed time limit is seen
 * within this, and slurmctld is not asked at every step. */
#define REQUERY_SECONDS 60.0
/* What a stop costs besides the save: the agreement, the requeue, the
 * exit of every rank before Slurm kills them. */
#define SLACK_SECONDS 10.0
/* A save takes the last one's time and a margin: it also waits for the
 * one in flight and for the slowest rank's disk. */
#define SAVE_MARGIN 1.25

static void signal_name(int sig, char *buf, size_t len)
{
	const char *abbrev = sigabbrev_np(sig);

	if (abbrev)
		snprintf(buf, len, "SIG%s", abbrev);
	else
		snprintf(buf, len, "signal %d", sig);
}

/* where a restart begins: "step_N", or "the start" before any checkpoint */
static void resume_point(int64_t step, char *buf, size_t len)
{
	if (step > 0)
		snprintf(buf, len, "step_%" PRId64, step);
	else
		snprintf(buf, len, "the start (no checkpoint yet)");
}

static void query(struct rl_job_watch *w)
{
	rl_slurm_job_query(&w->job);
	w->job_queried = rl_now();
}

/* seconds until the job's end; +inf when it has none we know */
static double time_left(const struct rl_job_watch *w)
{
	return w->job.known ? difftime(w->job.end_time, time(NULL)) : INFINITY;
}

void rl_job_watch_open(struct rl_job_watch *w, bool main, FILE *out, const char *signal_name)
{
	char end[64] = "";

	memset(w, 0, sizeof *w);
	w->main = main;
	w->out = main ? out : NULL;
	if (!main)
		return;
	query(w);
	if (!out)
		return;
	if (!w->job.id) {
		fprintf(out,
		        "rlrun train: on SIGTERM or %s, a checkpoint is saved and the run stops "
		        "(not a Slurm job: nothing to requeue)\n",
		        signal_name);
		return;
	}
	if (!w->job.known) {
		fprintf(out,
		        "rlrun train: warning: %s: the job's end time is unknown and requeue may "
		        "fail\n",
		        w->job.why);
		return;
	}
	struct tm tm;
	if (time_left(w) < 300 * 86400.0 && localtime_r(&w->job.end_time, &tm))
		strftime(end, sizeof end, ", and ahead of the job's end at %F %T", &tm);
	fprintf(out,
	        "rlrun train: Slurm job %" PRIu32 ", restart %d: on SIGTERM or %s%s, a checkpoint "
	        "is saved and the job requeued\n",
	        w->job.id, w->job.restart_count, signal_name, end);
	if (!w->job.batch || !w->job.requeue)
		fprintf(out,
		        "rlrun train: warning: job %" PRIu32 " cannot be requeued (%s): when it "
		        "is stopped it saves a checkpoint and exits; submit it again to resume\n",
		        w->job.id,
		        !w->job.batch ? "only jobs submitted with sbatch can"
		                      : "submitted with --no-requeue, or JobRequeue=0");
}

int rl_job_stop_due(struct rl_job_watch *w, struct rl_comm *world, bool ran_a_step,
                    double last_save_s)
{
	double save_s = last_save_s * SAVE_MARGIN;
	int reason = rl_stop_signal_caught();

	if (w->main && !reason && w->job.id) {
		if (rl_now() - w->job_queried >= REQUERY_SECONDS)
			query(w);
		if (ran_a_step && time_left(w) < w->longest_step + save_s + SLACK_SECONDS)
			reason = RL_STOP_DEADLINE;
	}
	if (world)
		rl_comm_all_reduce(world, &reason, 1, RL_COMM_I32, RL_COMM_MAX, "stop agreement");
	return reason;
}

bool rl_job_save_fits(struct rl_job_watch *w, int reason, int64_t done, int64_t total,
                      int64_t saved, double last_save_s)
{
	double save_s = last_save_s * SAVE_MARGIN;
	FILE *out = w->out;

	if (reason != RL_STOP_DEADLINE && w->job.id)
		query(w); /* a preemption has moved the end to that of the grace time */
	double left = time_left(w);
	if (out) {
		if (reason == RL_STOP_DEADLINE)
			fprintf(out,
			        "rlrun train: job %" PRIu32 " ends in %.0f s, too soon for another "
			        "step (%.1f s) and a checkpoint: stopping after step %" PRId64
			        " of %" PRId64 "\n",
			        w->job.id, left, w->longest_step, done, total);
		else {
			char name[32], ends[64] = "";

			signal_name(reason, name, sizeof name);
			if (isfinite(left))
				snprintf(ends, sizeof ends, " (job %" PRIu32 " ends in %.0f s)",
				         w->job.id, left);
			fprintf(out,
			        "rlrun train: %s: stopping after step %" PRId64 " of %" PRId64
			        "%s\n",
			        name, done, total, ends);
		}
	}
	if (saved == done)
		return false; /* begun at the step boundary already */
	if (save_s > 0 && save_s + 2.0 > left) {
		if (out)
			fprintf(out,
			        "rlrun train: not saving step %" PRId64
			        ": the last checkpoint took "
			        "%.1f s and %.0f s are left\n",
			        done, last_save_s, left);
		return false;
	}
	return true;
}

int rl_job_requeue(struct rl_job_watch *w, int64_t newest, int64_t done, char *err, size_t errlen)
{
	FILE *out = w->out;
	char from[64];
	int rc = 0;

	resume_point(newest, from, sizeof from);
	if (out && newest < done)
		fprintf(out, "rlrun train: %" PRId64 " step%s will be redone, from %s\n",
		        done - newest, rl_plural(done - newest), from);
	if (!w->job.id) {
		if (out)
			fprintf(out,
			        "rlrun train: not a Slurm job, nothing to requeue: the same "
			        "command resumes from %s\n",
			        from);
	} else if (rl_slurm_job_requeue(&w->job, err, errlen) == 0) {
		if (out)
			fprintf(out,
			        "rlrun train: requeued job %" PRIu32 ": it resumes from %s when "
			        "Slurm starts it again\n",
			        w->job.id, from);
	} else {
		size_t n = strlen(err);
		snprintf(err + n, errlen - n, "; submit the job again: it resumes from %s", from);
		rc = -1;
	}
	if (out)
		fflush(out);
	return rc;
}
