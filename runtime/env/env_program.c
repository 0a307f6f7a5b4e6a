/* The environment pool (env_program.h, the protocol in rl-env(7)): one
 * poll() loop over every copy, writing lines as each stdin pipe takes them
 * and reading answers as they come, so that neither side blocks on a big
 * line. Every episode keeps its transcript (the model's messages and the
 * observations given), so that a copy lost for any reason costs only the
 * answers it owed at that moment: the episodes it held go on in a fresh
 * copy, which rebuilds them from their transcripts.
 *
 * An episode is idle, waiting on the model (begun, or answered and not
 * done), waiting on its environment (a message sent, an answer owed), or
 * over (done, or failed: the caller ends it). One not on any copy
 * ("homeless": its copy was lost, or there was no room) is placed when it
 * next needs an answer. */
#define _GNU_SOURCE
#include "runtime/env/env_program.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/env/env_protocol.h"
#include "runtime/reward/program_io.h"

/* An answer line longer than this is garbage (an observation is text for
 * a model's context, far smaller). */
#define MAX_LINE (16u << 20)
/* How long a copy whose stdout ended may take to exit, and how long the
 * copies have at the pool's close once told to end. */
#define EXIT_GRACE_S  2.0
#define CLOSE_GRACE_S 1.0
/* Poll interval while waiting for a copy that closed its stdout to exit,
 * and while a copy owes answers (a child it left may hold its stdout
 * open after it died, so that no end of file says so). */
#define REAP_POLL_MS  2
#define DEATH_POLL_MS 50
/* Ids of episodes ended while an answer was owed, kept per copy so that
 * the late answer is dropped quietly rather than counted as bad output. */
#define ENDED_KEEP 64

enum ep_state { EP_IDLE, EP_MODEL, EP_ENV, EP_OVER };

struct episode {
	enum ep_state state;
	long long id; /* its name in the protocol, new on each placement */
	int copy;     /* the copy holding it, or -1 */
	char *prompt, *problem, *expected;
	json_t *metadata;
	struct rl_env_turn *hist; /* the turns answered, in order */
	int n_hist, cap_hist;
	char *pending; /* the message owed an answer (EP_ENV) */
	size_t pending_len;
	double turn_deadline, episode_deadline; /* monotonic; INFINITY: none */
	int resent_turn; /* the turn sent again after a stop signal, 0: none */
};

struct copy {
	struct rl_prog_copy c; /* pid 0: the slot is free */
	int serial;            /* for the log: the pool's n-th copy */
	int *eps;              /* the episodes it holds (max_in_flight at most) */
	int n_eps;
	char *out; /* bytes queued for its stdin */
	size_t out_len, out_off, out_cap;
	char *line; /* the partial line read from its stdout */
	size_t line_len, line_cap;
	bool overlong;
	bool closing;   /* its stdout ended: reaped next */
	double reap_by; /* ... or killed at this time */
	double heard;   /* its last line, or when it began to owe */
	long long ended[ENDED_KEEP];
	int n_ended;
};

struct rl_env_pool {
	struct rl_env_program p;
	char *command;
	int n_workers, n;
	struct episode *ep;
	struct copy *cp;
	struct pollfd *pfd;
	struct rl_prog_log lg;
	struct rl_reward_failures fail;
	struct rl_prog_sigpipe sigpipe; /* of the call in progress */
	struct rl_env_answer *ready;    /* answers not yet handed out */
	int n_ready, cap_ready;
	long long next_id;
	int copies_started;
	bool no_restart; /* the shell did not find the command */
	int spawn_errno; /* a copy could not be started in this call */
	double round_end;
};

/* ---- small things ---- */

static char *dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

static char *dup_opt(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int owed(const struct rl_env_pool *pool, const struct copy *c)
{
	int k = 0;

	for (int i = 0; i < c->n_eps; i++)
		k += pool->ep[c->eps[i]].state == EP_ENV;
	return k;
}

/* ---- writing to a copy ---- */

static void flush_out(struct copy *c)
{
	while (c->c.in_fd >= 0 && c->out_off < c->out_len) {
		ssize_t put = write(c->c.in_fd, c->out + c->out_off, c->out_len - c->out_off);

		if (put < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN) /* EPIPE: it died; its stdout tells */
				rl_prog_close_fd(&c->c.in_fd);
			return;
		}
		c->out_off += (size_t)put;
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
}

/* Queues line (freed; NULL: out of memory, the episode times out) and
 * writes what the pipe takes now. */
static void send_line(struct copy *c, char *line, size_t len)
{
	if (!line || c->c.in_fd < 0) {
		free(line);
		return;
	}
	if (c->out_off > 0) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *grown;

		while (cap < c->out_len + len)
			cap *= 2;
		if (!(grown = realloc(c->out, cap))) {
			free(line);
			return;
		}
		c->out = grown;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, line, len);
	c->out_len += len;
	free(line);
	flush_out(c);
}

