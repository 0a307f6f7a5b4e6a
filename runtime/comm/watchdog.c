/* When a collective is stuck, say which rank is to blame. Every rank runs a
 * thread that answers "where are you?" with its current activity; a rank
 * whose collective waited past the timeout asks every other rank, waits a
 * little for answers, and reports the ranks that stay silent (dead, or
 * hung outside any collective) and where the others wait. Then it tears
 * its communicators down and exits: the others do the same within their
 * own timeout, so the step ends instead of hanging. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/comm/backend.h"

enum { TAG_ASK = 1, TAG_ANSWER = 2 };

static MPI_Comm control(const struct rl_comm_world *w)
{
	return *(MPI_Comm *)w->control;
}

void rl_watchdog_serve(struct rl_comm_world *w)
{
	for (;;) {
		int flag = 0, ask;
		MPI_Status st;

		if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_ASK, control(w), &flag, &st) != MPI_SUCCESS ||
		    !flag)
			return;
		if (MPI_Recv(&ask, 1, MPI_INT, st.MPI_SOURCE, TAG_ASK, control(w),
		             MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return;
		struct rl_comm_activity now;
		pthread_mutex_lock(&w->lock);
		now = w->now;
		pthread_mutex_unlock(&w->lock);
		/* small enough to go eagerly: never blocks on a live asker */
		MPI_Send(&now, (int)sizeof now, MPI_BYTE, st.MPI_SOURCE, TAG_ANSWER, control(w));
	}
}

