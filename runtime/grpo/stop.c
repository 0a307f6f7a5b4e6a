/* The early stop. Slurm's signal comes while a step runs; the step
 * finishes (its collectives cannot be left half done), then every rank
 * agrees at the boundary. A step and a save must fit in the time left:
 * Slurm's GraceTime (preemption) or KillWait (time limit and scancel) for
 * a signal; for the end time, the run stops by itself early enough. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "runtime/base/clock.h"
#include "runtime/grpo/stop.h"
#include "runtime/grpo/stop_signal.h"
#include "runtime/grpo/train.h"
#include "runtime/grpo/trainer.h"

/* Between looks at the job's end time: a changed time limit is seen
 * within this, and slurmctld is not asked at every step. */
#define REQUERY_SECONDS 60.0
/* What a stop costs besides the save: the agreement, the requeue, the
 * exit of every rank before Slurm kills them. */
#define SLACK_SECONDS 10.0

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

static void query(struct rl_stop *s)
{
	rl_slurm_job_query(&s->job);
	s->job_queried = rl_now();
}

/* seconds until the job's end; +inf when it has none we know */
static double time_left(const struct rl_stop *s)
{
	return s->job.known ? difftime(s->job.end_time, time(NULL)) : INFINITY;
}

/* the seconds of the last full save, with a margin: a save also waits
 * for the one in flight and for the slowest rank's disk */
static double save_estimate(const struct rl_trainer *t)
{
	return t->ckpt->last_seconds * 1.25;
}

void rl_stop_open(struct rl_stop *s, struct rl_trainer *t)
{
	const struct rl_cfg_checkpointing *c = &t->cfg->checkpointing;
	char end[64] = "";

	memset(s, 0, sizeof *s);
	if (!rl_trainer_is_main(t))
		return;
	query(s);
	if (!t->progress)
		return;
	if (!s->job.id) {
		fprintf(t->progress,
		        "rlrun train: on SIGTERM or %s, a checkpoint is saved and the run stops "
		        "(not a Slurm job: nothing to requeue)\n",
		        c->signal);
		return;
	}
	if (!s->job.known) {
		fprintf(t->progress,
		        "rlrun train: warning: %s: the job's end time is unknown and requeue may "
		        "fail\n",
		        s->job.why);
		return;
	}
	struct tm tm;
	if (time_left(s) < 300 * 86400.0 && localtime_r(&s->job.end_time, &tm))
		strftime(end, sizeof end, ", and ahead of the job's end at %F %T", &tm);
	fprintf(t->progress,
	        "rlrun train: Slurm job %" PRIu32 ", restart %d: on SIGTERM or %s%s, a checkpoint "
	        "is saved and the job requeued\n",
	        s->job.id, s->job.restart_count, c->signal, end);
	if (!s->job.batch || !s->job.requeue)
		fprintf(t->progress,
		        "rlrun train: warning: job %" PRIu32 " cannot be requeued (%s): when it "
		        "is stopped it saves a checkpoint and exits; submit it again to resume\n",
		        s->job.id,
		        !s->job.batch ? "only jobs submitted with sbatch can"
		                      : "submitted with --no-requeue, or JobRequeue=0");
}

int rl_stop_due(struct rl_stop *s, struct rl_trainer *t, int64_t done)
{
	int reason = rl_stop_signal_caught();

	if (rl_trainer_is_main(t) && !reason && s->job.id) {
		if (rl_now() - s->job_queried >= REQUERY_SECONDS)
			query(s);
		/* only after a step of this process: a time limit too short
		 * for one step must not requeue the job forever */
		if (done > t->resumed_step &&
		    time_left(s) < s->longest_step + save_estimate(t) + SLACK_SECONDS)
			reason = RL_STOP_DEADLINE;
	}
	if (t->dist)
		rl_comm_all_reduce(t->dist->g[RL_G_WORLD], &reason, 1, RL_COMM_I32, RL_COMM_MAX,
		                   "stop agreement");
	return reason;
}

