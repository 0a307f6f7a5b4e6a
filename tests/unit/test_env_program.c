/* The environment pool (runtime/env/env_program.h) against small shell
 * environments this test writes, well-behaved and not: answers out of
 * order, slow answers, a copy crashing mid-episode, garbage lines, a copy
 * that never answers, one killed by a stop signal, a missing command, the
 * episode's time limit, the bounds on copies and episodes per copy, and
 * nothing left behind by the close. Every environment here answers a turn
 * with its episode's messages so far joined by dots ("a.b."), so the
 * expected observation is written from the test's own script of messages,
 * and an episode restarted on a fresh copy proves, by the same text, that
 * its transcript went with it. The built-in and example environments are
 * test_env_builtin.c's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "runtime/env/env_program.h"
#include "tests/unit/child_checks.h"
#include "tests/unit/helpers.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the test's environments ---- */

static char *dir;

static void make_dir(void)
{
	dir = tmp_dir();
}

static void remove_dir(void)
{
	remove_tree(dir);
	free(dir);
}

/* What every test environment shares, in POSIX sh: `handle LINE` plays
 * the "dots" game (each answer is the episode's messages so far, each
 * followed by a dot; the message "stop" ends it with reward 1, others
 * answer reward 0.25), rebuilding an episode's messages from a start's
 * history. Each copy adds its pid to $DIR/copies, and keeps in
 * $DIR/max.PID the most episodes it held at once and in $DIR/ends the
 * episodes it was told to end. */
static const char *prelude =
    "n=0 live=0 max=0\n"
    "echo $$ >> \"$DIR/copies\"\n"
    "id_of() { id=${1#*\\\"episode\\\":}; id=${id%%[!0-9]*}; }\n"
    "msg_of() { m=${1#*\\\"message\\\":\\\"}; m=${m%%\\\"*}; }\n"
    "start() {\n"
    "	id_of \"$1\"; h=; rest=$1\n"
    "	while :; do case $rest in\n"
    "	*'\"message\":\"'*) rest=${rest#*\\\"message\\\":\\\"}; h=\"$h${rest%%\\\"*}.\" ;;\n"
    "	*) break ;; esac; done\n"
    "	eval \"h_$id=\\$h\"; live=$((live + 1))\n"
    "	if [ $live -gt $max ]; then max=$live; echo $max > \"$DIR/max.$$\"; fi\n"
    "}\n"
    "answer() {\n"
    "	id_of \"$1\"; msg_of \"$1\"; eval \"h=\\${h_$id}$m.\"; eval \"h_$id=\\$h\"\n"
    "	case $m in\n"
    "	stop) live=$((live - 1))\n"
    "		printf '{\"episode\":%s,\"observation\":\"%s\",\"reward\":1,\"done\":true}\\n' "
    "\"$id\" \"$h\" ;;\n"
    "	*) printf '{\"episode\":%s,\"observation\":\"%s\",\"reward\":0.25,\"done\":false}\\n' "
    "\"$id\" \"$h\" ;;\n"
    "	esac\n"
    "}\n"
    "handle() {\n"
    "	case $1 in\n"
    "	*'\"type\":\"start\"'*) start \"$1\" ;;\n"
    "	*'\"type\":\"step\"'*) answer \"$1\" ;;\n"
    "	*'\"type\":\"end\"'*) live=$((live - 1)); id_of \"$1\"; echo $id >> \"$DIR/ends\" ;;\n"
    "	esac\n"
    "}\n";

/* The command for an environment: the prelude, then body (its loop). */
static char *env_command(const char *name, const char *body)
{
	char path[128], *cmd = NULL;
	FILE *f;

	snprintf(path, sizeof path, "%s/%s.sh", dir, name);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "DIR='%s'\n%s%s", dir, prelude, body);
	fclose(f);
	cr_assert_geq(asprintf(&cmd, "exec sh '%s'", path), 0);
	return cmd;
}

static const char *good_loop = "while IFS= read -r line; do n=$((n + 1)); handle \"$line\"; done\n";

/* An environment that plays the game after `before` (sh, run on each
 * input line, $line, its number in $n). */
static char *env_loop(const char *name, const char *before)
{
	char *body = NULL, *cmd;

	cr_assert_geq(
	    asprintf(&body,
	             "while IFS= read -r line; do n=$((n + 1))\n%s\n\thandle \"$line\"\ndone\n",
	             before),
	    0);
	cmd = env_command(name, body);
	free(body);
	return cmd;
}

static int count_lines(const char *name)
{
	char path[128], line[256];
	int n = 0;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		n++;
	fclose(f);
	return n;
}

