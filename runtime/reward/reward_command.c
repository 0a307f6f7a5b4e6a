/* The external reward program: one poll() loop drives every copy at once,
 * writing JSON lines as each stdin pipe accepts them and reading rewards as
 * they come, so that a program answering line by line never deadlocks
 * against a large input. Each copy runs in its own process group, so that a
 * timeout also kills what its shell started. Each copy's stderr comes
 * through a pipe of ours and is shown when the copy ends, each distinct
 * text once per call: a program that crashes on every sample shows its
 * traceback once, not once per sample. */
#define _GNU_SOURCE
#include "runtime/base/clock.h"
#include "runtime/reward/program_io.h"
#include "runtime/reward/reward_command.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A reward is a short number; longer lines are garbage and are not kept. */
#define MAX_LINE 256
/* How long a copy may take to exit once its output is over. */
#define EXIT_GRACE_S 5.0
/* Poll interval while waiting for a copy that closed its stdout to exit:
 * there is no portable descriptor for child exit without SIGCHLD. */
#define REAP_POLL_MS 2

struct worker {
	size_t begin, end;     /* the share: items [begin, end) */
	size_t next_write;     /* the next item to send */
	size_t next_read;      /* the item the next reward line is for */
	struct rl_prog_copy c; /* the running copy (pid 0: none) */
	size_t copy_begin;     /* the first item the running copy was given */
	char *wline;           /* the JSON line being written */
	size_t wlen, woff;
	char line[MAX_LINE]; /* the partial reward line read so far */
	size_t llen;
	bool overlong;
	bool no_restart; /* the shell did not find the command */
	/* 1 + the item a copy stopped with the job was on, 0 for none */
	size_t stop_restart;
	double deadline; /* monotonic seconds; see arm() */
};

struct job {
	const struct rl_reward_program *program;
	double round_end; /* when the last round's poll returned; 0 before */
	const struct rl_reward_item *items;
	double *rewards;
	struct rl_reward_failures *fail;
	struct rl_prog_sigpipe sigpipe;
	struct rl_prog_log lg;
	size_t started;
	int spawn_errno;
	double batch_deadline; /* monotonic seconds; INFINITY without a timeout */
};

/* ---- the JSON lines ---- */

static json_t *json_text(const char *s)
{
	return rl_prog_json_text(s, s ? strlen(s) : 0);
}

/* The line for item index, newline included; NULL when out of memory. */
static char *json_line(const struct rl_reward_item *it, size_t index, size_t *len)
{
	return rl_prog_json_line(
	    json_pack("{s:I, s:o?, s:o?, s:o?, s:o?}", "index", (json_int_t)index, "prompt",
	              json_text(it->prompt), "problem", json_text(it->problem), "response",
	              json_text(it->response), "expected_answer", json_text(it->expected)),
	    len);
}

/* ---- the copies ---- */

/* How long one reward may take: sample_timeout_s where it is shorter than
 * the call's bound, else that bound (<= 0: none). */
static double sample_timeout(const struct rl_reward_program *p)
{
	double s = p->sample_timeout_s;

	return s > 0 && (p->timeout_s <= 0 || s < p->timeout_s) ? s : p->timeout_s;
}

/* The deadline of a running copy: the timeout while it owes rewards, a grace
 * period to finish once it owes none. */
static void arm(const struct job *j, struct worker *w)
{
	double timeout = sample_timeout(j->program);
	double grace = timeout > 0 && timeout < EXIT_GRACE_S ? timeout : EXIT_GRACE_S;

	if (w->next_read < w->end && w->c.out_fd >= 0)
		w->deadline = timeout > 0 ? rl_now() + timeout : INFINITY;
	else
		w->deadline = rl_now() + grace;
}

/* The ended copy's stderr, under a line naming the samples it was given
 * up to last. */
static void show_err(struct job *j, struct worker *w, size_t last)
{
	char header[96];

	if (last > w->copy_begin)
		snprintf(header, sizeof header, "stderr of the copy given samples %zu-%zu",
		         w->copy_begin, last);
	else
		snprintf(header, sizeof header, "stderr of the copy given sample %zu",
		         w->copy_begin);
	rl_prog_show_err(&j->lg, &w->c, header);
}

/* Scores the rest of the share 0 as crashed. */
static void give_up(struct job *j, struct worker *w)
{
	j->fail->crashed += w->end - w->next_read;
	w->next_read = w->end;
}

