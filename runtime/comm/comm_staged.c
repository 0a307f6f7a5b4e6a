/* The staged transport: a device face whose collectives copy their device
 * buffers into host buffers, run the MPI backend's operation on those, and
 * copy the result back when it completes. It is what ranks sharing one GPU
 * use (NCCL refuses two ranks on one device), and, with the fenced table's
 * copies, what CI runs to prove that every device-path collective is given
 * device memory: the copy refuses anything else.
 *
 * The operation runs on the face's own MPI communicator, so that a device
 * collective still in flight never matches a host one of the same group.
 * Host buffers are kept for reuse per face: pinned ones cost a
 * cudaHostAlloc each, far more than the copy they serve. */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/backend.h"

/* A free host buffer of the face, kept for the next operation. */
struct stage_buf {
	void *p;
	size_t bytes;
	struct stage_buf *next;
};

struct staged_req {
	void *inner; /* the MPI backend's request */
	struct stage_buf *send, *recv;
	void *dst; /* where recv goes back to (device memory), NULL: nowhere */
	size_t dst_bytes;
};

/* The face's free list lives behind impl's MPI communicator: impl points
 * at this, whose first member is the communicator the MPI backend reads. */
struct staged_face {
	void *mpi; /* MPI_Comm *, as the MPI backend's impl */
	struct stage_buf *free_list;
};

static void *host_alloc(const struct rl_comm *c, size_t bytes)
{
	return c->stage->host_alloc ? c->stage->host_alloc(bytes) : malloc(bytes);
}

static void host_release(const struct rl_comm *c, void *p)
{
	if (c->stage->host_release)
		c->stage->host_release(p);
	else
		free(p);
}

static struct stage_buf *take(struct rl_comm *c, struct staged_face *f, size_t bytes)
{
	for (struct stage_buf **b = &f->free_list; *b; b = &(*b)->next)
		if ((*b)->bytes >= bytes) {
			struct stage_buf *got = *b;

			*b = got->next;
			return got;
		}
	struct stage_buf *b = malloc(sizeof *b);
	if (!b)
		return NULL;
	b->bytes = bytes ? bytes : 1;
	b->p = host_alloc(c, b->bytes);
	if (!b->p) {
		free(b);
		return NULL;
	}
	return b;
}

static void give_back(struct staged_face *f, struct stage_buf *b)
{
	if (!b)
		return;
	b->next = f->free_list;
	f->free_list = b;
}

static size_t sum(const size_t *counts, int n)
{
	size_t s = 0;

	for (int i = 0; i < n; i++)
		s += counts[i];
	return s;
}

/* An all-gather in place sends from its own block of recv. */
static bool gather_in_place(const struct rl_comm *c, const struct rl_comm_op *op)
{
	return op->kind == RL_OP_ALL_GATHER &&
	       op->send == (const char *)op->recv +
	                       (size_t)c->rank * op->count * rl_comm_dtype_size(op->dtype);
}

/* Elements of the operation's send and recv buffers; in place counts as
 * recv only. */
static void extents(const struct rl_comm *c, const struct rl_comm_op *op, size_t *send,
                    size_t *recv)
{
	size_t p = (size_t)c->size;

	*send = *recv = 0;
	switch (op->kind) {
	case RL_OP_ALL_REDUCE:
	case RL_OP_BROADCAST:
		*recv = op->count;
		break;
	case RL_OP_REDUCE_SCATTER:
		*send = p * op->count;
		*recv = op->count;
		break;
	case RL_OP_ALL_GATHER:
		*send = gather_in_place(c, op) ? 0 : op->count;
		*recv = p * op->count;
		break;
	case RL_OP_SEND:
		*send = op->count;
		break;
	case RL_OP_RECV:
		*recv = op->count;
		break;
	case RL_OP_SEND_RECV:
		*send = op->count;
		*recv = op->recv_count;
		break;
	case RL_OP_ALL_TO_ALL:
		*send = *recv = p * op->count;
		break;
	case RL_OP_ALL_TO_ALL_V:
		*send = sum(op->send_counts, c->size);
		*recv = sum(op->recv_counts, c->size);
		break;
	case RL_OP_BARRIER:
		break;
	}
}

static void release_req(struct rl_comm *c, struct staged_req *q)
{
	struct staged_face *f = c->impl;

	give_back(f, q->send);
	give_back(f, q->recv);
	free(q);
}

