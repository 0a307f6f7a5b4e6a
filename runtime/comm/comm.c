#define _GNU_SOURCE
/* The front end of every collective: it numbers the call, says what this
 * rank is waiting for (the watchdog's answer to the other ranks), starts
 * the operation on the group's backend and polls it. Polling instead of
 * blocking is what lets eight ranks share two cores (a blocked MPI call
 * spins and starves the rank it waits for) and what lets a rank give up
 * after the timeout. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/fenced.h"
#include "runtime/base/clock.h"
#include "runtime/comm/backend.h"

size_t rl_comm_dtype_size(enum rl_comm_dtype t)
{
	switch (t) {
	case RL_COMM_F32:
	case RL_COMM_I32:
		return 4;
	case RL_COMM_F64:
	case RL_COMM_I64:
		return 8;
	case RL_COMM_U8:
		break;
	}
	return 1;
}

int rl_comm_rank(const struct rl_comm *c)
{
	return c->rank;
}

int rl_comm_size(const struct rl_comm *c)
{
	return c->size;
}

const char *rl_comm_name(const struct rl_comm *c)
{
	return c->name;
}

int rl_comm_world_rank(const struct rl_comm *c, int r)
{
	return r >= 0 && r < c->size ? c->members[r] : -1;
}

static const char *const kind_names[] = {
    [RL_OP_ALL_REDUCE] = "all_reduce",
    [RL_OP_REDUCE_SCATTER] = "reduce_scatter",
    [RL_OP_ALL_GATHER] = "all_gather",
    [RL_OP_BROADCAST] = "broadcast",
    [RL_OP_SEND] = "send",
    [RL_OP_RECV] = "recv",
    [RL_OP_SEND_RECV] = "sendrecv",
    [RL_OP_ALL_TO_ALL] = "all_to_all",
    [RL_OP_ALL_TO_ALL_V] = "all_to_all_v",
    [RL_OP_BARRIER] = "barrier",
};

/* "all_reduce of 1024 x 4 B over dp (ranks 0,2): grad reduce" */
static void describe(const struct rl_comm *c, const struct rl_comm_op *op, const char *what,
                     char *buf, size_t len)
{
	size_t n = 0;

#define PUT(...)                                                                                   \
	do {                                                                                       \
		int k_ = snprintf(buf + n, len - n, __VA_ARGS__);                                  \
		if (k_ > 0)                                                                        \
			n = n + (size_t)k_ < len ? n + (size_t)k_ : len - 1;                       \
	} while (0)
	PUT("%s", kind_names[op->kind]);
	if (op->kind == RL_OP_SEND || op->kind == RL_OP_RECV)
		PUT(" %s rank %d", op->kind == RL_OP_SEND ? "to" : "from",
		    rl_comm_world_rank(c, op->peer));
	if (op->kind == RL_OP_ALL_TO_ALL_V) {
		size_t out = 0, in = 0;

		for (int i = 0; i < c->size; i++) {
			out += op->send_counts[i];
			in += op->recv_counts[i];
		}
		PUT(" of %zu out, %zu in x %zu B", out, in, rl_comm_dtype_size(op->dtype));
	} else if (op->kind != RL_OP_BARRIER) {
		PUT(" of %zu x %zu B", op->count, rl_comm_dtype_size(op->dtype));
	}
	if (op->kind == RL_OP_SEND_RECV)
		PUT(" to rank %d, %zu from rank %d", rl_comm_world_rank(c, op->peer),
		    op->recv_count, rl_comm_world_rank(c, op->recv_peer));
	PUT(" over %s (ranks ", c->name);
	for (int i = 0; i < c->size && i < 8; i++)
		PUT("%s%d", i ? "," : "", c->members[i]);
	if (c->size > 8)
		PUT(",... %d in all", c->size);
	PUT(")%s%s", what ? ": " : "", what ? what : "");
#undef PUT
}

/* Spin briefly for the fast case, then give the core away: on a node with
 * more ranks than cores the peer we wait for needs it. */
static void back_off(unsigned polls)
{
	if (polls < 64)
		return;
	if (polls < 2048) {
		sched_yield();
		return;
	}
	struct timespec ts = {0, polls < 8192 ? 20000 : 200000};
	nanosleep(&ts, NULL);
}

/* Polls req until it completes; this rank is "waiting" meanwhile, on the
 * operation described in desc: the watchdog's thread times it, and gives
 * up past the timeout whether or not the backend ever returns. */
