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
	uint16_t h[4] = {0x3f80, 0x4000, 0x4040, 0x4080}, hg[4];
	struct rl_buf G = rl_buf_f32(g), N = rl_buf_f32(NULL), HG = rl_buf_bf16(hg);
	struct rl_cbuf V = rl_cbuf_f32(v), NC = rl_cbuf_f32(NULL), H = rl_cbuf_bf16(h);

	cr_expect_eq(fwd(N, V, V, NC, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(G, NC, V, NC, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(G, V, NC, NC, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(G, V, V, NC, -1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(G, V, V, NC, 1, 0, 2, NULL), -1);
	cr_expect_eq(fwd(G, V, V, NC, 1, 2, -2, NULL), -1);
	cr_expect_eq(fwd(G, V, V, V, 0, 2, 2, NULL), 0);
	cr_expect_eq(bwd(G, g, g, NC, V, V, 1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(G, NULL, NULL, V, V, NC, 1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(N, g, NULL, V, NC, V, 1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(G, g, g, V, V, V, -1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(G, g, g, V, V, V, 1, 2, 0, NULL), -1);
	cr_expect_eq(bwd(G, g, g, V, V, V, 1, 0, 2, NULL), -1);
	cr_expect_eq(bwd(G, g, g, V, V, V, 0, 2, 2, NULL), 0);

	/* the type rules (linear.h), refused before any data is read: inputs
	 * of two types, a bias of another type, an fp32 input with a bf16
	 * output, a bias with bf16 inputs and an fp32 output, fp16, and a
	 * backward whose dx, x or W is not dy's type */
	struct rl_cbuf F16 = {h, RL_F16};
	struct rl_buf F16G = {hg, RL_F16};

	cr_expect_eq(fwd(HG, H, V, NC, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(HG, V, H, NC, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(HG, H, H, V, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(HG, V, V, NC, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(G, H, H, H, 1, 2, 2, NULL), -1);
	cr_expect_eq(fwd(F16G, F16, F16, NC, 1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(G, NULL, NULL, H, NC, H, 1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(HG, g, NULL, H, V, H, 1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(HG, NULL, NULL, H, NC, V, 1, 2, 2, NULL), -1);
	cr_expect_eq(bwd(N, g, NULL, F16, F16, NC, 1, 2, 2, NULL), -1);
	/* and the combinations it allows, on an empty batch */
	cr_expect_eq(fwd(HG, H, H, H, 0, 2, 2, NULL), 0);
	cr_expect_eq(fwd(G, H, H, NC, 0, 2, 2, NULL), 0);
	cr_expect_eq(bwd(HG, g, g, H, H, H, 0, 2, 2, NULL), 0);
}

static inline void expect_logprobs_arg_checks(rl_lm_logprobs_forward_fn fwd,
                                              rl_lm_logprobs_backward_fn bwd)
{
	float v[8] = {0}, g[8], work[8];
	int32_t tgt[2] = {0, 1};
	uint16_t h16[8] = {0};
	struct rl_lm_logprobs_shape s = {
	    .n = 2, .dim = 2, .vocab = 2, .chunk = 2, .logit_scale = 1.0f};
	struct rl_cbuf V = rl_cbuf_f32(v), N = rl_cbuf_f32(NULL), H = rl_cbuf_bf16(h16);
	struct rl_buf G = rl_buf_f32(g);

	cr_expect_eq(fwd(NULL, g, V, V, tgt, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, NULL, V, V, tgt, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, N, V, tgt, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, V, N, tgt, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, V, V, NULL, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, V, V, tgt, NULL, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, V, V, tgt, &s, NULL, NULL), -1);

	struct rl_lm_logprobs_shape bad[5] = {s, s, s, s, s};
	bad[0].n = -1;
	bad[1].dim = 0;
	bad[2].vocab = 0;
	bad[3].chunk = 0;
	bad[4].dim = -3;
	for (int i = 0; i < 5; i++) {
		cr_expect_eq(fwd(g, g + 2, V, V, tgt, &bad[i], work, NULL), -1, "shape %d", i);
		cr_expect_eq(bwd(G, g, v, V, V, tgt, v, &bad[i], work, NULL), -1, "shape %d", i);
	}
	cr_expect_eq(bwd(G, g, NULL, V, V, tgt, v, &s, work, NULL), -1);
	cr_expect_eq(bwd(G, g, v, N, V, tgt, v, &s, work, NULL), -1);
	cr_expect_eq(bwd(G, g, v, V, N, tgt, v, &s, work, NULL), -1);
	cr_expect_eq(bwd(G, g, v, V, V, NULL, v, &s, work, NULL), -1);
	cr_expect_eq(bwd(G, g, v, V, V, tgt, NULL, &s, work, NULL), -1);
	cr_expect_eq(bwd(G, g, v, V, V, tgt, v, &s, NULL, NULL), -1);
	cr_expect_eq(bwd(G, g, v, V, V, tgt, v, NULL, work, NULL), -1);
	/* the types (logprobs.h): h and W of one type, dh of theirs */
	cr_expect_eq(fwd(g, g + 2, H, V, tgt, &s, work, NULL), -1);
	cr_expect_eq(fwd(g, g + 2, (struct rl_cbuf){h16, RL_F16}, (struct rl_cbuf){h16, RL_F16},
	                 tgt, &s, work, NULL),
	             -1);
	cr_expect_eq(bwd(G, g, v, H, H, tgt, v, &s, work, NULL), -1);
	cr_expect_eq(bwd(G, g, v, V, H, tgt, v, &s, work, NULL), -1);
}

#endif
