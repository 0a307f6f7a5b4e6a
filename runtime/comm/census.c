/* The watchdog's questions and answers on the control channel. Every rank
 * answers "where are you?" with its activity; a rank that gives up asks
 * everyone and reports the silent ones (its verdict: verdict.c). Only
 * matched probes (MPI_Improbe, MPI_Mrecv) and nonblocking sends: the
 * watcher and the main thread may both serve at once, and nothing here
 * waits on a peer that may be dead. */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/base/clock.h"
#include "runtime/comm/census.h"

/* Past this many, the ranks that are elsewhere are counted, not listed. */
#define MAX_ELSEWHERE_LINES 16

MPI_Comm rl_census_control(const struct rl_comm_world *w)
{
	return *(MPI_Comm *)w->control;
}

void rl_census_pause_ms(long ms)
{
	struct timespec ts = {0, ms * 1000 * 1000};

	nanosleep(&ts, NULL);
}

/* Answers in flight: each keeps its buffer until its send completes. */
enum { N_SLOTS = 32 };
static struct {
	MPI_Request req;
	struct rl_comm_activity a;
} slots[N_SLOTS];
static bool slots_ready;
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

/* with slots_lock held */
static void reap(void)
{
	if (!slots_ready) {
		for (int i = 0; i < N_SLOTS; i++)
			slots[i].req = MPI_REQUEST_NULL;
		slots_ready = true;
	}
	for (int i = 0; i < N_SLOTS; i++) {
		int done = 0;

		if (slots[i].req != MPI_REQUEST_NULL &&
		    MPI_Test(&slots[i].req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			slots[i].req = MPI_REQUEST_NULL; /* a broken peer: forget it */
	}
}

/* Without a free slot (32 answers to dead askers still pending) the
 * question goes unanswered: the asker counts this rank as silent, which
 * costs a wrong name in a report, never a hang here. */
static void answer(struct rl_comm_world *w, int to)
{
	pthread_mutex_lock(&slots_lock);
	reap();
	for (int i = 0; i < N_SLOTS; i++) {
		if (slots[i].req != MPI_REQUEST_NULL)
			continue;
		pthread_mutex_lock(&w->lock);
		slots[i].a = w->now;
		pthread_mutex_unlock(&w->lock);
		if (MPI_Isend(&slots[i].a, (int)sizeof slots[i].a, MPI_BYTE, to, RL_TAG_ANSWER,
		              rl_census_control(w), &slots[i].req) != MPI_SUCCESS)
			slots[i].req = MPI_REQUEST_NULL;
		break;
	}
	pthread_mutex_unlock(&slots_lock);
}

void rl_census_terminate(char *s, size_t n)
{
	s[n - 1] = '\0';
}

void rl_census_answer(struct rl_comm_world *w)
{
	for (;;) {
		int flag = 0, ask;
		MPI_Message m;
		MPI_Status st;

		if (MPI_Improbe(MPI_ANY_SOURCE, RL_TAG_ASK, rl_census_control(w), &flag, &m, &st) !=
		        MPI_SUCCESS ||
		    !flag || MPI_Mrecv(&ask, 1, MPI_INT, &m, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			break;
		answer(w, st.MPI_SOURCE);
	}
	pthread_mutex_lock(&slots_lock);
	reap();
	pthread_mutex_unlock(&slots_lock);
}

/* The question's buffer outlives the sends, which may complete after the
 * census (a slow peer) or never (a dead one). */
static int ask_msg;

int rl_census_take(struct rl_comm_world *w, struct rl_census *cs, double seconds)
{
	int n = w->size, pending = 0;
	MPI_Request *recv = calloc((size_t)n, sizeof *recv);
	MPI_Request *send = calloc((size_t)n, sizeof *send);

	memset(cs, 0, sizeof *cs);
	cs->answer = calloc((size_t)n, sizeof *cs->answer);
	cs->answered = calloc((size_t)n, sizeof *cs->answered);
	if (!recv || !send || !cs->answer || !cs->answered) {
		free(recv);
		free(send);
		rl_census_free(cs, true);
		return -1;
	}
	for (int r = 0; r < n; r++) {
		recv[r] = send[r] = MPI_REQUEST_NULL;
		if (r == w->rank)
			continue;
		MPI_Irecv(&cs->answer[r], (int)sizeof cs->answer[r], MPI_BYTE, r, RL_TAG_ANSWER,
		          rl_census_control(w), &recv[r]);
		MPI_Isend(&ask_msg, 1, MPI_INT, r, RL_TAG_ASK, rl_census_control(w), &send[r]);
		pending++;
	}
	double until = rl_now() + seconds;
	while (pending > 0 && rl_now() < until) {
		for (int r = 0; r < n; r++) {
			int done = 0;

			if (recv[r] == MPI_REQUEST_NULL || cs->answered[r])
				continue;
			if (MPI_Test(&recv[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
				recv[r] = MPI_REQUEST_NULL; /* a broken peer: no answer */
				pending--;
			} else if (done) {
				cs->answered[r] = true;
				pending--;
			}
		}
		/* a rank asking this one at the same time must get its answer;
		 * a verdict is the watcher's to take */
		rl_census_answer(w);
		rl_census_pause_ms(5);
	}
	for (int r = 0; r < n; r++)
		if (send[r] != MPI_REQUEST_NULL)
			MPI_Request_free(&send[r]);
	free(send);
	for (int r = 0; r < n; r++)
		if (cs->answered[r])
			rl_census_terminate(cs->answer[r].what, sizeof cs->answer[r].what);
	cs->complete = pending == 0;
	cs->size = n;
	cs->recv = recv;
	return 0;
}

void rl_census_free(struct rl_census *cs, bool keep)
{
	MPI_Request *recv = cs->recv;

	/* a question left open would take the answer meant for the next
	 * census, and write it into memory freed here: cancelled, and waited
	 * for (a cancelled receive completes at once) */
	for (int r = 0; !keep && recv && r < cs->size; r++) {
		if (recv[r] == MPI_REQUEST_NULL || (cs->answered && cs->answered[r]))
			continue;
		MPI_Cancel(&recv[r]);
		MPI_Wait(&recv[r], MPI_STATUS_IGNORE);
	}
	free(cs->answer);
	free(cs->answered);
	free(recv);
	memset(cs, 0, sizeof *cs);
}

bool rl_census_others_working(struct rl_comm_world *w, double seconds)
{
	struct rl_census cs;
	bool all, working = false;

	if (rl_census_take(w, &cs, seconds))
		return false;
	all = cs.complete;
	for (int r = 0; r < w->size; r++)
		working |= r != w->rank && cs.answered[r] && cs.answer[r].state == RL_WORKING;
	rl_census_free(&cs, false);
	return all && working;
}

/* "collective #12 all_reduce of ... over dp (ranks 0,2): grad reduce", or
 * the blocking call's own description */
void rl_census_where(char *buf, size_t len, const struct rl_comm_activity *a)
{
	if (a->seq > 0 && a->collective)
		snprintf(buf, len, "collective #%llu %.*s", (unsigned long long)a->seq,
		         (int)sizeof a->what, a->what);
	else
		snprintf(buf, len, "%.*s", (int)sizeof a->what, a->what);
}

static void list_ranks(FILE *f, const int *ranks, int n, int total)
{
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%d", i ? "," : "", ranks[i]);
	if (total > n)
		fprintf(f, ",... (%d in all)", total);
}

void rl_census_lost_line(FILE *f, int me, const int *lost, int n, int total)
{
	fprintf(f, "rlrun: rank %d: rank%s ", me, total > 1 ? "s" : "");
	list_ranks(f, lost, n, total);
	fprintf(f, " %s not answer: dead, or hung outside any collective\n",
	        total > 1 ? "do" : "does");
}

/* What this rank sees of the lost ranks on its own node: whether a rank
 * died or hangs, where a census alone cannot tell. */
static void lost_details(FILE *f, const struct rl_comm_world *w, const int *lost, int n)
{
	for (int i = 0; i < n; i++) {
		enum rl_peer_state s = rl_comm_peer_state(w, lost[i]);

		if (s == RL_PEER_ELSEWHERE)
			continue;
		fprintf(f, "rlrun: rank %d: rank %d's process (pid %d on %s) %s\n", w->rank,
		        lost[i], (int)w->peers[lost[i]].pid, w->peers[lost[i]].host,
		        s == RL_PEER_GONE      ? "is gone"
		        : s == RL_PEER_STOPPED ? "is stopped (SIGSTOP, or a debugger)"
		                               : "runs but does not answer: hung");
	}
}

int rl_census_report(FILE *f, const struct rl_comm_world *w, const struct rl_comm_activity *mine,
                     double waited, const char *why, const struct rl_census *cs, int *lost)
{
	int n_lost = 0, elsewhere = 0;
	char at[160];

	rl_census_where(at, sizeof at, mine);
	if (why)
		fprintf(f, "rlrun: rank %d: %s failed after %.1f s: %s\n", w->rank, at, waited,
		        why);
	else
		fprintf(f,
		        "rlrun: rank %d: %s has waited %.1f s (cluster.collective_timeout %g s)\n",
		        w->rank, at, waited, w->timeout_s);
	if (!cs || !cs->answer) {
		/* no census: what this node shows */
		fprintf(f, "rlrun: rank %d: the other ranks could not be asked\n", w->rank);
		for (int r = 0; r < w->size; r++) {
			enum rl_peer_state s = rl_comm_peer_state(w, r);

			if (s == RL_PEER_GONE || s == RL_PEER_STOPPED)
				lost[n_lost++] = r;
		}
		if (n_lost) {
			rl_census_lost_line(f, w->rank, lost, n_lost, n_lost);
			lost_details(f, w, lost, n_lost);
		}
		return n_lost;
	}
	for (int r = 0; r < w->size; r++)
		if (r != w->rank && !cs->answered[r])
			lost[n_lost++] = r;
	if (n_lost) {
		rl_census_lost_line(f, w->rank, lost, n_lost, n_lost);
		lost_details(f, w, lost, n_lost);
	} else {
		fprintf(f, "rlrun: rank %d: every rank answers; none is dead\n", w->rank);
	}
	/* where the others are: the one that is elsewhere is often the cause */
	for (int r = 0; r < w->size; r++) {
		const struct rl_comm_activity *a = &cs->answer[r];
		char there[160];

		if (r == w->rank || !cs->answered[r])
			continue;
		if (a->state == RL_WAITING && a->seq == mine->seq &&
		    strcmp(a->what, mine->what) == 0)
			continue;
		if (++elsewhere > MAX_ELSEWHERE_LINES)
			continue;
		rl_census_where(there, sizeof there, a);
		fprintf(f, "rlrun: rank %d: rank %d is %s %s\n", w->rank, r,
		        a->state == RL_WAITING     ? "waiting in"
		        : a->state == RL_GIVING_UP ? "giving up too, in"
		                                   : "working, last in",
		        there);
	}
	if (elsewhere > MAX_ELSEWHERE_LINES)
		fprintf(f, "rlrun: rank %d: and %d more ranks elsewhere\n", w->rank,
		        elsewhere - MAX_ELSEWHERE_LINES);
	return n_lost;
}