static void *answer_loop(void *arg)
{
	struct rl_comm_world *w = arg;
	struct timespec ts = {0, 20 * 1000 * 1000};

	while (!atomic_load(&w->stop)) {
		rl_watchdog_serve(w);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int rl_watchdog_start(struct rl_comm_world *w, char *err, size_t errlen)
{
	atomic_store(&w->stop, 0);
	if (pthread_create(&w->answerer, NULL, answer_loop, w) != 0) {
		snprintf(err, errlen, "cannot start the watchdog thread");
		return -1;
	}
	w->has_answerer = true;
	return 0;
}

void rl_watchdog_stop(struct rl_comm_world *w)
{
	if (!w->has_answerer)
		return;
	atomic_store(&w->stop, 1);
	pthread_join(w->answerer, NULL);
	w->has_answerer = false;
}

/* Long enough for a rank busy between two collectives to answer (its thread
 * answers within 20 ms), short next to the timeout. */
static double grace_s(const struct rl_comm_world *w)
{
	double g = w->timeout_s / 5;
	return g < 1 ? 1 : g > 10 ? 10 : g;
}

struct census {
	struct rl_comm_activity *answer;
	bool *answered;
};

static void ask_everyone(struct rl_comm_world *w, struct census *cs)
{
	int n = w->size, ask = w->rank, pending = 0;
	MPI_Request *recv = calloc((size_t)n, sizeof *recv);
	MPI_Request *send = calloc((size_t)n, sizeof *send);

	if (!recv || !send)
		goto out;
	for (int r = 0; r < n; r++) {
		recv[r] = send[r] = MPI_REQUEST_NULL;
		if (r == w->rank)
			continue;
		MPI_Irecv(&cs->answer[r], (int)sizeof cs->answer[r], MPI_BYTE, r, TAG_ANSWER,
		          control(w), &recv[r]);
		MPI_Isend(&ask, 1, MPI_INT, r, TAG_ASK, control(w), &send[r]);
		pending++;
	}
	double until = rl_now() + grace_s(w);
	while (pending > 0 && rl_now() < until) {
		for (int r = 0; r < n; r++) {
			int done = 0;

			if (recv[r] == MPI_REQUEST_NULL)
				continue;
			if (MPI_Test(&recv[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
				recv[r] = MPI_REQUEST_NULL; /* a broken peer: no answer */
				pending--;
			} else if (done) {
				cs->answered[r] = true;
				pending--;
			}
		}
		if (!w->has_answerer)
			rl_watchdog_serve(w);
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	/* the questions complete on their own (a rank that lives on after
	 * asking must not keep them); answers from the silent are left
	 * behind: the process exits next */
	for (int r = 0; r < n; r++)
		if (send[r] != MPI_REQUEST_NULL)
			MPI_Request_free(&send[r]);
out:
	free(recv);
	free(send);
}

static void list_ranks(FILE *f, const int *ranks, int n)
{
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%d", i ? "," : "", ranks[i]);
}

static void report(struct rl_comm_world *w, const struct rl_comm_activity *mine, double waited,
                   const char *why, const struct census *cs)
{
	int *silent = calloc((size_t)w->size, sizeof *silent), n_silent = 0;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f || !silent) {
		fprintf(stderr, "rlrun: rank %d: %s stuck (%s)\n", w->rank, mine->what,
		        why ? why : "timeout");
		free(silent);
		return;
	}
	for (int r = 0; r < w->size; r++)
		if (r != w->rank && !cs->answered[r])
			silent[n_silent++] = r;
	if (why)
		fprintf(f, "rlrun: rank %d: collective #%llu %s failed after %.1f s: %s\n", w->rank,
		        (unsigned long long)mine->seq, mine->what, waited, why);
	else
		fprintf(f,
		        "rlrun: rank %d: collective #%llu %s has waited %.1f s "
		        "(cluster.collective_timeout %g s)\n",
		        w->rank, (unsigned long long)mine->seq, mine->what, waited, w->timeout_s);
	if (n_silent) {
		fprintf(f, "rlrun: rank %d: rank%s ", w->rank, n_silent > 1 ? "s" : "");
		list_ranks(f, silent, n_silent);
		fprintf(f, " %s not answer: dead, or hung outside any collective\n",
		        n_silent > 1 ? "do" : "does");
	} else {
		fprintf(f, "rlrun: rank %d: every rank answers; none is dead\n", w->rank);
	}
	/* where the others are: the one that is elsewhere is often the cause */
	for (int r = 0; r < w->size; r++) {
		const struct rl_comm_activity *a = &cs->answer[r];

		if (r == w->rank || !cs->answered[r])
			continue;
		if (a->waiting && a->seq == mine->seq && strcmp(a->what, mine->what) == 0)
			continue;
		fprintf(f, "rlrun: rank %d: rank %d is %s #%llu %.*s\n", w->rank, r,
		        a->waiting ? "waiting in" : "working, last in", (unsigned long long)a->seq,
		        (int)sizeof a->what, a->what);
	}
	fclose(f);
	fputs(text, stderr);
	fflush(stderr);
	free(text);
	free(silent);
}

bool rl_watchdog_others_working(struct rl_comm_world *w)
{
	struct census cs = {calloc((size_t)w->size, sizeof *cs.answer),
	                    calloc((size_t)w->size, sizeof *cs.answered)};
	bool working = false, all = cs.answer && cs.answered;

	if (all)
		ask_everyone(w, &cs);
	for (int r = 0; all && r < w->size; r++) {
		if (r == w->rank)
			continue;
		all = cs.answered[r];
		working |= all && !cs.answer[r].waiting;
	}
	free(cs.answer);
	free(cs.answered);
	return all && working;
}

_Noreturn void rl_watchdog_fire(struct rl_comm_world *w, struct rl_comm *c, double waited,
                                const char *why)
{
	struct rl_comm_activity mine;
	struct census cs = {calloc((size_t)w->size, sizeof *cs.answer),
	                    calloc((size_t)w->size, sizeof *cs.answered)};

	(void)c;
	pthread_mutex_lock(&w->lock);
	mine = w->now;
	pthread_mutex_unlock(&w->lock);
	if (cs.answer && cs.answered) {
		ask_everyone(w, &cs);
		report(w, &mine, waited, why, &cs);
	} else {
		fprintf(stderr, "rlrun: rank %d: collective #%llu %s is stuck\n", w->rank,
		        (unsigned long long)mine.seq, mine.what);
	}
	for (struct rl_comm *g = w->open; g; g = g->next_open) {
		if (g->device && g->device != g)
			g->device->be->abort(g->device);
		g->be->abort(g);
	}
	_exit(RL_COMM_EXIT);
}
