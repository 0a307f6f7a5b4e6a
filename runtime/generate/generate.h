/* Batched generation: prefill every prompt through the KV cache, then decode
 * one token per live sequence per step until each stops on its own (EOS,
 * stop token, stop string, token budget). Sequence i samples from RNG stream
 * stream_base + i of the seed, so its tokens do not depend on the batch it
 * ran in.
 * defines: struct rl_gen_params, struct rl_gen_output, rl_generate,
 * rl_gen_outputs_free */
#ifndef RL_GENERATE_GENERATE_H
#define RL_GENERATE_GENERATE_H

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
};

struct rl_gen_output {
	int32_t *tokens; /* generated ids, the stopping token included */
	float *logprobs; /* per token: see rl_sample */
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
