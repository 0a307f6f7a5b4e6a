/* The op table. Every op has a CPU reference and a CUDA kernel with one
 * signature, so a caller picks a backend once and the tests hold each kernel
 * to its reference field by field. Pointers are host memory for the CPU table
 * and device memory for the CUDA one; a field the backend lacks is NULL and
 * rl_ops_missing() names it, so callers refuse to start instead of crashing.
 * Backward ops add into their gradient outputs.
 *
 * Types. An activation buffer carries its element type with its address
 * (struct rl_buf, kernels/buf.h); an op computes in fp32 (or double) and
 * rounds each output once to its type, so the CPU op on bf16 is the fp32 op
 * on the same values, rounded, and every backend's bf16 differs from
 * another's only in the order of its fp32 sums. What an op takes:
 *
 *   op                         bf16 or fp32 (one type per call)    always fp32
 *   linear_forward(_invariant) x, W, bias, y (y fp32 for logits)    -
 *   linear_backward            dy, x, W, dx                        dW, dbias (main_grad)
 *   rmsnorm_forward/backward   x, weight, y, dy, dx                rstd, dweight
 *   rope_forward/backward      x (in place)                        inv_freq
 *   swiglu_forward/backward    gate, up, h, dh, dgate, dup         -
 *   embedding_forward          table, out (a copy)                 -
 *   embedding_backward         dout                                dtable
 *   add                        y, x                                -
 *   lm_logprobs_forward(_inv.) h, W                                logits, lse, logprob
 *   lm_logprobs_backward       h, W, dh (dlogits rounded to bf16    dW, the dh sum over
 *                              for the products)                    the chunks, dlogprob
 *   grouped_linear_*           x, W, y, dy, dx (as linear)         dW
 *   moe_combine_forward/bwd    y, out, dout, dy                    routing weights, dweight
 *   every other op             - (fp32 for now: attention, the     logits the loss reads
 *                              paged cache, sampling, AdamW)        (logits_logprobs),
 *                                                                   router logits, the
 *                                                                   optimizer's state
 *
 * The last row is the rest of the bf16 path (issue 41): until its ops take
 * types the model runs its activations in fp32. Tables on both backends
 * refuse any other combination (-1 before any work), and the fenced table
 * checks every typed buffer's bytes against its allocation.
 * defines: struct rl_ops, rl_ops_cpu, rl_ops_cuda (RL_HAVE_CUDA only),
 * rl_ops_missing */
#ifndef RL_KERNELS_OPS_H
#define RL_KERNELS_OPS_H

#include <stddef.h>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/linear.h"
#include "kernels/logprobs.h"
#include "kernels/moe.h"
#include "kernels/paged.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/sample.h"
#include "kernels/swiglu.h"
#include "kernels/vector.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rl_ops {
	const char *name;
	/* memory of the backend: allocation, zeroing, host <-> backend and
	 * backend <-> backend copies */
	void *(*alloc)(size_t bytes);
	void (*release)(void *p);
	int (*zero)(void *p, size_t bytes, void *stream);
	int (*to_host)(void *host, const void *src, size_t bytes, void *stream);
	int (*from_host)(void *dst, const void *host, size_t bytes, void *stream);
	int (*copy)(void *dst, const void *src, size_t bytes, void *stream);

	rl_embedding_forward_fn embedding_forward;
	rl_embedding_backward_fn embedding_backward;
	rl_rmsnorm_forward_fn rmsnorm_forward;
	rl_rmsnorm_backward_fn rmsnorm_backward;
	rl_rope_forward_fn rope_forward;
	rl_rope_backward_fn rope_backward;
	rl_attention_forward_fn attention_forward;
	rl_attention_backward_fn attention_backward;
	rl_attention_chunks_forward_fn attention_chunks_forward;
	rl_attention_chunks_backward_fn attention_chunks_backward;
	rl_swiglu_forward_fn swiglu_forward;
	rl_swiglu_backward_fn swiglu_backward;
	rl_linear_forward_fn linear_forward;
	rl_linear_backward_fn linear_backward;
	rl_lm_logprobs_forward_fn lm_logprobs_forward;
	rl_lm_logprobs_backward_fn lm_logprobs_backward;
	rl_adamw_step_fn adamw_step;
	rl_add_fn add;
	rl_scale_fn scale;
	rl_sum_squares_fn sum_squares;
	rl_round_bf16_fn round_bf16;
	rl_to_bf16_fn to_bf16;
	rl_from_bf16_fn from_bf16;
	rl_grouped_linear_forward_fn grouped_linear_forward;
	rl_grouped_linear_backward_fn grouped_linear_backward;
	rl_moe_combine_forward_fn moe_combine_forward;
	rl_moe_combine_backward_fn moe_combine_backward;
	/* generation: the paged KV cache, sampling on the backend, and the
	 * batch-invariant twins that make its logprobs equal training's */
	rl_kv_append_fn kv_append;
	rl_attention_paged_fn attention_paged;
	rl_sample_fn sample;
	rl_logits_logprobs_fn logits_logprobs;
	rl_linear_forward_fn linear_forward_invariant;
	rl_lm_logprobs_forward_fn lm_logprobs_forward_invariant;
	rl_grouped_linear_forward_fn grouped_linear_forward_invariant;
};

extern const struct rl_ops rl_ops_cpu;
#ifdef RL_HAVE_CUDA
extern const struct rl_ops rl_ops_cuda;
#endif

/* The name of the first op the table lacks, or NULL when it has them all. */
const char *rl_ops_missing(const struct rl_ops *ops);

#ifdef __cplusplus
}
#endif

#endif
