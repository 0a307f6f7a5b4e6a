/* The CUDA backend's table. extern "C" on the definition itself: nvcc may
 * compile this without config.h, and a namespace-scope const would otherwise
 * have internal linkage in C++. Positional, in the order of struct rl_ops
 * (C++17 has no designated initialisers); rl_ops_missing() and
 * tests/unit/test_cuda_table.c hold it to every field. */
#include "kernels/memory.h"
#include "kernels/ops.h"

extern "C" const struct rl_ops rl_ops_cuda = {
    /* name */ "cuda",
    rl_cuda_alloc,
    rl_cuda_release,
    rl_cuda_zero,
    rl_cuda_to_host,
    rl_cuda_from_host,
    rl_cuda_copy,
    rl_embedding_forward_cuda,
    rl_embedding_backward_cuda,
    rl_rmsnorm_forward_cuda,
    rl_rmsnorm_backward_cuda,
    rl_rope_forward_cuda,
    rl_rope_backward_cuda,
    rl_attention_forward_cuda,
    rl_attention_backward_cuda,
    rl_attention_chunks_forward_cuda,
    rl_attention_chunks_backward_cuda,
    rl_swiglu_forward_cuda,
    rl_swiglu_backward_cuda,
    rl_linear_forward_cuda,
    rl_linear_backward_cuda,
    rl_lm_logprobs_forward_cuda,
    rl_lm_logprobs_backward_cuda,
    rl_adamw_step_cuda,
    rl_add_cuda,
    rl_scale_cuda,
    rl_sum_squares_cuda,
    rl_round_bf16_cuda,
    rl_to_bf16_cuda,
    rl_from_bf16_cuda,
    rl_grouped_linear_forward_cuda,
    rl_grouped_linear_backward_cuda,
    rl_moe_combine_forward_cuda,
    rl_moe_combine_backward_cuda,
    rl_kv_append_cuda,
    rl_attention_paged_cuda,
    rl_sample_cuda,
    rl_logits_logprobs_cuda,
    rl_linear_forward_invariant_cuda,
    rl_lm_logprobs_forward_invariant_cuda,
    rl_grouped_linear_forward_invariant_cuda,
};