/* The pid a test environment wrote into $DIR/name. */
static int read_pid(const char *name)
{
	char path[128];
	int pid = 0;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "r");

	cr_assert_not_null(f, "no %s", path);
	cr_assert_eq(fscanf(f, "%d", &pid), 1);
	fclose(f);
	cr_assert_gt(pid, 0);
	return pid;
}

/* The largest of the copies' $DIR/max.PID. */
static int max_held(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int most = 0;

	cr_assert_not_null(d);
	while ((de = readdir(d)))
		if (strncmp(de->d_name, "max.", 4) == 0) {
			char path[512];
			int k = 0;
			FILE *f;

			snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
			f = fopen(path, "r");
			cr_assert_not_null(f);
			cr_assert_eq(fscanf(f, "%d", &k), 1);
			fclose(f);
			most = k > most ? k : most;
		}
	closedir(d);
	return most;
}

/* ---- driving a pool ---- */

struct harness {
	char *cmd; /* the program's command, the harness's to free */
	struct rl_env_pool *pool;
	char *log_text;
	size_t log_len;
	FILE *log;
	int fds;
	struct rl_reward_failures fail;
};

static struct rl_env_program program(const char *cmd)
{
	return (struct rl_env_program){.command = cmd,
	                               .num_workers = 1,
	                               .max_in_flight = 8,
	                               .turn_timeout_s = 10,
	                               .episode_timeout_s = 0,
	                               .stop_signals = NULL};
}

static void open_pool(struct harness *h, const struct rl_env_program *p, int n)
{
	char err[256] = "";

	*h = (struct harness){.cmd = (char *)p->command};
	h->fds = count_fds();
	h->log = open_memstream(&h->log_text, &h->log_len);
	cr_assert_not_null(h->log);
	cr_assert_eq(rl_env_pool_open(p, n, h->log, &h->pool, err, sizeof err), 0, "%s", err);
}

static const struct rl_env_start dots_start = {"prompt: play", "dots", "stop", "{\"k\":1}"};

static void begin(struct harness *h, int e)
{
	char err[256] = "";

	cr_assert_eq(rl_env_begin(h->pool, e, &dots_start, err, sizeof err), 0, "%s", err);
}

static void act(struct harness *h, int e, const char *msg)
{
	char err[256] = "";

	cr_assert_eq(rl_env_act(h->pool, e, msg, strlen(msg), err, sizeof err), 0, "%s", err);
}

/* Episodes 0..n-1 begun, each sent msg. */
static void begin_acting(struct harness *h, int n, const char *msg)
{
	for (int e = 0; e < n; e++) {
		begin(h, e);
		act(h, e, msg);
	}
}

/* The next answer, waiting at most limit_s (the test fails past it). */
static struct rl_env_answer next_answer(struct harness *h, double limit_s)
{
	struct rl_env_answer a;
	char err[256] = "";
	int n = 0;
	double until = now_s() + limit_s;

	while (n == 0) {
		cr_assert_lt(now_s(), until, "no answer within %g s; log:\n%.2000s", limit_s,
		             (fflush(h->log), h->log_text ? h->log_text : ""));
		cr_assert_eq(rl_env_wait(h->pool, 0.25, &a, 1, &n, err, sizeof err), 0, "%s", err);
	}
	return a;
}

static void expect_answer(const struct rl_env_answer *a, int e, const char *obs, double reward,
                          bool done)
{
	cr_expect_eq(a->episode, e, "episode %d, not %d", a->episode, e);
	cr_expect_eq(a->outcome, RL_ENV_ANSWERED, "episode %d: outcome %d", a->episode, a->outcome);
	cr_expect_str_eq(a->observation, obs);
	cr_expect_eq(a->observation_len, strlen(obs));
	cr_expect_eq(a->reward, reward, "episode %d: reward %g, not %g", a->episode, a->reward,
	             reward);
	cr_expect_eq(a->done, done);
}

/* The answer for e among the next k answers (any order), into out[e]. */
static void collect(struct harness *h, int k, struct rl_env_answer *by_episode, int n_eps,
                    double limit_s)
{
	for (int i = 0; i < k; i++) {
		struct rl_env_answer a = next_answer(h, limit_s);

		cr_assert(a.episode >= 0 && a.episode < n_eps);
		by_episode[a.episode] = a;
	}
}

/* Closes the pool and checks that nothing is left: no child, no
 * descriptor, no SIGPIPE pending or blocked. The failures and the log
 * stay in h. */
