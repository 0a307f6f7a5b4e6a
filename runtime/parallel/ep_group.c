#include <string.h>

#include "runtime/parallel/ep_group.h"

static void all_to_all_v(void *ctx, const float *send, const size_t *send_counts, float *recv,
                         const size_t *recv_counts, const char *what)
{
	rl_comm_all_to_all_v(rl_comm_device(ctx), send, send_counts, recv, recv_counts, RL_COMM_F32,
	                     what);
}

static void all_to_all_int(void *ctx, const int32_t *send, int32_t *recv, size_t count,
                           const char *what)
{
	rl_comm_all_to_all(ctx, send, recv, count, RL_COMM_I32, what);
}

static int max_int(void *ctx, int v, const char *what)
{
	rl_comm_all_reduce(ctx, &v, 1, RL_COMM_I32, RL_COMM_MAX, what);
	return v;
}

void rl_ep_group_bind(struct rl_ep_group *g, struct rl_comm *c)
{
	memset(g, 0, sizeof *g);
	g->size = 1;
	if (!c)
		return;
	g->ctx = c;
	g->rank = rl_comm_rank(c);
	g->size = rl_comm_size(c);
	g->all_to_all_v = all_to_all_v;
	g->all_to_all_int = all_to_all_int;
	g->max_int = max_int;
}
