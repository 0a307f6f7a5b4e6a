#include <string.h>

#include "runtime/parallel/pp_group.h"

static void stage_send(void *ctx, const float *buf, size_t n, int stage, const char *what)
{
	rl_comm_send(rl_comm_device(ctx), buf, n, RL_COMM_F32, stage, what);
}

static void stage_recv(void *ctx, float *buf, size_t n, int stage, const char *what)
{
	rl_comm_recv(rl_comm_device(ctx), buf, n, RL_COMM_F32, stage, what);
}

static void broadcast_host(void *ctx, float *buf, size_t n, int root, const char *what)
{
	rl_comm_broadcast(ctx, buf, n, RL_COMM_F32, root, what);
}

static void all_reduce(void *ctx, float *buf, size_t n, const char *what)
{
	rl_comm_all_reduce(rl_comm_device(ctx), buf, n, RL_COMM_F32, RL_COMM_SUM, what);
}

void rl_pp_group_bind(struct rl_pp_group *g, struct rl_comm *pp, struct rl_comm *embedding)
{
	memset(g, 0, sizeof *g);
	g->size = 1;
	if (!pp)
		return;
	g->ctx = pp;
	g->rank = rl_comm_rank(pp);
	g->size = rl_comm_size(pp);
	g->send = stage_send;
	g->recv = stage_recv;
	g->broadcast_host = broadcast_host;
	if (embedding) {
		g->embedding_ctx = embedding;
		g->embedding_all_reduce = all_reduce;
	}
}