static void close_pool(struct harness *h)
{
	sigset_t set;

	rl_env_pool_failures(h->pool, &h->fail);
	rl_env_pool_close(h->pool);
	h->pool = NULL;
	fclose(h->log);
	errno = 0;
	cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1, "a child is left");
	cr_expect_eq(errno, ECHILD);
	cr_expect_eq(count_fds(), h->fds, "descriptors leaked");
	sigpending(&set);
	cr_expect(!sigismember(&set, SIGPIPE), "SIGPIPE left pending");
	pthread_sigmask(SIG_BLOCK, NULL, &set);
	cr_expect(!sigismember(&set, SIGPIPE), "SIGPIPE left blocked");
}

/* What the harness holds after close_pool: the log and the command. */
static void release(struct harness *h)
{
	free(h->log_text);
	free(h->cmd);
}

static void expect_no_failures(const struct harness *h)
{
	cr_expect_eq(h->fail.crashed + h->fail.timed_out + h->fail.bad_output, 0,
	             "failures: %zu crashed, %zu timed out, %zu bad; log:\n%s", h->fail.crashed,
	             h->fail.timed_out, h->fail.bad_output, h->log_text);
}

TestSuite(env_program, .init = make_dir, .fini = remove_dir, .timeout = 60);

/* Four episodes of three turns each; the environment answers each batch
 * of four steps in reverse order. */
Test(env_program, answers_out_of_order)
{
	char *cmd = env_command(
	    "reverse",
	    "k=0\n"
	    "while IFS= read -r line; do\n"
	    "	case $line in\n"
	    "	*'\"type\":\"step\"'*) k=$((k + 1)); eval \"s_$k=\\$line\"\n"
	    "		if [ $k = 4 ]; then\n"
	    "			while [ $k -gt 0 ]; do eval \"handle \\\"\\$s_$k\\\"\"; "
	    "k=$((k - 1)); done\n"
	    "		fi ;;\n"
	    "	*) handle \"$line\" ;;\n"
	    "	esac\n"
	    "done\n");
	struct rl_env_program p = program(cmd);
	struct harness h;
	struct rl_env_answer got[4];
	const char *turns[3] = {"a", "b", "stop"}, *obs[3] = {"a.", "a.b.", "a.b.stop."};

	open_pool(&h, &p, 4);
	for (int e = 0; e < 4; e++)
		begin(&h, e);
	for (int t = 0; t < 3; t++) {
		for (int e = 0; e < 4; e++)
			act(&h, e, turns[t]);
		struct rl_env_answer first = next_answer(&h, 5);

		cr_expect_eq(first.episode, 3, "the last step's answer comes first");
		got[first.episode] = first;
		collect(&h, 3, got, 4, 5);
		for (int e = 0; e < 4; e++) {
			expect_answer(&got[e], e, obs[t], t == 2 ? 1.0 : 0.25, t == 2);
			free(got[e].observation);
		}
	}
	for (int e = 0; e < 4; e++)
		rl_env_end(h.pool, e);
	close_pool(&h);
	expect_no_failures(&h);
	cr_expect_eq(count_lines("copies"), 1);
	cr_expect_eq(count_lines("ends"), 0, "an episode answered done is not told to end");
	release(&h);
}

static const char *step_takes_0_3_s = "	case $line in *'\"type\":\"step\"'*) sleep 0.3 ;; esac\n";

/* Answers taking 0.3 s each, under a 2 s turn timeout: no failure. */
Test(env_program, slow_within_the_timeout)
{
	char *cmd = env_loop("slow", step_takes_0_3_s);
	struct rl_env_program p = program(cmd);
	struct harness h;
	struct rl_env_answer got[3];

	p.turn_timeout_s = 2;
	open_pool(&h, &p, 3);
	begin_acting(&h, 3, "x");
	collect(&h, 3, got, 3, 10);
	for (int e = 0; e < 3; e++) {
		expect_answer(&got[e], e, "x.", 0.25, false);
		free(got[e].observation);
		rl_env_end(h.pool, e);
	}
	close_pool(&h);
	expect_no_failures(&h);
	cr_expect_eq(count_lines("ends"), 3, "each episode ended is told");
	release(&h);
}

/* "slow" takes 5 s under a 1 s turn timeout: that episode times out, the
 * copy (silent while owing it) is killed, and the other episodes go on in
 * a fresh copy from their transcripts. */
