/* The job's record in slurmctld, through libslurm. Only the first rank
 * asks, and rarely: every query is a message to the controller. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "runtime/job/slurm_job.h"

static bool slurm_ready;

static uint32_t env_u32(const char *name)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	return errno || *end || n > UINT32_MAX ? 0 : (uint32_t)n;
}

/* libslurm retries a configuration file it cannot read for a minute and
 * then exits the process: look first. */
static bool init_slurm(char *why, size_t whylen)
{
	const char *conf = getenv("SLURM_CONF");

	if (slurm_ready)
		return true;
	if (!conf || !*conf)
		conf = "/etc/slurm/slurm.conf";
	if (access(conf, R_OK) != 0) {
		snprintf(why, whylen, "cannot read Slurm's configuration %s: %s", conf,
		         strerror(errno));
		return false;
	}
	slurm_init(NULL);
	slurm_ready = true;
	return true;
}

void rl_slurm_job_from_env(struct rl_slurm_job *j)
{
	j->id = env_u32("SLURM_JOB_ID");
	j->restart_count = (int)env_u32("SLURM_RESTART_COUNT");
	j->known = false;
	j->why[0] = '\0';
}

void rl_slurm_job_query(struct rl_slurm_job *j)
{
	job_info_msg_t *msg = NULL;

	rl_slurm_job_from_env(j);
	if (!j->id) {
		snprintf(j->why, sizeof j->why, "not a Slurm job (no SLURM_JOB_ID)");
		return;
	}
	if (!init_slurm(j->why, sizeof j->why))
		return;
	if (slurm_load_job(&msg, j->id, SHOW_DETAIL) != SLURM_SUCCESS) {
		snprintf(j->why, sizeof j->why, "slurmctld does not say how job %u is: %s", j->id,
		         slurm_strerror(slurm_get_errno()));
		return;
	}
	if (msg->record_count < 1) {
		snprintf(j->why, sizeof j->why, "slurmctld does not know job %u", j->id);
	} else {
		const slurm_job_info_t *info = &msg->job_array[0];

		j->known = true;
		j->batch = info->batch_flag != 0;
		j->requeue = info->requeue != 0;
		j->end_time = info->end_time;
	}
	slurm_free_job_info_msg(msg);
}

int rl_slurm_job_requeue(const struct rl_slurm_job *j, char *err, size_t errlen)
{
	char why[256];

	if (!j->id) {
		snprintf(err, errlen, "not a Slurm job (no SLURM_JOB_ID): nothing to requeue");
		return -1;
	}
	if (!init_slurm(why, sizeof why)) {
		snprintf(err, errlen, "cannot requeue job %u: %s", j->id, why);
		return -1;
	}
	if (slurm_requeue(j->id, 0) == SLURM_SUCCESS)
		return 0;
	int e = slurm_get_errno();
	const char *hint = "";
	if (e == ESLURM_BATCH_ONLY)
		hint = " (only jobs submitted with sbatch can be requeued)";
	else if (e == ESLURM_DISABLED)
		hint = " (the job was submitted with --no-requeue, or slurm.conf has JobRequeue=0 "
		       "and it lacks --requeue)";
	snprintf(err, errlen, "slurm_requeue(job %u): %s%s", j->id, slurm_strerror(e), hint);
	return -1;
}

void rl_slurm_job_done(void)
{
	if (slurm_ready)
		slurm_fini();
	slurm_ready = false;
}
