/* Token log-probabilities straight from the last hidden state: the LM head
 * product, log-softmax and the gather of each target's log-probability, in
 * fp32, walking the vocabulary in chunks so that memory stays
 * O(n x chunk) and the [n, vocab] logits never exist. The cross-entropy loss
 * is -mean(logprob) and is left to the caller, as are GRPO's weightings.
 *
 * Generation's logprobs equal the logprob pass's bit for bit when both sides
 * use the batch-invariant pair: the fused forward with its chunk logits from
 * the invariant GEMM (linear.h), each logit scale * dot, and
 * rl_logits_logprobs on the logits generation already has (the invariant
 * LM head's, unscaled), folding them in the same chunks with the same code.
 * defines: rl_lm_logprobs_forward_cpu, rl_lm_logprobs_backward_cpu,
 * rl_lm_logprobs_forward_invariant_cpu, rl_logits_logprobs_cpu,
 * rl_lm_logprobs_forward_cuda, rl_lm_logprobs_backward_cuda,
 * rl_lm_logprobs_forward_invariant_cuda, rl_logits_logprobs_cuda,
 * rl_lm_logprobs_work_floats, rl_logits_logprobs_fn, rl_lm_logprobs_types_ok */
#ifndef RL_KERNELS_LOGPROBS_H
#define RL_KERNELS_LOGPROBS_H

#include <stdint.h>

#include "kernels/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rl_lm_logprobs_shape {
	int n;             /* tokens */
	int dim;           /* hidden size */
	int vocab;         /* rows of the LM head */
	int chunk;         /* vocabulary entries per step, 1 .. vocab */
	float logit_scale; /* logits are multiplied by this (1/temperature) */
};

/* Floats of scratch the ops need for a shape, with h, W (and dh) of type
 * t: n * chunk for the chunk's fp32 logits; with bf16, room after them for
 * the chunk's dlogits rounded to bf16 (what the tensor cores take) and the
 * backward's fp32 sum of dh over the chunks, n * dim, which is added to
 * and rounded into a bf16 dh once. */
static inline long rl_lm_logprobs_work_floats(const struct rl_lm_logprobs_shape *s, enum rl_dtype t)
{
	long logits = (long)s->n * (long)s->chunk;

	if (t == RL_F32)
		return logits;
	return logits + (logits + 1) / 2 + (long)s->n * (long)s->dim;
}

/* The type rule of the fused ops: h, W (and dh) of one activation type. */
static inline bool rl_lm_logprobs_types_ok(enum rl_dtype h, enum rl_dtype w)
{
	return rl_act_type_ok(h) && w == h;
}

/* logits = logit_scale * h [n, dim] W^T (W is [vocab, dim]);
 * lse[t] = logsumexp(logits[t, :]); logprob[t] = logits[t, targets[t]] - lse[t].
 * A target of -1 means it is not in this W (a vocabulary split over
 * tensor-parallel ranks): logprob[t] is 0 and only lse[t] counts.
 * h and W share one type, fp32 or bf16 (kernels/buf.h); the logits, lse
 * and logprob are fp32 whatever it is (bf16 products are exact in fp32, so
 * a bf16 call is the fp32 one on the same values).
 * Returns -1 on bad arguments, types, or a target outside [-1, vocab). */
typedef int (*rl_lm_logprobs_forward_fn)(float *logprob, float *lse, struct rl_cbuf h,
                                         struct rl_cbuf w, const int32_t *targets,
                                         const struct rl_lm_logprobs_shape *shape, float *work,
                                         void *stream);
/* Given dlogprob [n] (the loss's gradient with respect to each logprob),
 * adds dh += dlogits W and dw += dlogits^T h (either may be NULL) where
 * dlogits[t, v] = logit_scale * dlogprob[t] * ([v == targets[t]] - softmax[t, v]),
 * recomputing the logits chunk by chunk from lse, which may be the whole
 * vocabulary's when W is one rank's slice of it (targets -1: no one-hot
 * term). dh has h's type; dw is fp32 (main_grad). With bf16 h and W each
 * chunk's dlogits are rounded to bf16 before the two products (the tensor
 * cores' operand; the CPU rounds them the same), dw sums them in fp32, and
 * dh's fp32 sum over the chunks is added to dh and rounded once. */
typedef int (*rl_lm_logprobs_backward_fn)(struct rl_buf dh, float *dw, const float *dlogprob,
                                          struct rl_cbuf h, struct rl_cbuf w,
                                          const int32_t *targets, const float *lse,
                                          const struct rl_lm_logprobs_shape *shape, float *work,
                                          void *stream);

