/* The generation loop over the model's KV-cache step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/generate/generate.h"
#include "runtime/model/kv_cache.h"

/* Prompts are prefilled in groups of at most this many tokens (a prompt
 * longer than that goes alone), bounding the activation scratch. */
#define PREFILL_TOKENS 4096

struct gen_state {
	struct rl_model *m;
	const struct rl_tokenizer *tok;
	const struct rl_gen_params *p;
	struct rl_gen_output *out;
	struct rl_stop_seq *stop_seq;
	struct rl_rng *rng;
	float *work;
	size_t *cap;
	int sample_vocab;
};

static int append(struct gen_state *g, int s, int32_t token, float logprob)
{
	struct rl_gen_output *o = &g->out[s];

	if (o->n_tokens == g->cap[s]) {
		size_t cap = g->cap[s] ? 2 * g->cap[s] : 64;
		int32_t *t = realloc(o->tokens, cap * sizeof *t);
		if (t)
			o->tokens = t;
		float *l = realloc(o->logprobs, cap * sizeof *l);
		if (l)
			o->logprobs = l;
		if (!t || !l)
			return -1;
		g->cap[s] = cap;
	}
	o->tokens[o->n_tokens] = token;
	o->logprobs[o->n_tokens++] = logprob;
	return 0;
}

static int decode_text(struct gen_state *g, int s, char *err, size_t errlen)
{
	struct rl_gen_output *o = &g->out[s];

	free(o->text);
	o->text = NULL;
	return rl_tokenizer_decode(g->tok, o->tokens, o->n_tokens, true, &o->text, &o->text_len,
	                           err, errlen);
}

/* Samples sequence s's next token from its logits row; returns 1 when the
 * sequence stops, 0 when it goes on, -1 on error. */
static int next_token(struct gen_state *g, int s, const float *row, int32_t *token, char *err,
                      size_t errlen)
{
	const struct rl_gen_params *p = g->p;
	struct rl_stop_hit hit;
	float logprob;

	if (rl_sample(row, g->sample_vocab, &p->sampling, &g->rng[s], token, &logprob, g->work, err,
	              errlen))
		return -1;
	if (append(g, s, *token, logprob)) {
		snprintf(err, errlen, "out of memory for generated tokens");
		return -1;
	}
	struct rl_gen_output *o = &g->out[s];
	bool need_text = g->tok && p->stop.n_stop_strings > 0;
	if (need_text && decode_text(g, s, err, errlen))
		return -1;
	if (rl_stop_check(&p->stop, &g->stop_seq[s], *token, need_text ? o->text : NULL,
	                  need_text ? o->text_len : 0, &hit, err, errlen))
		return -1;
	if (hit.reason == RL_STOP_NONE)
		return 0;
	o->reason = hit.reason;
	if (g->tok && !need_text && decode_text(g, s, err, errlen))
		return -1;
	if (hit.reason == RL_STOP_STRING) {
		o->text_len = hit.offset;
		o->text[o->text_len] = '\0';
	}
	return 1;
}

static int prefill(struct gen_state *g, struct rl_kv_cache *kv, int n,
                   const int32_t *const *prompts, const int *lens, int *live, int *n_live,
                   int32_t *next_ids, float *logits, char *err, size_t errlen)
{
	int V = g->m->cfg.vocab_size;
	int *slots = malloc((size_t)n * sizeof *slots),
	    *counts = malloc((size_t)n * sizeof *counts);
	int32_t *ids = malloc((size_t)kv->max_tokens * sizeof *ids);
	int rc = -1;

	if (!slots || !counts || !ids) {
		snprintf(err, errlen, "out of memory for the prefill");
		goto out;
	}
	*n_live = 0;
	for (int first = 0; first < n;) {
		int groups = 0, tokens = 0;

		while (first + groups < n &&
		       (groups == 0 || tokens + lens[first + groups] <= kv->max_tokens)) {
			int s = first + groups;
			memcpy(ids + tokens, prompts[s], (size_t)lens[s] * sizeof *ids);
			slots[groups] = s;
			counts[groups++] = lens[s];
			tokens += lens[s];
		}
		if (rl_model_decode(g->m, kv, groups, slots, counts, ids, logits, err, errlen))
			goto out;
		for (int r = 0; r < groups; r++) {
			int32_t tok;
			int stop = next_token(g, slots[r], logits + (size_t)r * (size_t)V, &tok,
			                      err, errlen);
			if (stop < 0)
				goto out;
			if (!stop) {
				live[*n_live] = slots[r];
				next_ids[(*n_live)++] = tok;
			}
		}
		first += groups;
	}
	rc = 0;
out:
	free(slots);
	free(counts);
	free(ids);
	return rc;
}