/* Starts a fresh copy for the rest of the share, if any is left. */
static void start(struct job *j, struct worker *w)
{
	free(w->wline);
	w->wline = NULL;
	w->llen = 0;
	w->overlong = false;
	w->next_write = w->next_read;
	w->copy_begin = w->next_read;
	if (w->next_read >= w->end || w->no_restart)
		return;
	int rc = rl_prog_spawn(&w->c, j->program->command, &j->sigpipe.caller_mask);

	if (rc != 0) {
		j->spawn_errno = rc;
		rl_prog_log_failure(&j->lg, NULL, "samples %zu-%zu: cannot start: %s", w->next_read,
		                    w->end - 1, strerror(rc));
		give_up(j, w);
		return;
	}
	j->started++;
	arm(j, w);
}

/* The copy has been reaped with status: account for what it left undone. */
static void finished(struct job *j, struct worker *w, int status)
{
	char last[200];

	w->c.pid = 0;
	rl_prog_close_fd(&w->c.in_fd);
	rl_prog_close_fd(&w->c.out_fd);
	rl_prog_read_err(&w->c);
	rl_prog_err_last_line(&w->c, last, sizeof last);
	if (w->next_read >= w->end) {
		show_err(j, w, w->end - 1);
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		rl_prog_log_failure(&j->lg, last,
		                    "samples %zu-%zu: exited with status 127 (%s), not restarting",
		                    w->next_read, w->end - 1, "command not found?");
		show_err(j, w, w->next_read);
		w->no_restart = true;
		give_up(j, w);
		return;
	}
	if (WIFSIGNALED(status) && j->program->stop_signals &&
	    sigismember(j->program->stop_signals, WTERMSIG(status)) == 1 &&
	    w->stop_restart != w->next_read + 1) {
		rl_prog_log_line(
		    &j->lg, "sample %zu: killed by signal %d, which stops the job: scored again",
		    w->next_read, WTERMSIG(status));
		show_err(j, w, w->next_read);
		w->stop_restart = w->next_read + 1;
		start(j, w);
		return;
	}
	if (WIFSIGNALED(status))
		rl_prog_log_failure(&j->lg, last, "sample %zu: killed by signal %d", w->next_read,
		                    WTERMSIG(status));
	else
		rl_prog_log_failure(&j->lg, last, "sample %zu: exited with status %d", w->next_read,
		                    WEXITSTATUS(status));
	show_err(j, w, w->next_read);
	j->fail->crashed++;
	w->next_read++;
	start(j, w);
}

static void on_deadline(struct job *j, struct worker *w)
{
	bool owed = w->next_read < w->end && w->c.out_fd >= 0;
	int status = rl_prog_kill(&w->c);

	if (!owed) { /* output over: it is a crash if rewards are missing */
		finished(j, w, status);
		return;
	}
	w->c.pid = 0;
	rl_prog_log_failure(&j->lg, NULL, "sample %zu: no reward within %g s", w->next_read,
	                    sample_timeout(j->program));
	show_err(j, w, w->next_read);
	j->fail->timed_out++;
	w->next_read++;
	start(j, w);
}

static void on_line(struct job *j, struct worker *w)
{
	char *end;
	double v;

	w->line[w->llen] = '\0';
	if (w->next_read >= w->end)
		return; /* more lines than items: ignored */
	size_t len = w->llen;

	while (len && strchr(" \t\r", w->line[len - 1]))
		w->line[--len] = '\0';
	errno = 0;
	v = strtod(w->line, &end);
	if (w->overlong || end == w->line || *end != '\0' || !isfinite(v)) {
		rl_prog_log_failure(&j->lg, NULL, "sample %zu: line '%.64s%s' is not a number",
		                    w->next_read, w->line, w->overlong ? "..." : "");
		j->fail->bad_output++;
		v = 0;
	}
	j->rewards[w->next_read++] = v;
	arm(j, w);
}