/* logprob[t] and lse[t] as the invariant fused forward computes them, from
 * logits [n, ld] (the first shape->vocab of each row; shape->dim is not
 * read) already computed: each is multiplied by logit_scale, then folded in
 * chunks of shape->chunk. targets in [-1, vocab). work: n * chunk floats. */
typedef int (*rl_logits_logprobs_fn)(float *logprob, float *lse, const float *logits, int ld,
                                     const int32_t *targets,
                                     const struct rl_lm_logprobs_shape *shape, float *work,
                                     void *stream);

int rl_lm_logprobs_forward_cpu(float *logprob, float *lse, struct rl_cbuf h, struct rl_cbuf w,
                               const int32_t *targets, const struct rl_lm_logprobs_shape *shape,
                               float *work, void *stream);
int rl_lm_logprobs_backward_cpu(struct rl_buf dh, float *dw, const float *dlogprob,
                                struct rl_cbuf h, struct rl_cbuf w, const int32_t *targets,
                                const float *lse, const struct rl_lm_logprobs_shape *shape,
                                float *work, void *stream);

int rl_lm_logprobs_forward_invariant_cpu(float *logprob, float *lse, struct rl_cbuf h,
                                         struct rl_cbuf w, const int32_t *targets,
                                         const struct rl_lm_logprobs_shape *shape, float *work,
                                         void *stream);
int rl_logits_logprobs_cpu(float *logprob, float *lse, const float *logits, int ld,
                           const int32_t *targets, const struct rl_lm_logprobs_shape *shape,
                           float *work, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA).
 * Pointers, work included, are device memory. The forward checks the
 * targets on the device and reads the verdict back, so it synchronises
 * with the stream once, before its first kernel: a bad target returns -1
 * with nothing written, as on the CPU (and the forward cannot be captured
 * in a CUDA graph). The backward does not synchronise; like the CPU op it
 * does not check the targets, and one outside the vocabulary only drops
 * its one-hot term.
 * Numerics: the logits are fp32 GEMMs (TF32 off) through rl_cuda_gemm;
 * between chunks the running maximum lives in lse and the running sum of
 * exp in logprob (no extra memory: the sum is double within a chunk and
 * rounded to float once per chunk); the target's logit is then its own dot
 * product in double, not the GEMM's entry. expf stands for the CPU's
 * polynomial exp (both within 2 ulps). logprob and lse differ from the CPU
 * op's by the two GEMMs' rounding, about 1e-7 of scale * sum_k |h[t, k]|
 * max|W| in a host emulation, and dh, dw by what that does to the softmax;
 * test_cuda_logprobs.c has the bounds it holds them to.
 * Determinism and batch invariance: every reduction has a fixed order and
 * nothing uses atomics, so a call repeated with the same inputs gives the
 * same bits, as long as cuBLASLt picks the same algorithm. The per-token
 * kernels (the chunk's max and sum of exp, lse, the target's logit,
 * dlogits) read only their token's row, so they do not depend on n; the
 * GEMMs' algorithm is chosen per shape and may change with n, so a token's
 * logits, and everything after them, are not guaranteed the same bits when
 * the other rows of the batch change, and neither is dh. dw sums over the
 * tokens and depends on all of them by definition. */
int rl_lm_logprobs_forward_cuda(float *logprob, float *lse, struct rl_cbuf h, struct rl_cbuf w,
                                const int32_t *targets, const struct rl_lm_logprobs_shape *shape,
                                float *work, void *stream);
int rl_lm_logprobs_backward_cuda(struct rl_buf dh, float *dw, const float *dlogprob,
                                 struct rl_cbuf h, struct rl_cbuf w, const int32_t *targets,
                                 const float *lse, const struct rl_lm_logprobs_shape *shape,
                                 float *work, void *stream);
/* kernels/cuda/logprobs_invariant.cu. Neither checks the targets on the
 * device (no synchronisation: both run inside a captured decode step); a
 * target outside [-1, vocab) gives logprob 0. */
int rl_lm_logprobs_forward_invariant_cuda(float *logprob, float *lse, struct rl_cbuf h,
                                          struct rl_cbuf w, const int32_t *targets,
                                          const struct rl_lm_logprobs_shape *shape, float *work,
                                          void *stream);
int rl_logits_logprobs_cuda(float *logprob, float *lse, const float *logits, int ld,
                            const int32_t *targets, const struct rl_lm_logprobs_shape *shape,
                            float *work, void *stream);

#ifdef __cplusplus
}
#endif

#endif
