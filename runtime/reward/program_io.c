/* The copies of a user's program, as the reward program and the
 * environment pool run them (program_io.h). */
#define _GNU_SOURCE
#include "runtime/reward/program_io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Of a copy's stderr, the last this many bytes are kept (a traceback ends
 * with what matters). */
#define ERR_KEEP          16384
#define MAX_FAILURE_LINES 10

void rl_prog_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
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
		rl_prog_close_fd(&fds[0]);
		rl_prog_close_fd(&fds[1]);
		return -1;
	}
	return 0;
}

int rl_prog_spawn(struct rl_prog_copy *c, const char *command, const sigset_t *child_mask)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1}, rc;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t deflt;
	char *argv[] = {"sh", "-c", (char *)command, NULL};

	if (cloexec_pipe(in) != 0 || cloexec_pipe(out) != 0 || cloexec_pipe(errp) != 0) {
		rc = errno;
		rl_prog_close_fd(&in[0]);
		rl_prog_close_fd(&in[1]);
		rl_prog_close_fd(&out[0]);
		rl_prog_close_fd(&out[1]);
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
	posix_spawnattr_setsigmask(&attr, child_mask);
	sigemptyset(&deflt);
	sigaddset(&deflt, SIGPIPE);
	posix_spawnattr_setsigdefault(&attr, &deflt);
	rc = posix_spawn(&c->pid, "/bin/sh", &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(in[0]);
	close(out[1]);
	close(errp[1]);
	if (rc != 0) {
		c->pid = 0;
		close(in[1]);
		close(out[0]);
		close(errp[0]);
		return rc;
	}
	fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
	fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
	fcntl(errp[0], F_SETFL, fcntl(errp[0], F_GETFL) | O_NONBLOCK);
	c->in_fd = in[1];
	c->out_fd = out[0];
	c->err_fd = errp[0];
	return 0;
}

int rl_prog_kill(struct rl_prog_copy *c)
{
	int status = 0;

	kill(-c->pid, SIGKILL);
	rl_prog_close_fd(&c->in_fd);
	rl_prog_close_fd(&c->out_fd);
	while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
		;
	c->pid = 0;
	return status;
}

void rl_prog_read_err(struct rl_prog_copy *c)
{
	char buf[4096];

	while (c->err_fd >= 0) {
		ssize_t got = read(c->err_fd, buf, sizeof buf);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == EAGAIN)
			return;
		if (got <= 0) {
			rl_prog_close_fd(&c->err_fd);
			return;
		}
		if (!c->err_text && !(c->err_text = malloc(ERR_KEEP)))
			continue; /* read and dropped */
		size_t n = (size_t)got;
		if (c->err_len + n > ERR_KEEP) {
			size_t drop = c->err_len + n - ERR_KEEP;

			drop = drop > c->err_len ? c->err_len : drop;
			memmove(c->err_text, c->err_text + drop, c->err_len - drop);
			c->err_len -= drop;
			c->err_cut = true;
		}
		memcpy(c->err_text + c->err_len, buf, n); /* n <= sizeof buf < ERR_KEEP */
		c->err_len += n;
	}
}

void rl_prog_err_last_line(const struct rl_prog_copy *c, char *out, size_t len)
{
	size_t end = c->err_len;

	out[0] = '\0';
	while (end > 0 && strchr(" \t\r\n", c->err_text[end - 1]))
		end--;
	size_t begin = end;
	while (begin > 0 && c->err_text[begin - 1] != '\n')
		begin--;
	if (end > begin)
		snprintf(out, len, "%.*s", (int)(end - begin), c->err_text + begin);
}

/* ---- the log ---- */

static void vlog_line(const struct rl_prog_log *l, const char *fmt, va_list ap)
{
	if (!l->file)
		return;
	fputs(l->prefix, l->file);
	vfprintf(l->file, fmt, ap);
	fputc('\n', l->file);
	fflush(l->file);
}

void rl_prog_log_line(const struct rl_prog_log *l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog_line(l, fmt, ap);
	va_end(ap);
}