static void read_some(struct job *j, struct worker *w)
{
	char buf[4096];
	ssize_t got = read(w->c.out_fd, buf, sizeof(buf));

	if (got < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (got <= 0) { /* EOF: it exited or closed stdout; reap it next */
		rl_prog_close_fd(&w->c.out_fd);
		rl_prog_close_fd(&w->c.in_fd);
		arm(j, w);
		return;
	}
	for (ssize_t i = 0; i < got; i++) {
		if (buf[i] == '\n') {
			on_line(j, w);
			w->llen = 0;
			w->overlong = false;
		} else if (w->llen + 1 < MAX_LINE) {
			w->line[w->llen++] = buf[i];
		} else {
			w->overlong = true;
		}
	}
}

static void write_some(struct job *j, struct worker *w)
{
	while (w->c.in_fd >= 0) {
		if (!w->wline) {
			if (w->next_write >= w->end) {
				rl_prog_close_fd(
				    &w->c.in_fd); /* EOF for programs that read it all */
				return;
			}
			w->wline = json_line(&j->items[w->next_write], w->next_write, &w->wlen);
			w->woff = 0;
			if (!w->wline) { /* out of memory: the copy ends at EOF */
				rl_prog_close_fd(&w->c.in_fd);
				return;
			}
		}
		ssize_t put = write(w->c.in_fd, w->wline + w->woff, w->wlen - w->woff);

		if (put < 0) {
			if (errno != EAGAIN && errno != EINTR) /* EPIPE: it died; stdout tells */
				rl_prog_close_fd(&w->c.in_fd);
			return;
		}
		w->woff += (size_t)put;
		if (w->woff == w->wlen) {
			free(w->wline);
			w->wline = NULL;
			w->next_write++;
		}
	}
}

/* Late by this much past what it asked to wait, this process was held up
 * (its job suspended and resumed, or never scheduled), and cannot tell
 * how long each copy had to answer: every copy gets its time again from
 * now, so that a job suspended and resumed scores as it would have. */
static void after_late(struct job *j, struct worker *ws, int nw, double late)
{
	if (late < RL_PROG_HELD_UP_S)
		return;
	/* the call's time too starts again */
	if (!isinf(j->batch_deadline))
		j->batch_deadline = fmax(j->batch_deadline, rl_now() + j->program->timeout_s);
	for (int k = 0; k < nw; k++)
		if (ws[k].c.pid)
			arm(j, &ws[k]);
}

/* The call's time is up: every copy still owing rewards is killed (its
 * process group), and what it owes is timed out. */
static void end_batch(struct job *j, struct worker *ws, int nw)
{
	for (int k = 0; k < nw; k++) {
		struct worker *w = &ws[k];

		if (!w->c.pid)
			continue;
		if (w->c.out_fd >= 0) /* answers waiting in the pipe came in time */
			read_some(j, w);
		rl_prog_kill(&w->c);
		if (w->next_read < w->end) {
			size_t owed = w->end - w->next_read;

			rl_prog_log_failure(&j->lg, NULL,
			                    "samples %zu-%zu: not scored within the call's %g s, "
			                    "killed",
			                    w->next_read, w->end - 1, j->program->timeout_s);
			j->fail->timed_out += owed;
		}
		show_err(j, w, w->next_read < w->end ? w->next_read : w->end - 1);
		w->next_read = w->end;
	}
}

/* One round: poll every copy, move data, reap and enforce deadlines.
 * Returns false when every share is done. */
static bool step(struct job *j, struct worker *ws, int nw, struct pollfd *pfd)
{
	double now = rl_now(), next = INFINITY;
	int np = 0, wait_ms;
	bool busy = false, reaping = false;

	if (j->round_end > 0)
		after_late(j, ws, nw, now - j->round_end);
	if (now >= j->batch_deadline) {
		end_batch(j, ws, nw);
		return false;
	}
	next = j->batch_deadline;
	for (int k = 0; k < nw; k++) {
		struct worker *w = &ws[k];

		if (!w->c.pid)
			continue;
		busy = true;
		if (w->c.out_fd < 0) {
			int status;
			pid_t r = waitpid(w->c.pid, &status, WNOHANG);

			if (r == w->c.pid || (r < 0 && errno == ECHILD)) {
				finished(j, w, r == w->c.pid ? status : 0);
				return true;
			}
			reaping = true;
		}
		if (now >= w->deadline) {
			size_t owed = w->next_read;

			/* an answer waiting in the pipe came in time */
			if (w->c.out_fd >= 0)
				read_some(j, w);
			if (w->next_read == owed)
				on_deadline(j, w);
			return true;
		}
		next = fmin(next, w->deadline);
		if (w->c.in_fd >= 0)
			pfd[np++] = (struct pollfd){.fd = w->c.in_fd, .events = POLLOUT};
		if (w->c.out_fd >= 0)
			pfd[np++] = (struct pollfd){.fd = w->c.out_fd, .events = POLLIN};
		if (w->c.err_fd >= 0)
			pfd[np++] = (struct pollfd){.fd = w->c.err_fd, .events = POLLIN};
	}
	if (!busy)
		return false;
	wait_ms = isinf(next) ? -1 : (int)fmin(ceil((next - now) * 1e3), 1e9);
	if (reaping && (wait_ms < 0 || wait_ms > REAP_POLL_MS))
		wait_ms = REAP_POLL_MS;
	double polled = rl_now();
	int ready = poll(pfd, (nfds_t)np, wait_ms);

	j->round_end = rl_now();
	if (wait_ms >= 0)
		after_late(j, ws, nw, j->round_end - polled - wait_ms / 1e3);
	if (ready < 0)
		return true; /* EINTR: go round again */
	for (int k = 0, p = 0; k < nw; k++) {
		struct worker *w = &ws[k];

		if (!w->c.pid)
			continue;
		int in_fd = w->c.in_fd, out_fd = w->c.out_fd, err_fd = w->c.err_fd;

		if (in_fd >= 0 && pfd[p++].revents)
			write_some(j, w);
		if (out_fd >= 0 && pfd[p++].revents && w->c.out_fd >= 0)
			read_some(j, w);
		if (err_fd >= 0 && pfd[p++].revents)
			rl_prog_read_err(&w->c);
	}
	return true;
}

void rl_reward_failures_add(struct rl_reward_failures *into, const struct rl_reward_failures *from)
{
	into->crashed += from->crashed;
	into->timed_out += from->timed_out;
	into->bad_output += from->bad_output;
	if (!into->first[0] && from->first[0])
		memcpy(into->first, from->first, sizeof into->first);
}

int rl_reward_workers(int num_workers)
{
	cpu_set_t set;
	long n;

	if (num_workers >= 1)
		return num_workers;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int rl_reward_command(const struct rl_reward_program *p, const struct rl_reward_item *items,
                      size_t n, double *rewards, struct rl_reward_failures *fail, FILE *log,
                      char *err, size_t errlen)
{
	struct rl_reward_failures local = {0};
	struct job j = {.program = p,
	                .items = items,
	                .rewards = rewards,
	                .fail = fail ? fail : &local,
	                .lg = {.file = log, .prefix = "reward command: "}};
	size_t nw = (size_t)rl_reward_workers(p->num_workers);

	for (size_t i = 0; i < n; i++)
		rewards[i] = 0;
	*j.fail = (struct rl_reward_failures){0};
	j.lg.fail = j.fail;
	if (n == 0)
		return 0;
	if (!p->command) {
		if (err && errlen)
			snprintf(err, errlen, "reward command: no command");
		return -1;
	}
	if (nw > n)
		nw = n;
	struct worker *ws = calloc(nw, sizeof(*ws));
	struct pollfd *pfd = calloc(3 * nw, sizeof(*pfd));

	if (!ws || !pfd) {
		free(ws);
		free(pfd);
		if (err && errlen)
			snprintf(err, errlen, "reward command: out of memory for %zu workers", nw);
		return -1;
	}
	/* Writes to a dead copy must fail with EPIPE, not kill the caller. */
	rl_prog_sigpipe_block(&j.sigpipe);
	j.batch_deadline = p->timeout_s > 0 ? rl_now() + p->timeout_s : INFINITY;

	for (size_t k = 0; k < nw; k++) {
		ws[k] = (struct worker){.begin = n * k / nw,
		                        .end = n * (k + 1) / nw,
		                        .c = {.in_fd = -1, .out_fd = -1, .err_fd = -1}};
		ws[k].next_read = ws[k].begin;
		start(&j, &ws[k]);
	}
	while (step(&j, ws, (int)nw, pfd))
		;
	rl_prog_log_summary(&j.lg, "not a number");
	for (size_t k = 0; k < nw; k++) {
		free(ws[k].wline);
		free(ws[k].c.err_text);
	}
	free(ws);
	free(pfd);

	rl_prog_sigpipe_restore(&j.sigpipe);
	if (j.started == 0) {
		if (err && errlen)
			snprintf(err, errlen, "reward command: cannot start /bin/sh -c '%s': %s",
			         p->command, strerror(j.spawn_errno));
		return -1;
	}
	return 0;
}
