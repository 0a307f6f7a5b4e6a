/* The argument checks an op's contract promises, written once and run
 * against each backend's function (the CPU op in its test, the CUDA op in
 * its parity test). Every case returns before any data is read, so the
 * CUDA ops are held to them on a machine without a GPU.
 * defines: expect_linear_arg_checks, expect_logprobs_arg_checks */
#ifndef RL_TESTS_OP_ARG_CHECKS_H
#define RL_TESTS_OP_ARG_CHECKS_H

#include <stdint.h>

#include <criterion/criterion.h>

#include "kernels/linear.h"
#include "kernels/logprobs.h"

static inline void expect_linear_arg_checks(rl_linear_forward_fn fwd, rl_linear_backward_fn bwd)
{
	float v[4] = {1, 2, 3, 4}, g[4];

	cr_expect_eq(fwd(NULL, v, v, NULL, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(g, NULL, v, NULL, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(g, v, NULL, NULL, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(g, v, v, NULL, -1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(g, v, v, NULL, 1, 0, 2, NULL), -1);
	cr_expect_eq(fwd(g, v, v, NULL, 1, 2, -2, NULL), -1);
	cr_expect_eq(fwd(g, v, v, v, 0, 2, 2, NULL), 0);
	cr_expect_eq(bwd(g, g, g, NULL, v, v, 1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(g, NULL, NULL, v, v, NULL, 1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(NULL, g, NULL, v, NULL, v, 1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(g, g, g, v, v, v, -1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(g, g, g, v, v, v, 1, 2, 0, NULL), -1);
	cr_expect_eq(bwd(g, g, g, v, v, v, 1, 0, 2, NULL), -1);
	cr_expect_eq(bwd(g, g, g, v, v, v, 0, 2, 2, NULL), 0);
}

static inline void expect_logprobs_arg_checks(rl_lm_logprobs_forward_fn fwd,
                                              rl_lm_logprobs_backward_fn bwd)
{
	float v[8] = {0}, g[8], work[8];
	int32_t tgt[2] = {0, 1};
	struct rl_lm_logprobs_shape s = {
	    .n = 2, .dim = 2, .vocab = 2, .chunk = 2, .logit_scale = 1.0f};

	cr_expect_eq(fwd(NULL, g, v, v, tgt, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, NULL, v, v, tgt, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, NULL, v, tgt, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, v, NULL, tgt, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, v, v, NULL, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, v, v, tgt, NULL, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, v, v, tgt, &s, NULL, NULL), -1);

	struct rl_lm_logprobs_shape bad[5] = {s, s, s, s, s};
	bad[0].n = -1;
	bad[1].dim = 0;
	bad[2].vocab = 0;
	bad[3].chunk = 0;
	bad[4].dim = -3;
	for (int i = 0; i < 5; i++) {
		cr_expect_eq(fwd(g, g + 2, v, v, tgt, &bad[i], work, NULL), -1, "shape %d", i);
		cr_expect_eq(bwd(g, g, v, v, v, tgt, v, &bad[i], work, NULL), -1, "shape %d", i);
	}
	cr_expect_eq(bwd(g, g, NULL, v, v, tgt, v, &s, work, NULL), -1);
	cr_expect_eq(bwd(g, g, v, NULL, v, tgt, v, &s, work, NULL), -1);
	cr_expect_eq(bwd(g, g, v, v, NULL, tgt, v, &s, work, NULL), -1);
	cr_expect_eq(bwd(g, g, v, v, v, NULL, v, &s, work, NULL), -1);
	cr_expect_eq(bwd(g, g, v, v, v, tgt, NULL, &s, work, NULL), -1);
	cr_expect_eq(bwd(g, g, v, v, v, tgt, v, &s, NULL, NULL), -1);
	cr_expect_eq(bwd(g, g, v, v, v, tgt, v, NULL, work, NULL), -1);
}

#endif