void rl_prog_log_failure(struct rl_prog_log *l, const char *detail, const char *fmt, ...)
{
	char msg[sizeof l->fail->first];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* truncated when long: it is a summary */
	if (!l->fail->first[0] && snprintf(l->fail->first, sizeof l->fail->first, "%s%s%s", msg,
	                                   detail && *detail ? ": " : "", detail ? detail : "") < 0)
		l->fail->first[0] = '\0';
	if (l->failure_lines < MAX_FAILURE_LINES) {
		l->failure_lines++;
		rl_prog_log_line(l, "%s", msg);
	} else {
		l->failures_unlisted++;
	}
}

static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return h;
}

void rl_prog_show_err(struct rl_prog_log *l, struct rl_prog_copy *c, const char *header)
{
	rl_prog_read_err(c);
	rl_prog_close_fd(&c->err_fd);
	if (c->err_len == 0)
		goto out;
	uint64_t h = fnv1a(c->err_text, c->err_len);
	for (size_t k = 0; k < l->n_shown; k++)
		if (l->shown[k] == h) {
			l->stderr_repeats++;
			goto out;
		}
	if (l->n_shown == RL_PROG_MAX_STDERR_SHOWN) {
		l->stderr_unshown++;
		goto out;
	}
	l->shown[l->n_shown++] = h;
	if (l->file) {
		rl_prog_log_line(l, "%s%s:", header, c->err_cut ? " (its end)" : "");
		for (size_t i = 0; i < c->err_len;) {
			const char *nl = memchr(c->err_text + i, '\n', c->err_len - i);
			size_t len = nl ? (size_t)(nl - (c->err_text + i)) : c->err_len - i;

			fprintf(l->file, "  | %.*s\n", (int)len, c->err_text + i);
			i += len + 1;
		}
		fflush(l->file);
	}
out:
	c->err_len = 0;
	c->err_cut = false;
}

void rl_prog_log_summary(const struct rl_prog_log *l, const char *bad_output_name)
{
	if (l->failures_unlisted)
		rl_prog_log_line(
		    l,
		    "%zu more failures not listed (in all: %zu crashed, %zu timed out, "
		    "%zu %s)",
		    l->failures_unlisted, l->fail->crashed, l->fail->timed_out, l->fail->bad_output,
		    bad_output_name);
	if (l->stderr_repeats)
		rl_prog_log_line(l, "%zu more cop%s wrote the same stderr as one shown above",
		                 l->stderr_repeats, l->stderr_repeats == 1 ? "y" : "ies");
	if (l->stderr_unshown)
		rl_prog_log_line(l, "%zu more cop%s wrote other stderr, not shown",
		                 l->stderr_unshown, l->stderr_unshown == 1 ? "y" : "ies");
}

/* ---- JSON ---- */

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

json_t *rl_prog_json_text(const char *s, size_t n)
{
	if (!s)
		return json_null();
	json_t *v = json_stringn(s, n);

	if (v)
		return v;
	size_t o = 0;
	char *fixed = malloc(3 * n + 1);

	if (!fixed)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t len = s[i] ? utf8_seq((const unsigned char *)s + i, n - i) : 1;

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
	v = json_stringn(fixed, o);
	free(fixed);
	return v;
}

char *rl_prog_json_line(json_t *o, size_t *len)
{
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

/* ---- SIGPIPE ---- */

void rl_prog_sigpipe_block(struct rl_prog_sigpipe *s)
{
	sigset_t pipe_set, pending;

	/* The process-wide disposition is the caller's, so only this thread's
	 * mask changes, and a SIGPIPE raised by our writes is consumed before
	 * it is unblocked. */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &s->caller_mask);
	sigpending(&pending);
	s->was_pending = sigismember(&pending, SIGPIPE);
}

void rl_prog_sigpipe_restore(const struct rl_prog_sigpipe *s)
{
	sigset_t pipe_set, pending;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	if (!s->was_pending) {
		struct timespec zero = {0, 0};

		sigpending(&pending);
		while (sigismember(&pending, SIGPIPE) && sigtimedwait(&pipe_set, NULL, &zero) < 0 &&
		       errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &s->caller_mask, NULL);
}
