/* The NCCL backend: collectives on device buffers. Every operation goes on
 * the legacy default stream, where the compute kernels run too, so it is
 * ordered after the kernels that wrote its input and before the ones that
 * read its output without any stream juggling; an event recorded behind it
 * is what comm.c polls. The exception is an operation started to overlap
 * compute (the data-parallel buckets): it goes on the group's own
 * non-blocking stream, behind an event recorded on the legacy stream (the
 * kernels that wrote its input), so that the kernels queued after it run
 * beside it; whoever reads its output waits for it first (rl_comm_wait).
 * The NCCL world is bootstrapped over MPI. */
#ifdef RL_HAVE_NCCL

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/backend.h"

struct nccl_group {
	ncclComm_t comm;
	int32_t *scratch;     /* one int32 on the device: the barrier's payload */
	cudaStream_t overlap; /* the overlapped operations' stream, made at first use */
	/* set by the watchdog's thread (ncclCommAbort): comm is gone, the
	 * rest stays for the main thread, which may still be in a call */
	atomic_int aborted;
};

struct nccl_req {
	cudaEvent_t done;
};

/* cudaStreamLegacy rather than 0: the same stream even in a program built
 * with per-thread default streams. */
#define RL_NCCL_STREAM cudaStreamLegacy

static const ncclDataType_t nccl_type[] = {
    [RL_COMM_F32] = ncclFloat32, [RL_COMM_F64] = ncclFloat64, [RL_COMM_I32] = ncclInt32,
    [RL_COMM_I64] = ncclInt64,   [RL_COMM_U8] = ncclUint8,
};
static const ncclRedOp_t nccl_op[] = {
    [RL_COMM_SUM] = ncclSum, [RL_COMM_MAX] = ncclMax, [RL_COMM_MIN] = ncclMin};
static const char *const nccl_call[] = {
    [RL_OP_ALL_REDUCE] = "ncclAllReduce",
    [RL_OP_REDUCE_SCATTER] = "ncclReduceScatter",
    [RL_OP_ALL_GATHER] = "ncclAllGather",
    [RL_OP_BROADCAST] = "ncclBroadcast",
    [RL_OP_SEND] = "ncclSend",
    [RL_OP_RECV] = "ncclRecv",
    [RL_OP_SEND_RECV] = "ncclSend/ncclRecv (sendrecv)",
    [RL_OP_ALL_TO_ALL] = "ncclSend/ncclRecv (all_to_all)",
    [RL_OP_ALL_TO_ALL_V] = "ncclSend/ncclRecv (all_to_all_v)",
    [RL_OP_BARRIER] = "ncclAllReduce (barrier)",
};

/* ncclGetLastError says which peer or transport failed; the result code
 * alone rarely does. */
static void nccl_message(ncclResult_t rc, const char *call, char *err, size_t errlen)
{
	const char *last = ncclGetLastError(NULL);
	int more = last && *last;

	snprintf(err, errlen, "comm_nccl: %s: %s%s%s%s", call, ncclGetErrorString(rc),
	         more ? " (" : "", more ? last : "", more ? ")" : "");
}

static void cuda_message(cudaError_t rc, const char *call, char *err, size_t errlen)
{
	snprintf(err, errlen, "comm_nccl: %s: %s", call, cudaGetErrorString(rc));
}

static int scratch(struct nccl_group *g, char *err, size_t errlen)
{
	cudaError_t rc;

	if (g->scratch)
		return 0;
	rc = cudaMalloc((void **)&g->scratch, sizeof *g->scratch);
	if (rc != cudaSuccess) {
		g->scratch = NULL;
		cuda_message(rc, "cudaMalloc (barrier scratch)", err, errlen);
		return -1;
	}
	/* zeros sum to zeros: the payload never overflows however many barriers run */
	rc = cudaMemsetAsync(g->scratch, 0, sizeof *g->scratch, RL_NCCL_STREAM);
	if (rc != cudaSuccess) {
		cuda_message(rc, "cudaMemsetAsync (barrier scratch)", err, errlen);
		return -1;
	}
	return 0;
}

/* Self included, as ncclSend/ncclRecv inside one group allow. */
static ncclResult_t all_to_all(const struct rl_comm_op *op, int size, ncclComm_t comm)
{
	size_t block = op->count * rl_comm_dtype_size(op->dtype);
	ncclDataType_t t = nccl_type[op->dtype];
	ncclResult_t rc = ncclGroupStart(), end;

	for (int p = 0; p < size && rc == ncclSuccess; p++) {
		rc = ncclSend((const char *)op->send + (size_t)p * block, op->count, t, p, comm,
		              RL_NCCL_STREAM);
		if (rc == ncclSuccess)
			rc = ncclRecv((char *)op->recv + (size_t)p * block, op->count, t, p, comm,
			              RL_NCCL_STREAM);
	}
	/* a group once opened must be closed, even after a failed call */
	end = ncclGroupEnd();
	return rc != ncclSuccess ? rc : end;
}

