#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/prompt.h"
#include "runtime/generate/generate.h"
#include "runtime/model/kv_cache.h"
#include "runtime/rollout/generate.h"
#include "runtime/rollout/share.h"

float rl_gen_logit_scale(const struct rl_config *cfg)
{
	double t = cfg->policy.generation.temperature;

	return t >= RL_SAMPLING_GREEDY_EPS ? (float)(1.0 / t) : 1.0f;
}

int rl_gen_logprob_chunk(const struct rl_config *cfg)
{
	return cfg->policy.logprob_chunk_size.set ? (int)cfg->policy.logprob_chunk_size.value
	                                          : 4096;
}

int rl_gen_settings_init(struct rl_gen_settings *g, const struct rl_config *cfg,
                         const struct rl_model *m, char *err, size_t errlen)
{
	const struct rl_cfg_policy *p = &cfg->policy;
	const struct rl_int_list *extra = &p->generation.stop_token_ids;
	const struct rl_model_config *mc = &m->cfg;
	/* resolved by the config: max_total_sequence_length when null */
	int64_t limit = cfg->data.max_input_seq_length.value;

	memset(g, 0, sizeof *g);
	g->sampling =
	    (struct rl_sampling){(float)p->generation.temperature,
	                         p->generation.top_k.set ? (int)p->generation.top_k.value : -1,
	                         (float)p->generation.top_p};
	g->stop_strings = (const char *const *)p->generation.stop_strings.v;
	g->n_stop_strings = p->generation.stop_strings.n;
	g->max_new_tokens = p->generation.max_new_tokens.value;
	/* at least one token must be left to generate */
	g->max_input_tokens =
	    limit > p->max_total_sequence_length - 1 ? p->max_total_sequence_length - 1 : limit;
	g->max_total_tokens = p->max_total_sequence_length;
	g->batch_size = (int)p->generation_batch_size;
	g->overlong_filtering = cfg->grpo.overlong_filtering;
	g->batch_invariant = p->generation.batch_invariant;
	g->kv_cache_blocks =
	    p->generation.kv_cache_blocks.set ? (int)p->generation.kv_cache_blocks.value : 0;
	g->memory_utilization = p->generation.gpu_memory_utilization.set
	                            ? p->generation.gpu_memory_utilization.value
	                            : 0;
	g->logit_scale = rl_gen_logit_scale(cfg);
	g->logprob_chunk = rl_gen_logprob_chunk(cfg);
	{
		/* a chat template writes the prompts' special tokens (NeMo-RL
		 * tokenizes them with add_special_tokens=False); plain prompts get
		 * the post-processor's, as `rlrun tokenize --text` shows */
		bool templated;

		if (rl_prompt_chat_template_applies(cfg, &templated, err, errlen))
			return -1;
		g->add_special_tokens = !templated;
	}

	g->n_eos_ids = (size_t)mc->n_eos;
	g->n_stop_ids = g->n_eos_ids + extra->n;
	g->stop_ids = calloc(g->n_stop_ids + 1, sizeof *g->stop_ids);
	if (!g->stop_ids) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < g->n_eos_ids; i++)
		g->stop_ids[i] = mc->eos_token_ids[i];
	for (size_t i = 0; i < extra->n; i++) {
		if (extra->v[i] >= mc->vocab_size) {
			snprintf(err, errlen,
			         "policy.generation.stop_token_ids[%zu]: %lld is past the model's "
			         "vocabulary of %d",
			         i, (long long)extra->v[i], mc->vocab_size);
			return -1;
		}
		g->stop_ids[g->n_eos_ids + i] = (int32_t)extra->v[i];
	}
	if (g->n_eos_ids == 0)
		fprintf(stderr,
		        "rlrun train: warning: %s/config.json names no eos_token_id; "
		        "responses end only at the token budget or a stop\n",
		        m->dir);
	return 0;
}

void rl_gen_settings_free(struct rl_gen_settings *g)
{
	free(g->stop_ids);
	memset(g, 0, sizeof *g);
}

int rl_gen_encode_prompts(const struct rl_tokenizer *tok, const struct rl_gen_settings *g,
                          struct rl_rollout *r, int32_t **ids, int *lens, int64_t *truncated,
                          char *err, size_t errlen)
{
	for (int k = 0; k < r->n_groups; k++) {
		size_t n;

		if (rl_tokenizer_encode(tok, r->prompts[k], strlen(r->prompts[k]),
		                        g->add_special_tokens, &ids[k], &n, err, errlen))
			return -1;
		if (n == 0) {
			snprintf(err, errlen, "problem %d of the step encodes to no tokens", k);
			return -1;
		}
		if ((int64_t)n > g->max_input_tokens) {
			n = (size_t)g->max_input_tokens;
			(*truncated)++;
			for (int i = 0; i < r->group_size; i++)
				r->s[k * r->group_size + i].loss_mult = 0;
		}
		lens[k] = (int)n;
	}
	return 0;
}

