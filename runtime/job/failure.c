/* A failure's record, and the requeue or the end of the step after it.
 * The record is made complete under a name of this rank's own and then
 * linked to the start's name: link(2) fails when the name exists, so of
 * the ranks that found the same failure exactly one acts, and a record is
 * never seen half written. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/durable.h"
#include "runtime/base/plural.h"
#include "runtime/ckpt/store.h"
#include "runtime/job/failure.h"
#include "runtime/job/slurm_job.h"

/* the lost ranks a record lists, and a report line's length */
#define MAX_LOST 16
#define WHAT_MAX 240

void rl_job_failures_early(struct rl_job_failures *f)
{
	struct rl_slurm_job j;

	memset(f, 0, sizeof *f);
	rl_slurm_job_from_env(&j);
	f->job_id = j.id;
	f->step_id = j.step_id;
	f->restart = j.restart_count;
}

void rl_job_failures_open(struct rl_job_failures *f, const struct rl_job_failure_policy *p,
                          bool requeueable, FILE *out)
{
	rl_job_failures_early(f);
	f->max_restarts = p->max_restarts;
	f->exclude_nodes = p->exclude_nodes;
	if (p->checkpoint_dir && (size_t)snprintf(f->dir, sizeof f->dir, "%s/failures",
	                                          p->checkpoint_dir) >= sizeof f->dir)
		f->dir[0] = '\0';
	f->requeue =
	    f->dir[0] && f->job_id &&
	    (strcmp(p->requeue, "true") == 0 || (strcmp(p->requeue, "auto") == 0 && requeueable));
	if (!out || !f->job_id)
		return;
	int n = rl_job_failures_count(f);
	if (f->requeue)
		fprintf(
		    out,
		    "rlrun train: on a failure (a rank lost, a collective stuck, a rank's error) "
		    "the job is requeued and resumes from the newest checkpoint: %d of %" PRId64
		    " failure%s used\n",
		    n, f->max_restarts, rl_plural(f->max_restarts));
	else
		fprintf(out, "rlrun train: on a failure the job step ends (not requeued: %s)\n",
		        !f->dir[0] ? "checkpointing is off"
		        : strcmp(p->requeue, "false") == 0
		            ? "checkpointing.requeue_on_failure false"
		            : "the job cannot be requeued");
	fflush(out);
}

/* The record's name for this job and start. */
static int record_path(const struct rl_job_failures *f, int restart, char *buf, size_t len)
{
	int k = snprintf(buf, len, "%s/job_%" PRIu32 ".start_%d.json", f->dir, f->job_id, restart);
	return k < 0 || (size_t)k >= len ? -1 : 0;
}

/* "job_J.start_R.json" of this job: R, else -1 */
static int start_of(const struct rl_job_failures *f, const char *name)
{
	char prefix[48];
	int restart, used = 0;

	snprintf(prefix, sizeof prefix, "job_%" PRIu32 ".start_", f->job_id);
	if (strncmp(name, prefix, strlen(prefix)) != 0)
		return -1;
	if (sscanf(name + strlen(prefix), "%d.json%n", &restart, &used) != 1 ||
	    name[strlen(prefix) + (size_t)used] != '\0' || restart < 0)
		return -1;
	return restart;
}

int rl_job_failures_count(const struct rl_job_failures *f)
{
	DIR *d = f->dir[0] ? opendir(f->dir) : NULL;
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL)
		n += start_of(f, e->d_name) >= 0;
	closedir(d);
	return n;
}

