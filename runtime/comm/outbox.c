#include <stdlib.h>

#include "runtime/comm/outbox.h"

struct rl_outbox_item {
	struct rl_comm_request *req; /* NULL once complete */
	void *owned;
};

static struct rl_outbox_item *at(struct rl_outbox *o, int k)
{
	return &o->items[(o->head + k) % o->cap];
}

static int grow(struct rl_outbox *o)
{
	int cap = o->cap ? 2 * o->cap : 16;
	struct rl_outbox_item *items = malloc((size_t)cap * sizeof *items);

	if (!items)
		return -1;
	for (int k = 0; k < o->n; k++)
		items[k] = *at(o, k);
	free(o->items);
	o->items = items;
	o->cap = cap;
	o->head = 0;
	return 0;
}

int rl_outbox_add(struct rl_outbox *o, struct rl_comm_request *req, void *owned)
{
	rl_outbox_reap(o);
	if (o->n == o->cap && grow(o)) {
		/* no room to remember it: finish it now, in order */
		rl_outbox_drain(o);
		rl_comm_wait(req);
		free(owned);
		return -1;
	}
	*at(o, o->n++) = (struct rl_outbox_item){req, owned};
	return 0;
}

/* The oldest item, complete: its memory goes. */
static void pop(struct rl_outbox *o)
{
	free(at(o, 0)->owned);
	o->head = (o->head + 1) % o->cap;
	o->n--;
}

void rl_outbox_reap(struct rl_outbox *o)
{
	/* test every one, for progress and so that each request is freed
	 * when it completes; free memory from the oldest on */
	for (int k = 0; k < o->n; k++) {
		struct rl_outbox_item *it = at(o, k);

		if (it->req && rl_comm_test(it->req))
			it->req = NULL;
	}
	while (o->n > 0 && !at(o, 0)->req)
		pop(o);
}

void rl_outbox_drain(struct rl_outbox *o)
{
	while (o->n > 0) {
		rl_comm_wait(at(o, 0)->req);
		at(o, 0)->req = NULL;
		pop(o);
	}
}

void rl_outbox_free(struct rl_outbox *o)
{
	rl_outbox_drain(o);
	free(o->items);
	*o = (struct rl_outbox){0};
}
