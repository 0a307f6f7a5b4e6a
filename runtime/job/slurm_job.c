/* The job's record in slurmctld, through libslurm. Only the first rank
 * asks, and rarely: every query is a message to the controller. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "runtime/job/slurm_job.h"

static bool slurm_ready;

/* NAME's value as an unsigned 32-bit number; false when unset or not one */
static bool env_u32_of(const char *name, uint32_t *out)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return false;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n > UINT32_MAX)
		return false;
	*out = (uint32_t)n;
	return true;
}

static uint32_t env_u32(const char *name)
{
	uint32_t n = 0;

	return env_u32_of(name, &n) ? n : 0;
}

/* libslurm retries a configuration file it cannot read for a minute and
 * then exits the process: look first. Once per process, from whichever
 * thread comes first (the watchdog's failure handler may). */
static pthread_mutex_t slurm_lock = PTHREAD_MUTEX_INITIALIZER;

static bool init_slurm(char *why, size_t whylen)
{
	const char *conf = getenv("SLURM_CONF");
	bool ready;

	pthread_mutex_lock(&slurm_lock);
	if (!conf || !*conf)
		conf = "/etc/slurm/slurm.conf";
	if (!slurm_ready && access(conf, R_OK) != 0) {
		snprintf(why, whylen, "cannot read Slurm's configuration %s: %s", conf,
		         strerror(errno));
	} else if (!slurm_ready) {
		slurm_init(NULL);
		slurm_ready = true;
	}
	ready = slurm_ready;
	pthread_mutex_unlock(&slurm_lock);
	return ready;
}

void rl_slurm_job_from_env(struct rl_slurm_job *j)
{
	j->id = env_u32("SLURM_JOB_ID");
	if (!env_u32_of("SLURM_STEP_ID", &j->step_id))
		j->step_id = UINT32_MAX;
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

/* The names of list (comma separated, Slurm's hostlist ranges left as
 * they are) and of nodes, each once. */
static int merge_nodes(const char *list, const char *const *nodes, int n, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	if (list && *list) {
		if (strlen(list) >= len)
			return -1;
		used = (size_t)snprintf(out, len, "%s", list);
	}
	for (int i = 0; i < n; i++) {
		const char *name = nodes[i];
		bool seen = false;

		if (!name || !*name)
			continue;
		/* already listed, as a whole name between commas */
		for (const char *p = out; (p = strstr(p, name)) != NULL; p++) {
			size_t k = strlen(name);

			if ((p == out || p[-1] == ',') && (p[k] == ',' || p[k] == '\0')) {
				seen = true;
				break;
			}
		}
		if (seen)
			continue;
		int k = snprintf(out + used, len - used, "%s%s", used ? "," : "", name);
		if (k < 0 || (size_t)k >= len - used)
			return -1;
		used += (size_t)k;
	}
	return 0;
}

int rl_slurm_job_exclude_nodes(const struct rl_slurm_job *j, const char *const *nodes, int n,
                               char *list, size_t listlen, char *err, size_t errlen)
{
	job_info_msg_t *msg = NULL;
	job_desc_msg_t desc;
	char why[256];
	int rc;

	if (!j->id || !init_slurm(why, sizeof why)) {
		snprintf(err, errlen, "%s", j->id ? why : "not a Slurm job");
		return -1;
	}
	if (slurm_load_job(&msg, j->id, SHOW_DETAIL) != SLURM_SUCCESS || msg->record_count < 1) {
		snprintf(err, errlen, "slurmctld does not say how job %u is: %s", j->id,
		         msg ? "no record" : slurm_strerror(slurm_get_errno()));
		if (msg)
			slurm_free_job_info_msg(msg);
		return -1;
	}
	rc = merge_nodes(msg->job_array[0].exc_nodes, nodes, n, list, listlen);
	slurm_free_job_info_msg(msg);
	if (rc) {
		snprintf(err, errlen, "the list of excluded nodes is too long");
		return -1;
	}
	slurm_init_job_desc_msg(&desc);
	desc.job_id = j->id;
	desc.exc_nodes = list;
	if (slurm_update_job(&desc) != SLURM_SUCCESS) {
		snprintf(err, errlen, "slurm_update_job(job %u, ExcNodeList=%s): %s", j->id, list,
		         slurm_strerror(slurm_get_errno()));
		return -1;
	}
	return 0;
}

int rl_slurm_job_end_step(const struct rl_slurm_job *j, char *err, size_t errlen)
{
	char why[256];

	if (!j->id || j->step_id == UINT32_MAX) {
		snprintf(err, errlen, "not in a Slurm job step");
		return -1;
	}
	if (!init_slurm(why, sizeof why)) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	if (slurm_kill_job_step(j->id, j->step_id, SIGKILL) != SLURM_SUCCESS) {
		snprintf(err, errlen, "slurm_kill_job_step(%u.%u): %s", j->id, j->step_id,
		         slurm_strerror(slurm_get_errno()));
		return -1;
	}
	return 0;
}

void rl_slurm_job_done(void)
{
	pthread_mutex_lock(&slurm_lock);
	if (slurm_ready)
		slurm_fini();
	slurm_ready = false;
	pthread_mutex_unlock(&slurm_lock);
}
