/* Messages one rank started and has not waited for, each with the memory
 * it sends from: what a rank hands to a busy peer and forgets. They
 * complete in their own time; their memory is freed in the order they were
 * started, so that one buffer can serve several messages (a refit's
 * buckets) by going with the last of them.
 * defines: struct rl_outbox, rl_outbox_add, rl_outbox_reap, rl_outbox_drain,
 * rl_outbox_free */
#ifndef RL_COMM_OUTBOX_H
#define RL_COMM_OUTBOX_H

#include "runtime/comm/comm.h"

struct rl_outbox_item;
struct rl_outbox {
	struct rl_outbox_item *items;
	int head, n, cap; /* the ring of items started and not freed */
};

/* req, started, and `owned` (malloc'd, NULL for none), freed once req and
 * every earlier message completed. Returns 0, or -1 out of memory: req has
 * then been waited for and owned freed, so the caller goes on alike. */
int rl_outbox_add(struct rl_outbox *o, struct rl_comm_request *req, void *owned);
/* Frees what completed, never waiting. */
void rl_outbox_reap(struct rl_outbox *o);
/* Waits for every message. */
void rl_outbox_drain(struct rl_outbox *o);
/* Drains and frees o's own memory. */
void rl_outbox_free(struct rl_outbox *o);

#endif