/* Blocks packed in rank order; an empty block is no call at all, so a rank
 * that sends nothing leaves its peers' matching ncclRecv out too (their
 * recv_counts say 0). */
static ncclResult_t all_to_all_v(const struct rl_comm_op *op, int size, ncclComm_t comm)
{
	size_t esz = rl_comm_dtype_size(op->dtype), out = 0, in = 0;
	ncclDataType_t t = nccl_type[op->dtype];
	ncclResult_t rc = ncclGroupStart(), end;

	for (int p = 0; p < size && rc == ncclSuccess; p++) {
		size_t ns = op->send_counts[p], nr = op->recv_counts[p];

		if (ns)
			rc = ncclSend((const char *)op->send + out * esz, ns, t, p, comm,
			              RL_NCCL_STREAM);
		if (rc == ncclSuccess && nr)
			rc = ncclRecv((char *)op->recv + in * esz, nr, t, p, comm, RL_NCCL_STREAM);
		out += ns;
		in += nr;
	}
	end = ncclGroupEnd();
	return rc != ncclSuccess ? rc : end;
}

static ncclResult_t send_recv(const struct rl_comm_op *op, ncclComm_t comm)
{
	ncclDataType_t t = nccl_type[op->dtype];
	ncclResult_t rc = ncclGroupStart(), end;

	if (rc == ncclSuccess)
		rc = ncclSend(op->send, op->count, t, op->peer, comm, RL_NCCL_STREAM);
	if (rc == ncclSuccess)
		rc = ncclRecv(op->recv, op->recv_count, t, op->recv_peer, comm, RL_NCCL_STREAM);
	end = ncclGroupEnd();
	return rc != ncclSuccess ? rc : end;
}

/* The stream an operation runs on: the group's overlap stream, made to
 * wait for the compute queued so far, for an overlapped one. */
static int stream_for(struct nccl_group *g, const struct rl_comm_op *op, cudaStream_t *s, char *err,
                      size_t errlen)
{
	cudaEvent_t ready;
	cudaError_t crc;

	*s = RL_NCCL_STREAM;
	if (!op->overlap)
		return 0;
	if (!g->overlap &&
	    (crc = cudaStreamCreateWithFlags(&g->overlap, cudaStreamNonBlocking)) != cudaSuccess) {
		g->overlap = NULL;
		cuda_message(crc, "cudaStreamCreateWithFlags", err, errlen);
		return -1;
	}
	if ((crc = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming)) != cudaSuccess) {
		cuda_message(crc, "cudaEventCreateWithFlags", err, errlen);
		return -1;
	}
	crc = cudaEventRecord(ready, RL_NCCL_STREAM);
	if (crc == cudaSuccess)
		crc = cudaStreamWaitEvent(g->overlap, ready, 0);
	/* a recorded event may be destroyed at once: the wait keeps it */
	cudaEventDestroy(ready);
	if (crc != cudaSuccess) {
		cuda_message(crc, "cudaStreamWaitEvent (overlap)", err, errlen);
		return -1;
	}
	*s = g->overlap;
	return 0;
}

