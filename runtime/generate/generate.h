/* The generation engine: continuous batching over a paged KV cache. Up to
 * max_slots sequences run at once; each engine step feeds every running one
 * its pending tokens (a prompt, or the last token drawn) in one batched
 * forward, samples every next token on the backend, and brings back only
 * the ids and their logprobs; a sequence that stops (EOS, stop token, stop
 * string, token budget) frees its slot for the next waiting prompt at
 * once. Prompts given as the same array (GRPO's samples of one prompt) are
 * prefilled once: a later one shares the first's cache blocks but the last
 * prompt token, which it feeds itself.
 *
 * Token t of prompt i draws its number from Philox at (seed, stream_base +
 * i, t), so with batch_invariant on what a sequence generates depends on
 * nothing but its prompt, the weights and that key: not on max_slots, the
 * order of the prompts, the sharing or the backend's threads. Its logprobs
 * are then the bits the trainer's batch-invariant logprob pass computes.
 * defines: struct rl_gen_params, struct rl_gen_output, rl_generate,
 * rl_gen_outputs_free */
#ifndef RL_GENERATE_GENERATE_H
#define RL_GENERATE_GENERATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/generate/sampler.h"
#include "runtime/generate/stop.h"
#include "runtime/model/model.h"
#include "runtime/tokenizer/tokenizer.h"

struct rl_gen_params {
	struct rl_sampling sampling;
	struct rl_stop stop;
	uint64_t seed;
	/* prompt i draws from stream stream_base + i: a caller that splits one
	 * logical batch into several calls keeps every sequence's stream */
	uint64_t stream_base;
	int max_slots; /* sequences at once; 0: all the prompts */
	/* the multi-turn session only (rl_generate ignores it): sequences
	 * holding a cache at once, running or waiting for their caller (0:
	 * max_slots). Above max_slots, a sequence waiting for its caller
	 * gives up its running slot but keeps its cache, so that max_slots
	 * bounds the batch of a step and this the episodes in flight. */
	int max_in_flight;
	/* the KV cache: tokens per block (0: 16) and blocks (0: enough for
	 * max_slots sequences of the longest length; fewer run at once when
	 * the blocks cannot hold max_slots of them, so it never runs out) */
	int kv_block;
	int kv_blocks;
	/* > 0, on a GPU: the blocks are what this share of the device's memory
	 * leaves (vLLM's gpu_memory_utilization), and fewer sequences run at
	 * once when they cannot all reach their longest length; kv_blocks
	 * wins when both are given */
	double memory_utilization;
	/* the logprobs: log-softmax of logit_scale * logits folded in chunks
	 * of logprob_chunk, as the trainer's pass (0: 1/temperature, or 1 when
	 * greedy; 0: the whole vocabulary) */
	float logit_scale;
	int logprob_chunk;
	bool batch_invariant;
};

struct rl_gen_output {
	int32_t *tokens; /* generated ids, the stopping token included */
	float *logprobs; /* per token: log p under logit_scale * logits, see above */
	size_t n_tokens;
	char *text; /* decoded, cut before a stop string; NULL without a tokenizer */
	size_t text_len;
	enum rl_stop_reason reason;
};

/* tok may be NULL when there are no stop strings; it is needed to produce
 * text. With a tokenizer, only ids it knows are drawn (Qwen's embedding is
 * padded past them). out has n_prompts entries, filled on success (free them with
 * rl_gen_outputs_free). */
int rl_generate(struct rl_model *m, const struct rl_tokenizer *tok, int n_prompts,
                const int32_t *const *prompts, const int *prompt_lens,
                const struct rl_gen_params *p, struct rl_gen_output *out, char *err, size_t errlen);
void rl_gen_outputs_free(struct rl_gen_output *out, int n);

#endif