static void wait_started(struct rl_comm *c, void *req, const char *desc)
{
	struct rl_comm_world *w = c->world;
	char err[512];

	rl_watchdog_begin_wait(w, desc, true);
	for (unsigned polls = 0;; polls++) {
		int rc = c->be->test(c, req, err, sizeof err);

		if (rc == 1)
			break;
		if (rc < 0)
			rl_watchdog_fire(w, err);
		if (!w->thread_multiple && polls % 256 == 255)
			rl_watchdog_serve(w);
		back_off(polls);
	}
	rl_watchdog_end_wait(w);
}

/* A failed operation described by desc: the watchdog's message names it. */
static _Noreturn void fire_on(struct rl_comm *c, const char *desc, const char *err)
{
	rl_watchdog_begin_wait(c->world, desc, true);
	rl_watchdog_fire(c->world, err);
}

/* Numbers the operation and starts it on the backend; desc gets its
 * description. */
static void *start(struct rl_comm *c, const struct rl_comm_op *op, const char *what, char *desc,
                   size_t desc_len)
{
	struct rl_comm_world *w = c->world;
	char err[512];
	void *req = NULL;

	describe(c, op, what, desc, desc_len);
	pthread_mutex_lock(&w->lock);
	w->now.seq++;
	pthread_mutex_unlock(&w->lock);
	/* MPI reads and writes its buffers from the host: device memory
	 * there would be read as garbage, or fault, far from the call */
	if (c->be == &rl_comm_mpi_backend &&
	    (rl_fenced_tagged(op->send) || rl_fenced_tagged(op->recv)))
		fire_on(c, desc,
		        "a host collective was given device memory (fenced): device buffers go "
		        "over the group's device face");
	if (c->be->start(c, op, &req, err, sizeof err))
		fire_on(c, desc, err);
	return req;
}

static void run(struct rl_comm *c, const struct rl_comm_op *op, const char *what)
{
	char desc[sizeof c->world->now.what];
	void *req = start(c, op, what, desc, sizeof desc);

	wait_started(c, req, desc);
}

struct rl_comm_request {
	struct rl_comm *c;
	void *req;
	char desc[sizeof((struct rl_comm_activity *)0)->what];
};

/* Without memory for the request, the operation runs to its end here
 * and NULL stands for one that is complete. */
static struct rl_comm_request *start_request(struct rl_comm *c, const struct rl_comm_op *op,
                                             const char *what)
{
	struct rl_comm_request *r = malloc(sizeof *r);

	if (!r) {
		run(c, op, what);
		return NULL;
	}
	r->c = c;
	r->req = start(c, op, what, r->desc, sizeof r->desc);
	return r;
}

/* The operations that come both blocking and started. */
static struct rl_comm_op broadcast_op(void *buf, size_t count, enum rl_comm_dtype t, int root)
{
	return (struct rl_comm_op){.kind = RL_OP_BROADCAST,
	                           .send = buf,
	                           .recv = buf,
	                           .count = count,
	                           .dtype = t,
	                           .peer = root};
}

static struct rl_comm_op send_op(const void *buf, size_t count, enum rl_comm_dtype t, int peer)
{
	return (struct rl_comm_op){
	    .kind = RL_OP_SEND, .send = buf, .count = count, .dtype = t, .peer = peer};
}

static struct rl_comm_op reduce_scatter_op(const void *send, void *recv, size_t count,
                                           enum rl_comm_dtype t, enum rl_comm_reduce op)
{
	return (struct rl_comm_op){.kind = RL_OP_REDUCE_SCATTER,
	                           .send = send,
	                           .recv = recv,
	                           .count = count,
	                           .dtype = t,
	                           .reduce = op};
}

static struct rl_comm_op all_gather_op(const void *send, void *recv, size_t count,
                                       enum rl_comm_dtype t)
{
	return (struct rl_comm_op){
	    .kind = RL_OP_ALL_GATHER, .send = send, .recv = recv, .count = count, .dtype = t};
}

struct rl_comm_request *rl_comm_start_broadcast(struct rl_comm *c, void *buf, size_t count,
                                                enum rl_comm_dtype t, int root, const char *what)
{
	struct rl_comm_op o = broadcast_op(buf, count, t, root);

	return start_request(c, &o, what);
}

struct rl_comm_request *rl_comm_start_send(struct rl_comm *c, const void *buf, size_t count,
                                           enum rl_comm_dtype t, int peer, const char *what)
{
	struct rl_comm_op o = send_op(buf, count, t, peer);

	return start_request(c, &o, what);
}

struct rl_comm_request *rl_comm_start_reduce_scatter(struct rl_comm *c, const void *send,
                                                     void *recv, size_t count, enum rl_comm_dtype t,
                                                     enum rl_comm_reduce op, const char *what)
{
	struct rl_comm_op o = reduce_scatter_op(send, recv, count, t, op);

