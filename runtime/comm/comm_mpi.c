/* The MPI backend: non-blocking MPI operations, so that comm.c can poll
 * them, yield the core between polls (many ranks on few cores) and give up
 * after the timeout; and the MPI twin every group has. */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/comm/backend.h"

/* all_to_all_v's blocks of packed tokens can pass 2^31 elements on one
 * rank: MPI-4 (MPICH 4) takes MPI_Count counts and MPI_Aint displacements;
 * an MPI-3 library takes ints, and a larger call is refused. */
#if MPI_VERSION >= 4
typedef MPI_Count v_count;
typedef MPI_Aint v_displ;
/* MPI_Aint holds any address difference: no buffer in memory is larger */
#define V_MAX  ((size_t)PTRDIFF_MAX)
#define V_CALL MPI_Ialltoallv_c
#define V_NAME "MPI_Ialltoallv_c"
#else
typedef int v_count;
typedef int v_displ;
#define V_MAX  ((size_t)INT_MAX)
#define V_CALL MPI_Ialltoallv
#define V_NAME "MPI_Ialltoallv"
#endif

/* What comm.c polls. MPI reads a nonblocking call's count and
 * displacement arrays until it completes, so all_to_all_v's live here. */
struct mpi_req {
	MPI_Request r[2]; /* a second for the receiving half of a sendrecv */
	v_count *counts;  /* all_to_all_v: size send counts, then size recv counts */
	v_displ *displs;  /* the same for displacements */
};

static MPI_Comm mpi_of(void *p)
{
	return *(MPI_Comm *)p;
}

static MPI_Datatype mpi_type(enum rl_comm_dtype t)
{
	switch (t) {
	case RL_COMM_F32:
		return MPI_FLOAT;
	case RL_COMM_F64:
		return MPI_DOUBLE;
	case RL_COMM_I32:
		return MPI_INT32_T;
	case RL_COMM_I64:
		return MPI_INT64_T;
	case RL_COMM_U8:
		break;
	}
	return MPI_UINT8_T;
}

static MPI_Op mpi_op(enum rl_comm_reduce op)
{
	return op == RL_COMM_MAX ? MPI_MAX : op == RL_COMM_MIN ? MPI_MIN : MPI_SUM;
}

static void mpi_message(int code, const char *call, char *err, size_t errlen)
{
	char text[MPI_MAX_ERROR_STRING];
	int len = 0;

	if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
		snprintf(text, sizeof text, "error %d", code);
	snprintf(err, errlen, "%s: %s", call, text);
}

/* MPI takes int counts; the layers above speak size_t. */
static int int_count(size_t n, char *err, size_t errlen)
{
	if (n > (size_t)0x7fffffff) {
		snprintf(err, errlen, "%zu elements are more than one MPI call carries", n);
		return -1;
	}
	return (int)n;
}

static void free_req(struct mpi_req *q)
{
	free(q->counts);
	free(q->displs);
	free(q);
}

/* One side's counts and displacements (elements, packed in rank order) in
 * MPI's types. */
static int v_side(const size_t *counts, int size, v_count *n, v_displ *at, const char *dir,
                  char *err, size_t errlen)
{
	size_t off = 0;

	for (int p = 0; p < size; p++) {
		/* an empty block's displacement is never read */
		if (counts[p] > V_MAX || (counts[p] && off > V_MAX)) {
			snprintf(err, errlen,
			         "all_to_all_v: %zu elements %s rank %d at element %zu: more than "
			         "%s carries",
			         counts[p], dir, p, off, V_NAME);
			return -1;
		}
		n[p] = (v_count)counts[p];
		at[p] = counts[p] ? (v_displ)off : 0;
		off += counts[p];
	}
	return 0;
}

static int v_arrays(const struct rl_comm *c, const struct rl_comm_op *op, struct mpi_req *q,
                    char *err, size_t errlen)
{
	size_t n = (size_t)c->size;

	q->counts = malloc(2 * n * sizeof *q->counts);
	q->displs = malloc(2 * n * sizeof *q->displs);
	if (!q->counts || !q->displs) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (v_side(op->send_counts, c->size, q->counts, q->displs, "to", err, errlen) ||
	    v_side(op->recv_counts, c->size, q->counts + n, q->displs + n, "from", err, errlen))
		return -1;
	return 0;
}