Test(env_program, slow_past_the_timeout)
{
	char *cmd =
	    env_loop("slowone", "	case $line in *'\"message\":\"slow\"'*) sleep 5 ;; esac\n");
	struct rl_env_program p = program(cmd);
	struct harness h;
	struct rl_env_answer got[3];

	p.turn_timeout_s = 1;
	open_pool(&h, &p, 3);
	begin_acting(&h, 3, "a");
	collect(&h, 3, got, 3, 5);
	for (int e = 0; e < 3; e++)
		free(got[e].observation);
	act(&h, 1, "b");
	act(&h, 2, "b");
	collect(&h, 2, got, 3, 5);
	expect_answer(&got[1], 1, "a.b.", 0.25, false);
	expect_answer(&got[2], 2, "a.b.", 0.25, false);
	free(got[1].observation);
	free(got[2].observation);

	double t0 = now_s();
	act(&h, 0, "slow");
	struct rl_env_answer a = next_answer(&h, 5);
	double took = now_s() - t0;

	cr_expect_eq(a.episode, 0);
	cr_expect_eq(a.outcome, RL_ENV_TIMED_OUT);
	cr_expect(a.done);
	cr_expect_eq(a.reward, 0);
	/* the 1 s turn timeout, and a generous margin for a loaded machine */
	cr_expect(took >= 0.9 && took < 3.0, "timed out after %g s", took);
	free(a.observation);
	rl_env_end(h.pool, 0);
	act(&h, 1, "stop");
	act(&h, 2, "c");
	collect(&h, 2, got, 3, 5);
	expect_answer(&got[1], 1, "a.b.stop.", 1.0, true);
	expect_answer(&got[2], 2, "a.b.c.", 0.25, false);
	free(got[1].observation);
	free(got[2].observation);
	rl_env_end(h.pool, 1);
	rl_env_end(h.pool, 2);
	close_pool(&h);
	cr_expect_eq(h.fail.timed_out, 1);
	cr_expect_eq(h.fail.crashed + h.fail.bad_output, 0);
	cr_expect_eq(count_lines("copies"), 2, "the hung copy was replaced once");
	expect_contains(h.log_text, "env command: episode 0 turn 2: no answer within 1 s");
	expect_contains(h.log_text, "killed");
	cr_expect(strstr(h.fail.first, "episode 0 turn 2: no answer within 1 s") == h.fail.first,
	          "first: %s", h.fail.first);
	release(&h);
}

/* The copy exits on its 7th input line (once), before answering it: the
 * episode owed that answer crashed; the two others, waiting on the
 * model, go on in a fresh copy and finish with the answers an
 * uninterrupted copy gives. Its stderr is shown once. */
Test(env_program, crash_mid_episode)
{
	char *cmd = env_loop(
	    "crash", "	if [ $n = 7 ] && [ ! -e \"$DIR/crashed\" ]; then\n"
	             "		touch \"$DIR/crashed\"; echo \"boom at line $n\" >&2; exit 3\n"
	             "	fi\n");
	struct rl_env_program p = program(cmd);
	struct harness h;
	struct rl_env_answer got[3];

	open_pool(&h, &p, 3);
	for (int e = 0; e < 3; e++)
		begin(&h, e); /* lines 1-3 */
	for (int e = 0; e < 3; e++) {
		act(&h, e, "a"); /* lines 4-6 */
		got[e] = next_answer(&h, 5);
		expect_answer(&got[e], e, "a.", 0.25, false);
		free(got[e].observation);
	}
	act(&h, 1, "b"); /* line 7 */
	struct rl_env_answer a = next_answer(&h, 5);

	cr_expect_eq(a.episode, 1);
	cr_expect_eq(a.outcome, RL_ENV_CRASHED);
	cr_expect(a.done);
	free(a.observation);
	rl_env_end(h.pool, 1);
	for (int e = 0; e < 3; e += 2)
		act(&h, e, "b");
	collect(&h, 2, got, 3, 5);
	for (int e = 0; e < 3; e += 2) {
		expect_answer(&got[e], e, "a.b.", 0.25, false);
		free(got[e].observation);
		act(&h, e, "stop");
	}
	collect(&h, 2, got, 3, 5);
	for (int e = 0; e < 3; e += 2) {
		expect_answer(&got[e], e, "a.b.stop.", 1.0, true);
		free(got[e].observation);
		rl_env_end(h.pool, e);
	}
	close_pool(&h);
	cr_expect_eq(h.fail.crashed, 1);
	cr_expect_eq(h.fail.timed_out + h.fail.bad_output, 0);
	cr_expect_eq(count_lines("copies"), 2);
	expect_contains(h.log_text, "episode 1 turn 2: copy 1 exited with status 3");
	expect_contains(h.log_text, "  | boom at line 7");
	expect_contains(h.fail.first, "boom at line 7");
	release(&h);
}

/* A copy that dies while a child it left holds its stdout open (so no
 * end of file comes): its death is seen all the same, well before the
 * turn timeout, and the child ends with it. */