void rl_gen_params_of(const struct rl_gen_settings *g, uint64_t seed, uint64_t stream_base,
                      size_t max_new_tokens, struct rl_gen_params *p)
{
	*p = (struct rl_gen_params){
	    .sampling = g->sampling,
	    .stop = {.eos_ids = g->stop_ids,
	             .n_eos_ids = g->n_eos_ids,
	             .stop_token_ids = g->stop_ids + g->n_eos_ids,
	             .n_stop_token_ids = g->n_stop_ids - g->n_eos_ids,
	             .stop_strings = g->stop_strings,
	             .n_stop_strings = g->n_stop_strings,
	             .max_new_tokens = max_new_tokens},
	    .seed = seed,
	    .stream_base = stream_base,
	    .max_slots = g->batch_size,
	    .kv_blocks = g->kv_cache_blocks,
	    .memory_utilization = g->memory_utilization,
	    .logit_scale = g->logit_scale,
	    .logprob_chunk = g->logprob_chunk,
	    .batch_invariant = g->batch_invariant,
	};
}

static int take_output(struct rl_sample *s, const int32_t *prompt, int prompt_len,
                       struct rl_gen_output *o)
{
	s->prompt_len = prompt_len;
	s->len = prompt_len + (int)o->n_tokens;
	s->ids = malloc((size_t)s->len * sizeof *s->ids);
	s->prev_lp = calloc(o->n_tokens + 1, sizeof *s->prev_lp);
	s->ref_lp = calloc(o->n_tokens + 1, sizeof *s->ref_lp);
	if (!s->ids || !s->prev_lp || !s->ref_lp)
		return -1;
	memcpy(s->ids, prompt, (size_t)prompt_len * sizeof *s->ids);
	memcpy(s->ids + prompt_len, o->tokens, o->n_tokens * sizeof *s->ids);
	s->gen_lp = o->logprobs;
	o->logprobs = NULL;
	s->response = o->text;
	o->text = NULL;
	s->truncated = o->reason == RL_STOP_MAX_TOKENS;
	return 0;
}

int rl_rollout_generate_share(struct rl_model *m, const struct rl_tokenizer *tok,
                              const struct rl_gen_settings *g, struct rl_comm *dp,
                              struct rl_rollout *r, uint64_t seed, int64_t *prompts_truncated,
                              char *err, size_t errlen)
{
	int32_t **ids = calloc((size_t)r->n_groups, sizeof *ids);
	int *lens = calloc((size_t)r->n_groups, sizeof *lens);
	const int32_t **seq_prompt = calloc((size_t)r->n, sizeof *seq_prompt);
	int *seq_len = calloc((size_t)r->n, sizeof *seq_len);
	struct rl_gen_output *out = calloc((size_t)r->n, sizeof *out);
	int rc = -1, longest = 0, lo, hi;

	rl_share_range(dp, r->n, &lo, &hi);
	if (!ids || !lens || !seq_prompt || !seq_len || !out) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	if (rl_gen_encode_prompts(tok, g, r, ids, lens, prompts_truncated, err, errlen))
		goto done;
	for (int i = 0; i < r->n; i++) {
		seq_prompt[i] = ids[r->s[i].group];
		seq_len[i] = lens[r->s[i].group];
		if (seq_len[i] > longest)
			longest = seq_len[i];
	}
	int64_t budget = g->max_total_tokens - longest;
	if (g->max_new_tokens < budget)
		budget = g->max_new_tokens;
	struct rl_gen_params p;
	rl_gen_params_of(g, seed, (uint64_t)lo, (size_t)budget, &p);
	if (hi > lo &&
	    rl_generate(m, tok, hi - lo, seq_prompt + lo, seq_len + lo, &p, out + lo, err, errlen))
		goto done;
	/* under expert parallelism, the ranks of ep that are done serve the
	 * others' experts until every one is */
	if (rl_model_decode_drain(m, err, errlen))
		goto done;
	for (int i = lo; i < hi; i++) {
		if (take_output(&r->s[i], seq_prompt[i], seq_len[i], &out[i])) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		if (g->overlong_filtering && r->s[i].truncated)
			r->s[i].loss_mult = 0;
	}
	rc = 0;
done:
	if (out)
		rl_gen_outputs_free(out, r->n);
	for (int k = 0; ids && k < r->n_groups; k++)
		free(ids[k]);
	free(ids);
	free(lens);
	free(seq_prompt);
	free(seq_len);
	free(out);
	return rc;
}
