/* The generation engine over the model's paged KV-cache step: a scheduler
 * on the host (which sequence runs in which slot, what each feeds next,
 * when each turn stops) around three backend calls per step: the model's
 * forward, the sample op and the logprob op. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/generate/engine.h"
#include "kernels/memory_use.h"
#include "runtime/model/backend.h"

/* A step takes at most this many new tokens (a prompt longer than that
 * goes alone), bounding the activation scratch. */
#define STEP_TOKENS 4096
#define KV_BLOCK    16

static int append(struct rl_gen_engine *e, int s, int32_t token, float logprob)
{
	struct rl_gen_output *o = &e->out[s];

	if (o->n_tokens == e->cap[s]) {
		size_t cap = e->cap[s] ? 2 * e->cap[s] : 64;
		int32_t *t = realloc(o->tokens, cap * sizeof *t);
		if (t)
			o->tokens = t;
		float *l = realloc(o->logprobs, cap * sizeof *l);
		if (l)
			o->logprobs = l;
		if (!t || !l)
			return -1;
		e->cap[s] = cap;
	}
	o->tokens[o->n_tokens] = token;
	o->logprobs[o->n_tokens++] = logprob;
	return 0;
}

static int decode_text(struct rl_gen_engine *e, int s, char *err, size_t errlen)
{
	struct rl_gen_output *o = &e->out[s];

	free(o->text);
	o->text = NULL;
	return rl_tokenizer_decode(e->tok, o->tokens, o->n_tokens, true, &o->text, &o->text_len,
	                           err, errlen);
}

/* Sequence s's new token; returns 1 when its turn stops, 0 when it goes
 * on, -1 on error. Stop strings are looked for in the turn's new text
 * only; the budget is the turn's. */
static int take_token(struct rl_gen_engine *e, int s, int32_t token, float logprob, char *err,
                      size_t errlen)
{
	const struct rl_gen_params *p = e->p;
	struct rl_gen_output *o = &e->out[s];
	bool need_text = e->tok && p->stop.n_stop_strings > 0;
	struct rl_stop stop = p->stop;
	struct rl_stop_hit hit;

	if (append(e, s, token, logprob)) {
		snprintf(err, errlen, "out of memory for generated tokens");
		return -1;
	}
	e->resp[s]++;
	stop.max_new_tokens = e->budget[s];
	if (need_text && decode_text(e, s, err, errlen))
		return -1;
	if (rl_stop_check(&stop, &e->stop_seq[s], token, need_text ? o->text : NULL,
	                  need_text ? o->text_len : 0, &hit, err, errlen))
		return -1;
	if (hit.reason == RL_STOP_NONE)
		return 0;
	o->reason = hit.reason;
	if (e->tok && !need_text && decode_text(e, s, err, errlen))
		return -1;
	if (hit.reason == RL_STOP_STRING) {
		o->text_len = hit.offset;
		o->text[o->text_len] = '\0';
	}
	return 1;
}

static bool same_prompt(const struct rl_gen_engine *e, int a, int b)
{
	return e->prompts[a] == e->prompts[b] && e->lens[a] == e->lens[b];
}

/* A slot holding sequence s's prompt but the last token in its cache: -1
 * when there is none, -2 when one is still to prefill them. A sequence
 * past its prompt still holds it first in its cache. */
static int twin_of(const struct rl_gen_engine *e, int s)
{
	int found = -1;

	for (int j = 0; j < e->n_slots; j++) {
		const struct rl_gen_engine_slot *o = &e->slots[j];

		if (o->seq < 0 || !same_prompt(e, o->seq, s))
			continue;
		if (e->kv->len[j] >= e->lens[s] - 1)
			return j;
		found = -2;
	}
	return found;
}

void rl_gen_engine_add(struct rl_gen_engine *e, int s, const int32_t *prompt, int len,
                       size_t budget)
{
	e->prompts[s] = prompt;
	e->lens[s] = len;
	e->budget[s] = budget;
	e->state[s] = RL_GEN_SEQ_QUEUED;
	e->order[e->n_order++] = s;
}

/* Continued sequence s runs its turn from the next step: it feeds its
 * pending tokens. */
static void start_turn(struct rl_gen_engine *e, int s)
{
	for (int k = 0; k < e->n_slots; k++)
		if (e->slots[k].seq == s) {
			e->slots[k].feed = e->pend[s];
			e->slots[k].n_feed = e->pend_n[s];
		}
	e->state[s] = RL_GEN_SEQ_RUNNING;
	e->running++;
}