Test(env_program, crash_with_a_child_holding_stdout)
{
	char *cmd = env_loop("orphan",
	                     "	if [ $n = 1 ]; then sleep 1000 & echo $! > \"$DIR/sleeper\"; fi\n"
	                     "	case $line in *'\"message\":\"crash\"'*) exit 3 ;; esac\n");
	struct rl_env_program p = program(cmd);
	struct harness h;

	open_pool(&h, &p, 1);
	double t0 = now_s();

	begin_acting(&h, 1, "crash");
	struct rl_env_answer a = next_answer(&h, 5);
	double took = now_s() - t0;

	cr_expect_eq(a.outcome, RL_ENV_CRASHED);
	cr_expect(took < 2.0, "its death seen after %g s (turn timeout 10 s)", took);
	free(a.observation);
	rl_env_end(h.pool, 0);
	close_pool(&h);
	cr_expect_eq(h.fail.crashed, 1);
	cr_expect(process_dead(read_pid("sleeper")), "the copy's child outlived it");
	release(&h);
}

/* Lines that are not answers: one naming its episode but not JSON, one
 * with a wrong type, one with a NaN reward (Python's json.dumps writes
 * NaN) fail their episodes as bad output; an answer for an unknown
 * episode, a line naming none, and a second answer to a turn are counted
 * and ignored, and the right answer after them is taken. */
Test(env_program, garbage)
{
	char *cmd = env_command(
	    "garbage",
	    "while IFS= read -r line; do\n"
	    "	id_of \"$line\"\n"
	    "	case $line in\n"
	    "	*'\"message\":\"nonjson\"'*) echo \"{\\\"episode\\\":$id, oops\" ;;\n"
	    "	*'\"message\":\"wrongtype\"'*) echo "
	    "\"{\\\"episode\\\":$id,\\\"observation\\\":5,\\\"reward\\\":0,\\\"done\\\":false}\" "
	    ";;\n"
	    "	*'\"message\":\"nan\"'*) echo "
	    "\"{\\\"episode\\\":$id,\\\"observation\\\":\\\"x\\\",\\\"reward\\\":NaN,\\\"done\\\":"
	    "false}\" ;;\n"
	    "	*'\"message\":\"unknown\"'*) echo "
	    "'{\"episode\":99999,\"observation\":\"x\",\"reward\":0,\"done\":false}'; "
	    "handle \"$line\" ;;\n"
	    "	*'\"message\":\"noid\"'*) echo 'hello'; echo '{\"observation\":1}'; "
	    "handle \"$line\" ;;\n"
	    "	*'\"message\":\"twice\"'*) handle \"$line\"; "
	    "echo "
	    "\"{\\\"episode\\\":$id,\\\"observation\\\":\\\"y\\\",\\\"reward\\\":0,\\\"done\\\":"
	    "false}\" ;;\n"
	    "	*) handle \"$line\" ;;\n"
	    "	esac\n"
	    "done\n");
	struct rl_env_program p = program(cmd);
	struct harness h;
	struct rl_env_answer got[6];
	const char *msgs[6] = {"nonjson", "wrongtype", "nan", "unknown", "noid", "twice"};

	open_pool(&h, &p, 6);
	for (int e = 0; e < 6; e++) {
		begin(&h, e);
		act(&h, e, msgs[e]);
		got[e] = next_answer(&h, 5);
		cr_expect_eq(got[e].episode, e);
	}
	/* the second answer to "twice" came after its first was taken */
	for (int e = 0; e < 3; e++) {
		cr_expect_eq(got[e].outcome, RL_ENV_BAD_OUTPUT, "%s: outcome %d", msgs[e],
		             got[e].outcome);
		cr_expect(got[e].done);
		cr_expect_eq(got[e].reward, 0);
	}
	expect_answer(&got[3], 3, "unknown.", 0.25, false);
	expect_answer(&got[4], 4, "noid.", 0.25, false);
	expect_answer(&got[5], 5, "twice.", 0.25, false);
	/* the second answer to "twice" comes while 5 waits on the model */
	struct rl_env_answer none;
	int n = -1;
	char err[256];

	cr_assert_eq(rl_env_wait(h.pool, 0.5, &none, 1, &n, err, sizeof err), 0);
	cr_expect_eq(n, 0);
	act(&h, 5, "stop"); /* the copy still plays */
	struct rl_env_answer last = next_answer(&h, 5);
	expect_answer(&last, 5, "twice.stop.", 1.0, true);
	free(last.observation);
	for (int e = 0; e < 6; e++) {
		free(got[e].observation);
		rl_env_end(h.pool, e);
	}
	close_pool(&h);
	cr_expect_eq(h.fail.bad_output, 3 + 1 + 2 + 1, "log:\n%s", h.log_text);
	cr_expect_eq(h.fail.crashed + h.fail.timed_out, 0);
	cr_expect_eq(count_lines("copies"), 1, "garbage does not cost the copy");
	expect_contains(h.log_text, "episode 0 turn 1: line '{\"episode\":0, oops' is not JSON");
	expect_contains(h.log_text, "episode 1 turn 1: line");
	expect_contains(h.log_text, "has no string \"observation\"");
	expect_contains(h.log_text, "episode 2 turn 1: line");
	expect_contains(h.log_text, "line 'hello' is not JSON: ignored");
	expect_contains(h.log_text, "answers an episode not waiting for an answer");
	release(&h);
}