	o.overlap = true;
	return start_request(c, &o, what);
}

struct rl_comm_request *rl_comm_start_all_gather(struct rl_comm *c, const void *send, void *recv,
                                                 size_t count, enum rl_comm_dtype t,
                                                 const char *what)
{
	struct rl_comm_op o = all_gather_op(send, recv, count, t);

	o.overlap = true;
	return start_request(c, &o, what);
}

bool rl_comm_test(struct rl_comm_request *r)
{
	char err[512];

	if (!r)
		return true;
	int rc = r->c->be->test(r->c, r->req, err, sizeof err);
	if (rc < 0)
		fire_on(r->c, r->desc, err);
	if (rc == 1)
		free(r);
	return rc == 1;
}

void rl_comm_wait(struct rl_comm_request *r)
{
	if (!r)
		return;
	wait_started(r->c, r->req, r->desc);
	free(r);
}

void rl_comm_set_patient(struct rl_comm *c, bool patient)
{
	atomic_store(&c->world->patient, patient);
}

void rl_comm_all_reduce(struct rl_comm *c, void *buf, size_t count, enum rl_comm_dtype t,
                        enum rl_comm_reduce op, const char *what)
{
	struct rl_comm_op o = {.kind = RL_OP_ALL_REDUCE,
	                       .send = buf,
	                       .recv = buf,
	                       .count = count,
	                       .dtype = t,
	                       .reduce = op};
	run(c, &o, what);
}

void rl_comm_reduce_scatter(struct rl_comm *c, const void *send, void *recv, size_t count,
                            enum rl_comm_dtype t, enum rl_comm_reduce op, const char *what)
{
	struct rl_comm_op o = reduce_scatter_op(send, recv, count, t, op);

	run(c, &o, what);
}

void rl_comm_all_gather(struct rl_comm *c, const void *send, void *recv, size_t count,
                        enum rl_comm_dtype t, const char *what)
{
	struct rl_comm_op o = all_gather_op(send, recv, count, t);

	run(c, &o, what);
}

void rl_comm_broadcast(struct rl_comm *c, void *buf, size_t count, enum rl_comm_dtype t, int root,
                       const char *what)
{
	struct rl_comm_op o = broadcast_op(buf, count, t, root);

	run(c, &o, what);
}

void rl_comm_send(struct rl_comm *c, const void *buf, size_t count, enum rl_comm_dtype t, int peer,
                  const char *what)
{
	struct rl_comm_op o = send_op(buf, count, t, peer);

	run(c, &o, what);
}

void rl_comm_recv(struct rl_comm *c, void *buf, size_t count, enum rl_comm_dtype t, int peer,
                  const char *what)
{
	struct rl_comm_op o = {
	    .kind = RL_OP_RECV, .recv = buf, .count = count, .dtype = t, .peer = peer};
	run(c, &o, what);
}

void rl_comm_sendrecv(struct rl_comm *c, const void *send, size_t send_count, int send_peer,
                      void *recv, size_t recv_count, int recv_peer, enum rl_comm_dtype t,
                      const char *what)
{
	struct rl_comm_op o = {.kind = RL_OP_SEND_RECV,
	                       .send = send,
	                       .recv = recv,
	                       .count = send_count,
	                       .dtype = t,
	                       .peer = send_peer,
	                       .recv_count = recv_count,
	                       .recv_peer = recv_peer};
	run(c, &o, what);
}

void rl_comm_all_to_all(struct rl_comm *c, const void *send, void *recv, size_t count,
                        enum rl_comm_dtype t, const char *what)
{
	struct rl_comm_op o = {
	    .kind = RL_OP_ALL_TO_ALL, .send = send, .recv = recv, .count = count, .dtype = t};
	run(c, &o, what);
}

void rl_comm_all_to_all_v(struct rl_comm *c, const void *send, const size_t *send_counts,
                          void *recv, const size_t *recv_counts, enum rl_comm_dtype t,
                          const char *what)
{
	struct rl_comm_op o = {.kind = RL_OP_ALL_TO_ALL_V,
	                       .send = send,
	                       .recv = recv,
	                       .dtype = t,
	                       .send_counts = send_counts,
	                       .recv_counts = recv_counts};
	run(c, &o, what);
}

void rl_comm_barrier(struct rl_comm *c, const char *what)
{
	struct rl_comm_op o = {.kind = RL_OP_BARRIER, .dtype = RL_COMM_U8};
	run(c, &o, what);
}

