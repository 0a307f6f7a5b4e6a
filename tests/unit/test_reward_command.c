/* The external reward program, driven through the small programs in
 * tests/unit/reward_progs/: exact rewards against values computed here from
 * the items, restarts after crashes, signals (the job's stop signals scoring
 * the item again), timeouts and garbage, a missing
 * command, a large input that would deadlock a naive implementation, JSON
 * escaping, and no children, descriptors or SIGPIPE left behind.
 *
 * The programs are found under $RL_TEST_SRCDIR, else $top_srcdir (what
 * `make check` exports), else the compile-time RL_SRCDIR, else ".". */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "runtime/reward/program_check.h"
#include "runtime/reward/reward_command.h"
#include "tests/unit/child_checks.h"

static const char *srcdir(void)
{
	const char *s = getenv("RL_TEST_SRCDIR");

	if (!s || !*s)
		s = getenv("top_srcdir");
#ifdef RL_SRCDIR
	if (!s || !*s)
		s = RL_SRCDIR;
#endif
	return s && *s ? s : ".";
}

/* "exec <interp> '<srcdir>/tests/unit/reward_progs/<script>'"; exec so that
 * the program itself is the child whose status is seen. */
static char *prog(const char *interp, const char *script)
{
	char *cmd = NULL, path[4096];

	snprintf(path, sizeof(path), "%s/tests/unit/reward_progs/%s", srcdir(), script);
	cr_assert_eq(access(path, R_OK), 0, "cannot read %s (set RL_TEST_SRCDIR)", path);
	cr_assert_geq(asprintf(&cmd, "exec %s '%s'", interp, path), 0);
	return cmd;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One call with the checks every call must pass: return 0, no children
 * left, no descriptors leaked, SIGPIPE neither pending nor blocked. The log
 * is returned (free it). */
static char *run_program(const struct rl_reward_program *p, const struct rl_reward_item *items,
                         size_t n, double *rewards, struct rl_reward_failures *fail)
{
	char *log_text = NULL, err[256] = "";
	size_t log_len = 0;
	FILE *log = open_memstream(&log_text, &log_len);
	int fds = count_fds();
	sigset_t set;

	cr_assert_not_null(log);
	int rc = rl_reward_command(p, items, n, rewards, fail, log, err, sizeof(err));

	fclose(log);
	cr_assert_eq(rc, 0, "%s", err);
	errno = 0;
	cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1, "a child is left");
	cr_expect_eq(errno, ECHILD);
	cr_expect_eq(count_fds(), fds, "descriptors leaked");
	sigpending(&set);
	cr_expect(!sigismember(&set, SIGPIPE), "SIGPIPE left pending");
	pthread_sigmask(SIG_BLOCK, NULL, &set);
	cr_expect(!sigismember(&set, SIGPIPE), "SIGPIPE left blocked");
	return log_text;
}

/* run_program with no stop signals */
static char *run(const char *cmd, double timeout, int workers, const struct rl_reward_item *items,
                 size_t n, double *rewards, struct rl_reward_failures *fail)
{
	struct rl_reward_program p = {cmd, timeout, workers, NULL, 0};

	return run_program(&p, items, n, rewards, fail);
}

#define expect_contains(text, needle)                                                              \
	cr_expect(strstr((text), (needle)) != NULL, "missing \"%s\" in:\n%s", (needle), (text))

/* n items; responses of growing length from a small alphabet, with "boom"
 * or other markers where asked. */
#define N 40
static char responses[N][64];
static struct rl_reward_item items[N];

static void make_items(void)
{
	for (size_t i = 0; i < N; i++) {
		size_t len = (i * 7) % 23 + 1;

		for (size_t k = 0; k < len; k++)
			responses[i][k] = "abcxyz 123"[(i + k) % 10];
		responses[i][len] = '\0';
		items[i] = (struct rl_reward_item){"the prompt", i % 2 ? "p" : NULL, responses[i],
		                                   i % 3 ? "42" : NULL};
	}
}

static void mark(size_t i, const char *text)
{
	snprintf(responses[i], sizeof(responses[i]), "%s", text);
}