static void send_start(struct copy *c, const struct episode *e)
{
	size_t len = 0;
	char *line = rl_env_line_start(e->id, e->prompt, e->problem, e->expected, e->metadata,
	                               e->hist, e->n_hist, &len);

	send_line(c, line, len);
}

static void send_step(struct rl_env_pool *pool, struct copy *c, const struct episode *e)
{
	if (owed(pool, c) == 1) /* it began to owe now */
		c->heard = rl_now();
	size_t len = 0;
	char *line = rl_env_line_step(e->id, e->n_hist + 1, e->pending, e->pending_len, &len);

	send_line(c, line, len);
}

/* ---- episodes on copies ---- */

static void remember_ended(struct copy *c, long long id)
{
	if (c->n_ended == ENDED_KEEP) {
		memmove(c->ended, c->ended + 1, (ENDED_KEEP - 1) * sizeof c->ended[0]);
		c->n_ended--;
	}
	c->ended[c->n_ended++] = id;
}

/* Takes e off its copy; tell: the program is sent "end" (it has not said
 * done), and an answer it still owes is dropped quietly. */
static void detach(struct rl_env_pool *pool, int e, bool tell)
{
	struct episode *x = &pool->ep[e];

	if (x->copy < 0)
		return;
	struct copy *c = &pool->cp[x->copy];

	if (tell && c->c.pid && !c->closing) {
		size_t len = 0;
		char *line = rl_env_line_end(x->id, &len);

		send_line(c, line, len);
		if (x->state == EP_ENV)
			remember_ended(c, x->id);
	}
	for (int i = 0; i < c->n_eps; i++)
		if (c->eps[i] == e) {
			c->eps[i] = c->eps[--c->n_eps];
			break;
		}
	x->copy = -1;
}

static int push_answer(struct rl_env_pool *pool, struct rl_env_answer a)
{
	if (pool->n_ready == pool->cap_ready) {
		int cap = pool->cap_ready ? 2 * pool->cap_ready : 16;
		struct rl_env_answer *grown = realloc(pool->ready, (size_t)cap * sizeof *grown);

		if (!grown)
			return -1;
		pool->ready = grown;
		pool->cap_ready = cap;
	}
	pool->ready[pool->n_ready++] = a;
	return 0;
}

/* e ends with a failure the caller scores 0 (already counted and logged). */
static void fail_episode(struct rl_env_pool *pool, int e, enum rl_env_outcome why)
{
	struct episode *x = &pool->ep[e];

	detach(pool, e, true);
	free(x->pending);
	x->pending = NULL;
	x->state = EP_OVER;
	push_answer(pool,
	            (struct rl_env_answer){
	                .episode = e, .outcome = why, .observation = calloc(1, 1), .done = true});
}

/* The copy's process has ended (it stays a zombie until rl_prog_kill
 * reaps it, so that its process group, which may outlive it, is still
 * its own to kill). */
