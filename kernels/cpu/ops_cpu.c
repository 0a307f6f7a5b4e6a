/* The CPU backend's table: host memory through the C library, every op from
 * kernels/cpu. */
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"

static void *cpu_alloc(size_t bytes)
{
	/* 64 bytes: a cache line, and what AVX-512 loads like */
	size_t rounded = (bytes + 63) & ~(size_t)63;
	return aligned_alloc(64, rounded ? rounded : 64);
}

static void cpu_release(void *p)
{
	free(p);
}

static int cpu_zero(void *p, size_t bytes, void *stream)
{
	(void)stream;
	if (bytes)
		memset(p, 0, bytes);
	return 0;
}

static int cpu_copy(void *dst, const void *src, size_t bytes, void *stream)
{
	(void)stream;
	if (bytes)
		memmove(dst, src, bytes);
	return 0;
}

const struct rl_ops rl_ops_cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .release = cpu_release,
    .zero = cpu_zero,
    .to_host = cpu_copy,
    .from_host = cpu_copy,
    .copy = cpu_copy,
    .embedding_forward = rl_embedding_forward_cpu,
    .embedding_backward = rl_embedding_backward_cpu,
    .rmsnorm_forward = rl_rmsnorm_forward_cpu,
    .rmsnorm_backward = rl_rmsnorm_backward_cpu,
    .rope_forward = rl_rope_forward_cpu,
    .rope_backward = rl_rope_backward_cpu,
    .attention_forward = rl_attention_forward_cpu,
    .attention_backward = rl_attention_backward_cpu,
    .attention_chunks_forward = rl_attention_chunks_forward_cpu,
    .attention_chunks_backward = rl_attention_chunks_backward_cpu,
    .swiglu_forward = rl_swiglu_forward_cpu,
    .swiglu_backward = rl_swiglu_backward_cpu,
    .linear_forward = rl_linear_forward_cpu,
    .linear_backward = rl_linear_backward_cpu,
    .lm_logprobs_forward = rl_lm_logprobs_forward_cpu,
    .lm_logprobs_backward = rl_lm_logprobs_backward_cpu,
    .adamw_step = rl_adamw_step_cpu,
    .add = rl_add_cpu,
    .scale = rl_scale_cpu,
    .sum_squares = rl_sum_squares_cpu,
    .round_bf16 = rl_round_bf16_cpu,
    .to_bf16 = rl_to_bf16_cpu,
    .from_bf16 = rl_from_bf16_cpu,
    .grouped_linear_forward = rl_grouped_linear_forward_cpu,
    .grouped_linear_backward = rl_grouped_linear_backward_cpu,
    .moe_combine_forward = rl_moe_combine_forward_cpu,
    .moe_combine_backward = rl_moe_combine_backward_cpu,
    .kv_append = rl_kv_append_cpu,
    .attention_paged = rl_attention_paged_cpu,
    .sample = rl_sample_cpu,
    .logits_logprobs = rl_logits_logprobs_cpu,
    .linear_forward_invariant = rl_linear_forward_invariant_cpu,
    .lm_logprobs_forward_invariant = rl_lm_logprobs_forward_invariant_cpu,
    .grouped_linear_forward_invariant = rl_grouped_linear_forward_invariant_cpu,
};
