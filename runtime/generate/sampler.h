/* Drawing the next token from a row of logits, with vLLM's (and so NeMo-RL's)
 * sampling parameters and in vLLM's order: temperature, then top-k, then
 * top-p, then one draw.
 * defines: struct rl_sampling, RL_SAMPLING_GREEDY_EPS, rl_sampling_check,
 * rl_sample_work_bytes, rl_sample, rl_sample_support */
#ifndef RL_GENERATE_SAMPLER_H
#define RL_GENERATE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/sample.h"
#include "runtime/base/rng.h"

/* A temperature below this is greedy decoding, as vLLM's _SAMPLING_EPS:
 * dividing by a tinier temperature only overflows. */
#define RL_SAMPLING_GREEDY_EPS RL_SAMPLE_GREEDY_EPS

/* temperature: >= 0; below RL_SAMPLING_GREEDY_EPS (0 in practice) = greedy.
 * top_k: 0 or -1 = off; otherwise keep the top_k highest scaled logits, ties
 *        broken towards the lower id so exactly top_k are kept (vLLM keeps
 *        every token tied with the k-th; with fp32 logits that almost never
 *        differs, and this way top_k = 1 is greedy exactly). >= vocab = off.
 * top_p: in (0, 1]; 1 = off. */
struct rl_sampling {
	float temperature;
	int top_k;
	float top_p;
};

/* -1 with a message naming the field for parameters outside the ranges
 * above, 0 otherwise: rl_sample's check, and the generation engine's
 * before it starts. */
int rl_sampling_check(const struct rl_sampling *s, char *err, size_t errlen);

/* Bytes of scratch rl_sample and rl_sample_support need: 2 * vocab floats
 * (scaled logits, unnormalized probabilities) and vocab int32 (candidate
 * ids). Allocate it with malloc (or aligned_alloc): part of it is used as
 * int32_t. Reuse it across calls; nothing in it survives a call. */
size_t rl_sample_work_bytes(int vocab);

/* Draws *token from logits[0..vocab).
 *
 * Sampling (temperature >= RL_SAMPLING_GREEDY_EPS):
 *   z_i = logits_i / temperature in fp32, p = softmax(z) with the normalizer
 *   summed in double. Ranking is by z descending, then id ascending.
 *   top-k keeps the first top_k tokens of that ranking; top-p then keeps
 *   the smallest prefix of the (top-k) ranking whose probabilities,
 *   renormalized over the top-k set, sum to >= top_p (at least one token).
 *   Exactly one rl_rng_uniform() u is drawn per call, even when only one
 *   token is left, so token t of a sequence always uses the stream's t-th
 *   number; the token is the first of the kept set, in ranking order (id
 *   order when nothing is truncated), whose cumulative mass exceeds
 *   u * (kept mass).
 * Greedy: the argmax of the logits, ties to the lowest id (as torch.argmax);
 *   rng and work may be NULL and no number is drawn.
 *
 * *logprob (may be NULL) is log p(token) under the temperature-scaled FULL
 * softmax, before top-k/top-p truncation: (z_tok - max z) - log(sum exp(z_i -
 * max z)). For greedy it is under the unscaled softmax. This is the quantity
 * the training side recomputes from its own logits, so the two can be
 * compared token by token.
 *
 * Returns -1 with a message for a non-finite logit (NaN, +inf or -inf: mask
 * tokens by shortening vocab, not with -inf), a logit that overflows once
 * divided by the temperature, parameters outside the ranges above, or a
 * missing rng/work when sampling. */
int rl_sample(const float *logits, int vocab, const struct rl_sampling *s, struct rl_rng *rng,
              int32_t *token, float *logprob, float *work, char *err, size_t errlen);

/* The set rl_sample draws from, in the order it walks it: ids[0..*n) (ids
 * has room for vocab). Greedy gives the argmax alone; no truncation gives
 * every id in id order; otherwise the kept tokens in ranking order. For
 * tests and debugging; same errors as rl_sample. */
int rl_sample_support(const float *logits, int vocab, const struct rl_sampling *s, int32_t *ids,
                      int *n, float *work, char *err, size_t errlen);

#endif