int rl_generate(struct rl_model *m, const struct rl_tokenizer *tok, int n_prompts,
                const int32_t *const *prompts, const int *prompt_lens,
                const struct rl_gen_params *p, struct rl_gen_output *out, char *err, size_t errlen)
{
	struct gen_state g = {m, tok, p, out, NULL, NULL, NULL, NULL, m->cfg.vocab_size};
	struct rl_kv_cache *kv = NULL;
	int *live = NULL, *ones = NULL, n_live = 0, max_prompt = 0, rc = -1;
	int32_t *next_ids = NULL;
	float *logits = NULL;

	memset(out, 0, (size_t)n_prompts * sizeof *out);
	if (n_prompts <= 0) {
		snprintf(err, errlen, "no prompts");
		return -1;
	}
	if (rl_stop_validate(&p->stop, err, errlen))
		return -1;
	if (p->stop.n_stop_strings && !tok) {
		snprintf(err, errlen, "stop strings need a tokenizer");
		return -1;
	}
	for (int s = 0; s < n_prompts; s++) {
		if (prompt_lens[s] <= 0) {
			snprintf(err, errlen, "prompt %d is empty", s);
			return -1;
		}
		if (prompt_lens[s] > max_prompt)
			max_prompt = prompt_lens[s];
	}
	size_t max_len = (size_t)max_prompt + p->stop.max_new_tokens;
	if (max_len > (size_t)m->cfg.max_position_embeddings) {
		snprintf(err, errlen,
		         "prompt (%d tokens) plus max_new_tokens (%zu) exceeds the model's "
		         "max_position_embeddings (%d)",
		         max_prompt, p->stop.max_new_tokens, m->cfg.max_position_embeddings);
		return -1;
	}
	int budget = max_prompt > PREFILL_TOKENS ? max_prompt : PREFILL_TOKENS;
	if (budget < n_prompts)
		budget = n_prompts;
	kv = rl_kv_cache_new(m, n_prompts, (int)max_len, budget);
	g.stop_seq = calloc((size_t)n_prompts, sizeof *g.stop_seq);
	g.rng = calloc((size_t)n_prompts, sizeof *g.rng);
	g.cap = calloc((size_t)n_prompts, sizeof *g.cap);
	g.work = malloc(rl_sample_work_bytes(m->cfg.vocab_size));
	live = malloc((size_t)n_prompts * sizeof *live);
	ones = malloc((size_t)n_prompts * sizeof *ones);
	next_ids = malloc((size_t)n_prompts * sizeof *next_ids);
	logits = malloc((size_t)n_prompts * (size_t)m->cfg.vocab_size * sizeof *logits);
	if (!kv || !g.stop_seq || !g.rng || !g.cap || !g.work || !live || !ones || !next_ids ||
	    !logits) {
		snprintf(err, errlen,
		         "out of memory for generating %d sequences of up to %zu tokens", n_prompts,
		         max_len);
		goto out;
	}
	/* Qwen pads the embedding past the tokenizer's ids; a padded id could not
	 * be decoded (or trained on), so it is never drawn. */
	if (tok && rl_tokenizer_vocab_size(tok) < g.sample_vocab)
		g.sample_vocab = rl_tokenizer_vocab_size(tok);
	for (int s = 0; s < n_prompts; s++) {
		rl_rng_seed(&g.rng[s], p->seed, p->stream_base + (uint64_t)s);
		ones[s] = 1;
	}
	if (prefill(&g, kv, n_prompts, prompts, prompt_lens, live, &n_live, next_ids, logits, err,
	            errlen))
		goto out;
	while (n_live > 0) {
		int still = 0;

		if (rl_model_decode(m, kv, n_live, live, ones, next_ids, logits, err, errlen))
			goto out;
		for (int r = 0; r < n_live; r++) {
			int32_t tok_id;
			int stop =
			    next_token(&g, live[r], logits + (size_t)r * (size_t)m->cfg.vocab_size,
			               &tok_id, err, errlen);
			if (stop < 0)
				goto out;
			if (!stop) {
				live[still] = live[r];
				next_ids[still++] = tok_id;
			}
		}
		n_live = still;
	}
	rc = 0;
out:
	if (rc)
		rl_gen_outputs_free(out, n_prompts);
	rl_kv_cache_free(m, kv);
	free(g.stop_seq);
	free(g.rng);
	free(g.cap);
	free(g.work);
	free(live);
	free(ones);
	free(next_ids);
	free(logits);
	return rc;
}

void rl_gen_outputs_free(struct rl_gen_output *out, int n)
{
	for (int s = 0; s < n; s++) {
		free(out[s].tokens);
		free(out[s].logprobs);
		free(out[s].text);
		memset(&out[s], 0, sizeof out[s]);
	}
}
