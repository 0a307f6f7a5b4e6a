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
	/* tears the group down without waiting for anyone: after a timeout.
	 * Called from the watchdog's thread while the main thread may still
	 * be inside the group's calls: it must leave c's memory as it is (the
	 * process exits next) */
	void (*abort)(struct rl_comm *c);
	void (*free)(struct rl_comm *c);
	/* Optional: -1 with err when the group's library found a failure by
	 * itself (NCCL's asynchronous errors: a peer gone, a network error),
	 * which an operation in flight may never report. Called from the
	 * watchdog's thread, with the world's lock held; never blocks. */
	int (*check)(struct rl_comm *c, char *err, size_t errlen);
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

/* What a rank is doing, as the watchdog reports it to the others (the
 * answer to "where are you?", sent as bytes between copies of one
 * program). */
enum rl_comm_state { RL_WORKING, RL_WAITING, RL_GIVING_UP };
struct rl_comm_activity {
	uint64_t seq;       /* collectives started so far */
	int32_t state;      /* enum rl_comm_state */
	int32_t collective; /* what is the collective seq, not a blocking call */
	char what[96];      /* "all_reduce over dp (ranks 0,2): grad reduce" */
};

/* The longest node name the watchdog keeps for a rank. */
#define RL_COMM_HOST_MAX 64

/* A rank's process (peers.c), gathered when the world is made. */
struct rl_comm_peer {
	char host[RL_COMM_HOST_MAX]; /* SLURMD_NODENAME, else the host's name */
	int32_t pid;
	uint64_t start; /* its start time in /proc/PID/stat: a reused pid is not it */
};
/* What this rank sees of another's process: only on its own node. */
enum rl_peer_state { RL_PEER_ELSEWHERE, RL_PEER_GONE, RL_PEER_STOPPED, RL_PEER_RUNNING };

struct rl_comm_world {
	int rank, size;
	double timeout_s;
	void *control;        /* MPI_Comm for the watchdog's questions and answers */
	void *world_mpi;      /* the MPI world communicator (dup) */
	pthread_mutex_t lock; /* guards now, since, open and the failure handler */
	struct rl_comm *open; /* every group not yet freed */
	struct rl_comm_activity now;
	double since;               /* rl_now() when now.state became RL_WAITING */
	struct rl_comm_peer *peers; /* [size]; NULL until gathered */
	rl_comm_failure_fn on_failure;
	void *on_failure_arg;
	/* the watchdog's two threads (watchdog.c): the watcher times this
	 * rank's waits and answers the others; the monitor watches the
	 * watcher's heartbeat and ends a report that cannot end */
	pthread_t watcher, monitor;
	bool has_threads;
	atomic_int stop;
	/* MPI is up and the control channel made (rl_watchdog_allow_mpi);
	 * the watcher holds mpi_use while it may call MPI */
	atomic_int mpi_up;
	pthread_mutex_t mpi_use;
	atomic_ullong beat;    /* the watcher's rounds */
	atomic_int firing;     /* a report has begun: the process ends with it */
	atomic_int aborted;    /* SIGABRT came (UCX's fatal errors end that way) */
	atomic_llong deadline; /* ms on rl_now's clock by which a report must end */
	bool thread_multiple;  /* MPI provides MPI_THREAD_MULTIPLE */
	bool mpi_started_here;
	atomic_int patient; /* rl_comm_set_patient */
};

/* watchdog.c: the watcher and the monitor (started before MPI, so that a
 * rendezvous that never completes is caught too), and what a rank does
 * when a wait is stuck (never returns). */
int rl_watchdog_start(struct rl_comm_world *w, char *err, size_t errlen);
void rl_watchdog_stop(struct rl_comm_world *w);
/* The main thread waits in desc (a collective numbered now.seq, or a
 * blocking MPI or NCCL call) from now on, until rl_watchdog_end_wait:
 * past the world's timeout, the watcher reports it and ends the process. */
void rl_watchdog_begin_wait(struct rl_comm_world *w, const char *desc, bool collective);
void rl_watchdog_end_wait(struct rl_comm_world *w);
/* peers.c: every rank's node and process (collective, at the world's
 * start), a rank's node ("" unknown), and what this rank sees of its
 * process. */
int rl_comm_peers_gather(struct rl_comm_world *w, char *err, size_t errlen);
const char *rl_comm_peer_host(const struct rl_comm_world *w, int r);
enum rl_peer_state rl_comm_peer_state(const struct rl_comm_world *w, int r);

/* RL_WATCHED(w, desc, call): a blocking call (MPI_Comm_split, NCCL's
 * initialisation...) timed by the watchdog as a collective is, named desc
 * in its report; the call's value. */
static inline int rl_watched_end(struct rl_comm_world *w, int rc)
{
	rl_watchdog_end_wait(w);
	return rc;
}
#define RL_WATCHED(w, desc, call)                                                                  \
	(rl_watchdog_begin_wait((w), (desc), false), rl_watched_end((w), (int)(call)))
/* Without MPI_THREAD_MULTIPLE the watcher cannot ask anyone or answer:
 * the main thread's waiting loop serves the others' questions. */
void rl_watchdog_serve(struct rl_comm_world *w);
/* The watchdog may use MPI from now on (MPI is up and the control channel
 * made), or not any more (before MPI_Finalize: returns once the watcher is
 * out of MPI). */
void rl_watchdog_allow_mpi(struct rl_comm_world *w, bool allow);
/* Catches SIGABRT (UCX's fatal errors) for w's watchdog to report, or
 * gives the signal back to what was there (catch false). */
void rl_watchdog_catch_abort(struct rl_comm_world *w, bool catch);
/* An operation failed with why: report and end the process, as a timeout
 * does. */
_Noreturn void rl_watchdog_fire(struct rl_comm_world *w, const char *why);
/* A rank's own failure (rl_comm_abort_run): prints msg and runs the
 * failure handler; the caller then ends the run. Returns only to the
 * first thread that gives up (any later one waits for the end). */
void rl_watchdog_claim(struct rl_comm_world *w, const char *msg);

#endif