/* A program that reads and never answers: every episode owed an answer
 * times out within the turn timeout (and a margin), and the hung copy is
 * killed with its process group (its `sleep` child included). */
Test(env_program, never_answers)
{
	char *cmd = env_command("mute", "sleep 1000 &\n"
	                                "echo $! > \"$DIR/sleeper\"\n"
	                                "while IFS= read -r line; do :; done\n"
	                                "wait\n");
	struct rl_env_program p = program(cmd);
	struct harness h;
	struct rl_env_answer got[3];

	p.turn_timeout_s = 0.5;
	open_pool(&h, &p, 3);
	double t0 = now_s();

	begin_acting(&h, 3, "a");
	collect(&h, 3, got, 3, 5);
	double took = now_s() - t0;

	for (int e = 0; e < 3; e++) {
		cr_expect_eq(got[e].outcome, RL_ENV_TIMED_OUT);
		free(got[e].observation);
		rl_env_end(h.pool, e);
	}
	cr_expect(took >= 0.45 && took < 2.5, "all timed out after %g s", took);
	int sleeper = read_pid("sleeper");

	close_pool(&h);
	cr_expect_eq(h.fail.timed_out, 3);
	cr_expect(process_dead(sleeper), "the copy's child %d outlived it", sleeper);
	release(&h);
}

/* A copy killed by one of the job's stop signals did not fail: its
 * episodes go on in a fresh copy, the turn it owed sent again. Without
 * stop signals, the same kill is a crash. */
static void stop_signal_case(bool listed)
{
	char *cmd = env_loop("sig", "	case $line in *'\"message\":\"sig\"'*)\n"
	                            "		if [ ! -e \"$DIR/signalled\" ]; then\n"
	                            "			touch \"$DIR/signalled\"; kill -USR1 $$\n"
	                            "		fi ;;\n"
	                            "	esac\n");
	struct rl_env_program p = program(cmd);
	struct harness h;
	struct rl_env_answer got[2];
	sigset_t stop;

	sigemptyset(&stop);
	sigaddset(&stop, SIGUSR1);
	p.stop_signals = listed ? &stop : NULL;
	open_pool(&h, &p, 2);
	begin_acting(&h, 2, "a");
	collect(&h, 2, got, 2, 5);
	free(got[0].observation);
	free(got[1].observation);
	act(&h, 0, "sig");
	got[0] = next_answer(&h, 5);
	if (listed) {
		expect_answer(&got[0], 0, "a.sig.", 0.25, false);
	} else {
		cr_expect_eq(got[0].outcome, RL_ENV_CRASHED);
	}
	free(got[0].observation);
	act(&h, 1, "stop");
	got[1] = next_answer(&h, 5);
	expect_answer(&got[1], 1, "a.stop.", 1.0, true);
	free(got[1].observation);
	rl_env_end(h.pool, 0);
	rl_env_end(h.pool, 1);
	close_pool(&h);
	cr_expect_eq(count_lines("copies"), 2);
	if (listed) {
		expect_no_failures(&h);
		expect_contains(h.log_text, "killed by signal 10, which stops the job");
	} else {
		cr_expect_eq(h.fail.crashed, 1);
		expect_contains(h.log_text, "episode 0 turn 2: copy 1 killed by signal 10");
	}
	release(&h);
}

Test(env_program, stop_signal_is_not_a_failure)
{
	stop_signal_case(true);
}

Test(env_program, other_signal_is_a_crash)
{
	stop_signal_case(false);
}

/* The shell finds no command (exit 127): the episodes owed answers
 * crash, and no copy is started again, however many turns follow. */
Test(env_program, command_not_found)
{
	char *cmd = NULL;
	struct harness h;
	struct rl_env_answer got[3];

	cr_assert_geq(asprintf(&cmd, "echo $$ >> '%s/copies'; exec /nonexistent/env-program", dir),
	              0);
	struct rl_env_program p = program(cmd);

	p.num_workers = 2;
	open_pool(&h, &p, 3);
	begin_acting(&h, 2, "a");
	collect(&h, 2, got, 3, 5);
	begin(&h, 2);
	act(&h, 2, "a");
	got[2] = next_answer(&h, 5);
	for (int e = 0; e < 3; e++) {
		cr_expect_eq(got[e].outcome, RL_ENV_CRASHED, "episode %d", e);
		free(got[e].observation);
		rl_env_end(h.pool, e);
	}
	close_pool(&h);
	cr_expect_eq(h.fail.crashed, 3);
	cr_expect_eq(count_lines("copies"), 1, "started once");
	expect_contains(h.log_text, "status 127 (command not found?), not restarting");
	expect_contains(h.fail.first, "not found");
	release(&h);
}