int rl_gen_engine_continue(struct rl_gen_engine *e, int s, const int32_t *obs, int n_obs,
                           size_t budget)
{
	struct rl_gen_output *o = &e->out[s];

	if (1 + n_obs > e->pend_cap[s]) {
		int32_t *b = realloc(e->pend[s], (size_t)(1 + n_obs) * sizeof *b);
		if (!b)
			return -1;
		e->pend[s] = b;
		e->pend_cap[s] = 1 + n_obs;
	}
	/* the turn's last token was drawn but never fed: it goes first */
	e->pend[s][0] = e->next[s];
	if (n_obs > 0)
		memcpy(e->pend[s] + 1, obs, (size_t)n_obs * sizeof *obs);
	e->pend_n[s] = 1 + n_obs;
	e->resp[s] += n_obs;
	e->budget[s] = budget;
	e->stop_seq[s] = (struct rl_stop_seq){0};
	o->n_tokens = 0;
	free(o->text);
	o->text = NULL;
	o->text_len = 0;
	o->reason = RL_STOP_NONE;
	if (e->running < e->max_running) {
		start_turn(e, s);
		return 0;
	}
	e->state[s] = RL_GEN_SEQ_READY;
	e->ready[(e->ready_head + e->ready_n++) % e->n] = s;
	return 0;
}

void rl_gen_engine_finish(struct rl_gen_engine *e, int s)
{
	if (e->state[s] == RL_GEN_SEQ_RUNNING)
		e->running--;
	/* a READY one's entry in the ring is skipped when reached */
	if (e->state[s] == RL_GEN_SEQ_RUNNING || e->state[s] == RL_GEN_SEQ_ENDED ||
	    e->state[s] == RL_GEN_SEQ_READY)
		for (int k = 0; k < e->n_slots; k++)
			if (e->slots[k].seq == s) {
				rl_kv_slot_release(e->kv, k);
				e->slots[k] = (struct rl_gen_engine_slot){-1, NULL, 0};
				e->live--;
			}
	e->state[s] = RL_GEN_SEQ_DONE;
}

/* Running places go first to the continued sequences waiting for one, in
 * the order continued (an episode under way finishes, and frees its
 * cache, sooner); then free slots take the queued sequences, in order. A
 * prompt whose twin holds its prefill shares it; one whose twin is still
 * to prefill waits a step for it, and the prompts behind it go ahead. */
int rl_gen_engine_admit(struct rl_gen_engine *e, char *err, size_t errlen)
{
	int k = 0;

	while (e->ready_n > 0 && e->running < e->max_running) {
		int s = e->ready[e->ready_head];

		e->ready_head = (e->ready_head + 1) % e->n;
		e->ready_n--;
		if (e->state[s] == RL_GEN_SEQ_READY)
			start_turn(e, s);
	}
	for (int i = e->waiting; i < e->n_order && e->running < e->max_running; i++) {
		int s = e->order[i], P = e->lens[s], src;

		while (k < e->n_slots && e->slots[k].seq >= 0)
			k++;
		if (k == e->n_slots)
			break;
		if (e->state[s] != RL_GEN_SEQ_QUEUED || (src = twin_of(e, s)) == -2)
			continue;

		struct rl_gen_engine_slot *sl = &e->slots[k];

		sl->seq = s;
		sl->feed = e->prompts[s];
		sl->n_feed = P;
		if (src >= 0 && P > 1) {
			if (rl_kv_slot_share(e->kv, k, src, P - 1, err, errlen))
				return -1;
			sl->feed = e->prompts[s] + P - 1;
			sl->n_feed = 1;
			e->shared += (uint64_t)(P - 1);
		}
		e->state[s] = RL_GEN_SEQ_RUNNING;
		e->live++;
		e->running++;
	}
	while (e->waiting < e->n_order && e->state[e->order[e->waiting]] != RL_GEN_SEQ_QUEUED)
		e->waiting++;
	return 0;
}

bool rl_gen_engine_busy(const struct rl_gen_engine *e)
{
	for (int k = 0; k < e->n_slots; k++)
		if (e->slots[k].seq >= 0 && e->slots[k].n_feed > 0)
			return true;
	if (e->running >= e->max_running)
		return false;
	for (int i = 0; i < e->ready_n; i++)
		if (e->state[e->ready[(e->ready_head + i) % e->n]] == RL_GEN_SEQ_READY)
			return true;
	for (int i = e->waiting; i < e->n_order; i++)
		if (e->state[e->order[i]] == RL_GEN_SEQ_QUEUED)
			return e->live < e->n_slots;
	return false;
}

