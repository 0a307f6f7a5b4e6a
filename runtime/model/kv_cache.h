/* The key/value cache of generation and the forward pass that uses it: a
 * step feeds each of several sequences some new tokens (the whole prompt at
 * prefill, one token per decode step), appends their keys and values to the
 * sequence's cache and returns the logits of each sequence's last new token.
 * Under expert parallelism every rank of an ep group runs each sparse
 * layer's exchange together: a rank decodes in step with the others, and
 * once it has nothing left it serves their tokens routed to its experts
 * (rl_model_decode_drain) until every rank is done.
 * defines: struct rl_kv_cache, rl_kv_cache_new, rl_kv_cache_free,
 * rl_model_decode, rl_model_decode_drain */
#ifndef RL_MODEL_KV_CACHE_H
#define RL_MODEL_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/model/model.h"

struct rl_kv_cache {
	int n_slots;    /* sequences it holds */
	int max_len;    /* tokens per sequence */
	int max_tokens; /* new tokens per step, all sequences together */
	int *len;       /* host: tokens cached per slot */
	float **k, **v; /* per layer: [n_slots, max_len, this rank's kv heads, head_dim] */
	struct rl_decode_scratch *scratch;
	/* a bf16 model's weights were rounded at the cache's first decode:
	 * they do not change while a cache is in use */
	bool weights_rounded;
};

struct rl_kv_cache *rl_kv_cache_new(const struct rl_model *m, int n_slots, int max_len,
                                    int max_tokens);
void rl_kv_cache_free(const struct rl_model *m, struct rl_kv_cache *kv);

/* Feeds n_new[g] tokens (ids, concatenated over groups) to cache slot
 * slots[g] for each of n_groups groups; a slot appears at most once.
 * logits_host receives [n_groups, vocab]. */
int rl_model_decode(struct rl_model *m, struct rl_kv_cache *kv, int n_groups, const int *slots,
                    const int *n_new, const int32_t *ids, float *logits_host, char *err,
                    size_t errlen);
/* After this rank's last rl_model_decode of a generation (or none): under
 * expert parallelism, takes part in the other ranks' steps, with no
 * tokens of its own, until no rank of ep decodes any more. Every rank of
 * ep must call it, at the end of the same generation; nothing without
 * expert parallelism. In ep_idle.c, beside the training's idle passes. */
int rl_model_decode_drain(struct rl_model *m, char *err, size_t errlen);

#endif
