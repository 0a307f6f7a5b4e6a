/* Collectives between the ranks of a run, one interface over two backends:
 * MPI for host buffers (and the process bootstrap under srun --mpi=pmi2 or
 * mpiexec), NCCL for device buffers. A struct rl_comm is one group: the
 * world, or a sub-group the layout names (tp, dp-cp, ...).
 *
 * Every collective is watched, by a thread of the watchdog's own that does
 * not need the main thread to come back from MPI, UCX or CUDA. A call
 * returns when the operation is complete on this rank; when it waits longer
 * than the run's collective timeout, or the backend reports a broken peer,
 * this rank asks every other rank where it stands, prints which collective
 * is stuck and which ranks do not answer, tells the ranks that answered
 * (which give up at once, naming the same ranks), runs the run's failure
 * handler, aborts its communicators and exits with RL_COMM_EXIT: the
 * callers never see a failure, and a run never hangs silently. The setup's
 * blocking calls (MPI_Init's rendezvous, communicator splits, NCCL's
 * initialisation) and MPI_Finalize are watched the same way.
 * defines: enum rl_comm_dtype, enum rl_comm_reduce, struct rl_comm_world,
 * struct rl_comm, rl_comm_world_init, rl_comm_world_finalize,
 * rl_comm_split, rl_comm_free, rl_comm_set_patient, rl_comm_all_reduce, rl_comm_reduce_scatter,
 * rl_comm_all_gather, rl_comm_broadcast, rl_comm_send, rl_comm_recv, rl_comm_sendrecv,
 * rl_comm_all_to_all, rl_comm_all_to_all_v, rl_comm_barrier, struct rl_comm_request,
 * rl_comm_start_broadcast, rl_comm_start_send, rl_comm_start_reduce_scatter,
 * rl_comm_start_all_gather, rl_comm_test, rl_comm_wait, rl_comm_abort_run,
 * enum rl_comm_transport, struct rl_comm_stage, rl_comm_connect_device, rl_comm_device,
 * rl_comm_transport_name, struct rl_comm_failure, rl_comm_failure_fn, rl_comm_on_failure */
#ifndef RL_COMM_COMM_H
#define RL_COMM_COMM_H

#include <stdbool.h>
#include <stddef.h>

/* The exit status of a rank that gave up on a stuck or broken collective. */
#define RL_COMM_EXIT 3

enum rl_comm_dtype { RL_COMM_F32, RL_COMM_F64, RL_COMM_I32, RL_COMM_I64, RL_COMM_U8 };
enum rl_comm_reduce { RL_COMM_SUM, RL_COMM_MAX, RL_COMM_MIN };
/* How a group moves device buffers (its device face, rl_comm_device):
 * RL_COMM_MPI where the backend's memory is host memory (the CPU backend:
 * the group itself), RL_COMM_NCCL between GPUs, RL_COMM_STAGED through host
 * buffers and MPI (ranks that share one GPU, which NCCL refuses, and the
 * fenced backend, which proves the device path without a GPU). */
enum rl_comm_transport { RL_COMM_MPI, RL_COMM_STAGED, RL_COMM_NCCL };
const char *rl_comm_transport_name(enum rl_comm_transport t);

size_t rl_comm_dtype_size(enum rl_comm_dtype t);

struct rl_comm_world; /* the process's MPI world and its watchdog */
struct rl_comm;       /* one group */

/* What a rank's watchdog found when it gave up, handed to the run's
 * failure handler before the process ends. */
struct rl_comm_failure {
	int rank;         /* this rank, in the world */
	const char *host; /* this rank's node */
	/* this rank found the failure itself (its wait timed out, an
	 * operation failed, the rank failed), rather than being told by
	 * another rank's watchdog: it acts for the run */
	bool found_here;
	/* the rank's own failure (rl_comm_abort_run, or a lone task's
	 * error), which ends the run's processes itself: MPI_Abort takes
	 * every rank, a lone task exits */
	bool own;
	const char *report; /* what this rank printed */
	int n_lost;         /* ranks that did not answer: dead, or hung */
	const int *lost;
	const char *const *lost_hosts; /* their nodes ("" where unknown) */
};
typedef void (*rl_comm_failure_fn)(void *arg, const struct rl_comm_failure *f);
/* fn runs on whichever thread reports, after the report and before the
 * process ends: it must not use the run's groups, and has a few seconds
 * (the watchdog's monitor ends the process then). NULL: none. w NULL:
 * the handler of the worlds made from now on, from the first moment of
 * their setup. */