Test(reward_command, len_mod3_any_workers)
{
	double rewards[N];
	struct rl_reward_failures fail;
	char *cmd = prog("awk -f", "len_mod3.awk");

	make_items();
	for (int workers = 1; workers <= 8; workers += 3) {
		free(run(cmd, 5, workers, items, N, rewards, &fail));
		for (size_t i = 0; i < N; i++)
			cr_expect_eq(rewards[i], (double)(strlen(responses[i]) % 3),
			             "workers %d item %zu", workers, i);
		cr_expect(fail.crashed == 0 && fail.timed_out == 0 && fail.bad_output == 0);
	}
	/* more workers than items */
	free(run(cmd, 5, 64, items, 3, rewards, &fail));
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(rewards[i], (double)(strlen(responses[i]) % 3));
	free(cmd);
}

/* A program that answers only at EOF: its stdin must be closed after its
 * share, or it would wait until the timeout. */
Test(reward_command, reads_to_eof)
{
	double rewards[N];
	struct rl_reward_failures fail;

	make_items();
	double t0 = now_s();

	free(run("awk '{ n++ } END { for (i = 0; i < n; i++) print i }'", 3, 2, items, N, rewards,
	         &fail));
	cr_expect_lt(now_s() - t0, 2.0);
	for (size_t i = 0; i < N; i++) /* each copy counts from 0 within its share */
		cr_expect_eq(rewards[i], (double)(i < N / 2 ? i : i - N / 2), "item %zu", i);
	cr_expect(fail.crashed == 0 && fail.timed_out == 0 && fail.bad_output == 0);
}

Test(reward_command, exit_restarts)
{
	double rewards[N];
	struct rl_reward_failures fail;
	char *cmd = prog("awk -f", "exit_on_boom.awk");
	const size_t booms[] = {3, 4, 10, N - 1};

	make_items();
	for (size_t b = 0; b < 4; b++)
		mark(booms[b], "boom");
	for (int workers = 1; workers <= 2; workers++) {
		char *log = run(cmd, 5, workers, items, N, rewards, &fail);

		for (size_t i = 0; i < N; i++) {
			bool boom = strcmp(responses[i], "boom") == 0;

			cr_expect_eq(rewards[i], boom ? 0.0 : (double)(strlen(responses[i]) % 3),
			             "item %zu", i);
		}
		cr_expect_eq(fail.crashed, 4);
		cr_expect_eq(fail.timed_out + fail.bad_output, 0);
		expect_contains(log, "reward command: sample 3: exited with status 3");
		expect_contains(log, "reward command: sample 4: exited with status 3");
		expect_contains(log, "reward command: sample 39: exited with status 3");
		free(log);
	}
	free(cmd);
}

Test(reward_command, signal)
{
	double rewards[N];
	struct rl_reward_failures fail;
	char *cmd = prog("sh", "signal_on_boom.sh");

	make_items();
	mark(0, "boom");
	mark(17, "boom");
	char *log = run(cmd, 5, 1, items, N, rewards, &fail);

	for (size_t i = 0; i < N; i++)
		cr_expect_eq(rewards[i], i == 0 || i == 17 ? 0.0 : 1.0, "item %zu", i);
	cr_expect_eq(fail.crashed, 2);
	expect_contains(log, "sample 17: killed by signal 15");
	free(log);
	free(cmd);
}

/* Slurm stops a job (preemption, time limit, scancel) with a signal to
 * every process of the step, the reward program's included. A copy killed
 * by one of the job's stop signals scores its item again and nothing is a
 * failure: the step the job stops after scores as it would have. */