static int cmp_int(const void *a, const void *b)
{
	return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Every failure of this job so far, oldest first, one line each. */
static void print_history(const struct rl_job_failures *f, int me)
{
	DIR *d = opendir(f->dir);
	struct dirent *e;
	int starts[256], n = 0;

	if (!d)
		return;
	while ((e = readdir(d)) != NULL && n < (int)(sizeof starts / sizeof starts[0])) {
		int s = start_of(f, e->d_name);

		if (s >= 0)
			starts[n++] = s;
	}
	closedir(d);
	qsort(starts, (size_t)n, sizeof starts[0], cmp_int);
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX + 64];
		json_t *r = NULL;

		if (record_path(f, starts[i], path, sizeof path) == 0)
			r = json_load_file(path, 0, NULL);
		const char *when = r ? json_string_value(json_object_get(r, "time")) : NULL;
		const char *what = r ? json_string_value(json_object_get(r, "what")) : NULL;
		json_t *lost = json_object_get(r, "lost_ranks");
		size_t n_lost = json_array_size(lost);
		char who[160] = "";
		size_t used = 0;

		for (size_t k = 0; k < n_lost && used < sizeof who - 16; k++)
			used += (size_t)snprintf(who + used, sizeof who - used,
			                         "%s%" JSON_INTEGER_FORMAT, k ? "," : "",
			                         json_integer_value(json_array_get(lost, k)));
		fprintf(stderr, "rlrun: rank %d:   start %d, %s: ", me, starts[i],
		        when ? when : "?");
		if (n_lost)
			fprintf(stderr, "rank%s %s did not answer; ", n_lost > 1 ? "s" : "", who);
		fprintf(stderr, "%s; the next start resumed from step %" PRId64 "\n",
		        what ? what : "(an unreadable record)",
		        r ? (int64_t)json_integer_value(json_object_get(r, "resume_from")) : -1);
		json_decref(r);
	}
}

/* The newest committed step in the checkpoint directory (0: none). */
static int64_t committed_step(const struct rl_job_failures *f)
{
	struct rl_ckpt_listing l;
	char root[PATH_MAX], err[256];
	int64_t step = 0;
	size_t n = strlen(f->dir) - strlen("/failures");

	memcpy(root, f->dir, n);
	root[n] = '\0';
	if (rl_ckpt_scan(root, &l, err, sizeof err) == 0) {
		step = l.n ? l.steps[l.n - 1] : 0;
		rl_ckpt_listing_free(&l);
	}
	return step;
}

/* The report's first line, without the "rlrun: rank R: " (or "rlrun
 * train: rank R: ") every line of it begins with. */
static void first_line(const char *report, char *buf, size_t len)
{
	const char *p = report, *end = strchr(report, '\n'), *r = strstr(report, "rank ");

	if (!end)
		end = p + strlen(p);
	if (r && r < end && r - p < 20) {
		const char *colon = strstr(r, ": ");

		if (colon && colon < end)
			p = colon + 2;
	}
	snprintf(buf, len, "%.*s", (int)(end - p), p);
}

enum record_result { RECORDED, RECORDED_ELSEWHERE, NOT_RECORDED };

