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
#include "runtime/reward/reward_command.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* A reward is a short number; longer lines are garbage and are not kept. */
#define MAX_LINE 256
/* How long a copy may take to exit once its output is over. */
#define EXIT_GRACE_S 5.0
/* Poll interval while waiting for a copy that closed its stdout to exit:
 * there is no portable descriptor for child exit without SIGCHLD. */
#define REAP_POLL_MS 2
/* A round of the loop takes this long only when this process was not
 * running: stopped with its job (scontrol suspend, gang scheduling), or
 * never scheduled. */
#define HELD_UP_S 1.0
/* Of a copy's stderr, the last this many bytes are kept (a traceback ends
 * with what matters). */
#define ERR_KEEP 16384
/* Per call: failure lines and distinct stderr texts shown; the rest are
 * counted in one line at the end. */
#define MAX_FAILURE_LINES 10
#define MAX_STDERR_SHOWN  3

struct worker {
	size_t begin, end; /* the share: items [begin, end) */
	size_t next_write; /* the next item to send */
	size_t next_read;  /* the item the next reward line is for */
	pid_t pid;         /* the running copy, or 0 */
	int in_fd, out_fd; /* our ends of its stdin and stdout, or -1 */
	int err_fd;        /* our end of its stderr, or -1 */
	size_t copy_begin; /* the first item the running copy was given */
	char *err_text;    /* the tail of its stderr (ERR_KEEP bytes) */
	size_t err_len;
	bool err_cut; /* the head of its stderr was dropped */
	char *wline;  /* the JSON line being written */
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
	FILE *log;
	sigset_t child_mask;
	size_t started;
	int spawn_errno;
	double batch_deadline; /* monotonic seconds; INFINITY without a timeout */
	size_t failure_lines, failures_unlisted;
	uint64_t shown[MAX_STDERR_SHOWN]; /* hashes of the stderr texts shown */
	size_t n_shown, stderr_repeats, stderr_unshown;
};

/* ---- the JSON lines ---- */

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned lo = 0x80, hi = 0xBF;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xC2 && s[0] <= 0xDF) {
		len = 2;
	} else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
		len = 3;
		lo = s[0] == 0xE0 ? 0xA0 : lo;
		hi = s[0] == 0xED ? 0x9F : hi;
	} else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
		len = 4;
		lo = s[0] == 0xF0 ? 0x90 : lo;
		hi = s[0] == 0xF4 ? 0x8F : hi;
	} else {
		return 0;
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t k = 2; k < len; k++)
		if ((s[k] & 0xC0) != 0x80)
			return 0;
	return len;
}

/* A JSON string for s; generated text can end inside a character, which
 * jansson refuses, so invalid bytes become U+FFFD as in Python's "replace". */