Test(reward_command, stop_signal_scores_again)
{
	double rewards[N];
	struct rl_reward_failures fail;
	char dir[] = "/tmp/rl-reward-XXXXXX", *script = prog("sh", "term_once_on_boom.sh"), *cmd;
	sigset_t term;

	cr_assert_not_null(mkdtemp(dir));
	cr_assert_geq(asprintf(&cmd, "%s '%s'", script, dir), 0);
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	make_items();
	mark(0, "boom");
	mark(17, "boom");
	struct rl_reward_program p = {cmd, 5, 2, &term, 0};
	char *log = run_program(&p, items, N, rewards, &fail);

	for (size_t i = 0; i < N; i++)
		cr_expect_eq(rewards[i], 1.0, "item %zu", i);
	cr_expect(fail.crashed == 0 && fail.timed_out == 0 && fail.bad_output == 0);
	expect_contains(log, "sample 0: killed by signal 15, which stops the job: scored again");
	expect_contains(log, "sample 17: killed by signal 15, which stops the job: scored again");
	free(log);

	/* SIGTERM not among the stop signals: the program's own crash */
	char remove[64];
	snprintf(remove, sizeof(remove), "rm -f %s/seen-*", dir);
	cr_assert_eq(system(remove), 0);
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	p.stop_signals = &usr1;
	log = run_program(&p, items, N, rewards, &fail);
	for (size_t i = 0; i < N; i++)
		cr_expect_eq(rewards[i], i == 0 || i == 17 ? 0.0 : 1.0, "item %zu", i);
	cr_expect_eq(fail.crashed, 2);
	cr_expect(strstr(log, "scored again") == NULL, "%s", log);
	free(log);
	cr_assert_eq(system(remove), 0);
	cr_expect_eq(rmdir(dir), 0);
	free(cmd);
	free(script);
}

/* Scored again once per item: a copy that dies of the stop signal on the
 * same item twice has crashed on it. */
Test(reward_command, stop_signal_scores_again_once)
{
	double rewards[N];
	struct rl_reward_failures fail;
	char *cmd = prog("sh", "signal_on_boom.sh");
	sigset_t term;

	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	make_items();
	mark(17, "boom");
	struct rl_reward_program p = {cmd, 5, 1, &term, 0};
	char *log = run_program(&p, items, N, rewards, &fail);

	for (size_t i = 0; i < N; i++)
		cr_expect_eq(rewards[i], i == 17 ? 0.0 : 1.0, "item %zu", i);
	cr_expect_eq(fail.crashed, 1);
	expect_contains(log, "sample 17: killed by signal 15, which stops the job: scored again\n"
	                     "reward command: sample 17: killed by signal 15\n");
	free(log);
	free(cmd);
}

/* A caller held still past the timeout (its job suspended, then resumed)
 * gives every copy its time again: the copy that answers half a second
 * after the resume is in time, though 3.5 s passed with a timeout of 1 s. */
Test(reward_command, caller_held_up_is_not_a_timeout)
{
	double rewards[N];
	struct rl_reward_failures fail;
	char *cmd = prog("sh", "hold_caller_on_late.sh");

	make_items();
	mark(5, "late");
	char *log = run(cmd, 1, 1, items, N, rewards, &fail);

	for (size_t i = 0; i < N; i++)
		cr_expect_eq(rewards[i], 1.0, "item %zu", i);
	cr_expect(fail.crashed == 0 && fail.timed_out == 0 && fail.bad_output == 0, "%s", log);
	free(log);
	free(cmd);
}

/* Whether process pid is gone or a zombie, waiting up to a second for the
 * SIGKILL to land. */
Test(reward_command, timeout_kills_group)
{
	double rewards[N];
	struct rl_reward_failures fail;
	char pidfile[] = "/tmp/rl-sleep-XXXXXX", *cmd, *script = prog("sh", "hang_on_sleepy.sh");
	int fd = mkstemp(pidfile);
	int sleep_pid = 0;

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_geq(asprintf(&cmd, "SLEEP_PID_FILE=%s %s", pidfile, script), 0);
	make_items();
	mark(5, "sleepy");
	double t0 = now_s();
	char *log = run(cmd, 1, 2, items, N, rewards, &fail);
	double dt = now_s() - t0;
	FILE *f = fopen(pidfile, "r");

	cr_assert_not_null(f);
	cr_expect_eq(fscanf(f, "%d", &sleep_pid), 1, "the program did not write its pid");
	fclose(f);
	unlink(pidfile);
	cr_expect(sleep_pid > 0 && process_dead(sleep_pid), "the program's child %d survived",
	          sleep_pid);
	free(script);

	/* the call's time is up when item 5's is: the rest of the first
	 * copy's share (items 0-19) is not scored either; the other's is */
	for (size_t i = 0; i < N; i++)
		cr_expect_eq(rewards[i], i >= 5 && i < N / 2 ? 0.0 : 1.0, "item %zu", i);
	cr_expect_eq(fail.timed_out, N / 2 - 5);
	cr_expect_eq(fail.crashed + fail.bad_output, 0);
	cr_expect_lt(dt, 3, "took %.2f s", dt);
	expect_contains(log,
	                "reward command: samples 5-19: not scored within the call's 1 s, killed");
	free(log);
	free(cmd);
}

