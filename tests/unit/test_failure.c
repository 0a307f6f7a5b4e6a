/* A failure's record and what follows it (runtime/job/failure.c), without
 * a Slurm: the job as its environment names it, and a SLURM_CONF that
 * cannot be read, so that the requeue and the end of the step fail, said.
 * The record's content is checked field by field against the failure
 * handed in; how many there are, against the calls made. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/job/failure.h"
#include "tests/unit/helpers.h"

static char *dir;

static void setup(void)
{
	dir = tmp_dir();
	setenv("SLURM_JOB_ID", "77", 1);
	setenv("SLURM_STEP_ID", "0", 1);
	setenv("SLURM_RESTART_COUNT", "0", 1);
	setenv("SLURM_CONF", "/nonexistent/slurm.conf", 1);
}

static void teardown(void)
{
	remove_tree(dir);
	free(dir);
}

TestSuite(failure, .init = setup, .fini = teardown);

/* stderr of fn(f, cf) into a string */
static char *handled(const struct rl_job_failures *f, const struct rl_comm_failure *cf)
{
	char path[4200];
	size_t len;

	snprintf(path, sizeof path, "%s/stderr", dir);
	fflush(stderr);
	int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	rl_job_failure_handle((void *)f, cf);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	return slurp(path, &len);
}

static void open_policy(struct rl_job_failures *f, const char *requeue, int64_t max)
{
	struct rl_job_failure_policy p = {requeue, max, false, dir};

	rl_job_failures_open(f, &p, false, NULL);
}

static const int lost2[] = {2};
static const char *const lost2_hosts[] = {"nodeB"};

static struct rl_comm_failure failure_at(int rank, bool found_here)
{
	return (struct rl_comm_failure){
	    .rank = rank,
	    .host = "nodeA",
	    .found_here = found_here,
	    .report = "rlrun: rank 0: collective #9 all_reduce over dp has waited 5.0 s\n"
	              "rlrun: rank 0: rank 2 does not answer: dead, or hung\n",
	    .n_lost = 1,
	    .lost = lost2,
	    .lost_hosts = lost2_hosts,
	};
}

static json_t *record_of(int start)
{
	char path[4200];

	snprintf(path, sizeof path, "%s/failures/job_77.start_%d.json", dir, start);
	return json_load_file(path, 0, NULL);
}

Test(failure, the_rank_that_found_it_records_it_once)
{
	struct rl_job_failures f;
	struct rl_comm_failure a = failure_at(0, true), b = failure_at(1, true);

	open_policy(&f, "true", 3);
	cr_assert(f.requeue, "requeue_on_failure true under a Slurm job with checkpoints");
	char *first = handled(&f, &a), *second = handled(&f, &b);
	json_t *r = record_of(0);
	cr_assert_not_null(r, "no record of start 0");
	cr_assert_eq(json_integer_value(json_object_get(r, "job_id")), 77);
	cr_assert_eq(json_integer_value(json_object_get(r, "start")), 0);
	cr_assert_eq(json_integer_value(json_object_get(r, "rank")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(r, "host")), "nodeA");
	cr_assert_eq(json_integer_value(json_array_get(json_object_get(r, "lost_ranks"), 0)), 2);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(r, "lost_nodes"), 0)),
	                 "nodeB");
	/* no step_N in the directory: the next start begins at the start */
	cr_assert_eq(json_integer_value(json_object_get(r, "resume_from")), 0);
	/* the report's first line, without its "rlrun: rank 0: " */
	cr_assert_str_eq(json_string_value(json_object_get(r, "what")),
	                 "collective #9 all_reduce over dp has waited 5.0 s");
	cr_assert_eq(rl_job_failures_count(&f), 1);
	/* no Slurm here: the requeue fails, said, and the step is ended */
	expect_contains(first, "cannot requeue job 77");
	expect_contains(first, "ending job step 77.0");
	/* the second rank found the record made: it does nothing, silently */
	cr_assert_str_eq(second, "");
	json_decref(r);
	free(first);
	free(second);
}