static int nccl_start(struct rl_comm *c, const struct rl_comm_op *op, void **req, char *err,
                      size_t errlen)
{
	struct nccl_group *g = c->impl;
	ncclDataType_t t = nccl_type[op->dtype];
	ncclResult_t rc = ncclSuccess;
	struct nccl_req *r;
	cudaError_t crc;
	cudaStream_t s;

	if (!g || atomic_load(&g->aborted)) {
		snprintf(err, errlen, "comm_nccl: group %s %s", c->name,
		         g ? "was aborted" : "has no communicator");
		return -1;
	}
	if (op->kind == RL_OP_BARRIER && scratch(g, err, errlen))
		return -1;
	r = malloc(sizeof *r);
	if (!r) {
		snprintf(err, errlen, "comm_nccl: out of memory");
		return -1;
	}
	/* made before the operation is enqueued: once it is, there must be an
	 * event to hand back, or nothing could tell when it finishes */
	crc = cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming);
	if (crc != cudaSuccess) {
		cuda_message(crc, "cudaEventCreateWithFlags", err, errlen);
		free(r);
		return -1;
	}
	if (stream_for(g, op, &s, err, errlen)) {
		cudaEventDestroy(r->done);
		free(r);
		return -1;
	}
	switch (op->kind) {
	case RL_OP_ALL_REDUCE:
		rc = ncclAllReduce(op->send, op->recv, op->count, t, nccl_op[op->reduce], g->comm,
		                   RL_NCCL_STREAM);
		break;
	case RL_OP_REDUCE_SCATTER:
		rc = ncclReduceScatter(op->send, op->recv, op->count, t, nccl_op[op->reduce],
		                       g->comm, s);
		break;
	case RL_OP_ALL_GATHER:
		rc = ncclAllGather(op->send, op->recv, op->count, t, g->comm, s);
		break;
	case RL_OP_BROADCAST:
		rc = ncclBroadcast(op->recv, op->recv, op->count, t, op->peer, g->comm,
		                   RL_NCCL_STREAM);
		break;
	case RL_OP_SEND:
		rc = ncclSend(op->send, op->count, t, op->peer, g->comm, RL_NCCL_STREAM);
		break;
	case RL_OP_RECV:
		rc = ncclRecv(op->recv, op->count, t, op->peer, g->comm, RL_NCCL_STREAM);
		break;
	case RL_OP_SEND_RECV:
		rc = send_recv(op, g->comm);
		break;
	case RL_OP_ALL_TO_ALL:
		rc = all_to_all(op, c->size, g->comm);
		break;
	case RL_OP_ALL_TO_ALL_V:
		rc = all_to_all_v(op, c->size, g->comm);
		break;
	case RL_OP_BARRIER:
		rc = ncclAllReduce(g->scratch, g->scratch, 1, ncclInt32, ncclSum, g->comm,
		                   RL_NCCL_STREAM);
		break;
	}
	if (rc != ncclSuccess) {
		nccl_message(rc, nccl_call[op->kind], err, errlen);
		goto fail;
	}
	crc = cudaEventRecord(r->done, s);
	if (crc != cudaSuccess) {
		cuda_message(crc, "cudaEventRecord", err, errlen);
		goto fail;
	}
	*req = r;
	return 0;
fail:
	cudaEventDestroy(r->done);
	free(r);
	return -1;
}

/* req is released on failure too: nothing else could release it. */
static int nccl_test(struct rl_comm *c, void *req, char *err, size_t errlen)
{
	struct nccl_group *g = c->impl;
	struct nccl_req *r = req;
	cudaError_t crc = cudaEventQuery(r->done);
	ncclResult_t rc, async = ncclSuccess;
	int ret = -1;

	if (crc == cudaSuccess) {
		ret = 1;
	} else if (crc == cudaErrorNotReady) {
		/* a dead peer leaves the kernel spinning: only NCCL's own
		 * watchdog knows, and says so here */
		if (!g || atomic_load(&g->aborted)) {
			snprintf(err, errlen, "comm_nccl: group %s was aborted", c->name);
		} else if ((rc = ncclCommGetAsyncError(g->comm, &async)) != ncclSuccess) {
			nccl_message(rc, "ncclCommGetAsyncError", err, errlen);
		} else if (async != ncclSuccess && async != ncclInProgress) {
			nccl_message(async, "asynchronous error", err, errlen);
		} else {
			return 0;
		}
	} else {
		cuda_message(crc, "cudaEventQuery", err, errlen);
	}
	cudaEventDestroy(r->done);
	free(r);
	return ret;
}

static int adopt(struct rl_comm *child, ncclComm_t comm, char *err, size_t errlen)
{
	struct nccl_group *g = calloc(1, sizeof *g);

	if (!g) {
		snprintf(err, errlen, "comm_nccl: out of memory");
		ncclCommDestroy(comm);
		return -1;
	}
	g->comm = comm;
	child->impl = g;
	return 0;
}

static int nccl_split(struct rl_comm *parent, int color, int key, struct rl_comm *child, char *err,
                      size_t errlen)
{
	struct nccl_group *pg = parent->impl;
	ncclComm_t comm = NULL;
	ncclResult_t rc;

	if (!pg) {
		snprintf(err, errlen, "comm_nccl: split of group %s: it has no communicator",
		         parent->name);
		return -1;
	}
	/* ncclCommSplit is collective over the parent: a rank that belongs to
	 * no group still takes part, or the others would wait for it forever */
	char desc[96];

	snprintf(desc, sizeof desc, "ncclCommSplit from group %s", parent->name);
	rc = (ncclResult_t)RL_WATCHED(
	    parent->world, desc,
	    ncclCommSplit(pg->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &comm, NULL));
	if (rc != ncclSuccess) {
		nccl_message(rc, "ncclCommSplit", err, errlen);
		return -1;
	}
	if (color < 0) {
		/* in no group: took part, and that is all (comm.h's contract) */
		child->impl = NULL;
		return 0;
	}
	if (!comm) {
		snprintf(err, errlen, "comm_nccl: ncclCommSplit of group %s gave no communicator",
		         parent->name);
		return -1;
	}
	return adopt(child, comm, err, errlen);
}