/* This step's groups: the slots with something to feed, in order, while
 * the token budget lasts (the first always). */
static int plan_step(struct rl_gen_engine *e)
{
	int groups = 0, tokens = 0;

	for (int k = 0; k < e->n_slots; k++) {
		struct rl_gen_engine_slot *sl = &e->slots[k];

		if (sl->seq < 0 || sl->n_feed == 0)
			continue;
		if (groups > 0 && tokens + sl->n_feed > e->kv->max_tokens)
			continue;
		memcpy(e->g_ids + tokens, sl->feed, (size_t)sl->n_feed * sizeof *e->g_ids);
		e->g_slot[groups] = k;
		e->g_count[groups++] = sl->n_feed;
		tokens += sl->n_feed;
	}
	e->fed += (uint64_t)tokens;
	if (groups > e->max_groups)
		e->max_groups = groups;
	return groups;
}

/* The groups' next tokens and their logprobs, drawn and computed on the
 * backend, read back. A sequence's token at response position t draws
 * from Philox at (seed, stream_base + s, t). */
static int sample_step(struct rl_gen_engine *e, int groups, const float *logits, char *err,
                       size_t errlen)
{
	const struct rl_ops *ops = e->m->ops;
	int V = e->m->cfg.vocab_size;
	struct rl_lm_logprobs_shape lp = e->lp;

	for (int g = 0; g < groups; g++) {
		int s = e->slots[e->g_slot[g]].seq;

		e->counters[2 * g] = (int64_t)(e->p->stream_base + (uint64_t)s);
		e->counters[2 * g + 1] = (int64_t)e->resp[s];
	}
	lp.n = groups;
	if (ops->from_host(e->d_counters, e->counters, (size_t)groups * 2 * sizeof(int64_t),
	                   NULL) ||
	    ops->sample(e->d_tokens, logits, groups, e->sample_vocab, V, &e->sp, e->d_counters,
	                NULL) ||
	    ops->to_host(e->tokens, e->d_tokens, (size_t)groups * sizeof(int32_t), NULL)) {
		snprintf(err, errlen, "sampling on the %s backend failed", ops->name);
		return -1;
	}
	/* under tensor parallelism as the logprob pass computes them: each
	 * rank's slice of the vocabulary, then combined */
	if (e->m->shard.tp.size > 1)
		return rl_model_decode_logprobs_tp(e->m, e->kv, groups, e->tokens, lp.logit_scale,
		                                   lp.chunk, e->logprobs, err, errlen);
	if (ops->logits_logprobs(e->d_logprobs, e->d_lse, logits, V, e->d_tokens, &lp, e->d_work,
	                         NULL) ||
	    ops->to_host(e->logprobs, e->d_logprobs, (size_t)groups * sizeof(float), NULL)) {
		snprintf(err, errlen, "logprobs on the %s backend failed", ops->name);
		return -1;
	}
	return 0;
}

int rl_gen_engine_step(struct rl_gen_engine *e, int *ended, int *n_ended, char *err, size_t errlen)
{
	const float *logits;
	int groups = plan_step(e);

	if (n_ended)
		*n_ended = 0;
	if (groups == 0)
		return 0;
	e->steps++;
	if (rl_model_decode(e->m, e->kv, groups, e->g_slot, e->g_count, e->g_ids, &logits, err,
	                    errlen) ||
	    sample_step(e, groups, logits, err, errlen))
		return -1;
	for (int g = 0; g < groups; g++) {
		int k = e->g_slot[g], s = e->slots[k].seq, stop;

		if (e->tokens[g] < 0 || e->tokens[g] >= e->sample_vocab) {
			snprintf(err, errlen,
			         "sequence %d, token %zu: the logits are not finite (or overflow "
			         "at temperature %g)",
			         s, e->out[s].n_tokens, (double)e->sp.temperature);
			return -1;
		}
		stop = take_token(e, s, e->tokens[g], e->logprobs[g], err, errlen);
		if (stop < 0)
			return -1;
		e->next[s] = e->tokens[g];
		if (stop && e->one_turn) {
			rl_kv_slot_release(e->kv, k);
			e->slots[k].seq = -1;
			e->state[s] = RL_GEN_SEQ_DONE;
			e->live--;
			e->running--;
			continue;
		}
		if (stop) {
			/* it keeps its slot and its cache, not its running
			 * place; its last token waits */
			e->running--;
			e->slots[k].n_feed = 0;
			e->state[s] = RL_GEN_SEQ_ENDED;
			if (ended)
				ended[(*n_ended)++] = s;
			continue;
		}
		e->slots[k].feed = &e->next[s];
		e->slots[k].n_feed = 1;
	}
	return 0;
}

