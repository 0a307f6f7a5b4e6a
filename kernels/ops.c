/* Backend-independent helpers of the op table. */
#include "kernels/ops.h"

#define CHECK(field)                                                                               \
	do {                                                                                       \
		if (!ops->field)                                                                   \
			return #field;                                                             \
	} while (0)

const char *rl_ops_missing(const struct rl_ops *ops)
{
	CHECK(alloc);
	CHECK(release);
	CHECK(zero);
	CHECK(to_host);
	CHECK(from_host);
	CHECK(copy);
	CHECK(embedding_forward);
	CHECK(embedding_backward);
	CHECK(rmsnorm_forward);
	CHECK(rmsnorm_backward);
	CHECK(rope_forward);
	CHECK(rope_backward);
	CHECK(attention_forward);
	CHECK(attention_backward);
	CHECK(attention_chunks_forward);
	CHECK(attention_chunks_backward);
	CHECK(swiglu_forward);
	CHECK(swiglu_backward);
	CHECK(linear_forward);
	CHECK(linear_backward);
	CHECK(lm_logprobs_forward);
	CHECK(lm_logprobs_backward);
	CHECK(adamw_step);
	CHECK(add);
	CHECK(scale);
	CHECK(sum_squares);
	CHECK(round_bf16);
	CHECK(to_bf16);
	CHECK(from_bf16);
	CHECK(grouped_linear_forward);
	CHECK(grouped_linear_backward);
	CHECK(moe_combine_forward);
	CHECK(moe_combine_backward);
	CHECK(kv_append);
	CHECK(attention_paged);
	CHECK(sample);
	CHECK(logits_logprobs);
	CHECK(linear_forward_invariant);
	CHECK(lm_logprobs_forward_invariant);
	CHECK(grouped_linear_forward_invariant);
	return NULL;
}
