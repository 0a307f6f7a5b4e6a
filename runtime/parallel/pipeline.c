/* Each hand-over names its micro-batch for the watchdog. Where a stage
 * sends to a neighbour that sends back in the same step (the steady state
 * of 1F1B), the two go as one sendrecv: two blocking sends of large
 * messages would wait on each other. */
#include <stdbool.h>
#include <stdio.h>

#include "runtime/parallel/pipeline.h"

static int stage(const struct rl_pipeline *p)
{
	return p->pp ? rl_comm_rank(p->pp) : 0;
}

static int stages(const struct rl_pipeline *p)
{
	return p->pp ? rl_comm_size(p->pp) : 1;
}

static bool first(const struct rl_pipeline *p)
{
	return stage(p) == 0;
}

static bool last(const struct rl_pipeline *p)
{
	return stage(p) == stages(p) - 1;
}

static struct rl_acts *acts_of(const struct rl_pipeline *p, int mb)
{
	return p->acts[mb % p->n_acts];
}

static size_t floats(const struct rl_pipeline *p, int mb)
{
	return rl_model_stage_floats(p->m, p->tokens(p->ctx, mb));
}

static void recv_forward(const struct rl_pipeline *p, int mb)
{
	if (!first(p))
		rl_comm_recv(p->pp, rl_acts_stage_input(acts_of(p, mb)), floats(p, mb), RL_COMM_F32,
		             stage(p) - 1, "pipeline activations from the stage before");
}

static void send_forward(const struct rl_pipeline *p, int mb)
{
	if (!last(p))
		rl_comm_send(p->pp, rl_acts_stage_output(acts_of(p, mb)), floats(p, mb),
		             RL_COMM_F32, stage(p) + 1, "pipeline activations to the stage after");
}

static void recv_backward(const struct rl_pipeline *p, int mb)
{
	if (!last(p))
		rl_comm_recv(p->pp, rl_acts_stage_grad(acts_of(p, mb)), floats(p, mb), RL_COMM_F32,
		             stage(p) + 1, "pipeline gradient from the stage after");
}

static void send_backward(const struct rl_pipeline *p, int mb)
{
	if (!first(p))
		rl_comm_send(p->pp, rl_acts_stage_grad(acts_of(p, mb)), floats(p, mb), RL_COMM_F32,
		             stage(p) - 1, "pipeline gradient to the stage before");
}

/* out of micro-batch fwd to the stage after, the gradient of bwd from it */
static void send_forward_recv_backward(const struct rl_pipeline *p, int fwd, int bwd)
{
	if (!last(p))
		rl_comm_sendrecv(p->pp, rl_acts_stage_output(acts_of(p, fwd)), floats(p, fwd),
		                 stage(p) + 1, rl_acts_stage_grad(acts_of(p, bwd)), floats(p, bwd),
		                 stage(p) + 1, RL_COMM_F32,
		                 "pipeline activations out, gradient in (stage after)");
}

/* the gradient of bwd to the stage before, the input of fwd from it */
static void send_backward_recv_forward(const struct rl_pipeline *p, int bwd, int fwd)
{
	if (!first(p))
		rl_comm_sendrecv(p->pp, rl_acts_stage_grad(acts_of(p, bwd)), floats(p, bwd),
		                 stage(p) - 1, rl_acts_stage_input(acts_of(p, fwd)), floats(p, fwd),
		                 stage(p) - 1, RL_COMM_F32,
		                 "pipeline gradient out, activations in (stage before)");
}

int rl_pipeline_forward(const struct rl_pipeline *p, int n_mb, char *err, size_t errlen)
{
	for (int i = 0; i < n_mb; i++) {
		recv_forward(p, i);
		if (p->forward(p->ctx, i, acts_of(p, i), err, errlen))
			return -1;
		send_forward(p, i);
	}
	return 0;
}

int rl_pipeline_1f1b(const struct rl_pipeline *p, int n_mb, char *err, size_t errlen)
{
	int after = stages(p) - stage(p) - 1;
	int warmup = after < n_mb ? after : n_mb, steady = n_mb - warmup;

	if (p->n_acts < (warmup < n_mb ? warmup + 1 : warmup)) {
		snprintf(err, errlen, "pipeline: %d activation sets for %d micro-batches in flight",
		         p->n_acts, warmup + 1);
		return -1;
	}
	for (int i = 0; i < warmup; i++) {
		recv_forward(p, i);
		if (p->forward(p->ctx, i, acts_of(p, i), err, errlen))
			return -1;
		send_forward(p, i);
	}
	if (steady > 0)
		recv_forward(p, warmup);
	for (int j = 0; j < steady; j++) {
		int i = warmup + j;

		if (p->forward(p->ctx, i, acts_of(p, i), err, errlen))
			return -1;
		send_forward_recv_backward(p, i, j);
		if (p->backward(p->ctx, j, acts_of(p, j), err, errlen))
			return -1;
		if (j == steady - 1)
			send_backward(p, j);
		else
			send_backward_recv_forward(p, j, i + 1);
	}
	for (int j = steady; j < n_mb; j++) {
		recv_backward(p, j);
		if (p->backward(p->ctx, j, acts_of(p, j), err, errlen))
			return -1;
		send_backward(p, j);
	}
	return 0;
}