/* A 1 s episode timeout over turns of 0.3 s: the episode ends timed out
 * at about 1 s, at its fourth turn on an idle machine (at most three
 * answered: 3 x 0.3 s fit in 1 s, 4 do not; at least one on a loaded
 * one), and the program is told to end it. */
Test(env_program, episode_timeout)
{
	char *cmd = env_loop("paced", step_takes_0_3_s);
	struct rl_env_program p = program(cmd);
	struct harness h;
	struct rl_env_answer a;
	int answered = 0;

	p.turn_timeout_s = 5;
	p.episode_timeout_s = 1;
	open_pool(&h, &p, 1);
	double t0 = now_s();

	begin(&h, 0);
	for (;;) {
		act(&h, 0, "a");
		a = next_answer(&h, 5);
		if (a.outcome != RL_ENV_ANSWERED)
			break;
		answered++;
		free(a.observation);
	}
	double took = now_s() - t0;

	cr_expect_eq(a.outcome, RL_ENV_TIMED_OUT);
	free(a.observation);
	cr_expect(answered >= 1 && answered <= 3, "%d turns answered in 1 s at 0.3 s each",
	          answered);
	cr_expect(took >= 0.95 && took < 2.5, "ended after %g s", took);
	rl_env_end(h.pool, 0);
	close_pool(&h);
	cr_expect_eq(h.fail.timed_out, 1);
	cr_expect_eq(count_lines("ends"), 1, "the program was told");
	expect_contains(h.log_text, "episode 0: not over within 1 s");
	release(&h);
}

/* The environment holds this process still for 3 s (as a job suspended
 * and resumed would be) and answers half a second after it runs again:
 * under a 1 s turn timeout the answer came in time, the held time not
 * counted. */
Test(env_program, held_still_is_not_counted)
{
	char *cmd =
	    env_loop("hold", "	case $line in *'\"message\":\"late\"'*)\n"
	                     "		kill -STOP $PPID; sleep 3; kill -CONT $PPID; sleep 0.5 ;;\n"
	                     "	esac\n");
	struct rl_env_program p = program(cmd);
	struct harness h;

	p.turn_timeout_s = 1;
	open_pool(&h, &p, 1);
	begin_acting(&h, 1, "late");
	struct rl_env_answer a = next_answer(&h, 10);

	expect_answer(&a, 0, "late.", 0.25, false);
	free(a.observation);
	rl_env_end(h.pool, 0);
	close_pool(&h);
	expect_no_failures(&h);
	release(&h);
}

/* Two copies at most, three episodes each: six episodes start two
 * copies; a seventh waits for room, and gets it when one ends. */
Test(env_program, workers_and_episodes_per_copy)
{
	char *cmd = env_command("count", good_loop);
	struct rl_env_program p = program(cmd);
	struct harness h;
	struct rl_env_answer got[7];

	p.num_workers = 2;
	p.max_in_flight = 3;
	open_pool(&h, &p, 7);
	for (int e = 0; e < 7; e++)
		begin(&h, e);
	for (int e = 0; e < 7; e++)
		act(&h, e, "a");
	collect(&h, 6, got, 7, 5);
	struct rl_env_answer none;
	int n = -1;
	char err[256];

	cr_assert_eq(rl_env_wait(h.pool, 0.3, &none, 1, &n, err, sizeof err), 0);
	cr_expect_eq(n, 0, "episode 6 has no room until one ends");
	for (int e = 0; e < 6; e++) {
		expect_answer(&got[e], e, "a.", 0.25, false);
		free(got[e].observation);
	}
	rl_env_end(h.pool, 0);
	got[6] = next_answer(&h, 5);
	expect_answer(&got[6], 6, "a.", 0.25, false);
	free(got[6].observation);
	for (int e = 1; e < 7; e++)
		rl_env_end(h.pool, e);
	close_pool(&h);
	expect_no_failures(&h);
	cr_expect_eq(count_lines("copies"), 2);
	cr_expect_eq(max_held(), 3);
	release(&h);
}

/* A well-behaved copy that left a child running: the close ends both,
 * the copy's whole process group, whether the copy exits by itself at
 * the end of its input or not. */
