/* The pipeline schedules of the policy passes: which micro-batch a stage
 * runs forward or backward next, and the hand-over of activations and
 * their gradients between neighbouring stages. One stage (no group) is the
 * degenerate case: each micro-batch forward, then backward.
 * defines: struct rl_pipeline, rl_pipeline_forward, rl_pipeline_1f1b */
#ifndef RL_PARALLEL_PIPELINE_H
#define RL_PARALLEL_PIPELINE_H

#include <stddef.h>

#include "runtime/comm/comm.h"
#include "runtime/model/model.h"

struct rl_pipeline {
	struct rl_comm *pp; /* NULL: one stage */
	struct rl_model *m;
	/* micro-batch i runs in acts[i % n_acts]; 1F1B keeps up to the
	 * number of stages after this one (itself included) in flight */
	struct rl_acts **acts;
	int n_acts;
	/* the caller's part, micro-batch by micro-batch: its tokens (every
	 * stage knows them: they size the messages), the forward pass (on
	 * the last stage with whatever follows it: logprobs, the loss) and
	 * the backward pass; 0 or -1 with err */
	void *ctx;
	int (*tokens)(void *ctx, int mb);
	int (*forward)(void *ctx, int mb, struct rl_acts *a, char *err, size_t errlen);
	int (*backward)(void *ctx, int mb, struct rl_acts *a, char *err, size_t errlen);
	/* expert parallelism: idle passes after the micro-batches, so that
	 * every rank of an ep group (all alike down their pipeline) runs as
	 * many, in the same schedule; they hand nothing between stages */
	int idle;
	int (*idle_forward)(void *ctx, struct rl_acts *a, char *err, size_t errlen);
	int (*idle_backward)(void *ctx, struct rl_acts *a, char *err, size_t errlen);
};

/* Every micro-batch forward, as they come: each stage starts the next one
 * once it handed the last on. */
int rl_pipeline_forward(const struct rl_pipeline *p, int n_mb, char *err, size_t errlen);
/* Forward and backward of every micro-batch in Megatron's one-forward-
 * one-backward order: a stage runs as many forwards as there are stages
 * after it before its first backward, then alternates, so that at most
 * that many micro-batches hold activations. */
int rl_pipeline_1f1b(const struct rl_pipeline *p, int n_mb, char *err, size_t errlen);

#endif