int rl_gen_engine_check_params(const struct rl_tokenizer *tok, const struct rl_gen_params *p,
                               bool stop_budget, char *err, size_t errlen)
{
	struct rl_stop stop = p->stop;

	if (!stop_budget)
		stop.max_new_tokens = 1;
	if (rl_stop_validate(&stop, err, errlen))
		return -1;
	if (p->stop.n_stop_strings && !tok) {
		snprintf(err, errlen, "stop strings need a tokenizer");
		return -1;
	}
	if (p->max_slots < 0 || p->max_in_flight < 0 || p->kv_block < 0 || p->kv_blocks < 0 ||
	    p->logprob_chunk < 0 || !(p->logit_scale >= 0)) {
		snprintf(err, errlen, "generation: negative slots, block size, blocks or chunk");
		return -1;
	}
	return rl_sampling_check(&p->sampling, err, errlen);
}

void rl_gen_engine_free(struct rl_gen_engine *e)
{
	const struct rl_ops *ops = e->m->ops;

	rl_kv_cache_free(e->m, e->kv);
	if (e->pend)
		for (int s = 0; s < e->n; s++)
			free(e->pend[s]);
	free(e->prompts);
	free(e->lens);
	free(e->stop_seq);
	free(e->cap);
	free(e->budget);
	free(e->resp);
	free(e->next);
	free(e->pend);
	free(e->pend_cap);
	free(e->pend_n);
	free(e->ready);
	free(e->state);
	free(e->order);
	free(e->slots);
	free(e->g_slot);
	free(e->g_count);
	free(e->g_ids);
	free(e->tokens);
	free(e->logprobs);
	free(e->counters);
	rl_ops_release(ops, e->d_tokens);
	rl_ops_release(ops, e->d_counters);
	rl_ops_release(ops, e->d_logprobs);
	rl_ops_release(ops, e->d_lse);
	rl_ops_release(ops, e->d_work);
}

/* The most new tokens one step takes: STEP_TOKENS, but never more than
 * every slot's longest feed at once (what the slots can feed in one
 * step: a small run's scratch is sized by the run, not by the bound, which
 * with a wide MLP is gigabytes), and never less than one whole feed. */
static int step_budget(const struct rl_gen_engine *e, int longest)
{
	int64_t all = (int64_t)e->max_running * longest;
	int budget = all < STEP_TOKENS ? (int)all : STEP_TOKENS;

	return budget > longest ? budget : longest;
}

/* The cache's blocks, and how many sequences run at once: p's count of
 * blocks, or what p's share of the GPU leaves, the slots then cut so that
 * each can reach its longest length (no sequence is ever stopped for want
 * of blocks); otherwise enough for every slot. */
static int size_cache(struct rl_gen_engine *e, int block, int max_len, int budget, int *blocks,
                      char *err, size_t errlen)
{
	const struct rl_gen_params *p = e->p;
	int per_seq = (max_len + block - 1) / block;
	size_t left = 0, per_block = rl_kv_block_bytes(e->m, block);
	int64_t can = p->kv_blocks;

	*blocks = 0;
	if (can <= 0 && p->memory_utilization > 0) {
		switch (rl_backend_memory_left(e->m->base_ops, p->memory_utilization, &left)) {
		case 0:
			return 0; /* host memory: the share means nothing here */
		case 1:
			break;
		default:
			snprintf(err, errlen,
			         "generation: the %s backend cannot say its free memory",
			         e->m->ops->name);
			return -1;
		}
		size_t scratch = rl_kv_scratch_bytes(e->m, e->n_slots, budget);
		left = left > scratch ? left - scratch : 0;
		can = (int64_t)(left / per_block);
		if (can < per_seq) {
			snprintf(
			    err, errlen,
			    "policy.generation.gpu_memory_utilization %g leaves %.2f GB for the "
			    "KV cache: one sequence of %d tokens needs %.2f GB",
			    p->memory_utilization, (double)left / 1e9, max_len,
			    (double)per_seq * (double)per_block / 1e9);
			return -1;
		}
	}
	if (can <= 0 || can >= rl_kv_blocks_for(e->n_slots, max_len, block))
		return 0;
	if (can < per_seq) {
		snprintf(
		    err, errlen,
		    "generation: a KV cache of %lld blocks of %d tokens cannot hold one sequence "
		    "of %d tokens",
		    (long long)can, block, max_len);
		return -1;
	}
	*blocks = (int)can;
	if (can / per_seq < e->n_slots)
		e->n_slots = (int)(can / per_seq);
	return 0;
}

