/* Prefill and decode through the KV cache. The token-wise work (norms,
 * projections, MLP) runs on all new tokens of all sequences as one batch;
 * only attention goes sequence by sequence, each against its own cache. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/model/forward_util.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/moe.h"

struct rl_decode_scratch {
	int32_t *ids, *pos;
	float *x, *xn, *q, *k, *v, *qn, *kn, *att, *gate, *up, *h, *last, *logits;
	int32_t *pos_host;      /* host: positions, then ids as this rank's vocabulary rows */
	int *first;             /* host: first token of each group */
	struct rl_moe_acts moe; /* every sparse layer's in turn: no backward pass */
};

static void release_all(const struct rl_model *m, struct rl_kv_cache *kv)
{
	const struct rl_ops *ops = m->ops;
	struct rl_decode_scratch *s = kv->scratch;

	if (s) {
		void *dev[] = {s->ids, s->pos, s->x,    s->xn, s->q, s->k,    s->v,     s->qn,
		               s->kn,  s->att, s->gate, s->up, s->h, s->last, s->logits};
		for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
			ops->release(dev[i]);
		free(s->pos_host);
		free(s->first);
		rl_moe_acts_free(ops, &s->moe);
		free(s);
	}
	for (int l = 0; kv->k && l < m->cfg.n_layers; l++) {
		ops->release(kv->k[l]);
		ops->release(kv->v[l]);
	}
	free(kv->k);
	free(kv->v);
	free(kv->len);
}

struct rl_kv_cache *rl_kv_cache_new(const struct rl_model *m, int n_slots, int max_len,
                                    int max_tokens)
{
	const struct rl_model_config *c = &m->cfg;
	const struct rl_ops *ops = m->ops;
	struct rl_kv_cache *kv = calloc(1, sizeof *kv);
	size_t f = sizeof(float), T = (size_t)max_tokens, d = (size_t)c->hidden_size;
	const struct rl_model_shard *sh = &m->shard;
	size_t kvd = (size_t)sh->n_kv_heads * (size_t)c->head_dim;
	size_t qd = (size_t)sh->n_heads * (size_t)c->head_dim, inter = (size_t)sh->intermediate;
	size_t per_layer = (size_t)n_slots * (size_t)max_len * kvd * f;
	struct rl_decode_scratch *s;
	int ok = 1;

	if (!kv || n_slots <= 0 || max_len <= 0 || max_tokens <= 0) {
		free(kv);
		return NULL;
	}
	kv->n_slots = n_slots;
	kv->max_len = max_len;
	kv->max_tokens = max_tokens;
	kv->len = calloc((size_t)n_slots, sizeof *kv->len);
	kv->k = calloc((size_t)c->n_layers, sizeof *kv->k);
	kv->v = calloc((size_t)c->n_layers, sizeof *kv->v);
	kv->scratch = s = calloc(1, sizeof *s);
	if (!kv->len || !kv->k || !kv->v || !s) {
		release_all(m, kv);
		free(kv);
		return NULL;
	}
	for (int l = sh->first_layer; l < sh->first_layer + sh->n_layers; l++) {
		kv->k[l] = ops->alloc(per_layer);
		kv->v[l] = ops->alloc(per_layer);
		ok &= kv->k[l] && kv->v[l];
	}
	s->ids = ops->alloc(T * sizeof(int32_t));
	s->pos = ops->alloc(T * sizeof(int32_t));
	s->x = ops->alloc(T * d * f);
	s->xn = ops->alloc(T * d * f);
	s->q = ops->alloc(T * qd * f);
	s->qn = ops->alloc(T * qd * f);
	s->k = ops->alloc(T * kvd * f);
	s->kn = ops->alloc(T * kvd * f);
	s->v = ops->alloc(T * kvd * f);
	s->att = ops->alloc(T * qd * f);
	s->gate = ops->alloc(T * inter * f);
	s->up = ops->alloc(T * inter * f);
	s->h = ops->alloc(T * inter * f);
	s->last = ops->alloc((size_t)n_slots * d * f);
	s->logits = ops->alloc((size_t)n_slots * (size_t)sh->vocab * f);
	s->pos_host = malloc(2 * T * sizeof(int32_t)); /* positions, then local ids */
	s->first = malloc(((size_t)n_slots + 1) * sizeof(int));
	ok &= s->ids && s->pos && s->x && s->xn && s->q && s->qn && s->k && s->kn && s->v &&
	      s->att && s->gate && s->up && s->h && s->last && s->logits && s->pos_host && s->first;
	if (!ok) {
		release_all(m, kv);
		free(kv);
		return NULL;
	}
	return kv;
}

void rl_kv_cache_free(const struct rl_model *m, struct rl_kv_cache *kv)
{
	if (!kv)
		return;
	release_all(m, kv);
	free(kv);
}