/* With sample_timeout shorter than the call's timeout, the copy that hangs
 * is killed after it and a fresh one scores the rest of its share: one
 * sample lost, not the share. */
Test(reward_command, sample_timeout_loses_one_sample)
{
	double rewards[N];
	struct rl_reward_failures fail;
	char *script = prog("sh", "hang_on_sleepy.sh");
	struct rl_reward_program p = {script, 30, 2, NULL, 0.5};

	make_items();
	mark(5, "sleepy");
	double t0 = now_s();
	char *log = run_program(&p, items, N, rewards, &fail);
	double dt = now_s() - t0;

	for (size_t i = 0; i < N; i++)
		cr_expect_eq(rewards[i], i == 5 ? 0.0 : 1.0, "item %zu", i);
	cr_expect_eq(fail.timed_out, 1);
	cr_expect_eq(fail.crashed + fail.bad_output, 0);
	cr_expect_lt(dt, 10, "took %.2f s: the call's timeout, not the sample's", dt);
	expect_contains(log, "reward command: sample 5: no reward within 0.5 s");
	free(log);
	free(script);
}

Test(reward_command, bad_output)
{
	double rewards[N];
	struct rl_reward_failures fail;
	char *cmd = prog("awk -f", "garbage.awk");
	const char *kinds[] = {"garbage", "nan", "inf", "empty", "trailing", "long"};

	make_items();
	for (size_t k = 0; k < 6; k++)
		mark(2 * k + 1, kinds[k]);
	char *log = run(cmd, 5, 1, items, N, rewards, &fail);

	for (size_t i = 0; i < N; i++)
		cr_expect_eq(rewards[i], i % 2 && i < 12 ? 0.0 : 1.0, "item %zu", i);
	cr_expect_eq(fail.bad_output, 6);
	cr_expect_eq(fail.crashed + fail.timed_out, 0);
	expect_contains(log, "reward command: sample 1: line 'abc' is not a number");
	expect_contains(log, "sample 5: line '-inf' is not a number");
	free(log);
	free(cmd);
}

Test(reward_command, command_not_found)
{
	double rewards[N];
	struct rl_reward_failures fail;

	make_items();
	for (int workers = 1; workers <= 3; workers += 2) {
		for (size_t i = 0; i < N; i++)
			rewards[i] = 7;
		char *log =
		    run("/nonexistent/reward-program", 5, workers, items, N, rewards, &fail);

		for (size_t i = 0; i < N; i++)
			cr_expect_eq(rewards[i], 0.0);
		cr_expect_eq(fail.crashed, N);
		expect_contains(log, "exited with status 127");
		free(log);
	}
}

/* A program that exits without reading: our writes meet a closed pipe,
 * which must neither kill us nor leave SIGPIPE behind (run() checks). */
Test(reward_command, early_exit_sigpipe)
{
	const size_t n = 30, big = 256 * 1024;
	struct rl_reward_item *its = calloc(n, sizeof(*its));
	double *rewards = calloc(n, sizeof(double));
	char *text = malloc(big + 1);
	struct rl_reward_failures fail;

	memset(text, 'q', big);
	text[big] = '\0';
	for (size_t i = 0; i < n; i++)
		its[i] = (struct rl_reward_item){text, NULL, text, NULL};
	char *log = run("exit 0", 5, 2, its, n, rewards, &fail);

	cr_expect_eq(fail.crashed, n);
	expect_contains(log, "sample 0: exited with status 0");
	free(log);
	free(its);
	free(rewards);
	free(text);
}