int rl_comm_nccl_from_mpi(struct rl_comm *parent, int color, int key, struct rl_comm *child,
                          char *err, size_t errlen)
{
	/* byte 0: rank 0's ncclGetUniqueId result, so that its failure reaches
	 * the others instead of leaving them in ncclCommInitRank */
	unsigned char msg[1 + sizeof(ncclUniqueId)] = {0};
	MPI_Comm tmp = MPI_COMM_NULL;
	ncclUniqueId id;
	ncclComm_t comm = NULL;
	ncclResult_t rc;
	int rank, size;

	if (!parent->impl) {
		snprintf(err, errlen, "comm_nccl: NCCL group from %s: it has no MPI communicator",
		         parent->name);
		return -1;
	}
	if (RL_WATCHED(parent->world, "MPI_Comm_split for NCCL's first group",
	               MPI_Comm_split(*(MPI_Comm *)parent->impl, color < 0 ? MPI_UNDEFINED : color,
	                              key, &tmp)) != MPI_SUCCESS) {
		snprintf(err, errlen, "comm_nccl: NCCL group from %s: MPI_Comm_split failed",
		         parent->name);
		return -1;
	}
	if (tmp == MPI_COMM_NULL) {
		child->impl = NULL;
		return 0;
	}
	MPI_Comm_rank(tmp, &rank);
	MPI_Comm_size(tmp, &size);
	if (rank == 0) {
		msg[0] = (unsigned char)ncclGetUniqueId(&id);
		memcpy(msg + 1, &id, sizeof id);
	}
	if (RL_WATCHED(parent->world, "MPI_Bcast of NCCL's unique id",
	               MPI_Bcast(msg, (int)sizeof msg, MPI_BYTE, 0, tmp)) != MPI_SUCCESS) {
		snprintf(err, errlen, "comm_nccl: NCCL group from %s: MPI_Bcast of the id failed",
		         parent->name);
		MPI_Comm_free(&tmp);
		return -1;
	}
	MPI_Comm_free(&tmp);
	if (msg[0] != ncclSuccess) {
		snprintf(err, errlen,
		         "comm_nccl: NCCL group from %s: ncclGetUniqueId on its rank 0: %s",
		         parent->name, ncclGetErrorString((ncclResult_t)msg[0]));
		return -1;
	}
	memcpy(&id, msg + 1, sizeof id);
	rc = (ncclResult_t)RL_WATCHED(parent->world, "ncclCommInitRank (NCCL's first group)",
	                              ncclCommInitRank(&comm, size, id, rank));
	if (rc != ncclSuccess) {
		nccl_message(rc, "ncclCommInitRank", err, errlen);
		return -1;
	}
	return adopt(child, comm, err, errlen);
}

/* From the watchdog's thread, while the main thread may still be inside
 * a call on the group: the communicator is aborted (its kernels end, its
 * calls return), nothing is freed, and the process exits next. */
static void nccl_abort(struct rl_comm *c)
{
	struct nccl_group *g = c->impl;

	if (!g || atomic_exchange(&g->aborted, 1))
		return;
	ncclCommAbort(g->comm);
}

/* NCCL finds a dead peer or a broken link in its own threads; a kernel
 * waiting for that peer never ends, so this is how the watchdog hears. */
static int nccl_check(struct rl_comm *c, char *err, size_t errlen)
{
	struct nccl_group *g = c->impl;
	ncclResult_t rc, async = ncclSuccess;

	if (!g || atomic_load(&g->aborted))
		return 0;
	rc = ncclCommGetAsyncError(g->comm, &async);
	if (rc != ncclSuccess) {
		nccl_message(rc, "ncclCommGetAsyncError", err, errlen);
		return -1;
	}
	if (async != ncclSuccess && async != ncclInProgress) {
		nccl_message(async, "asynchronous error", err, errlen);
		return -1;
	}
	return 0;
}

static void nccl_free(struct rl_comm *c)
{
	struct nccl_group *g = c->impl;

	if (!g)
		return;
	/* without ncclCommFinalize, ncclCommDestroy finalizes itself: what is
	 * still queued completes before the resources go */
	if (!atomic_load(&g->aborted))
		ncclCommDestroy(g->comm);
	cudaFree(g->scratch);
	if (g->overlap)
		cudaStreamDestroy(g->overlap);
	free(g);
	c->impl = NULL;
}

const struct rl_comm_backend rl_comm_nccl_backend = {
    .name = "nccl",
    .start = nccl_start,
    .test = nccl_test,
    .split = nccl_split,
    .abort = nccl_abort,
    .free = nccl_free,
    .check = nccl_check,
};

#else
typedef int rl_comm_nccl_unused;
#endif