void rl_comm_on_failure(struct rl_comm_world *w, rl_comm_failure_fn fn, void *arg);

/* Starts MPI (a singleton when no launcher started this process) and the
 * watchdog's answering thread. expect_world > 0 is the size the layout was
 * computed for: a launcher that started the ranks as separate singletons
 * (srun without --mpi=pmi2) is refused here, by name. timeout_s: how long a
 * collective may wait. On success *world_comm is the world group on the
 * MPI backend. */
int rl_comm_world_init(struct rl_comm_world **w, struct rl_comm **world_comm, int expect_world,
                       double timeout_s, char *err, size_t errlen);
/* Frees every group still open, stops the watchdog and finalizes MPI. */
void rl_comm_world_finalize(struct rl_comm_world *w);

/* The sub-group of parent whose members passed the same color, ordered by
 * key, on MPI (its host face). name ("tp", "dp-cp") is what messages call
 * it. Collective over parent: every member calls it, in the same order. A
 * negative color joins no group: *out is NULL and the return 0. */
int rl_comm_split(struct rl_comm *parent, int color, int key, const char *name,
                  struct rl_comm **out, char *err, size_t errlen);

/* The staged transport's copies between device memory and host memory
 * (the op table's to_host and from_host) and the host buffers it stages
 * through (pinned ones on CUDA; NULL: malloc and free). Copies return 0,
 * or -1 when the memory is not what the transport needs (the fenced
 * table's checks): the collective then fails, named. */
struct rl_comm_stage {
	int (*to_host)(void *host, const void *src, size_t bytes, void *stream);
	int (*from_host)(void *dst, const void *host, size_t bytes, void *stream);
	void *(*host_alloc)(size_t bytes);
	void (*host_release)(void *p);
};

/* Gives group c its device face on transport t (stage: RL_COMM_STAGED's
 * copies, kept by pointer). Collective over parent, as the split that made
 * c was, with the same color and key (c NULL where color < 0: this rank
 * took part in the split but is in no group); parent NULL: c is the first
 * group connected, every member of c calls it, and the device groups of
 * later calls are split from its face (NCCL: one ncclUniqueId for the
 * run, then ncclCommSplit). RL_COMM_MPI: c is its own device face. */
int rl_comm_connect_device(struct rl_comm *parent, struct rl_comm *c, int color, int key,
                           enum rl_comm_transport t, const struct rl_comm_stage *stage, char *err,
                           size_t errlen);
/* The face of c that takes device buffers: c itself until
 * rl_comm_connect_device gave it another. NULL for NULL. */
struct rl_comm *rl_comm_device(struct rl_comm *c);
void rl_comm_free(struct rl_comm *c);

int rl_comm_rank(const struct rl_comm *c);
int rl_comm_size(const struct rl_comm *c);
const char *rl_comm_name(const struct rl_comm *c);
/* The world rank of the group's member r. */
int rl_comm_world_rank(const struct rl_comm *c, int r);

/* While set, a collective of c's run that outlasts the timeout waits on as
 * long as every rank answers and one of them is working: for one role of
 * a run waiting on the other's phase (non-colocated generation), which may
 * take longer than any collective should. A run where every rank waits is
 * still stuck, and one with a silent rank still broken. */
void rl_comm_set_patient(struct rl_comm *c, bool patient);

/* what: a few words naming the call site ("grad reduce-scatter"), for the
 * watchdog's message. Buffers are host memory on a group, and device
 * memory (the backend's) on its device face, rl_comm_device(group). A host
 * collective given fenced memory (kernels/fenced.h) fails, named; so does
 * a staged one given host memory, by the fenced table's copies. */
void rl_comm_all_reduce(struct rl_comm *c, void *buf, size_t count, enum rl_comm_dtype t,
                        enum rl_comm_reduce op, const char *what);