static int mpi_start(struct rl_comm *c, const struct rl_comm_op *op, void **req, char *err,
                     size_t errlen)
{
	MPI_Comm comm = mpi_of(c->impl);
	MPI_Datatype t = mpi_type(op->dtype);
	struct mpi_req *q = calloc(1, sizeof *q);
	int n = int_count(op->count, err, errlen), rc = MPI_SUCCESS;
	const char *call = "";

	if (!q || n < 0) {
		if (!q)
			snprintf(err, errlen, "out of memory");
		free(q);
		return -1;
	}
	MPI_Request *r = q->r;
	r[0] = r[1] = MPI_REQUEST_NULL;
	const void *send = op->send;
	switch (op->kind) {
	case RL_OP_ALL_REDUCE:
		call = "MPI_Iallreduce";
		rc = MPI_Iallreduce(MPI_IN_PLACE, op->recv, n, t, mpi_op(op->reduce), comm, r);
		break;
	case RL_OP_REDUCE_SCATTER:
		call = "MPI_Ireduce_scatter_block";
		rc = MPI_Ireduce_scatter_block(send, op->recv, n, t, mpi_op(op->reduce), comm, r);
		break;
	case RL_OP_ALL_GATHER:
		call = "MPI_Iallgather";
		/* MPI wants MPI_IN_PLACE, not aliasing buffers */
		if (op->send == (const char *)op->recv +
		                    (size_t)c->rank * op->count * rl_comm_dtype_size(op->dtype))
			send = MPI_IN_PLACE;
		rc = MPI_Iallgather(send, n, t, op->recv, n, t, comm, r);
		break;
	case RL_OP_BROADCAST:
		call = "MPI_Ibcast";
		rc = MPI_Ibcast(op->recv, n, t, op->peer, comm, r);
		break;
	case RL_OP_SEND:
		call = "MPI_Isend";
		rc = MPI_Isend(op->send, n, t, op->peer, 0, comm, r);
		break;
	case RL_OP_RECV:
		call = "MPI_Irecv";
		rc = MPI_Irecv(op->recv, n, t, op->peer, 0, comm, r);
		break;
	case RL_OP_SEND_RECV: {
		int m = int_count(op->recv_count, err, errlen);

		if (m < 0) {
			free_req(q);
			return -1;
		}
		call = "MPI_Irecv";
		rc = MPI_Irecv(op->recv, m, t, op->recv_peer, 0, comm, &r[1]);
		if (rc == MPI_SUCCESS) {
			call = "MPI_Isend";
			rc = MPI_Isend(op->send, n, t, op->peer, 0, comm, &r[0]);
		}
		break;
	}
	case RL_OP_ALL_TO_ALL:
		call = "MPI_Ialltoall";
		rc = MPI_Ialltoall(send, n, t, op->recv, n, t, comm, r);
		break;
	case RL_OP_ALL_TO_ALL_V: {
		size_t k = (size_t)c->size;

		call = V_NAME;
		if (v_arrays(c, op, q, err, errlen)) {
			free_req(q);
			return -1;
		}
		rc = V_CALL(send, q->counts, q->displs, t, op->recv, q->counts + k, q->displs + k,
		            t, comm, r);
		break;
	}
	case RL_OP_BARRIER:
		call = "MPI_Ibarrier";
		rc = MPI_Ibarrier(comm, r);
		break;
	}
	if (rc != MPI_SUCCESS) {
		mpi_message(rc, call, err, errlen);
		free_req(q);
		return -1;
	}
	*req = q;
	return 0;
}

static int mpi_test(struct rl_comm *c, void *req, char *err, size_t errlen)
{
	struct mpi_req *q = req;
	MPI_Status status[2];
	int done = 0, rc = MPI_Testall(2, q->r, &done, status);

	(void)c;
	if (rc != MPI_SUCCESS) {
		mpi_message(rc, "MPI_Testall", err, errlen);
		return -1;
	}
	if (done)
		free_req(q);
	return done;
}

int rl_comm_mpi_split_host(struct rl_comm *parent, int color, int key, struct rl_comm *child,
                           char *err, size_t errlen)
{
	MPI_Comm *comm = malloc(sizeof *comm);
	int rc;

	if (!comm) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	char desc[96];

	snprintf(desc, sizeof desc, "MPI_Comm_split of group %s from %s", child->name,
	         parent->name);
	rc = RL_WATCHED(
	    parent->world, desc,
	    MPI_Comm_split(mpi_of(parent->host), color < 0 ? MPI_UNDEFINED : color, key, comm));
	if (rc != MPI_SUCCESS) {
		mpi_message(rc, "MPI_Comm_split", err, errlen);
		free(comm);
		return -1;
	}
	if (*comm == MPI_COMM_NULL) {
		/* not a member: took part in the split, and that is all */
		free(comm);
		child->size = 0;
		return 0;
	}
	MPI_Comm_rank(*comm, &child->rank);
	MPI_Comm_size(*comm, &child->size);
	child->host = comm;
	child->members = malloc((size_t)child->size * sizeof *child->members);
	if (!child->members) {
		snprintf(err, errlen, "out of memory");
		rl_comm_mpi_free_host(child);
		return -1;
	}
	int me = parent->world->rank;
	snprintf(desc, sizeof desc, "MPI_Allgather of group %s's members", child->name);
	rc = RL_WATCHED(parent->world, desc,
	                MPI_Allgather(&me, 1, MPI_INT, child->members, 1, MPI_INT, *comm));
	if (rc != MPI_SUCCESS) {
		mpi_message(rc, "MPI_Allgather", err, errlen);
		rl_comm_mpi_free_host(child);
		return -1;
	}
	return 0;
}

void rl_comm_mpi_free_host(struct rl_comm *c)
{
	if (c->host) {
		MPI_Comm_free((MPI_Comm *)c->host);
		free(c->host);
	}
	free(c->members);
	c->host = NULL;
	c->members = NULL;
}

static int mpi_split(struct rl_comm *parent, int color, int key, struct rl_comm *child, char *err,
                     size_t errlen)
{
	if (rl_comm_mpi_split_host(parent, color, key, child, err, errlen))
		return -1;
	child->impl = child->host;
	return 0;
}

/* MPI has no way to cancel a collective: the process exits instead. */
static void mpi_abort(struct rl_comm *c)
{
	(void)c;
}

static void mpi_free(struct rl_comm *c)
{
	rl_comm_mpi_free_host(c);
	c->impl = NULL;
}

const struct rl_comm_backend rl_comm_mpi_backend = {
    .name = "mpi",
    .start = mpi_start,
    .test = mpi_test,
    .split = mpi_split,
    .abort = mpi_abort,
    .free = mpi_free,
};
