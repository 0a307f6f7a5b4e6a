/* Internal to runtime/comm: what a backend provides (start an operation,
 * poll it, split, abort) and the state comm.c, watchdog.c and the backends
 * share. Each backend only starts and tests operations; waiting, timing
 * and the watchdog are comm.c's, the same for both. */
#ifndef RL_COMM_BACKEND_H
#define RL_COMM_BACKEND_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "runtime/comm/comm.h"

enum rl_comm_kind {
	RL_OP_ALL_REDUCE,
	RL_OP_REDUCE_SCATTER,
	RL_OP_ALL_GATHER,
	RL_OP_BROADCAST,
	RL_OP_SEND,
	RL_OP_RECV,
	RL_OP_SEND_RECV,
	RL_OP_ALL_TO_ALL,
	RL_OP_ALL_TO_ALL_V,
	RL_OP_BARRIER,
};

struct rl_comm_op {
	enum rl_comm_kind kind;
	const void *send;
	void *recv;
	size_t count; /* as each call in comm.h counts it */
	enum rl_comm_dtype dtype;
	enum rl_comm_reduce reduce;
	int peer; /* broadcast root, send/recv peer: a rank in the group */
	/* RL_OP_SEND_RECV: send goes to peer, recv_count elements come into
	 * recv from recv_peer */
	size_t recv_count;
	int recv_peer;
	/* RL_OP_ALL_TO_ALL_V: elements to and from each rank, one entry per
	 * member (count is unused); the caller's arrays, alive for the call */
	const size_t *send_counts, *recv_counts;
	/* started to overlap compute (rl_comm_start_reduce_scatter...): NCCL
	 * runs it on the group's communication stream */
	bool overlap;
};

struct rl_comm_backend {
	const char *name;
	/* 0 and *req, or -1 with err */
	int (*start)(struct rl_comm *c, const struct rl_comm_op *op, void **req, char *err,
	             size_t errlen);
	/* 1 complete (req released), 0 pending, -1 failed with err */
	int (*test)(struct rl_comm *c, void *req, char *err, size_t errlen);
	/* the child of parent (its impl set), or -1 with err */
	int (*split)(struct rl_comm *parent, int color, int key, struct rl_comm *child, char *err,
	             size_t errlen);
	/* tears the group down without waiting for anyone: after a timeout */
	void (*abort)(struct rl_comm *c);
	void (*free)(struct rl_comm *c);
};

extern const struct rl_comm_backend rl_comm_mpi_backend;
/* comm_staged.c: device buffers through host ones and the MPI backend, on
 * the device face's own MPI communicator (impl) */
extern const struct rl_comm_backend rl_comm_staged_backend;
/* face becomes c's staged device face (be, impl); collective over c */
int rl_comm_staged_face(struct rl_comm *c, struct rl_comm *face, char *err, size_t errlen);
/* comm_mpi.c: makes child's MPI twin (host, rank, size, members) from
 * parent's; frees it. */
int rl_comm_mpi_split_host(struct rl_comm *parent, int color, int key, struct rl_comm *child,
                           char *err, size_t errlen);
void rl_comm_mpi_free_host(struct rl_comm *c);
#ifdef RL_HAVE_NCCL
extern const struct rl_comm_backend rl_comm_nccl_backend;
/* The NCCL group of parent's (an MPI group's) members that passed the same
 * color, ordered by key: the child's rank 0 draws the ncclUniqueId and
 * sends it over MPI. How the NCCL world is made; NCCL sub-groups then come
 * from rl_comm_nccl_backend.split (ncclCommSplit). Uses the current CUDA
 * device. */
int rl_comm_nccl_from_mpi(struct rl_comm *parent, int color, int key, struct rl_comm *child,
                          char *err, size_t errlen);
#endif

struct rl_comm {
	const struct rl_comm_backend *be;
	struct rl_comm_world *world;
	void *impl; /* the backend's communicator */
	/* Every group, NCCL ones too, has an MPI twin over the same ranks: how
	 * it was split, and a host path for small control data. On MPI groups
	 * impl == host. */
	void *host;
	char name[32];
	int rank, size;
	int *members;              /* world ranks of the group's ranks */
	struct rl_comm *next_open; /* the world's list, for finalize and abort */
	/* the device face (rl_comm_connect_device), NULL until then; a face
	 * has of_group set and borrows its group's members and host twin */
	struct rl_comm *device;
	struct rl_comm *of_group;
	const struct rl_comm_stage *stage; /* RL_COMM_STAGED's copies */
};

/* What a rank is doing, as the watchdog reports it to the others. */
struct rl_comm_activity {
	uint64_t seq;    /* collectives started so far */
	int32_t waiting; /* 1 while inside a collective */
	char what[96];   /* "all_reduce over dp (ranks 0,2): grad reduce" */
};

struct rl_comm_world {
	int rank, size;
	double timeout_s;
	void *control;        /* MPI_Comm for the watchdog's questions and answers */
	void *world_mpi;      /* the MPI world communicator (dup) */
	struct rl_comm *open; /* every group not yet freed */
	pthread_mutex_t lock; /* guards now */
	struct rl_comm_activity now;
	pthread_t answerer;
	atomic_int stop;
	bool has_answerer;
	bool mpi_started_here;
	bool patient; /* rl_comm_set_patient */
};

/* watchdog.c: the answering thread, and what a rank does when a
 * collective is stuck (never returns). */
int rl_watchdog_start(struct rl_comm_world *w, char *err, size_t errlen);
void rl_watchdog_stop(struct rl_comm_world *w);
/* Serves questions that arrived, from the waiting loop when there is no
 * answering thread. */
void rl_watchdog_serve(struct rl_comm_world *w);
/* Every other rank answers, and one at least is working (between
 * collectives): a long wait is another rank's long work, not a hang. */
bool rl_watchdog_others_working(struct rl_comm_world *w);
_Noreturn void rl_watchdog_fire(struct rl_comm_world *w, struct rl_comm *c, double waited,
                                const char *why);

#endif
