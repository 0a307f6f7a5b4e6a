/* A verdict: what a rank that gives up found (the ranks that do not
 * answer, its stuck wait), sent to every rank that answered its census.
 * They give up at once, naming the same ranks, and acknowledge once their
 * own report is out; the sender waits for those acknowledgements before it
 * goes on to exit, because a launcher may end every rank as soon as one
 * exits (MPICH's hydra does), which would cut the others' reports short. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/comm/census.h"

int rl_verdict_take(struct rl_comm_world *w, struct rl_verdict *v)
{
	int flag = 0;
	MPI_Message m;
	MPI_Status st;

	if (MPI_Improbe(MPI_ANY_SOURCE, RL_TAG_VERDICT, rl_census_control(w), &flag, &m, &st) !=
	        MPI_SUCCESS ||
	    !flag)
		return 0;
	memset(v, 0, sizeof *v);
	if (MPI_Mrecv(v, (int)sizeof *v, MPI_BYTE, &m, MPI_STATUS_IGNORE) != MPI_SUCCESS)
		return 0;
	/* bytes from another rank: bounded before they are read */
	v->from = st.MPI_SOURCE;
	if (v->n_lost < 0 || v->n_lost > w->size)
		v->n_lost = 0;
	for (int i = 0; i < v->n_lost && i < RL_VERDICT_MAX_LOST; i++)
		if (v->lost[i] < 0 || v->lost[i] >= w->size)
			v->lost[i] = 0;
	rl_census_terminate(v->at.what, sizeof v->at.what);
	rl_census_terminate(v->why, sizeof v->why);
	return 1;
}

/* The acknowledgements' payload outlives their sends. */
static int ack_msg;

static void ack(struct rl_comm_world *w, int to, double seconds)
{
	MPI_Request r;
	int done = 0;

	if (MPI_Isend(&ack_msg, 1, MPI_INT, to, RL_TAG_ACK, rl_census_control(w), &r) !=
	    MPI_SUCCESS)
		return;
	for (double until = rl_now() + seconds; !done && rl_now() < until;) {
		if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return;
		if (!done)
			rl_census_pause_ms(2);
	}
	if (!done)
		MPI_Request_free(&r);
}

void rl_verdict_ack(struct rl_comm_world *w, int to)
{
	ack(w, to, 0.2);
}

void rl_verdict_ack_pending(struct rl_comm_world *w)
{
	struct rl_verdict v;

	while (rl_verdict_take(w, &v))
		ack(w, v.from, 0.2);
}

void rl_verdict_send(struct rl_comm_world *w, const struct rl_census *cs,
                     const struct rl_verdict *v, double seconds)
{
	/* the sends' buffer outlives them: they may never complete */
	static struct rl_verdict out;
	int n = w->size, pending = 0;
	MPI_Request *send = calloc((size_t)n, sizeof *send);
	MPI_Request *acks = calloc((size_t)n, sizeof *acks);
	int *got = calloc((size_t)n, sizeof *got);

	if (!send || !acks || !got || !cs->answered)
		goto out;
	out = *v;
	for (int r = 0; r < n; r++) {
		send[r] = acks[r] = MPI_REQUEST_NULL;
		if (r == w->rank || !cs->answered[r])
			continue;
		if (MPI_Isend(&out, (int)sizeof out, MPI_BYTE, r, RL_TAG_VERDICT,
		              rl_census_control(w), &send[r]) != MPI_SUCCESS)
			continue;
		if (MPI_Irecv(&got[r], 1, MPI_INT, r, RL_TAG_ACK, rl_census_control(w), &acks[r]) ==
		    MPI_SUCCESS)
			pending++;
	}
	for (double until = rl_now() + seconds; pending > 0 && rl_now() < until;) {
		for (int r = 0; r < n; r++) {
			int done = 0;

			if (send[r] != MPI_REQUEST_NULL &&
			    (MPI_Test(&send[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done))
				send[r] = MPI_REQUEST_NULL;
			done = 0;
			if (acks[r] == MPI_REQUEST_NULL)
				continue;
			if (MPI_Test(&acks[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) {
				acks[r] = MPI_REQUEST_NULL;
				pending--;
			}
		}
		/* a rank giving up at the same time waits for this one's
		 * acknowledgement, and its census for an answer */
		rl_census_answer(w);
		rl_verdict_ack_pending(w);
		rl_census_pause_ms(2);
	}
	for (int r = 0; r < n; r++) {
		if (send[r] != MPI_REQUEST_NULL)
			MPI_Request_free(&send[r]);
		/* a cancelled receive completes at once, and then got can go */
		if (acks[r] != MPI_REQUEST_NULL) {
			MPI_Cancel(&acks[r]);
			MPI_Wait(&acks[r], MPI_STATUS_IGNORE);
		}
	}
out:
	free(send);
	free(acks);
	free(got);
}

void rl_verdict_report(FILE *f, const struct rl_comm_world *w, const struct rl_verdict *v,
                       const struct rl_comm_activity *mine, double waited)
{
	char at[160], here[160];
	int listed = v->n_lost < RL_VERDICT_MAX_LOST ? v->n_lost : RL_VERDICT_MAX_LOST;

	rl_census_where(at, sizeof at, &v->at);
	rl_census_where(here, sizeof here, mine);
	fprintf(f, "rlrun: rank %d: rank %d gave up on %s%s%s\n", w->rank, v->from, at,
	        v->why[0] ? ": " : "", v->why);
	if (v->n_lost)
		rl_census_lost_line(f, w->rank, v->lost, listed, v->n_lost);
	else
		fprintf(f, "rlrun: rank %d: every rank answered rank %d; none is dead\n", w->rank,
		        v->from);
	if (mine->state == RL_WAITING)
		fprintf(f, "rlrun: rank %d: this rank was waiting %.1f s in %s\n", w->rank, waited,
		        here);
	else
		fprintf(f, "rlrun: rank %d: this rank was working, last in %s\n", w->rank, here);
}