static void close_ends_the_group(const char *after_loop)
{
	char *body = NULL, *cmd;
	struct harness h;

	cr_assert_geq(asprintf(&body, "sleep 1000 &\necho $! > \"$DIR/sleeper\"\n%s%s", good_loop,
	                       after_loop),
	              0);
	cmd = env_command("leaves", body);
	struct rl_env_program p = program(cmd);

	open_pool(&h, &p, 1);
	begin_acting(&h, 1, "stop");
	struct rl_env_answer a = next_answer(&h, 5);

	expect_answer(&a, 0, "stop.", 1.0, true);
	free(a.observation);
	rl_env_end(h.pool, 0);
	int sleeper = read_pid("sleeper");

	cr_assert_eq(kill(sleeper, 0), 0, "the child runs before the close");
	close_pool(&h);
	expect_no_failures(&h);
	cr_expect(process_dead(sleeper), "the copy's child %d outlived the close", sleeper);
	release(&h);
	free(body);
}

Test(env_program, close_ends_the_group_of_a_copy_that_exits)
{
	close_ends_the_group("");
}

Test(env_program, close_ends_the_group_of_a_copy_that_does_not)
{
	close_ends_the_group("sleep 1000\n");
}

/* The caller's mistakes are errors that say what is wrong, and change
 * nothing: a turn for an episode not begun, a second turn before the
 * answer, a turn after done, a second begin, metadata that is not JSON. */
Test(env_program, misuse)
{
	char *cmd = env_command("plain", good_loop);
	struct rl_env_program p = program(cmd);
	struct harness h;
	char err[256] = "";
	struct rl_env_start bad = dots_start;

	open_pool(&h, &p, 2);
	cr_expect_eq(rl_env_act(h.pool, 0, "a", 1, err, sizeof err), -1);
	cr_expect_str_eq(err, "env command: episode 0 is not waiting for the model's turn");
	bad.metadata = "{level: 2}";
	cr_expect_eq(rl_env_begin(h.pool, 1, &bad, err, sizeof err), -1);
	expect_contains(err, "env command: episode 1: its metadata is not JSON");
	cr_expect_eq(rl_env_begin(h.pool, 2, &dots_start, err, sizeof err), -1);
	expect_contains(err, "episode 2 is out of range (0-1)");
	begin(&h, 0);
	cr_expect_eq(rl_env_begin(h.pool, 0, &dots_start, err, sizeof err), -1);
	expect_contains(err, "episode 0 is in flight already");
	act(&h, 0, "stop");
	cr_expect_eq(rl_env_act(h.pool, 0, "b", 1, err, sizeof err), -1);
	struct rl_env_answer a = next_answer(&h, 5);

	expect_answer(&a, 0, "stop.", 1.0, true);
	free(a.observation);
	cr_expect_eq(rl_env_act(h.pool, 0, "c", 1, err, sizeof err), -1, "a turn after done");
	rl_env_end(h.pool, 0);
	begin(&h, 0); /* again, after its end */
	act(&h, 0, "d");
	a = next_answer(&h, 5);
	expect_answer(&a, 0, "d.", 0.25, false);
	free(a.observation);
	rl_env_end(h.pool, 0);
	close_pool(&h);
	expect_no_failures(&h);
	release(&h);
}

/* A message larger than a pipe holds, echoed back in the observation: no
 * deadlock. Then a copy that dies while being written to: EPIPE, no
 * SIGPIPE (this test process would die of it). */
Test(env_program, big_lines_and_a_dead_reader)
{
	char *cmd = env_command("big", good_loop);
	struct rl_env_program p = program(cmd);
	struct harness h;
	size_t len = 300000;
	char *big = malloc(len + 1), *want = malloc(len + 2);

	cr_assert(big && want);
	for (size_t i = 0; i < len; i++)
		big[i] = (char)('a' + i % 26);
	big[len] = '\0';
	memcpy(want, big, len);
	want[len] = '.';
	want[len + 1] = '\0';
	open_pool(&h, &p, 1);
	begin(&h, 0);
	act(&h, 0, big);
	struct rl_env_answer a = next_answer(&h, 20);

	expect_answer(&a, 0, want, 0.25, false);
	free(a.observation);
	rl_env_end(h.pool, 0);
	close_pool(&h);
	expect_no_failures(&h);
	release(&h);

	cmd = env_command("deaf", "exit 0\n");
	p = program(cmd);
	open_pool(&h, &p, 1);
	begin(&h, 0);
	usleep(200000);
	act(&h, 0, big);
	a = next_answer(&h, 5);
	cr_expect_eq(a.outcome, RL_ENV_CRASHED);
	free(a.observation);
	rl_env_end(h.pool, 0);
	close_pool(&h);
	cr_expect_eq(h.fail.crashed, 1);
	release(&h);
	free(big);
	free(want);
}
