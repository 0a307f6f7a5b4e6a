/* The paged key/value cache of generation and the forward pass that uses it.
 *
 * The cache is a pool of blocks of `block` token rows per layer; each slot
 * (a sequence being generated) owns a row of the block table naming its
 * blocks in order. A slot can start from another slot's first tokens
 * (rl_kv_slot_share: GRPO's samples of one prompt share its prefill): the
 * blocks are shared, counted, and copied on the first write into a shared
 * one. A step feeds each of several slots some new tokens (a prompt at
 * prefill, one token per decode step), appends their keys and values with
 * one op per layer, runs attention of all of the step's tokens with one op
 * per layer, and leaves the logits of each slot's last new token on the
 * backend for the sampler.
 *
 * Under expert parallelism every rank of an ep group runs each sparse
 * layer's exchange together: a rank decodes in step with the others, and
 * once it has nothing left it serves their tokens routed to its experts
 * (rl_model_decode_drain) until every rank is done.
 * defines: struct rl_kv_cache, rl_kv_cache_new, rl_kv_cache_free,
 * rl_kv_blocks_for, rl_kv_block_bytes, rl_kv_scratch_bytes, rl_kv_slot_release, rl_kv_slot_share,
 * rl_model_decode, rl_model_decode_logprobs_tp, rl_model_decode_drain */
#ifndef RL_MODEL_KV_CACHE_H
#define RL_MODEL_KV_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/model/model.h"

struct rl_kv_cache {
	int n_slots;         /* sequences it holds at once */
	int max_len;         /* tokens per sequence */
	int max_tokens;      /* new tokens per step, all sequences together */
	int block;           /* token rows per block */
	int n_blocks;        /* blocks in the pool */
	int max_blocks;      /* blocks per slot: ceil(max_len / block) */
	int *len;            /* host: tokens cached per slot */
	int *held;           /* host: blocks in each slot's table row */
	int32_t *table_host; /* [n_slots, max_blocks] block ids */
	int *refs;           /* host: slots holding each block */
	int32_t *free_ids;   /* host: a stack of free blocks */
	int n_free;
	int32_t *table; /* backend: table_host, uploaded when changed */
	bool table_dirty;
	float **k, **v; /* per layer: [n_blocks * block, this rank's kv heads, head_dim] */
	struct rl_decode_scratch *scratch;
	/* a bf16 model's weights were rounded at the cache's first decode:
	 * they do not change while a cache is in use */
	bool weights_rounded;
};

/* Blocks of `block` rows that n_slots sequences of max_len tokens can need
 * at most, each with its own copy: what n_blocks 0 means below. */
int64_t rl_kv_blocks_for(int n_slots, int max_len, int block);

/* Bytes of one block (keys and values, every layer of this rank), and of
 * the rest a cache holds for n_slots slots and max_tokens tokens a step
 * (activations, logits): what sizing a cache from memory needs. */
size_t rl_kv_block_bytes(const struct rl_model *m, int block);
size_t rl_kv_scratch_bytes(const struct rl_model *m, int n_slots, int max_tokens);

/* n_blocks <= 0: rl_kv_blocks_for(n_slots, max_len, block). The pool
 * never runs out while every slot stays within max_len and n_blocks is at
 * least that; a smaller pool makes rl_model_decode fail with a message
 * when it does. NULL when out of memory or given a size <= 0. */
struct rl_kv_cache *rl_kv_cache_new(const struct rl_model *m, int n_slots, int max_len,
                                    int max_tokens, int block, int n_blocks);
void rl_kv_cache_free(const struct rl_model *m, struct rl_kv_cache *kv);

/* The slot holds nothing any more; its blocks go back to the pool once no
 * other slot shares them. */
void rl_kv_slot_release(struct rl_kv_cache *kv, int slot);
/* Empty slot dst starts with the first n tokens of slot src (n <= src's
 * length), sharing src's blocks. */
int rl_kv_slot_share(struct rl_kv_cache *kv, int dst, int src, int n, char *err, size_t errlen);

/* Feeds n_new[g] tokens (ids, concatenated over groups) to cache slot
 * slots[g] for each of n_groups groups; a slot appears at most once.
 * *logits gets the backend's [n_groups, vocab] logits of each group's last
 * new token, the whole vocabulary on every rank and stage; valid until the
 * next call. */
int rl_model_decode(struct rl_model *m, struct rl_kv_cache *kv, int n_groups, const int *slots,
                    const int *n_new, const int32_t *ids, const float **logits, char *err,
                    size_t errlen);
/* Under tensor parallelism: the logprobs of tokens[g] (host) under the
 * last rl_model_decode's logits, each rank folding its slice of the
 * vocabulary in chunks of chunk, combined as the logprob pass combines
 * them (rl_tp_combine_logprobs), so that the two agree to the bit.
 * lp_host [n_groups] on every rank and stage. Collective over tp (and pp). */
int rl_model_decode_logprobs_tp(struct rl_model *m, struct rl_kv_cache *kv, int n_groups,
                                const int32_t *tokens, float logit_scale, int chunk, float *lp_host,
                                char *err, size_t errlen);
/* After this rank's last rl_model_decode of a generation (or none): under
 * expert parallelism, takes part in the other ranks' steps, with no
 * tokens of its own, until no rank of ep decodes any more. Every rank of
 * ep must call it, at the end of the same generation; nothing without
 * expert parallelism. In ep_idle.c, beside the training's idle passes. */
int rl_model_decode_drain(struct rl_model *m, char *err, size_t errlen);

#endif