static bool ended(const struct copy *c)
{
	siginfo_t si = {0};

	if (waitid(P_PID, (id_t)c->c.pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
		return errno == ECHILD; /* reaped by someone else */
	return si.si_pid == c->c.pid;
}

static int copies_running(const struct rl_env_pool *pool)
{
	int k = 0;

	for (int i = 0; i < pool->n_workers; i++)
		k += pool->cp[i].c.pid != 0;
	return k;
}

static int start_copy(struct rl_env_pool *pool, struct copy *c)
{
	int rc = rl_prog_spawn(&c->c, pool->command, &pool->sigpipe.caller_mask);

	if (rc != 0)
		return rc;
	c->serial = ++pool->copies_started;
	c->n_eps = c->n_ended = 0;
	c->out_len = c->out_off = c->line_len = 0;
	c->overlong = c->closing = false;
	c->heard = rl_now();
	return 0;
}

/* Puts e on a copy with room (the least loaded; a fresh one when none has
 * room and a slot is free), under a new id, and sends its start with its
 * transcript and, when it is owed an answer, its message. Returns 0, 1
 * when there is no room now, or an errno value when no copy could start. */
static int place(struct rl_env_pool *pool, int e)
{
	struct episode *x = &pool->ep[e];
	struct copy *best = NULL, *free_slot = NULL;

	for (int i = 0; i < pool->n_workers; i++) {
		struct copy *c = &pool->cp[i];

		if (!c->c.pid)
			free_slot = free_slot ? free_slot : c;
		else if (!c->closing && c->n_eps < pool->p.max_in_flight &&
		         (!best || c->n_eps < best->n_eps))
			best = c;
	}
	if (!best && free_slot && !pool->no_restart) { /* none has room */
		int rc = start_copy(pool, free_slot);

		if (rc != 0)
			return rc;
		best = free_slot;
	}
	if (!best)
		return 1;
	x->id = pool->next_id++;
	x->copy = (int)(best - pool->cp);
	best->eps[best->n_eps++] = e;
	send_start(best, x);
	if (x->state == EP_ENV)
		send_step(pool, best, x);
	return 0;
}

/* An episode owed an answer that has no copy: placed now, or crashed when
 * the command cannot run (exit 127) or no copy could start. */
static void place_owed(struct rl_env_pool *pool, int e)
{
	if (pool->no_restart) {
		rl_prog_log_failure(&pool->lg, NULL,
		                    "episode %d: not answered: the command was not found "
		                    "(exit status 127)",
		                    e);
		pool->fail.crashed++;
		fail_episode(pool, e, RL_ENV_CRASHED);
		return;
	}
	int rc = place(pool, e);

	if (rc > 1) {
		pool->spawn_errno = rc;
		rl_prog_log_failure(&pool->lg, NULL, "episode %d: cannot start a copy: %s", e,
		                    strerror(rc));
		pool->fail.crashed++;
		fail_episode(pool, e, RL_ENV_CRASHED);
	}
}

/* Homeless episodes owed an answer, placed where there is room now. */
static void place_waiting(struct rl_env_pool *pool)
{
	for (int e = 0; e < pool->n; e++)
		if (pool->ep[e].state == EP_ENV && pool->ep[e].copy < 0)
			place_owed(pool, e);
}

/* ---- a copy lost ---- */

static void show_err(struct rl_env_pool *pool, struct copy *c)
{
	char header[64];

	snprintf(header, sizeof header, "stderr of copy %d", c->serial);
	rl_prog_show_err(&pool->lg, &c->c, header);
}

/* The copy is gone (reaped with status, or killed for hanging: hung):
 * what it owed fails or goes again; what it held goes on elsewhere. */
static void lost(struct rl_env_pool *pool, struct copy *c, int status, bool hung)
{
	char last[200];
	bool stopped = !hung && WIFSIGNALED(status) && pool->p.stop_signals &&
	               sigismember(pool->p.stop_signals, WTERMSIG(status)) == 1;
	bool not_found = !hung && WIFEXITED(status) && WEXITSTATUS(status) == 127;

	c->c.pid = 0;
	rl_prog_close_fd(&c->c.in_fd);
	rl_prog_close_fd(&c->c.out_fd);
	rl_prog_read_err(&c->c);
	rl_prog_err_last_line(&c->c, last, sizeof last);
	if (not_found)
		pool->no_restart = true;
	if (stopped)
		rl_prog_log_line(&pool->lg,
		                 "copy %d: killed by signal %d, which stops the job: its episodes "
		                 "go on",
		                 c->serial, WTERMSIG(status));
	while (c->n_eps > 0) {
		int e = c->eps[0];
		struct episode *x = &pool->ep[e];

		detach(pool, e, false);
		if (x->state != EP_ENV || hung)
			continue; /* placed again when it next needs an answer */
		if (stopped && x->resent_turn != x->n_hist + 1) {
			x->resent_turn = x->n_hist + 1;
			continue;
		}
		if (stopped)
			rl_prog_log_failure(&pool->lg, last,
			                    "episode %d turn %d: its copy was killed by signal %d "
			                    "twice",
			                    e, x->n_hist + 1, WTERMSIG(status));
		else if (not_found)
			rl_prog_log_failure(
			    &pool->lg, last,
			    "episode %d: copy %d exited with status 127 (command not "
			    "found?), not restarting",
			    e, c->serial);
		else if (WIFSIGNALED(status))
			rl_prog_log_failure(&pool->lg, last,
			                    "episode %d turn %d: copy %d killed by signal %d", e,
			                    x->n_hist + 1, c->serial, WTERMSIG(status));
		else
			rl_prog_log_failure(&pool->lg, last,
			                    "episode %d turn %d: copy %d exited with status %d", e,
			                    x->n_hist + 1, c->serial, WEXITSTATUS(status));
		pool->fail.crashed++;
		fail_episode(pool, e, RL_ENV_CRASHED);
	}
	show_err(pool, c);
	c->closing = false;
	place_waiting(pool);
}

/* ---- reading a copy ---- */

static bool drop_ended(struct copy *c, long long id)
{
	for (int i = 0; i < c->n_ended; i++)
		if (c->ended[i] == id) {
			c->ended[i] = c->ended[--c->n_ended];
			return true;
		}
	return false;
}

static void bad_line(struct rl_env_pool *pool, const struct copy *c, int e, const char *why)
{
	char shown[80];
	size_t n = c->overlong ? 0 : c->line_len;

	snprintf(shown, sizeof shown, "%.*s%s", (int)(n > 64 ? 64 : n), c->overlong ? "" : c->line,
	         n > 64 || c->overlong ? "..." : "");
	pool->fail.bad_output++;
	if (e < 0) {
		rl_prog_log_failure(&pool->lg, NULL, "copy %d: line '%s' %s: ignored", c->serial,
		                    shown, why);
		return;
	}
	rl_prog_log_failure(&pool->lg, NULL, "episode %d turn %d: line '%s' %s", e,
	                    pool->ep[e].n_hist + 1, shown, why);
	fail_episode(pool, e, RL_ENV_BAD_OUTPUT);
}

/* The episode on copy c under id, or -1. */
static int on_copy(const struct rl_env_pool *pool, const struct copy *c, long long id)
{
	for (int i = 0; i < c->n_eps; i++)
		if (pool->ep[c->eps[i]].id == id)
			return c->eps[i];
	return -1;
}

/* e's answer taken: its transcript grows by the turn. */
static void take(struct rl_env_pool *pool, struct copy *c, int e, const struct rl_env_reply *r)
{
	struct episode *x = &pool->ep[e];
	struct rl_env_turn t = {x->pending, dup_n(r->observation, r->observation_len),
	                        x->pending_len, r->observation_len};
	char *for_caller = dup_n(r->observation, r->observation_len);

	if (x->n_hist == x->cap_hist) {
		int cap = x->cap_hist ? 2 * x->cap_hist : 8;
		struct rl_env_turn *grown = realloc(x->hist, (size_t)cap * sizeof *grown);

		if (grown) {
			x->hist = grown;
			x->cap_hist = cap;
		}
	}
	if (!t.observation || !for_caller || x->n_hist == x->cap_hist) {
		free(t.observation);
		free(for_caller);
		bad_line(pool, c, e, "could not be kept (out of memory)");
		return;
	}
	x->hist[x->n_hist++] = t;
	x->pending = NULL;
	x->state = r->done ? EP_OVER : EP_MODEL;
	if (r->done)
		detach(pool, e, false);
	push_answer(pool, (struct rl_env_answer){.episode = e,
	                                         .outcome = RL_ENV_ANSWERED,
	                                         .observation = for_caller,
	                                         .observation_len = r->observation_len,
	                                         .reward = r->reward,
	                                         .done = r->done});
}

/* A whole line from copy c: an answer for an episode owed one, or bad
 * output (that episode's, when it names one owed an answer). */
static void on_line(struct rl_env_pool *pool, struct copy *c)
{
	struct rl_env_reply r;

	c->heard = rl_now();
	if (c->overlong) {
		bad_line(pool, c, -1, "is too long");
		return;
	}
	c->line[c->line_len] = '\0';
	if (strspn(c->line, " \t\r") == c->line_len)
		return; /* a blank line says nothing */
	rl_env_reply_parse(c->line, c->line_len, &r);
	int e = r.named ? on_copy(pool, c, r.id) : -1;

	if (e >= 0 && pool->ep[e].state == EP_ENV && r.why)
		bad_line(pool, c, e, r.why);
	else if (e >= 0 && pool->ep[e].state == EP_ENV)
		take(pool, c, e, &r);
	else if (!r.named || r.why)
		bad_line(pool, c, -1, r.why);
	else if (e >= 0 || !drop_ended(c, r.id)) /* a late answer to an end is not counted */
		bad_line(pool, c, -1, "answers an episode not waiting for an answer");
	rl_env_reply_free(&r);
}

static void read_out(struct rl_env_pool *pool, struct copy *c)
{
	char buf[65536];

	while (c->c.out_fd >= 0) {
		ssize_t got = read(c->c.out_fd, buf, sizeof buf);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == EAGAIN)
			return;
		if (got <= 0) { /* it exited or closed stdout: reaped next */
			rl_prog_close_fd(&c->c.out_fd);
			rl_prog_close_fd(&c->c.in_fd);
			c->closing = true;
			c->reap_by = rl_now() + EXIT_GRACE_S;
			return;
		}
		for (ssize_t i = 0; i < got;) {
			const char *nl = memchr(buf + i, '\n', (size_t)(got - i));
			size_t n = nl ? (size_t)(nl - (buf + i)) : (size_t)(got - i);

			if (!c->overlong && c->line_len + n + 1 > MAX_LINE) {
				c->overlong = true;
			} else if (!c->overlong) {
				if (c->line_len + n + 1 > c->line_cap) {
					size_t cap = c->line_cap ? c->line_cap : 4096;
					char *grown;

					while (cap < c->line_len + n + 1)
						cap *= 2;
					if ((grown = realloc(c->line, cap))) {
						c->line = grown;
						c->line_cap = cap;
					} else {
						c->overlong = true;
					}
				}
				if (!c->overlong) {
					memcpy(c->line + c->line_len, buf + i, n);
					c->line_len += n;
				}
			}
			i += (ssize_t)n;
			if (nl) {
				on_line(pool, c);
				c->line_len = 0;
				c->overlong = false;
				i++;
			}
		}
	}
}

/* ---- the clocks ---- */

/* e fails for want of an answer in time; tell: its copy is told to end
 * it (it runs on). */
static void time_out(struct rl_env_pool *pool, int e, double now, bool tell)
{
	struct episode *x = &pool->ep[e];

	if (now >= x->episode_deadline)
		rl_prog_log_failure(&pool->lg, NULL, "episode %d: not over within %g s", e,
		                    pool->p.episode_timeout_s);
	else
		rl_prog_log_failure(&pool->lg, NULL, "episode %d turn %d: no answer within %g s", e,
		                    x->n_hist + 1, pool->p.turn_timeout_s);
	pool->fail.timed_out++;
	if (!tell)
		detach(pool, e, false);
	fail_episode(pool, e, RL_ENV_TIMED_OUT);
}

/* No answer for e by its deadline: the episode's own time was up, or its
 * turn's. A copy that has said nothing for a whole turn timeout while
 * owing answers is hung: killed with its process group; what of it is
 * past its time fails, the rest goes on in a fresh copy. */
static void on_deadline(struct rl_env_pool *pool, int e, double now)
{
	struct episode *x = &pool->ep[e];
	struct copy *c = x->copy >= 0 ? &pool->cp[x->copy] : NULL;

	if (!c || now >= x->episode_deadline || now - c->heard < pool->p.turn_timeout_s) {
		time_out(pool, e, now, true); /* it talks, just not of e */
		return;
	}
	rl_prog_log_line(&pool->lg, "copy %d: said nothing for %g s while owing answers: killed",
	                 c->serial, now - c->heard);
	int status = rl_prog_kill(&c->c);

	for (int i = 0; i < c->n_eps;) {
		struct episode *y = &pool->ep[c->eps[i]];

		if (y->state == EP_ENV && now >= fmin(y->turn_deadline, y->episode_deadline))
			time_out(pool, c->eps[i], now, false); /* takes it off eps[i] */
		else
			i++;
	}
	lost(pool, c, status, true);
}

/* This process was held still (its job suspended and resumed): every
 * clock that was running gets its time again, as the reward program's. */
static void held_up(struct rl_env_pool *pool, double late)
{
	double now = rl_now();

	for (int e = 0; e < pool->n; e++) {
		struct episode *x = &pool->ep[e];

		if (x->state == EP_ENV && pool->p.turn_timeout_s > 0)
			x->turn_deadline = now + pool->p.turn_timeout_s;
		if (x->state == EP_ENV || x->state == EP_MODEL)
			x->episode_deadline += late;
	}
	for (int i = 0; i < pool->n_workers; i++)
		pool->cp[i].heard = now;
}

/* ---- the loop ---- */

/* One round: poll every copy up to wait_ms, move data, reap, enforce the
 * deadlines. */
static void round_once(struct rl_env_pool *pool, int wait_ms)
{
	int np = 0;
	double now = rl_now(), next = INFINITY;

	for (int e = 0; e < pool->n; e++)
		if (pool->ep[e].state == EP_ENV)
			next = fmin(next,
			            fmin(pool->ep[e].turn_deadline, pool->ep[e].episode_deadline));
	for (int i = 0; i < pool->n_workers; i++) {
		struct copy *c = &pool->cp[i];

		if (!c->c.pid)
			continue;
		if (c->closing)
			next = fmin(next, now + REAP_POLL_MS / 1e3);
		else if (owed(pool, c) >
		         0) /* its death shows no descriptor while a child holds its stdout */
			next = fmin(next, now + DEATH_POLL_MS / 1e3);
		if (c->c.in_fd >= 0 && c->out_len > c->out_off)
			pool->pfd[np++] = (struct pollfd){.fd = c->c.in_fd, .events = POLLOUT};
		if (c->c.out_fd >= 0)
			pool->pfd[np++] = (struct pollfd){.fd = c->c.out_fd, .events = POLLIN};
		if (c->c.err_fd >= 0)
			pool->pfd[np++] = (struct pollfd){.fd = c->c.err_fd, .events = POLLIN};
	}
	if (!isinf(next)) {
		double ms = ceil((next - now) * 1e3);

		wait_ms = wait_ms < 0 || ms < wait_ms ? (int)fmax(0, fmin(ms, 1e9)) : wait_ms;
	}
	double polled = rl_now();
	int ready = poll(pool->pfd, (nfds_t)np, wait_ms);

	pool->round_end = rl_now();
	if (wait_ms >= 0 && pool->round_end - polled - wait_ms / 1e3 >= RL_PROG_HELD_UP_S)
		held_up(pool, pool->round_end - polled - wait_ms / 1e3);
	for (int i = 0; i < pool->n_workers && ready > 0; i++) {
		struct copy *c = &pool->cp[i];

		if (!c->c.pid)
			continue;
		flush_out(c);
		read_out(pool, c);
		rl_prog_read_err(&c->c);
	}
	now = rl_now();
	for (int i = 0; i < pool->n_workers; i++) {
		struct copy *c = &pool->cp[i];

		if (!c->c.pid)
			continue;
		bool gone = ended(c);

		if (gone && !c->closing)
			read_out(pool, c); /* what it wrote before it died counts */
		if (gone ||
		    (c->closing && now >= c->reap_by)) /* what else is in its group ends too */
			lost(pool, c, rl_prog_kill(&c->c), false);
	}
	for (int e = 0; e < pool->n; e++) {
		struct episode *x = &pool->ep[e];

		if (x->state == EP_ENV && now >= fmin(x->turn_deadline, x->episode_deadline))
			on_deadline(pool, e, now);
	}
}

static bool any_owed(const struct rl_env_pool *pool)
{
	for (int e = 0; e < pool->n; e++)
		if (pool->ep[e].state == EP_ENV)
			return true;
	return false;
}

/* ---- the API ---- */

int rl_env_pool_open(const struct rl_env_program *p, int n_episodes, FILE *log,
                     struct rl_env_pool **out, char *err, size_t errlen)
{
	struct rl_env_pool *pool = calloc(1, sizeof *pool);

	*out = NULL;
	if (!p->command || n_episodes < 0) {
		free(pool);
		snprintf(err, errlen, "env command: %s", p->command ? "no episodes" : "no command");
		return -1;
	}
	if (!pool)
		goto oom;
	pool->p = *p;
	pool->p.max_in_flight = p->max_in_flight < 1 ? 1 : p->max_in_flight;
	pool->n_workers = rl_reward_workers(p->num_workers);
	pool->n = n_episodes;
	pool->command = strdup(p->command);
	pool->ep = calloc(n_episodes ? (size_t)n_episodes : 1, sizeof *pool->ep);
	pool->cp = calloc((size_t)pool->n_workers, sizeof *pool->cp);
	pool->pfd = calloc(3 * (size_t)pool->n_workers, sizeof *pool->pfd);
	if (!pool->command || !pool->ep || !pool->cp || !pool->pfd)
		goto oom;
	for (int i = 0; i < pool->n_workers; i++) {
		pool->cp[i].c = (struct rl_prog_copy){.in_fd = -1, .out_fd = -1, .err_fd = -1};
		if (!(pool->cp[i].eps = calloc((size_t)pool->p.max_in_flight, sizeof(int))))
			goto oom;
	}
	for (int e = 0; e < n_episodes; e++)
		pool->ep[e].copy = -1;
	pool->lg =
	    (struct rl_prog_log){.file = log, .prefix = "env command: ", .fail = &pool->fail};
	*out = pool;
	return 0;
oom:
	rl_env_pool_close(pool);
	snprintf(err, errlen, "env command: out of memory for %d episodes", n_episodes);
	return -1;
}

static void forget(struct episode *x)
{
	free(x->prompt);
	free(x->problem);
	free(x->expected);
	json_decref(x->metadata);
	for (int t = 0; t < x->n_hist; t++) {
		free(x->hist[t].message);
		free(x->hist[t].observation);
	}
	free(x->hist);
	free(x->pending);
	*x = (struct episode){.copy = -1};
}

int rl_env_begin(struct rl_env_pool *pool, int e, const struct rl_env_start *s, char *err,
                 size_t errlen)
{
	if (e < 0 || e >= pool->n) {
		snprintf(err, errlen, "env command: episode %d is out of range (0-%d)", e,
		         pool->n - 1);
		return -1;
	}
	struct episode *x = &pool->ep[e];
	json_error_t je;

	if (x->state == EP_MODEL || x->state == EP_ENV) {
		snprintf(err, errlen, "env command: episode %d is in flight already", e);
		return -1;
	}
	forget(x);
	if (s->metadata && !(x->metadata = json_loads(s->metadata, JSON_DECODE_ANY, &je))) {
		snprintf(err, errlen, "env command: episode %d: its metadata is not JSON: %s", e,
		         je.text);
		return -1;
	}
	x->prompt = dup_opt(s->prompt);
	x->problem = dup_opt(s->problem);
	x->expected = dup_opt(s->expected);
	x->state = EP_MODEL;
	x->turn_deadline = INFINITY;
	x->episode_deadline =
	    pool->p.episode_timeout_s > 0 ? rl_now() + pool->p.episode_timeout_s : INFINITY;
	if (pool->no_restart)
		return 0; /* its first turn fails as crashed */
	rl_prog_sigpipe_block(&pool->sigpipe);
	int rc = place(pool, e);
	rl_prog_sigpipe_restore(&pool->sigpipe);
	if (rc > 1) {
		forget(x);
		snprintf(err, errlen, "env command: cannot start /bin/sh -c '%s': %s",
		         pool->command, strerror(rc));
		return -1;
	}
	return 0;
}

int rl_env_act(struct rl_env_pool *pool, int e, const char *message, size_t len, char *err,
               size_t errlen)
{
	if (e < 0 || e >= pool->n || pool->ep[e].state != EP_MODEL) {
		snprintf(err, errlen, "env command: episode %d is not waiting for the model's turn",
		         e);
		return -1;
	}
	struct episode *x = &pool->ep[e];

	if (!(x->pending = dup_n(message ? message : "", message ? len : 0))) {
		snprintf(err, errlen, "env command: out of memory for episode %d's message", e);
		return -1;
	}
	x->pending_len = message ? len : 0;
	x->state = EP_ENV;
	x->turn_deadline =
	    pool->p.turn_timeout_s > 0 ? rl_now() + pool->p.turn_timeout_s : INFINITY;
	pool->spawn_errno = 0;
	rl_prog_sigpipe_block(&pool->sigpipe);
	if (rl_now() >= x->episode_deadline)
		on_deadline(pool, e, rl_now());
	else if (x->copy >= 0)
		send_step(pool, &pool->cp[x->copy], x);
	else
		place_owed(pool, e);
	rl_prog_sigpipe_restore(&pool->sigpipe);
	if (pool->spawn_errno) {
		snprintf(err, errlen, "env command: cannot start /bin/sh -c '%s': %s",
		         pool->command, strerror(pool->spawn_errno));
		return -1;
	}
	return 0;
}

void rl_env_end(struct rl_env_pool *pool, int e)
{
	if (!pool || e < 0 || e >= pool->n || pool->ep[e].state == EP_IDLE)
		return;
	rl_prog_sigpipe_block(&pool->sigpipe);
	detach(pool, e, pool->ep[e].state != EP_OVER);
	rl_prog_sigpipe_restore(&pool->sigpipe);
	forget(&pool->ep[e]);
}

int rl_env_wait(struct rl_env_pool *pool, double wait_s, struct rl_env_answer *out, int cap, int *n,
                char *err, size_t errlen)
{
	double until = wait_s < 0 ? INFINITY : rl_now() + wait_s;

	*n = 0;
	pool->spawn_errno = 0;
	rl_prog_sigpipe_block(&pool->sigpipe);
	place_waiting(pool);
	for (;;) {
		double left = until - rl_now();
		bool owing = any_owed(pool);
		int wait_ms = pool->n_ready > 0 || (wait_s < 0 && !owing) ? 0
		              : isinf(left)                               ? -1
		                            : (int)fmax(0, ceil(left * 1e3));

		round_once(pool, wait_ms);
		if (pool->n_ready > 0 || rl_now() >= until || (wait_s < 0 && !any_owed(pool)))
			break;
	}
	rl_prog_sigpipe_restore(&pool->sigpipe);
	*n = pool->n_ready < cap ? pool->n_ready : cap;
	if (*n > 0) {
		memcpy(out, pool->ready, (size_t)*n * sizeof *out);
		memmove(pool->ready, pool->ready + *n, (size_t)(pool->n_ready - *n) * sizeof *out);
		pool->n_ready -= *n;
	}
	if (pool->spawn_errno) {
		snprintf(err, errlen, "env command: cannot start /bin/sh -c '%s': %s",
		         pool->command, strerror(pool->spawn_errno));
		return -1;
	}
	return 0;
}

void rl_env_pool_failures(struct rl_env_pool *pool, struct rl_reward_failures *fail)
{
	rl_reward_failures_add(fail, &pool->fail);
	pool->fail = (struct rl_reward_failures){0};
}

void rl_env_pool_close(struct rl_env_pool *pool)
{
	if (!pool)
		return;
	rl_prog_sigpipe_block(&pool->sigpipe);
	double until = rl_now() + CLOSE_GRACE_S;

	for (int i = 0; pool->cp && i < pool->n_workers; i++)
		rl_prog_close_fd(&pool->cp[i].c.in_fd); /* the end of its input: end */
	while (pool->cp && copies_running(pool) > 0 && rl_now() < until) {
		for (int i = 0; i < pool->n_workers; i++) {
			struct copy *c = &pool->cp[i];
			char buf[4096];

			if (!c->c.pid)
				continue;
			while (c->c.out_fd >= 0 && read(c->c.out_fd, buf, sizeof buf) > 0)
				; /* what it says now is not waited for */
			rl_prog_read_err(&c->c);
			if (ended(c))
				rl_prog_kill(&c->c); /* its group too */
		}
		if (copies_running(pool) > 0)
			poll(NULL, 0, REAP_POLL_MS);
	}
	for (int i = 0; pool->cp && i < pool->n_workers; i++) {
		struct copy *c = &pool->cp[i];

		if (c->c.pid)
			rl_prog_kill(&c->c);
		rl_prog_close_fd(&c->c.out_fd);
		show_err(pool, c);
		free(c->c.err_text);
		free(c->eps);
		free(c->out);
		free(c->line);
	}
	rl_prog_log_summary(&pool->lg, "bad output");
	rl_prog_sigpipe_restore(&pool->sigpipe);
	for (int e = 0; pool->ep && e < pool->n; e++)
		forget(&pool->ep[e]);
	for (int k = 0; k < pool->n_ready; k++)
		free(pool->ready[k].observation);
	free(pool->ready);
	free(pool->ep);
	free(pool->cp);
	free(pool->pfd);
	free(pool->command);
	free(pool);
}