static json_t *json_text(const char *s)
{
	if (!s)
		return json_null();
	json_t *v = json_string(s);

	if (v)
		return v;
	size_t n = strlen(s), o = 0;
	char *fixed = malloc(3 * n + 1);

	if (!fixed)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t len = utf8_seq((const unsigned char *)s + i, n - i);

		if (len) {
			memcpy(fixed + o, s + i, len);
			o += len;
			i += len;
		} else {
			memcpy(fixed + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	fixed[o] = '\0';
	v = json_string(fixed);
	free(fixed);
	return v;
}

/* The line for item index, newline included; NULL when out of memory. */
static char *json_line(const struct rl_reward_item *it, size_t index, size_t *len)
{
	json_t *o = json_pack("{s:I, s:o?, s:o?, s:o?, s:o?}", "index", (json_int_t)index, "prompt",
	                      json_text(it->prompt), "problem", json_text(it->problem), "response",
	                      json_text(it->response), "expected_answer", json_text(it->expected));
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL, *line;

	json_decref(o);
	if (!s)
		return NULL;
	*len = strlen(s);
	line = realloc(s, *len + 2);
	if (!line) {
		free(s);
		return NULL;
	}
	line[(*len)++] = '\n';
	line[*len] = '\0';
	return line;
}

/* ---- the copies ---- */

static void log_line(const struct job *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void log_line(const struct job *j, const char *fmt, ...)
{
	va_list ap;

	if (!j->log)
		return;
	va_start(ap, fmt);
	fputs("reward command: ", j->log);
	vfprintf(j->log, fmt, ap);
	fputc('\n', j->log);
	fflush(j->log);
	va_end(ap);
}

/* One failed sample (or run of samples): listed up to MAX_FAILURE_LINES per
 * call; the first is kept in fail->first with detail (the last line of the
 * copy's stderr), for the caller's error when every sample fails. */
static void log_failure(struct job *j, const char *detail, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void log_failure(struct job *j, const char *detail, const char *fmt, ...)
{
	char msg[sizeof j->fail->first];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* truncated when long: it is a summary */
	if (!j->fail->first[0] && snprintf(j->fail->first, sizeof j->fail->first, "%s%s%s", msg,
	                                   detail && *detail ? ": " : "", detail ? detail : "") < 0)
		j->fail->first[0] = '\0';
	if (j->failure_lines < MAX_FAILURE_LINES) {
		j->failure_lines++;
		log_line(j, "%s", msg);
	} else {
		j->failures_unlisted++;
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

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

	if (w->next_read < w->end && w->out_fd >= 0)
		w->deadline = timeout > 0 ? rl_now() + timeout : INFINITY;
	else
		w->deadline = rl_now() + grace;
}

/* A pipe whose ends are not 0, 1 or 2, so that dup2 onto the child's 0 and 1
 * never finds its source there already (it would keep O_CLOEXEC). */
static int cloexec_pipe(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	for (int k = 0; k < 2; k++) {
		if (fds[k] > 2)
			continue;
		int moved = fcntl(fds[k], F_DUPFD_CLOEXEC, 3);

		close(fds[k]);
		fds[k] = moved;
	}
	if (fds[0] < 0 || fds[1] < 0) {
		close_fd(&fds[0]);
		close_fd(&fds[1]);
		return -1;
	}
	return 0;
}

static int spawn(struct job *j, struct worker *w)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1}, rc;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t deflt;
	char *argv[] = {"sh", "-c", (char *)j->program->command, NULL};

	if (cloexec_pipe(in) != 0 || cloexec_pipe(out) != 0 || cloexec_pipe(errp) != 0) {
		rc = errno;
		close_fd(&in[0]);
		close_fd(&in[1]);
		close_fd(&out[0]);
		close_fd(&out[1]);
		return rc;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
	/* The child gets the caller's signal mask (not ours with SIGPIPE blocked)
	 * and SIGPIPE's default action, whatever the caller ignores. */
	posix_spawnattr_init(&attr);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
	                                    POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &j->child_mask);
	sigemptyset(&deflt);
	sigaddset(&deflt, SIGPIPE);
	posix_spawnattr_setsigdefault(&attr, &deflt);
	rc = posix_spawn(&w->pid, "/bin/sh", &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(in[0]);
	close(out[1]);
	close(errp[1]);
	if (rc != 0) {
		w->pid = 0;
		close(in[1]);
		close(out[0]);
		close(errp[0]);
		return rc;
	}
	fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
	fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
	fcntl(errp[0], F_SETFL, fcntl(errp[0], F_GETFL) | O_NONBLOCK);
	w->in_fd = in[1];
	w->out_fd = out[0];
	w->err_fd = errp[0];
	return 0;
}

/* ---- the copies' stderr ---- */

/* Reads what the copy's stderr holds now, keeping the last ERR_KEEP bytes;
 * closes it at its end. */
static void read_err(struct worker *w)
{
	char buf[4096];

	while (w->err_fd >= 0) {
		ssize_t got = read(w->err_fd, buf, sizeof buf);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == EAGAIN)
			return;
		if (got <= 0) {
			close_fd(&w->err_fd);
			return;
		}
		if (!w->err_text && !(w->err_text = malloc(ERR_KEEP)))
			continue; /* read and dropped */
		size_t n = (size_t)got;
		if (w->err_len + n > ERR_KEEP) {
			size_t drop = w->err_len + n - ERR_KEEP;

			drop = drop > w->err_len ? w->err_len : drop;
			memmove(w->err_text, w->err_text + drop, w->err_len - drop);
			w->err_len -= drop;
			w->err_cut = true;
		}
		memcpy(w->err_text + w->err_len, buf, n); /* n <= sizeof buf < ERR_KEEP */
		w->err_len += n;
	}
}

/* The last non-blank line of the copy's stderr, into out ("" for none). */
static void err_last_line(const struct worker *w, char *out, size_t len)
{
	size_t end = w->err_len;

	out[0] = '\0';
	while (end > 0 && strchr(" \t\r\n", w->err_text[end - 1]))
		end--;
	size_t begin = end;
	while (begin > 0 && w->err_text[begin - 1] != '\n')
		begin--;
	if (end > begin)
		snprintf(out, len, "%.*s", (int)(end - begin), w->err_text + begin);
}

static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

/* The ended copy's stderr, read to its end and shown if this call has not
 * shown the same text yet; then forgotten. */
static void show_err(struct job *j, struct worker *w, size_t last)
{
	read_err(w);
	close_fd(&w->err_fd);
	if (w->err_len == 0)
		goto out;
	uint64_t h = fnv1a(w->err_text, w->err_len);
	for (size_t k = 0; k < j->n_shown; k++)
		if (j->shown[k] == h) {
			j->stderr_repeats++;
			goto out;
		}
	if (j->n_shown == MAX_STDERR_SHOWN) {
		j->stderr_unshown++;
		goto out;
	}
	j->shown[j->n_shown++] = h;
	if (j->log) {
		if (last > w->copy_begin)
			log_line(j, "stderr of the copy given samples %zu-%zu%s:", w->copy_begin,
			         last, w->err_cut ? " (its end)" : "");
		else
			log_line(j, "stderr of the copy given sample %zu%s:", w->copy_begin,
			         w->err_cut ? " (its end)" : "");
		for (size_t i = 0; i < w->err_len;) {
			const char *nl = memchr(w->err_text + i, '\n', w->err_len - i);
			size_t len = nl ? (size_t)(nl - (w->err_text + i)) : w->err_len - i;

			fprintf(j->log, "  | %.*s\n", (int)len, w->err_text + i);
			i += len + 1;
		}
		fflush(j->log);
	}
out:
	w->err_len = 0;
	w->err_cut = false;
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
	int rc = spawn(j, w);

	if (rc != 0) {
		j->spawn_errno = rc;
		log_failure(j, NULL, "samples %zu-%zu: cannot start: %s", w->next_read, w->end - 1,
		            strerror(rc));
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

	w->pid = 0;
	close_fd(&w->in_fd);
	close_fd(&w->out_fd);
	read_err(w);
	err_last_line(w, last, sizeof last);
	if (w->next_read >= w->end) {
		show_err(j, w, w->end - 1);
		return;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
		log_failure(j, last, "samples %zu-%zu: exited with status 127 (%s), not restarting",
		            w->next_read, w->end - 1, "command not found?");
		show_err(j, w, w->next_read);
		w->no_restart = true;
		give_up(j, w);
		return;
	}
	if (WIFSIGNALED(status) && j->program->stop_signals &&
	    sigismember(j->program->stop_signals, WTERMSIG(status)) == 1 &&
	    w->stop_restart != w->next_read + 1) {
		log_line(j, "sample %zu: killed by signal %d, which stops the job: scored again",
		         w->next_read, WTERMSIG(status));
		show_err(j, w, w->next_read);
		w->stop_restart = w->next_read + 1;
		start(j, w);
		return;
	}
	if (WIFSIGNALED(status))
		log_failure(j, last, "sample %zu: killed by signal %d", w->next_read,
		            WTERMSIG(status));
	else
		log_failure(j, last, "sample %zu: exited with status %d", w->next_read,
		            WEXITSTATUS(status));
	show_err(j, w, w->next_read);
	j->fail->crashed++;
	w->next_read++;
	start(j, w);
}

static int wait_blocking(pid_t pid)
{
	int status = 0;

	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

/* Kills the copy's process group and reaps it. */
static int kill_copy(struct worker *w)
{
	kill(-w->pid, SIGKILL);
	close_fd(&w->in_fd);
	close_fd(&w->out_fd);
	return wait_blocking(w->pid);
}

static void on_deadline(struct job *j, struct worker *w)
{
	bool owed = w->next_read < w->end && w->out_fd >= 0;
	int status = kill_copy(w);

	if (!owed) { /* output over: it is a crash if rewards are missing */
		finished(j, w, status);
		return;
	}
	w->pid = 0;
	log_failure(j, NULL, "sample %zu: no reward within %g s", w->next_read,
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
		log_failure(j, NULL, "sample %zu: line '%.64s%s' is not a number", w->next_read,
		            w->line, w->overlong ? "..." : "");
		j->fail->bad_output++;
		v = 0;
	}
	j->rewards[w->next_read++] = v;
	arm(j, w);
}

static void read_some(struct job *j, struct worker *w)
{
	char buf[4096];
	ssize_t got = read(w->out_fd, buf, sizeof(buf));

	if (got < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (got <= 0) { /* EOF: it exited or closed stdout; reap it next */
		close_fd(&w->out_fd);
		close_fd(&w->in_fd);
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
	while (w->in_fd >= 0) {
		if (!w->wline) {
			if (w->next_write >= w->end) {
				close_fd(&w->in_fd); /* EOF for programs that read it all */
				return;
			}
			w->wline = json_line(&j->items[w->next_write], w->next_write, &w->wlen);
			w->woff = 0;
			if (!w->wline) { /* out of memory: the copy ends at EOF */
				close_fd(&w->in_fd);
				return;
			}
		}
		ssize_t put = write(w->in_fd, w->wline + w->woff, w->wlen - w->woff);

		if (put < 0) {
			if (errno != EAGAIN && errno != EINTR) /* EPIPE: it died; stdout tells */
				close_fd(&w->in_fd);
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
	if (late < HELD_UP_S)
		return;
	/* the call's time too starts again */
	if (!isinf(j->batch_deadline))
		j->batch_deadline = fmax(j->batch_deadline, rl_now() + j->program->timeout_s);
	for (int k = 0; k < nw; k++)
		if (ws[k].pid)
			arm(j, &ws[k]);
}

/* The call's time is up: every copy still owing rewards is killed (its
 * process group), and what it owes is timed out. */
static void end_batch(struct job *j, struct worker *ws, int nw)
{
	for (int k = 0; k < nw; k++) {
		struct worker *w = &ws[k];

		if (!w->pid)
			continue;
		if (w->out_fd >= 0) /* answers waiting in the pipe came in time */
			read_some(j, w);
		kill_copy(w);
		w->pid = 0;
		if (w->next_read < w->end) {
			size_t owed = w->end - w->next_read;

			log_failure(j, NULL,
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

		if (!w->pid)
			continue;
		busy = true;
		if (w->out_fd < 0) {
			int status;
			pid_t r = waitpid(w->pid, &status, WNOHANG);

			if (r == w->pid || (r < 0 && errno == ECHILD)) {
				finished(j, w, r == w->pid ? status : 0);
				return true;
			}
			reaping = true;
		}
		if (now >= w->deadline) {
			size_t owed = w->next_read;

			/* an answer waiting in the pipe came in time */
			if (w->out_fd >= 0)
				read_some(j, w);
			if (w->next_read == owed)
				on_deadline(j, w);
			return true;
		}
		next = fmin(next, w->deadline);
		if (w->in_fd >= 0)
			pfd[np++] = (struct pollfd){.fd = w->in_fd, .events = POLLOUT};
		if (w->out_fd >= 0)
			pfd[np++] = (struct pollfd){.fd = w->out_fd, .events = POLLIN};
		if (w->err_fd >= 0)
			pfd[np++] = (struct pollfd){.fd = w->err_fd, .events = POLLIN};
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

		if (!w->pid)
			continue;
		int in_fd = w->in_fd, out_fd = w->out_fd, err_fd = w->err_fd;

		if (in_fd >= 0 && pfd[p++].revents)
			write_some(j, w);
		if (out_fd >= 0 && pfd[p++].revents && w->out_fd >= 0)
			read_some(j, w);
		if (err_fd >= 0 && pfd[p++].revents)
			read_err(w);
	}
	return true;
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

/* The lines that stand for those not shown. */
static void log_summary(const struct job *j)
{
	if (j->failures_unlisted)
		log_line(j,
		         "%zu more failures not listed (in all: %zu crashed, %zu timed out, %zu "
		         "not a number)",
		         j->failures_unlisted, j->fail->crashed, j->fail->timed_out,
		         j->fail->bad_output);
	if (j->stderr_repeats)
		log_line(j, "%zu more cop%s wrote the same stderr as one shown above",
		         j->stderr_repeats, j->stderr_repeats == 1 ? "y" : "ies");
	if (j->stderr_unshown)
		log_line(j, "%zu more cop%s wrote other stderr, not shown", j->stderr_unshown,
		         j->stderr_unshown == 1 ? "y" : "ies");
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
	                .log = log};
	size_t nw = (size_t)rl_reward_workers(p->num_workers);
	sigset_t pipe_set, pending;
	bool was_pending;

	for (size_t i = 0; i < n; i++)
		rewards[i] = 0;
	*j.fail = (struct rl_reward_failures){0};
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
	/* Writes to a dead copy must fail with EPIPE, not kill the caller; the
	 * process-wide disposition is the caller's, so only this thread's mask
	 * changes, and a SIGPIPE raised by our writes is consumed before it is
	 * unblocked. */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &j.child_mask);
	j.batch_deadline = p->timeout_s > 0 ? rl_now() + p->timeout_s : INFINITY;
	sigpending(&pending);
	was_pending = sigismember(&pending, SIGPIPE);

	for (size_t k = 0; k < nw; k++) {
		ws[k] = (struct worker){.begin = n * k / nw,
		                        .end = n * (k + 1) / nw,
		                        .in_fd = -1,
		                        .out_fd = -1,
		                        .err_fd = -1};
		ws[k].next_read = ws[k].begin;
		start(&j, &ws[k]);
	}
	while (step(&j, ws, (int)nw, pfd))
		;
	log_summary(&j);
	for (size_t k = 0; k < nw; k++) {
		free(ws[k].wline);
		free(ws[k].err_text);
	}
	free(ws);
	free(pfd);

	if (!was_pending) {
		struct timespec zero = {0, 0};

		sigpending(&pending);
		while (sigismember(&pending, SIGPIPE) && sigtimedwait(&pipe_set, NULL, &zero) < 0 &&
		       errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &j.child_mask, NULL);
	if (j.started == 0) {
		if (err && errlen)
			snprintf(err, errlen, "reward command: cannot start /bin/sh -c '%s': %s",
			         p->command, strerror(j.spawn_errno));
		return -1;
	}
	return 0;
}