Test(reward_command, large_input_no_deadlock)
{
	const size_t n = 1000, big = 64 * 1024;
	struct rl_reward_item *its = calloc(n, sizeof(*its));
	double *rewards = calloc(n, sizeof(double));
	char *text = malloc(big + 1);
	struct rl_reward_failures fail;
	char *cmd = prog("awk -f", "echo_index.awk");

	for (size_t i = 0; i < big; i++)
		text[i] = "lorem ipsum "[i % 12];
	text[big] = '\0';
	for (size_t i = 0; i < n; i++)
		its[i] = (struct rl_reward_item){"prompt", NULL, text, "1"};
	for (int workers = 1; workers <= 3; workers += 2) {
		free(run(cmd, 20, workers, its, n, rewards, &fail));
		for (size_t i = 0; i < n; i++)
			cr_expect_eq(rewards[i], (double)i, "workers %d item %zu", workers, i);
		cr_expect(fail.crashed == 0 && fail.timed_out == 0 && fail.bad_output == 0);
	}
	free(cmd);
	free(its);
	free(rewards);
	free(text);
}

Test(reward_command, json_escaping)
{
	const struct rl_reward_item its[2] = {
	    {"say \"hi\"", NULL, "a\\b\nc \xc3\xa9\t/", "ctrl \x01"},
	    {"p", "q", "bad \xff byte", NULL},
	};
	double rewards[2];
	struct rl_reward_failures fail;
	char *cmd = prog("sh", "check_escapes.sh");

	free(run(cmd, 5, 1, its, 2, rewards, &fail));
	cr_expect_eq(rewards[0], 1.0);
	cr_expect_eq(rewards[1], 1.0);
	free(cmd);
}