static int staged_start(struct rl_comm *c, const struct rl_comm_op *op, void **req, char *err,
                        size_t errlen)
{
	struct staged_face *f = c->impl;
	size_t esz = rl_comm_dtype_size(op->dtype), n_send, n_recv;
	struct rl_comm_op h = *op;
	struct staged_req *q = calloc(1, sizeof *q);

	if (!f || !q) {
		snprintf(err, errlen, "comm_staged: %s", f ? "out of memory" : "group aborted");
		free(q);
		return -1;
	}
	extents(c, op, &n_send, &n_recv);
	bool in_place = gather_in_place(c, op);
	bool root_only_in = op->kind == RL_OP_BROADCAST && c->rank != op->peer;
	if ((n_send && !(q->send = take(c, f, n_send * esz))) ||
	    (n_recv && !(q->recv = take(c, f, n_recv * esz)))) {
		snprintf(err, errlen, "comm_staged: no host memory for %zu B",
		         (n_send + n_recv) * esz);
		release_req(c, q);
		return -1;
	}
	const char *copy_what = "the send buffer";
	int rc = 0;
	if (q->send)
		rc = c->stage->to_host(q->send->p, op->send, n_send * esz, NULL);
	if (!rc && q->recv) {
		/* what recv holds going in is the operation's input too: an
		 * all-reduce and a root's broadcast in place, the own block of
		 * an all-gather in place */
		copy_what = "the buffer";
		if (op->kind == RL_OP_ALL_REDUCE || (op->kind == RL_OP_BROADCAST && !root_only_in))
			rc = c->stage->to_host(q->recv->p, op->recv, n_recv * esz, NULL);
		else if (in_place)
			rc = c->stage->to_host((char *)q->recv->p +
			                           (size_t)c->rank * op->count * esz,
			                       op->send, op->count * esz, NULL);
	}
	if (rc) {
		snprintf(err, errlen,
		         "comm_staged: %s is not device memory of this run's backend (a device "
		         "collective needs the backend's memory; host values go over the group "
		         "itself)",
		         copy_what);
		release_req(c, q);
		return -1;
	}
	h.send = q->send ? q->send->p : NULL;
	h.recv = q->recv ? q->recv->p : NULL;
	if (in_place)
		h.send = (char *)q->recv->p + (size_t)c->rank * op->count * esz;
	if (op->kind == RL_OP_ALL_REDUCE || op->kind == RL_OP_BROADCAST)
		h.send = h.recv;
	q->dst = op->kind == RL_OP_BROADCAST && !root_only_in ? NULL : op->recv;
	q->dst_bytes = n_recv * esz;
	/* the MPI backend reads impl as its communicator */
	void *face = c->impl;
	c->impl = f->mpi;
	rc = rl_comm_mpi_backend.start(c, &h, &q->inner, err, errlen);
	c->impl = face;
	if (rc) {
		release_req(c, q);
		return -1;
	}
	*req = q;
	return 0;
}

static int staged_test(struct rl_comm *c, void *req, char *err, size_t errlen)
{
	struct staged_req *q = req;
	int rc = rl_comm_mpi_backend.test(c, q->inner, err, errlen);

	if (rc == 0)
		return 0;
	if (rc == 1 && q->dst && q->dst_bytes &&
	    c->stage->from_host(q->dst, q->recv->p, q->dst_bytes, NULL)) {
		snprintf(err, errlen,
		         "comm_staged: the receive buffer is not device memory of this "
		         "run's backend");
		rc = -1;
	}
	release_req(c, q);
	return rc;
}

static int staged_split(struct rl_comm *parent, int color, int key, struct rl_comm *child,
                        char *err, size_t errlen)
{
	(void)parent, (void)color, (void)key, (void)child;
	snprintf(err, errlen, "comm_staged: device faces are made by rl_comm_connect_device");
	return -1;
}

static void staged_abort(struct rl_comm *c)
{
	(void)c; /* as MPI's: the process exits next */
}

static void staged_free(struct rl_comm *c)
{
	struct staged_face *f = c->impl;

	if (!f)
		return;
	while (f->free_list) {
		struct stage_buf *b = f->free_list;

		f->free_list = b->next;
		host_release(c, b->p);
		free(b);
	}
	MPI_Comm_free((MPI_Comm *)f->mpi);
	free(f->mpi);
	free(f);
	c->impl = NULL;
}

int rl_comm_staged_face(struct rl_comm *c, struct rl_comm *face, char *err, size_t errlen)
{
	struct staged_face *f = calloc(1, sizeof *f);
	MPI_Comm *comm = malloc(sizeof *comm);

	/* a communicator of its own over the same members: collective over c */
	if (!f || !comm ||
	    RL_WATCHED(c->world, "MPI_Comm_dup for a staged device face",
	               MPI_Comm_dup(*(MPI_Comm *)c->host, comm)) != MPI_SUCCESS) {
		snprintf(err, errlen, "comm_staged: %s",
		         f && comm ? "MPI_Comm_dup failed" : "out of memory");
		free(f);
		free(comm);
		return -1;
	}
	f->mpi = comm;
	face->impl = f;
	face->be = &rl_comm_staged_backend;
	return 0;
}

const struct rl_comm_backend rl_comm_staged_backend = {
    .name = "staged",
    .start = staged_start,
    .test = staged_test,
    .split = staged_split,
    .abort = staged_abort,
    .free = staged_free,
};