/* failures/job_J.start_R.json: complete, durable, once per start. */
static enum record_result record(const struct rl_job_failures *f, const struct rl_comm_failure *cf,
                                 const char *what, char *err, size_t errlen)
{
	char path[PATH_MAX + 64], tmp[PATH_MAX + 96], when[32];
	time_t now = time(NULL);
	struct tm tm;
	json_t *lost = json_array(), *nodes = json_array();
	enum record_result rc = NOT_RECORDED;

	if (rl_make_dirs(f->dir, "checkpointing.checkpoint_dir", err, errlen))
		goto out;
	if (record_path(f, f->restart, path, sizeof path) ||
	    (size_t)snprintf(tmp, sizeof tmp, "%s.rank%d.tmp", path, cf->rank) >= sizeof tmp) {
		snprintf(err, errlen, "%.300s: the path is too long", f->dir);
		goto out;
	}
	gmtime_r(&now, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	for (int i = 0; i < cf->n_lost && i < MAX_LOST; i++) {
		json_array_append_new(lost, json_integer(cf->lost[i]));
		if (cf->lost_hosts && cf->lost_hosts[i][0])
			json_array_append_new(nodes, json_string(cf->lost_hosts[i]));
	}
	json_t *r = json_pack("{s:I, s:i, s:s, s:i, s:s, s:O, s:i, s:O, s:I, s:s}", "job_id",
	                      (json_int_t)f->job_id, "start", f->restart, "time", when, "rank",
	                      cf->rank, "host", cf->host ? cf->host : "", "lost_ranks", lost,
	                      "lost_count", cf->n_lost, "lost_nodes", nodes, "resume_from",
	                      (json_int_t)committed_step(f), "what", what);
	char *text = r ? json_dumps(r, JSON_INDENT(1)) : NULL;
	json_decref(r);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	size_t len = strlen(text);
	bool written = fd >= 0 && rl_write_all(fd, text, len) == 0 &&
	               rl_write_all(fd, "\n", 1) == 0 && fsync(fd) == 0;
	int saved = errno;
	if (fd >= 0)
		close(fd);
	free(text);
	if (!written) {
		snprintf(err, errlen, "%.300s: %s", tmp, strerror(saved));
		unlink(tmp);
		goto out;
	}
	if (link(tmp, path) == 0) {
		rl_sync_parent(path);
		rc = RECORDED;
	} else if (errno == EEXIST) {
		rc = RECORDED_ELSEWHERE;
	} else {
		snprintf(err, errlen, "%.300s: %s", path, strerror(errno));
	}
	unlink(tmp);
out:
	json_decref(lost);
	json_decref(nodes);
	return rc;
}

/* A rank's own failure's step ends by MPI_Abort, right after. */
static void end_step(const struct rl_job_failures *f, const struct rl_comm_failure *cf)
{
	struct rl_slurm_job j;
	char err[512];
	int me = cf->rank;

	if (cf->own)
		return;
	rl_slurm_job_from_env(&j);
	if (j.step_id == UINT32_MAX)
		return;
	fprintf(stderr,
	        "rlrun: rank %d: ending job step %" PRIu32 ".%" PRIu32
	        ", so that no rank of it hangs on\n",
	        me, f->job_id, j.step_id);
	fflush(stderr);
	if (rl_slurm_job_end_step(&j, err, sizeof err))
		fprintf(stderr, "rlrun: rank %d: %s\n", me, err);
}

static void exclude(const struct rl_job_failures *f, const struct rl_comm_failure *cf,
                    const struct rl_slurm_job *j)
{
	char list[4096], err[512];

	if (!f->exclude_nodes || cf->n_lost == 0 || !cf->lost_hosts)
		return;
	if (rl_slurm_job_exclude_nodes(j, cf->lost_hosts, cf->n_lost, list, sizeof list, err,
	                               sizeof err))
		fprintf(stderr, "rlrun: rank %d: warning: checkpointing.exclude_failed_nodes: %s\n",
		        cf->rank, err);
	else
		fprintf(stderr, "rlrun: rank %d: job %" PRIu32 " now excludes nodes %s\n", cf->rank,
		        f->job_id, list);
}

void rl_job_failure_handle(void *arg, const struct rl_comm_failure *cf)
{
	const struct rl_job_failures *f = arg;
	char what[WHAT_MAX], err[512];
	int me = cf->rank;

	if (!f || !cf->found_here || !f->job_id)
		return;
	first_line(cf->report, what, sizeof what);
	if (!f->requeue) {
		end_step(f, cf);
		return;
	}
	switch (record(f, cf, what, err, sizeof err)) {
	case RECORDED_ELSEWHERE:
		return; /* another rank found it too, and acts */
	case NOT_RECORDED:
		fprintf(stderr,
		        "rlrun: rank %d: cannot record the failure (%s): the job is not requeued\n",
		        me, err);
		end_step(f, cf);
		return;
	case RECORDED:
		break;
	}
	int n = rl_job_failures_count(f);
	if (n > f->max_restarts) {
		fprintf(stderr,
		        "rlrun: rank %d: job %" PRIu32 " failed %d time%s "
		        "(checkpointing.max_failure_restarts %" PRId64 "): not requeued again; its "
		        "failures:\n",
		        me, f->job_id, n, rl_plural(n), f->max_restarts);
		print_history(f, me);
		end_step(f, cf);
		return;
	}
	struct rl_slurm_job j;
	int64_t from = committed_step(f);
	rl_slurm_job_from_env(&j);
	if (rl_slurm_job_requeue(&j, err, sizeof err)) {
		fprintf(stderr, "rlrun: rank %d: %s\n", me, err);
		end_step(f, cf);
		return;
	}
	if (from > 0)
		fprintf(stderr,
		        "rlrun: rank %d: requeued job %" PRIu32
		        " after failure %d of at most %" PRId64 ": it resumes from step_%" PRId64
		        " when Slurm starts it again\n",
		        me, f->job_id, n, f->max_restarts, from);
	else
		fprintf(stderr,
		        "rlrun: rank %d: requeued job %" PRIu32
		        " after failure %d of at most %" PRId64
		        ": it starts again from the start (no checkpoint yet)\n",
		        me, f->job_id, n, f->max_restarts);
	exclude(f, cf, &j);
	fflush(stderr);
}
