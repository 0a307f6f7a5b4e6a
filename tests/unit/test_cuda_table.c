/* The CUDA table is positional (kernels/cuda/ops_cuda.cu), so a field put
 * in the wrong slot would compile whenever two ops share a signature: each
 * slot is checked against the function it must hold. Needs no GPU. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <criterion/criterion.h>

#include "kernels/ops.h"
#ifdef RL_HAVE_CUDA
#include "kernels/memory.h"
#endif

Test(cuda_table, every_field_holds_its_op)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	const struct rl_ops *t = &rl_ops_cuda;

	cr_expect_null(rl_ops_missing(t), "the CUDA table lacks %s", rl_ops_missing(t));
	cr_expect_str_eq(t->name, "cuda");
#define SLOT(field, fn) cr_expect((void (*)(void))t->field == (void (*)(void))fn, #field)
	SLOT(alloc, rl_cuda_alloc);
	SLOT(release, rl_cuda_release);
	SLOT(zero, rl_cuda_zero);
	SLOT(to_host, rl_cuda_to_host);
	SLOT(from_host, rl_cuda_from_host);
	SLOT(copy, rl_cuda_copy);
	SLOT(embedding_forward, rl_embedding_forward_cuda);
	SLOT(embedding_backward, rl_embedding_backward_cuda);
	SLOT(rmsnorm_forward, rl_rmsnorm_forward_cuda);
	SLOT(rmsnorm_backward, rl_rmsnorm_backward_cuda);
	SLOT(rope_forward, rl_rope_forward_cuda);
	SLOT(rope_backward, rl_rope_backward_cuda);
	SLOT(attention_forward, rl_attention_forward_cuda);
	SLOT(attention_backward, rl_attention_backward_cuda);
	SLOT(attention_chunks_forward, rl_attention_chunks_forward_cuda);
	SLOT(attention_chunks_backward, rl_attention_chunks_backward_cuda);
	SLOT(swiglu_forward, rl_swiglu_forward_cuda);
	SLOT(swiglu_backward, rl_swiglu_backward_cuda);
	SLOT(linear_forward, rl_linear_forward_cuda);
	SLOT(linear_backward, rl_linear_backward_cuda);
	SLOT(lm_logprobs_forward, rl_lm_logprobs_forward_cuda);
	SLOT(lm_logprobs_backward, rl_lm_logprobs_backward_cuda);
	SLOT(adamw_step, rl_adamw_step_cuda);
	SLOT(add, rl_add_cuda);
	SLOT(scale, rl_scale_cuda);
	SLOT(sum_squares, rl_sum_squares_cuda);
	SLOT(round_bf16, rl_round_bf16_cuda);
	SLOT(to_bf16, rl_to_bf16_cuda);
	SLOT(from_bf16, rl_from_bf16_cuda);
	SLOT(grouped_linear_forward, rl_grouped_linear_forward_cuda);
	SLOT(grouped_linear_backward, rl_grouped_linear_backward_cuda);
	SLOT(moe_combine_forward, rl_moe_combine_forward_cuda);
	SLOT(moe_combine_backward, rl_moe_combine_backward_cuda);
	SLOT(kv_append, rl_kv_append_cuda);
	SLOT(attention_paged, rl_attention_paged_cuda);
	SLOT(sample, rl_sample_cuda);
	SLOT(logits_logprobs, rl_logits_logprobs_cuda);
	SLOT(linear_forward_invariant, rl_linear_forward_invariant_cuda);
	SLOT(lm_logprobs_forward_invariant, rl_lm_logprobs_forward_invariant_cuda);
	SLOT(grouped_linear_forward_invariant, rl_grouped_linear_forward_invariant_cuda);
#undef SLOT
#endif
}