int rl_gen_engine_init(struct rl_gen_engine *e, int max_len, int longest_feed, char *err,
                       size_t errlen)
{
	const struct rl_model *m = e->m;
	const struct rl_ops *ops = m->ops;
	const struct rl_gen_params *p = e->p;
	int V = m->cfg.vocab_size, S, blocks, n = e->n;
	int budget = step_budget(e, longest_feed);
	int block = p->kv_block ? p->kv_block : KV_BLOCK;
	bool greedy = p->sampling.temperature < RL_SAMPLING_GREEDY_EPS;

	if (size_cache(e, block, max_len, budget, &blocks, err, errlen))
		return -1;
	S = e->n_slots;
	if (e->max_running > S)
		e->max_running = S;
	if (budget < S)
		budget = S;
	e->sp = (struct rl_sample_params){p->sampling.temperature, p->sampling.top_k,
	                                  p->sampling.top_p, p->seed};
	e->lp = (struct rl_lm_logprobs_shape){
	    .n = 0,
	    .dim = 1,
	    .vocab = V,
	    .chunk = p->logprob_chunk > 0 && p->logprob_chunk < V ? p->logprob_chunk : V,
	    .logit_scale = p->logit_scale > 0 ? p->logit_scale
	                   : greedy           ? 1.0f
	                                      : 1.0f / p->sampling.temperature};
	e->kv = rl_kv_cache_new(m, S, max_len, budget, block, blocks);
	e->prompts = calloc((size_t)n, sizeof *e->prompts);
	e->lens = calloc((size_t)n, sizeof *e->lens);
	e->stop_seq = calloc((size_t)n, sizeof *e->stop_seq);
	e->cap = calloc((size_t)n, sizeof *e->cap);
	e->budget = calloc((size_t)n, sizeof *e->budget);
	e->resp = calloc((size_t)n, sizeof *e->resp);
	e->next = calloc((size_t)n, sizeof *e->next);
	e->pend = calloc((size_t)n, sizeof *e->pend);
	e->pend_cap = calloc((size_t)n, sizeof *e->pend_cap);
	e->pend_n = calloc((size_t)n, sizeof *e->pend_n);
	e->ready = calloc((size_t)n, sizeof *e->ready);
	e->state = calloc((size_t)n, sizeof *e->state);
	e->order = calloc((size_t)n, sizeof *e->order);
	e->slots = malloc((size_t)S * sizeof *e->slots);
	e->g_slot = malloc((size_t)S * sizeof *e->g_slot);
	e->g_count = malloc((size_t)S * sizeof *e->g_count);
	e->g_ids = malloc((size_t)budget * sizeof *e->g_ids);
	e->tokens = malloc((size_t)S * sizeof *e->tokens);
	e->logprobs = malloc((size_t)S * sizeof *e->logprobs);
	e->counters = malloc((size_t)S * 2 * sizeof *e->counters);
	e->d_tokens = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, (size_t)S * sizeof(int32_t));
	e->d_counters = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, (size_t)S * 2 * sizeof(int64_t));
	e->d_logprobs = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, (size_t)S * sizeof(float));
	e->d_lse = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, (size_t)S * sizeof(float));
	e->d_work =
	    rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, (size_t)S * (size_t)e->lp.chunk * sizeof(float));
	if (!e->kv || !e->prompts || !e->lens || !e->stop_seq || !e->cap || !e->budget ||
	    !e->resp || !e->next || !e->pend || !e->pend_cap || !e->pend_n || !e->ready ||
	    !e->state || !e->order || !e->slots || !e->g_slot || !e->g_count || !e->g_ids ||
	    !e->tokens || !e->logprobs || !e->counters || !e->d_tokens || !e->d_counters ||
	    !e->d_logprobs || !e->d_lse || !e->d_work) {
		snprintf(err, errlen,
		         "out of memory for generating %d sequences at once of up to %d tokens", S,
		         max_len);
		return -1;
	}
	for (int k = 0; k < S; k++)
		e->slots[k] = (struct rl_gen_engine_slot){-1, NULL, 0};
	/* Qwen pads the embedding past the tokenizer's ids; a padded id could
	 * not be decoded (or trained on), so it is never drawn. */
	e->sample_vocab = V;
	if (e->tok && rl_tokenizer_vocab_size(e->tok) < V)
		e->sample_vocab = rl_tokenizer_vocab_size(e->tok);
	return 0;
}