static int check_groups(const struct rl_model *m, const struct rl_kv_cache *kv, int n_groups,
                        const int *slots, const int *n_new, const int32_t *ids, char *err,
                        size_t errlen)
{
	int total = 0;

	if (n_groups <= 0 || n_groups > kv->n_slots) {
		snprintf(err, errlen, "decode: %d sequences for a cache of %d", n_groups,
		         kv->n_slots);
		return -1;
	}
	for (int g = 0; g < n_groups; g++) {
		int s = slots[g];

		if (s < 0 || s >= kv->n_slots || n_new[g] <= 0) {
			snprintf(err, errlen, "decode: bad slot %d or token count %d", s, n_new[g]);
			return -1;
		}
		for (int h = 0; h < g; h++) {
			if (slots[h] == s) {
				snprintf(err, errlen, "decode: slot %d given twice", s);
				return -1;
			}
		}
		if (kv->len[s] + n_new[g] > kv->max_len) {
			snprintf(err, errlen,
			         "decode: sequence %d would exceed the cache's %d tokens", s,
			         kv->max_len);
			return -1;
		}
		total += n_new[g];
	}
	if (total > kv->max_tokens) {
		snprintf(err, errlen, "decode: %d new tokens, room for %d", total, kv->max_tokens);
		return -1;
	}
	for (int t = 0; t < total; t++) {
		if (ids[t] < 0 || ids[t] >= m->cfg.vocab_size) {
			snprintf(err, errlen, "token id %d is outside the vocabulary (%d)", ids[t],
			         m->cfg.vocab_size);
			return -1;
		}
	}
	return 0;
}

static int layer_decode(struct rl_model *m, struct rl_kv_cache *kv, int l, int n_groups,
                        const int *slots, const int *n_new, int T, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_config *c = &m->cfg;
	struct rl_decode_scratch *s = kv->scratch;
	int d = c->hidden_size;
	int H = m->shard.n_heads, Hkv = m->shard.n_kv_heads, D = c->head_dim;
	float eps = (float)c->rms_norm_eps;
	struct rl_attention_shape shape = {H, Hkv, D, (float)(1.0 / sqrt((double)D))};
	struct rl_rows rows;
	size_t kvrow = (size_t)Hkv * (size_t)D, qrow = (size_t)H * (size_t)D;
	float *q = s->q, *k = s->k;

	RL_TRY(ops->rmsnorm_forward(s->xn, NULL, s->x, P(ATTN_NORM), T, d, eps, NULL),
	       "layer %d: input_layernorm", l);
	if (c->qk_norm) {
		q = s->qn;
		k = s->kn;
	}
	struct rl_qkv_out o = {s->q, s->k, s->v, q, k, NULL, NULL};
	if (rl_block_qkv(m, l, s->xn, s->pos, T, &o, err, errlen))
		return -1;
	for (int g = 0; g < n_groups; g++) {
		size_t at =
		    ((size_t)slots[g] * (size_t)kv->max_len + (size_t)kv->len[slots[g]]) * kvrow;
		size_t first = (size_t)s->first[g],
		       bytes = (size_t)n_new[g] * kvrow * sizeof(float);
		float *kc = kv->k[l] + (size_t)slots[g] * (size_t)kv->max_len * kvrow;
		float *vc = kv->v[l] + (size_t)slots[g] * (size_t)kv->max_len * kvrow;

		RL_TRY(ops->copy(kv->k[l] + at, k + first * kvrow, bytes, NULL) ||
		           ops->copy(kv->v[l] + at, s->v + first * kvrow, bytes, NULL),
		       "layer %d: cache append", l);
		RL_TRY(ops->attention_cached(s->att + first * qrow, q + first * qrow, kc, vc,
		                             n_new[g], kv->len[slots[g]] + n_new[g], &shape, NULL),
		       "layer %d: attention", l);
	}
	rl_rows_of(m, T, false, &rows);
	RL_TRY(ops->linear_forward(s->xn, s->att, P(O), rl_tp_row_bias(m, P(O_BIAS)), T, H * D, d,
	                           NULL),
	       "layer %d: o_proj", l);
	rl_tp_sum_rows(m, &rows, s->xn, s->xn, d, "decode o_proj sum");
	RL_TRY(ops->add(s->x, s->xn, (int64_t)T * d, NULL), "layer %d: residual", l);
	RL_TRY(ops->rmsnorm_forward(s->xn, NULL, s->x, P(MLP_NORM), T, d, eps, NULL),
	       "layer %d: post_attention_layernorm", l);
	/* the experts read all of xn before they write it */
	if (rl_layer_is_moe(&m->cfg, l)
	        ? rl_moe_forward(m, l, &s->moe, s->xn, T, NULL, s->xn, false, err, errlen)
	        : rl_block_mlp(m, l, s->xn, s->gate, s->up, s->h, s->xn, T, err, errlen))
		return -1;
	rl_tp_sum_rows(m, &rows, s->xn, s->xn, d, "decode down_proj sum");
	RL_TRY(ops->add(s->x, s->xn, (int64_t)T * d, NULL), "layer %d: residual", l);
	return 0;
}

