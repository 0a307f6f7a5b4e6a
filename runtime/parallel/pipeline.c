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

/* The pipeline's micro-batches [0, real) are the caller's, the rest idle
 * passes, which no stage hands on. */
static void recv_forward(const struct rl_pipeline *p, int mb, int real)
{
	if (!first(p) && mb < real)
		rl_comm_recv(rl_comm_device(p->pp), rl_acts_stage_input(acts_of(p, mb)),
		             floats(p, mb), RL_COMM_F32, stage(p) - 1,
		             "pipeline activations from the stage before");
}

static void send_forward(const struct rl_pipeline *p, int mb, int real)
{
	if (!last(p) && mb < real)
		rl_comm_send(rl_comm_device(p->pp), rl_acts_stage_output(acts_of(p, mb)),
		             floats(p, mb), RL_COMM_F32, stage(p) + 1,
		             "pipeline activations to the stage after");
}

static void recv_backward(const struct rl_pipeline *p, int mb, int real)
{
	if (!last(p) && mb < real)
		rl_comm_recv(rl_comm_device(p->pp), rl_acts_stage_grad(acts_of(p, mb)),
		             floats(p, mb), RL_COMM_F32, stage(p) + 1,
		             "pipeline gradient from the stage after");
}

static void send_backward(const struct rl_pipeline *p, int mb, int real)
{
	if (!first(p) && mb < real)
		rl_comm_send(rl_comm_device(p->pp), rl_acts_stage_grad(acts_of(p, mb)),
		             floats(p, mb), RL_COMM_F32, stage(p) - 1,
		             "pipeline gradient to the stage before");
}

/* out of micro-batch fwd to the stage after, the gradient of bwd from it
 * (an idle one neither: bwd < fwd) */
static void send_forward_recv_backward(const struct rl_pipeline *p, int fwd, int bwd, int real)
{
	if (last(p))
		return;
	if (fwd >= real) {
		recv_backward(p, bwd, real);
		return;
	}
	rl_comm_sendrecv(rl_comm_device(p->pp), rl_acts_stage_output(acts_of(p, fwd)),
	                 floats(p, fwd), stage(p) + 1, rl_acts_stage_grad(acts_of(p, bwd)),
	                 floats(p, bwd), stage(p) + 1, RL_COMM_F32,
	                 "pipeline activations out, gradient in (stage after)");
}

/* the gradient of bwd to the stage before, the input of fwd from it */
static void send_backward_recv_forward(const struct rl_pipeline *p, int bwd, int fwd, int real)
{
	if (first(p))
		return;
	if (fwd >= real) {
		send_backward(p, bwd, real);
		return;
	}
	rl_comm_sendrecv(rl_comm_device(p->pp), rl_acts_stage_grad(acts_of(p, bwd)), floats(p, bwd),
	                 stage(p) - 1, rl_acts_stage_input(acts_of(p, fwd)), floats(p, fwd),
	                 stage(p) - 1, RL_COMM_F32,
	                 "pipeline gradient out, activations in (stage before)");
}

static int run_forward(const struct rl_pipeline *p, int mb, int real, char *err, size_t errlen)
{
	return mb < real ? p->forward(p->ctx, mb, acts_of(p, mb), err, errlen)
	                 : p->idle_forward(p->ctx, acts_of(p, mb), err, errlen);
}

static int run_backward(const struct rl_pipeline *p, int mb, int real, char *err, size_t errlen)
{
	return mb < real ? p->backward(p->ctx, mb, acts_of(p, mb), err, errlen)
	                 : p->idle_backward(p->ctx, acts_of(p, mb), err, errlen);
}

int rl_pipeline_forward(const struct rl_pipeline *p, int n_mb, char *err, size_t errlen)
{
	for (int i = 0; i < n_mb + p->idle; i++) {
		recv_forward(p, i, n_mb);
		if (run_forward(p, i, n_mb, err, errlen))
			return -1;
		send_forward(p, i, n_mb);
	}
	return 0;
}

int rl_pipeline_1f1b(const struct rl_pipeline *p, int n_mb, char *err, size_t errlen)
{
	int real = n_mb, all = n_mb + p->idle;
	int after = stages(p) - stage(p) - 1;
	int warmup = after < all ? after : all, steady = all - warmup;

	if (p->n_acts < (warmup < all ? warmup + 1 : warmup)) {
		snprintf(err, errlen, "pipeline: %d activation sets for %d micro-batches in flight",
		         p->n_acts, warmup + 1);
		return -1;
	}
	for (int i = 0; i < warmup; i++) {
		recv_forward(p, i, real);
		if (run_forward(p, i, real, err, errlen))
			return -1;
		send_forward(p, i, real);
	}
	if (steady > 0)
		recv_forward(p, warmup, real);
	for (int j = 0; j < steady; j++) {
		int i = warmup + j;

		if (run_forward(p, i, real, err, errlen))
			return -1;
		send_forward_recv_backward(p, i, j, real);
		if (run_backward(p, j, real, err, errlen))
			return -1;
		if (j == steady - 1)
			send_backward(p, j, real);
		else
			send_backward_recv_forward(p, j, i + 1, real);
	}
	for (int j = steady; j < all; j++) {
		recv_backward(p, j, real);
		if (run_backward(p, j, real, err, errlen))
			return -1;
		send_backward(p, j, real);
	}
	return 0;
}