/* The first rank's choice: save step done, or keep the newest checkpoint
 * because a save would not end before Slurm kills the job. */
static bool choose_save(struct rl_stop *s, struct rl_trainer *t, int reason, int64_t done,
                        int64_t saved)
{
	FILE *out = t->progress;
	int64_t total = t->cfg->grpo.max_num_steps;

	if (reason != RL_STOP_DEADLINE && s->job.id)
		query(s); /* a preemption has moved the end to that of the grace time */
	double left = time_left(s);
	if (out) {
		if (reason == RL_STOP_DEADLINE)
			fprintf(out,
			        "rlrun train: job %" PRIu32 " ends in %.0f s, too soon for another "
			        "step (%.1f s) and a checkpoint: stopping after step %" PRId64
			        " of %" PRId64 "\n",
			        s->job.id, left, s->longest_step, done, total);
		else {
			char name[32], ends[64] = "";

			signal_name(reason, name, sizeof name);
			if (isfinite(left))
				snprintf(ends, sizeof ends, " (job %" PRIu32 " ends in %.0f s)",
				         s->job.id, left);
			fprintf(out,
			        "rlrun train: %s: stopping after step %" PRId64 " of %" PRId64
			        "%s\n",
			        name, done, total, ends);
		}
	}
	if (saved == done)
		return false; /* begun at the step boundary already */
	double need = save_estimate(t);
	if (need > 0 && need + 2.0 > left) {
		if (out)
			fprintf(out,
			        "rlrun train: not saving step %" PRId64
			        ": the last checkpoint took "
			        "%.1f s and %.0f s are left\n",
			        done, t->ckpt->last_seconds, left);
		return false;
	}
	return true;
}

int rl_stop_run(struct rl_stop *s, struct rl_trainer *t, int reason, int64_t done, int64_t saved,
                const struct rl_step_metrics *m, char *err, size_t errlen)
{
	int save = rl_trainer_is_main(t) ? choose_save(s, t, reason, done, saved) : 0;

	if (t->dist)
		rl_comm_broadcast(t->dist->g[RL_G_WORLD], &save, 1, RL_COMM_I32, 0, "stop: save");
	if (t->progress && t->ckpt->in_flight && !atomic_load(&t->ckpt->written))
		fprintf(t->progress,
		        "rlrun train: checkpoint step_%" PRId64 " is still being written: it is "
		        "finished first\n",
		        t->ckpt->step);
	if ((save && rl_trainer_save(t, done, m, err, errlen)) ||
	    rl_trainer_save_poll(t, true, err, errlen))
		return -1;

	int requeued = 1;
	if (rl_trainer_is_main(t)) {
		int64_t newest = t->ckpt->committed;
		FILE *out = t->progress;
		char from[64];

		resume_point(newest, from, sizeof from);
		if (out && newest < done)
			fprintf(out, "rlrun train: %" PRId64 " step(s) will be redone, from %s\n",
			        done - newest, from);
		if (!s->job.id) {
			if (out)
				fprintf(
				    out,
				    "rlrun train: not a Slurm job, nothing to requeue: the same "
				    "command resumes from %s\n",
				    from);
		} else if (rl_slurm_job_requeue(&s->job, err, errlen) == 0) {
			if (out)
				fprintf(out,
				        "rlrun train: requeued job %" PRIu32
				        ": it resumes from %s when "
				        "Slurm starts it again\n",
				        s->job.id, from);
		} else {
			size_t n = strlen(err);
			snprintf(err + n, errlen - n, "; submit the job again: it resumes from %s",
			         from);
			requeued = 0;
		}
		if (out)
			fflush(out);
	}
	if (t->dist)
		rl_comm_broadcast(t->dist->g[RL_G_WORLD], &requeued, 1, RL_COMM_I32, 0,
		                  "stop: requeue");
	if (!requeued && !rl_trainer_is_main(t))
		err[0] = '\0';
	return requeued ? 0 : RL_TRAIN_AGREED_FAILURE;
}