/* send holds size x count elements; rank r receives the reduction of block r.
 * send and recv do not overlap. */
void rl_comm_reduce_scatter(struct rl_comm *c, const void *send, void *recv, size_t count,
                            enum rl_comm_dtype t, enum rl_comm_reduce op, const char *what);
/* recv receives size x count elements, block r from rank r. send may be
 * recv + rank x count (in place). */
void rl_comm_all_gather(struct rl_comm *c, const void *send, void *recv, size_t count,
                        enum rl_comm_dtype t, const char *what);
void rl_comm_broadcast(struct rl_comm *c, void *buf, size_t count, enum rl_comm_dtype t, int root,
                       const char *what);
void rl_comm_send(struct rl_comm *c, const void *buf, size_t count, enum rl_comm_dtype t, int peer,
                  const char *what);
void rl_comm_recv(struct rl_comm *c, void *buf, size_t count, enum rl_comm_dtype t, int peer,
                  const char *what);
/* send to send_peer and recv from recv_peer at once: the pairing of
 * pipeline stages, where each side sends and receives in the same step
 * and two blocking sends could wait on each other. */
void rl_comm_sendrecv(struct rl_comm *c, const void *send, size_t send_count, int send_peer,
                      void *recv, size_t recv_count, int recv_peer, enum rl_comm_dtype t,
                      const char *what);
/* Block r of send goes to rank r; block r of recv comes from rank r. send
 * and recv do not overlap. */
void rl_comm_all_to_all(struct rl_comm *c, const void *send, void *recv, size_t count,
                        enum rl_comm_dtype t, const char *what);
/* all_to_all with a count per peer, for expert-parallel token dispatch:
 * send_counts[r] elements go to rank r and recv_counts[r] come from it,
 * both buffers packed in rank order (block r starts after the blocks of
 * ranks 0..r-1). The counts are host arrays of size entries on either
 * backend, and may be 0; recv_counts must match what each peer sends (a
 * rl_comm_all_to_all of the counts before tells every rank). send and
 * recv do not overlap. */
void rl_comm_all_to_all_v(struct rl_comm *c, const void *send, const size_t *send_counts,
                          void *recv, const size_t *recv_counts, enum rl_comm_dtype t,
                          const char *what);
void rl_comm_barrier(struct rl_comm *c, const char *what);

/* An operation started and not waited for: what one role sends another
 * that is busy with its own phase (a command to a generation rank in the
 * middle of a rollout, which takes it when it gets there). The buffer must
 * stay as it is until the operation completes. Started operations of a
 * group match the other ranks' calls in the order they were started, as
 * blocking ones do. NULL is a request already complete. */
struct rl_comm_request;
struct rl_comm_request *rl_comm_start_broadcast(struct rl_comm *c, void *buf, size_t count,
                                                enum rl_comm_dtype t, int root, const char *what);
struct rl_comm_request *rl_comm_start_send(struct rl_comm *c, const void *buf, size_t count,
                                           enum rl_comm_dtype t, int peer, const char *what);
/* The data-parallel buckets' collectives, started while compute goes on
 * (Megatron's overlap): on NCCL they run on the group's communication
 * stream, after the compute already queued, and rl_comm_wait orders what
 * is queued after it behind them. */
struct rl_comm_request *rl_comm_start_reduce_scatter(struct rl_comm *c, const void *send,
                                                     void *recv, size_t count, enum rl_comm_dtype t,
                                                     enum rl_comm_reduce op, const char *what);
struct rl_comm_request *rl_comm_start_all_gather(struct rl_comm *c, const void *send, void *recv,
                                                 size_t count, enum rl_comm_dtype t,
                                                 const char *what);
/* Never waits: true once r completed, and r is then freed. */
bool rl_comm_test(struct rl_comm_request *r);
/* Waits for r, watched as every collective is, and frees it. */
void rl_comm_wait(struct rl_comm_request *r);

/* A rank that cannot go on (bad data, a failed reward program) ends the
 * whole run at once instead of leaving the others to time out: prints msg,
 * runs the failure handler and aborts every rank with status. Does not
 * return. */
_Noreturn void rl_comm_abort_run(struct rl_comm_world *w, int status, const char *msg);

#endif