/* The world's list of groups is read by the watchdog's thread too. */
static void link_open(struct rl_comm *c)
{
	pthread_mutex_lock(&c->world->lock);
	c->next_open = c->world->open;
	c->world->open = c;
	pthread_mutex_unlock(&c->world->lock);
}

int rl_comm_split(struct rl_comm *parent, int color, int key, const char *name,
                  struct rl_comm **out, char *err, size_t errlen)
{
	struct rl_comm *c = calloc(1, sizeof *c);

	*out = NULL;
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->world = parent->world;
	snprintf(c->name, sizeof c->name, "%s", name);
	c->be = &rl_comm_mpi_backend;
	if (rl_comm_mpi_backend.split(parent, color, key, c, err, errlen)) {
		free(c);
		return -1;
	}
	if (c->size == 0) {
		/* a rank outside every group of the split: nothing to hold */
		free(c);
		return 0;
	}
	link_open(c);
	*out = c;
	return 0;
}

const char *rl_comm_transport_name(enum rl_comm_transport t)
{
	return t == RL_COMM_NCCL     ? "nccl"
	       : t == RL_COMM_STAGED ? "staged (host buffers + mpi)"
	                             : "mpi";
}

struct rl_comm *rl_comm_device(struct rl_comm *c)
{
	return c && c->device ? c->device : c;
}

/* A face of c: its name, place and members, borrowed. */
static struct rl_comm *new_face(struct rl_comm *c)
{
	struct rl_comm *f = calloc(1, sizeof *f);

	if (!f)
		return NULL;
	f->world = c->world;
	snprintf(f->name, sizeof f->name, "%.20s (device)", c->name);
	f->rank = c->rank;
	f->size = c->size;
	f->members = c->members;
	f->host = c->host;
	f->of_group = c;
	return f;
}

/* The watchdog's thread reads the faces (their libraries' errors). */
static void set_device(struct rl_comm *c, struct rl_comm *f)
{
	pthread_mutex_lock(&c->world->lock);
	c->device = f;
	pthread_mutex_unlock(&c->world->lock);
}

static void free_face(struct rl_comm *f)
{
	if (!f || !f->of_group)
		return;
	f->be->free(f);
	free(f);
}

int rl_comm_connect_device(struct rl_comm *parent, struct rl_comm *c, int color, int key,
                           enum rl_comm_transport t, const struct rl_comm_stage *stage, char *err,
                           size_t errlen)
{
	if (t == RL_COMM_MPI || (t == RL_COMM_STAGED && !c))
		return 0;
	if (c && c->device) {
		snprintf(err, errlen, "group %s already has a device face", c->name);
		return -1;
	}
	struct rl_comm *f = c ? new_face(c) : NULL;
	if (c && !f) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (t == RL_COMM_STAGED) {
		f->stage = stage;
		if (rl_comm_staged_face(c, f, err, errlen)) {
			free(f);
			return -1;
		}
		set_device(c, f);
		return 0;
	}
#ifdef RL_HAVE_NCCL
	struct rl_comm none = {.be = &rl_comm_nccl_backend};
	struct rl_comm *dst = f ? f : &none;
	int rc;

	dst->be = &rl_comm_nccl_backend;
	if (!parent) {
		rc = rl_comm_nccl_from_mpi(c, 0, c->rank, dst, err, errlen);
	} else if (!parent->device) {
		snprintf(err, errlen, "group %s: its parent %s has no NCCL face", c ? c->name : "-",
		         parent->name);
		rc = -1;
	} else {
		rc = rl_comm_nccl_backend.split(parent->device, color, key, dst, err, errlen);
	}
	if (rc || !c) {
		free(f);
		return rc;
	}
	set_device(c, f);
	return 0;
#else
	(void)parent, (void)color, (void)key;
	snprintf(err, errlen,
	         "group %s: NCCL is not in this build of rlrun (configure --with-cuda)",
	         c ? c->name : "-");
	free(f);
	return -1;
#endif
}

void rl_comm_free(struct rl_comm *c)
{
	struct rl_comm_world *w;
	char desc[64];

	if (!c)
		return;
	w = c->world;
	pthread_mutex_lock(&w->lock);
	for (struct rl_comm **p = &w->open; *p; p = &(*p)->next_open)
		if (*p == c) {
			*p = c->next_open;
			break;
		}
	pthread_mutex_unlock(&w->lock);
	/* NCCL's destroy waits for what is queued, a peer that died included */
	snprintf(desc, sizeof desc, "freeing group %s", c->name);
	rl_watchdog_begin_wait(w, desc, false);
	free_face(c->device);
	c->be->free(c);
	if (c->host)
		rl_comm_mpi_free_host(c);
	rl_watchdog_end_wait(w);
	free(c);
}