Test(failure, a_rank_told_by_another_does_nothing)
{
	struct rl_job_failures f;
	struct rl_comm_failure told = failure_at(3, false);

	open_policy(&f, "true", 3);
	char *out = handled(&f, &told);
	cr_assert_str_eq(out, "");
	cr_assert_eq(rl_job_failures_count(&f), 0);
	free(out);
}

Test(failure, past_max_failure_restarts_the_history_and_no_requeue)
{
	struct rl_job_failures f;
	struct rl_comm_failure a = failure_at(0, true);
	char *out = NULL;

	for (int start = 0; start < 3; start++) {
		char n[8];

		snprintf(n, sizeof n, "%d", start);
		setenv("SLURM_RESTART_COUNT", n, 1);
		open_policy(&f, "true", 2);
		free(out);
		out = handled(&f, &a);
		cr_assert_eq(rl_job_failures_count(&f), start + 1);
	}
	/* the third of max 2: said, with every failure, oldest first */
	expect_contains(out, "job 77 failed 3 times (checkpointing.max_failure_restarts 2): not "
	                     "requeued again");
	char *s0 = strstr(out, "  start 0, "), *s1 = strstr(out, "  start 1, "),
	     *s2 = strstr(out, "  start 2, ");
	cr_assert(s0 && s1 && s2 && s0 < s1 && s1 < s2, "history out of order:\n%s", out);
	expect_contains(s0, ": rank 2 did not answer; collective #9 all_reduce over dp has waited");
	cr_assert_null(strstr(out, "cannot requeue"), "a requeue was tried past the limit");
	expect_contains(out, "ending job step 77.0");
	free(out);
}

Test(failure, without_checkpoints_or_requeue_the_step_ends_unrecorded)
{
	struct rl_job_failures f;
	struct rl_job_failure_policy none = {"true", 3, false, NULL};
	struct rl_comm_failure a = failure_at(0, true);

	rl_job_failures_open(&f, &none, true, NULL);
	cr_assert_not(f.requeue, "no checkpoint to resume from: nothing to requeue");
	char *out = handled(&f, &a);
	expect_contains(out, "ending job step 77.0");
	free(out);
	/* auto on a job that cannot be requeued, with checkpoints */
	open_policy(&f, "auto", 3);
	cr_assert_not(f.requeue);
	out = handled(&f, &a);
	expect_contains(out, "ending job step 77.0");
	cr_assert_eq(rl_job_failures_count(&f), 0);
	free(out);
	/* a rank's own failure: MPI_Abort ends the step, not the handler */
	struct rl_comm_failure own = failure_at(0, true);
	own.own = true;
	out = handled(&f, &own);
	cr_assert_str_eq(out, "");
	free(out);
	/* and not a Slurm job at all: nothing to do */
	unsetenv("SLURM_JOB_ID");
	open_policy(&f, "true", 3);
	out = handled(&f, &a);
	cr_assert_str_eq(out, "");
	free(out);
}

Test(failure, what_a_failure_will_do_is_said_at_the_start)
{
	struct rl_job_failures f;
	struct rl_job_failure_policy p = {"auto", 3, false, dir};
	char path[4200];
	size_t len;

	snprintf(path, sizeof path, "%s/out", dir);
	FILE *out = fopen(path, "w");
	rl_job_failures_open(&f, &p, true, out);
	p.requeue = "false";
	rl_job_failures_open(&f, &p, true, out);
	fclose(out);
	char *text = slurp(path, &len);
	expect_contains(text, "the job is requeued and resumes from the newest checkpoint: 0 of 3 "
	                      "failures used");
	expect_contains(text, "on a failure the job step ends (not requeued: "
	                      "checkpointing.requeue_on_failure false)");
	free(text);
}
