#include <string.h>

#include "runtime/parallel/tp_group.h"

static void all_reduce(void *ctx, float *buf, size_t n, const char *what)
{
	rl_comm_all_reduce(rl_comm_device(ctx), buf, n, RL_COMM_F32, RL_COMM_SUM, what);
}

static void all_gather(void *ctx, const float *send, float *recv, size_t n, const char *what)
{
	rl_comm_all_gather(rl_comm_device(ctx), send, recv, n, RL_COMM_F32, what);
}

static void reduce_scatter(void *ctx, const float *send, float *recv, size_t n, const char *what)
{
	rl_comm_reduce_scatter(rl_comm_device(ctx), send, recv, n, RL_COMM_F32, RL_COMM_SUM, what);
}

static void all_reduce_host(void *ctx, float *buf, size_t n, const char *what)
{
	rl_comm_all_reduce(ctx, buf, n, RL_COMM_F32, RL_COMM_SUM, what);
}

static void all_gather_host(void *ctx, const float *send, float *recv, size_t n, const char *what)
{
	rl_comm_all_gather(ctx, send, recv, n, RL_COMM_F32, what);
}

void rl_tp_group_bind(struct rl_tp_group *g, struct rl_comm *c)
{
	memset(g, 0, sizeof *g);
	g->size = 1;
	if (!c)
		return;
	g->ctx = c;
	g->rank = rl_comm_rank(c);
	g->size = rl_comm_size(c);
	g->all_reduce = all_reduce;
	g->all_gather = all_gather;
	g->reduce_scatter = reduce_scatter;
	g->all_reduce_host = all_reduce_host;
	g->all_gather_host = all_gather_host;
}