/* The last stage: each group's last new token through the final norm and
 * the LM head, the whole vocabulary's logits into logits_host. */
static int head_logits(struct rl_model *m, struct rl_kv_cache *kv, int n_groups, const int *n_new,
                       float *logits_host, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_config *c = &m->cfg;
	struct rl_decode_scratch *s = kv->scratch;
	int d = c->hidden_size;
	size_t row = (size_t)d * sizeof(float);

	for (int g = 0; g < n_groups; g++) {
		RL_TRY(ops->copy(s->last + (size_t)g * (size_t)d,
		                 s->x + (size_t)(s->first[g] + n_new[g] - 1) * (size_t)d, row,
		                 NULL),
		       "decode: gathering the last tokens");
	}
	RL_TRY(ops->rmsnorm_forward(s->xn, NULL, s->last, m->final_norm->data, n_groups, d,
	                            (float)c->rms_norm_eps, NULL),
	       "final norm");
	RL_TRY(ops->linear_forward(s->logits, s->xn, m->lm_head->data, NULL, n_groups, d,
	                           m->shard.vocab, NULL),
	       "lm_head");
	return rl_tp_gather_vocab(m, s->logits, n_groups, logits_host, err, errlen);
}

int rl_model_decode(struct rl_model *m, struct rl_kv_cache *kv, int n_groups, const int *slots,
                    const int *n_new, const int32_t *ids, float *logits_host, char *err,
                    size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_config *c = &m->cfg;
	struct rl_decode_scratch *s = kv->scratch;
	const struct rl_pp_group *pp = &m->shard.pp;
	int d = c->hidden_size, T = 0;
	struct rl_rows rows;

	if (check_groups(m, kv, n_groups, slots, n_new, ids, err, errlen))
		return -1;
	if (!kv->weights_rounded) {
		if (rl_model_round_weights(m, err, errlen))
			return -1;
		kv->weights_rounded = true;
	}
	if (m->shard.ep.size > 1) {
		/* a step of this rank's: the ranks draining take part (under
		 * pipeline parallelism, each stage's in its own ep group) */
		m->shard.ep.max_int(m->shard.ep.ctx, 1, "decode: a rank of ep decodes");
	}
	for (int g = 0; g < n_groups; g++) {
		s->first[g] = T;
		for (int i = 0; i < n_new[g]; i++)
			s->pos_host[T++] = kv->len[slots[g]] + i;
	}
	/* this rank's rows of the vocabulary, -1 for the others' */
	int32_t *local_ids = s->pos_host + T;
	for (int t = 0; t < T; t++)
		local_ids[t] = rl_tp_local_row(m, ids[t]);
	RL_TRY(ops->from_host(s->ids, local_ids, (size_t)T * sizeof(int32_t), NULL) ||
	           ops->from_host(s->pos, s->pos_host, (size_t)T * sizeof(int32_t), NULL),
	       "decode: copying the tokens");
	rl_rows_of(m, T, false, &rows);
	if (rl_model_first_stage(m)) {
		RL_TRY(ops->embedding_forward(s->x, s->ids, m->embed->data, T, d, m->shard.vocab,
		                              NULL),
		       "embedding");
		rl_tp_sum_rows(m, &rows, s->x, s->x, d, "decode vocab-parallel embedding sum");
	} else {
		pp->recv(pp->ctx, s->x, (size_t)T * (size_t)d, pp->rank - 1,
		         "decode: hidden states from the stage before");
	}
	for (int l = m->shard.first_layer; l < m->shard.first_layer + m->shard.n_layers; l++) {
		if (layer_decode(m, kv, l, n_groups, slots, n_new, T, err, errlen))
			return -1;
	}
	for (int g = 0; g < n_groups; g++)
		kv->len[slots[g]] += n_new[g];
	if (rl_model_last_stage(m)) {
		if (head_logits(m, kv, n_groups, n_new, logits_host, err, errlen))
			return -1;
	} else {
		pp->send(pp->ctx, s->x, (size_t)T * (size_t)d, pp->rank + 1,
		         "decode: hidden states to the stage after");
	}
	/* every stage samples the same tokens from the same logits */
	if (pp->size > 1)
		pp->broadcast(pp->ctx, logits_host, (size_t)n_groups * (size_t)c->vocab_size,
		              pp->size - 1, "decode: logits from the last stage");
	return 0;
}