/* With no descriptor left for a pipe, nothing can start: -1 and zeros. */
Test(reward_command, cannot_start)
{
	struct rlimit old, low;
	int fds[256], nfd = 0, rc;
	double rewards[3] = {5, 5, 5};
	struct rl_reward_failures fail;
	char err[256] = "";

	make_items();
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 64;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	while (nfd < 256 && (fds[nfd] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		nfd++;
	struct rl_reward_program echo = {"echo 1", 5, 2, NULL, 0};
	rc = rl_reward_command(&echo, items, 3, rewards, &fail, NULL, err, sizeof(err));
	while (nfd > 0)
		close(fds[--nfd]);
	setrlimit(RLIMIT_NOFILE, &old);
	cr_expect_eq(rc, -1);
	cr_expect(strstr(err, "cannot start") != NULL, "%s", err);
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(rewards[i], 0.0);
	cr_expect_eq(fail.crashed, 3);
}

/* Copies run at once: 8 items of 0.2 s each take about ceil(8/W) * 0.2 s
 * with W copies, 1.6 s with one. Compared with the serial run of the same
 * test, not with absolute times: 4 copies must take under half its time,
 * and at least the two items each copy sleeps through in turn. */
Test(reward_command, workers_run_at_once)
{
	const double sleep_s = 0.2;
	double rewards[8], t0, serial, parallel;
	struct rl_reward_failures fail;
	char *cmd, *script = prog("sh", "sleep_each.sh");

	cr_assert_geq(asprintf(&cmd, "SLEEP_S=%g %s", sleep_s, script), 0);
	make_items();
	t0 = now_s();
	free(run(cmd, 30, 1, items, 8, rewards, &fail));
	serial = now_s() - t0;
	cr_expect_eq(fail.crashed + fail.timed_out + fail.bad_output, 0);
	t0 = now_s();
	free(run(cmd, 30, 4, items, 8, rewards, &fail));
	parallel = now_s() - t0;
	cr_expect_eq(fail.crashed + fail.timed_out + fail.bad_output, 0);
	for (size_t i = 0; i < 8; i++)
		cr_expect_eq(rewards[i], 1.0, "item %zu", i);
	cr_expect_geq(serial, 8 * sleep_s, "serial %.2f s", serial);
	cr_expect_geq(parallel, 2 * sleep_s, "parallel %.2f s", parallel);
	cr_expect_lt(parallel, 0.5 * serial, "4 copies took %.2f s, one %.2f s", parallel, serial);
	free(cmd);
	free(script);
}

/* num_workers < 1: the CPUs this process may run on, as nproc(1) counts
 * them. */
Test(reward_command, default_workers_are_the_cpus)
{
	/* nproc would follow OMP_NUM_THREADS, which has nothing to say here */
	FILE *p = popen("env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc", "r");
	int cpus = 0;

	cr_assert_not_null(p);
	cr_assert_eq(fscanf(p, "%d", &cpus), 1);
	pclose(p);
	cr_expect_eq(rl_reward_workers(0), cpus);
	cr_expect_eq(rl_reward_workers(-1), cpus);
	cr_expect_eq(rl_reward_workers(3), 3);
}

/* A program that hangs on every item costs the call's timeout, not one
 * timeout per item (20 per copy here): every item is timed out. */
Test(reward_command, hanging_program_costs_one_timeout)
{
	double rewards[N];
	struct rl_reward_failures fail;
	const double timeout = 0.5;

	make_items();
	double t0 = now_s();
	char *log = run("exec sleep 1000", timeout, 2, items, N, rewards, &fail);
	double dt = now_s() - t0;

	cr_expect_eq(fail.timed_out, N);
	cr_expect_eq(fail.crashed + fail.bad_output, 0);
	cr_expect_geq(dt, timeout);
	/* one timeout and the killing; a timeout per item would be 10 s */
	cr_expect_lt(dt, 4 * timeout, "took %.2f s", dt);
	expect_contains(log, "samples 0-19: not scored within the call's 0.5 s, killed");
	expect_contains(log, "samples 20-39: not scored within the call's 0.5 s, killed");
	free(log);
}

static size_t count_of(const char *text, const char *needle)
{
	size_t n = 0;

	for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* A program that crashes on every item: its traceback is shown once, the
 * failures are listed ten at a time and counted, and the first failure
 * keeps the traceback's last line for the caller. */
Test(reward_command, crash_traceback_shown_once)
{
	double rewards[N];
	struct rl_reward_failures fail;
	char *cmd = prog("sh", "traceback.sh");

	make_items();
	char *log = run(cmd, 30, 2, items, N, rewards, &fail);

	cr_expect_eq(fail.crashed, N);
	cr_expect_eq(count_of(log, "Traceback (most recent call last):"), 1, "%s", log);
	cr_expect_eq(count_of(log, "  | ZeroDivisionError: division by zero"), 1, "%s", log);
	cr_expect_eq(count_of(log, ": exited with status 1"), 10, "%s", log);
	expect_contains(log, "30 more failures not listed (in all: 40 crashed, 0 timed out");
	expect_contains(log, "39 more copies wrote the same stderr as one shown above");
	cr_expect(strstr(fail.first, "exited with status 1: ZeroDivisionError: division by zero"),
	          "first: %s", fail.first);
	free(log);
	free(cmd);
}

/* ---- rl_reward_program_check ---- */

static char *check(const char *command)
{
	static char why[8192];

	why[0] = '\0';
	return rl_reward_program_check(command, why, sizeof why) ? why : NULL;
}

#define expect_refused(command, needle)                                                            \
	do {                                                                                       \
		const char *w_ = check(command);                                                   \
		cr_expect(w_ &&strstr(w_, needle), "%s: %s", command, w_ ? w_ : "accepted");       \
	} while (0)

Test(program_check, runnable_commands_pass)
{
	char *script = prog("sh", "len_mod3.awk");

	cr_expect_null(check(script), "%s", script); /* exec sh '<path>' */
	cr_expect_null(check("echo 1"));
	cr_expect_null(check("FOO=1 BAR='a b' exec awk -f /dev/null"));
	cr_expect_null(check("sh -e -c 'echo 1'"));
	cr_expect_null(check("python3 -m judge"));
	cr_expect_null(check("$HOME/judge.py"), "expansions are the shell's");
	cr_expect_null(check("cat | awk '{print 1}'"));
	free(script);
}

Test(program_check, missing_and_not_executable_refused)
{
	char dir[] = "/tmp/rl-check-XXXXXX", path[256], cmd[600];

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/judge.py", dir);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("print(1)\n", f);
	fclose(f);
	chmod(path, 0644);

	expect_refused("/nonexistent/judge.py --fast", "/nonexistent/judge.py: no such file");
	expect_refused(path, "is not executable (chmod +x it");
	snprintf(cmd, sizeof cmd, "'%s' x", dir);
	expect_refused(cmd, "is a directory");
	expect_refused("no-such-reward-program-xyz",
	               "no-such-reward-program-xyz: not found in PATH");
	expect_refused("exec python3 -u /nonexistent/judge.py",
	               "/nonexistent/judge.py: no such file");
	expect_refused("sh \"/nonexistent/a b.sh\"", "/nonexistent/a b.sh: no such file");
	expect_refused("   ", "the command is empty");
	/* through its interpreter the same file is fine */
	snprintf(cmd, sizeof cmd, "sh %s", path);
	cr_expect_null(check(cmd), "%s", cmd);
	chmod(path, 0755);
	cr_expect_null(check(path), "%s", path);
	unlink(path);
	rmdir(dir);
}

/* rl_rewarder_setup: which runs play episodes, whose rewards come with
 * them (the built-in multi-turn tasks' environments, an env with
 * multi_turn), and which score single responses. */
#include "runtime/config/diag.h"
#include "runtime/reward/rewarder.h"

static void setup_from(const char *yaml, struct rl_config *cfg, struct rl_reward *r, int want_rc,
                       char *err, size_t errlen)
{
	struct rl_diags d = {0};

	cr_assert_eq(rl_config_load_text("t.yaml", yaml, strlen(yaml), ".", NULL, 0, cfg, &d), 0,
	             "config: %s", d.n ? d.v[0].msg : "?");
	rl_diags_free(&d);
	cr_assert_eq(rl_rewarder_setup(r, cfg, NULL, err, errlen), want_rc, "%s", err);
}

Test(rewarder, multi_turn_runs)
{
	struct rl_config cfg;
	struct rl_reward r;
	char err[512] = "";
	const char *model = "policy:\n  model_name: builtin:tiny-llama\n";
	char *y = NULL;

	cr_assert_geq(asprintf(&y, "%sdata:\n  dataset_name: calculator\n", model), 0);
	setup_from(y, &cfg, &r, 0, err, sizeof err);
	cr_expect(r.multi_turn);
	cr_expect_eq(r.kind, RL_REWARD_TASK);
	cr_expect_eq(r.task, RL_TASK_CALCULATOR);
	cr_expect_str_eq(r.name, "calculator");
	cr_expect_null(r.env);
	rl_config_free(&cfg);
	free(y);

	cr_assert_geq(asprintf(&y, "%sdata:\n  dataset_name: guess\n", model), 0);
	setup_from(y, &cfg, &r, 0, err, sizeof err);
	cr_expect(r.multi_turn);
	cr_expect_str_eq(r.name, "guess");
	rl_config_free(&cfg);
	free(y);

	cr_assert_geq(asprintf(&y, "%sdata:\n  dataset_name: arithmetic\n", model), 0);
	setup_from(y, &cfg, &r, 0, err, sizeof err);
	cr_expect(!r.multi_turn);
	rl_config_free(&cfg);
	free(y);

	/* a user's environment: the program is checked as a reward program's */
	cr_assert_geq(asprintf(&y,
	                       "%sdata:\n  dataset_name: calculator\n  env_name: tools\n"
	                       "env:\n  tools:\n    command: /bin/cat\n    multi_turn: true\n"
	                       "  plain:\n    command: /bin/cat\n",
	                       model),
	              0);
	setup_from(y, &cfg, &r, 0, err, sizeof err);
	cr_expect(r.multi_turn);
	cr_expect_eq(r.kind, RL_REWARD_COMMAND);
	cr_expect_str_eq(r.env->name, "tools");
	rl_config_free(&cfg);
	free(y);

	cr_assert_geq(asprintf(&y,
	                       "%sdata:\n  dataset_name: calculator\n  env_name: plain\n"
	                       "env:\n  plain:\n    command: /bin/cat\n",
	                       model),
	              0);
	setup_from(y, &cfg, &r, 0, err, sizeof err);
	cr_expect(!r.multi_turn, "a reward program scores single responses");
	rl_config_free(&cfg);
	free(y);

	cr_assert_geq(asprintf(&y,
	                       "%sdata:\n  dataset_name: calculator\n  env_name: tools\n"
	                       "env:\n  tools:\n    command: /no/such/env-program\n"
	                       "    multi_turn: true\n",
	                       model),
	              0);
	setup_from(y, &cfg, &r, -1, err, sizeof err);
	cr_expect(strstr(err, "env.tools.command '/no/such/env-program' cannot run") != NULL, "%s",
	          err);
	rl_config_free(&cfg);
	free(y);
}
