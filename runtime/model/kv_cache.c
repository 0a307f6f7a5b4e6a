/* Prefill and decode through the paged KV cache. The token-wise work
 * (norms, projections, MLP) runs on all new tokens of all slots as one
 * batch, and so do the cache append and attention: one op each per layer,
 * whatever the mix of prompts and decode steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/memory_use.h"
#include "runtime/model/forward_util.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/moe.h"
#include "runtime/model/split.h"

struct rl_decode_scratch {
	int32_t *ids, *pos, *rows, *off;
	float *x, *xn, *q, *k, *v, *qn, *kn, *att, *gate, *up, *h, *last, *logits;
	float *logits_full;     /* tensor parallelism: the gathered vocabulary */
	float *logits_host;     /* tensor or pipeline parallelism: the host's copy */
	int32_t *host;          /* host: positions, local ids, cache rows, table offsets */
	int *first;             /* host: first token of each group */
	struct rl_moe_acts moe; /* every sparse layer's in turn: no backward pass */
};

static void release_all(const struct rl_model *m, struct rl_kv_cache *kv)
{
	const struct rl_ops *ops = m->ops;
	struct rl_decode_scratch *s = kv->scratch;

	if (s) {
		void *dev[] = {s->ids,  s->pos, s->rows, s->off,  s->x,      s->xn,
		               s->q,    s->k,   s->v,    s->qn,   s->kn,     s->att,
		               s->gate, s->up,  s->h,    s->last, s->logits, s->logits_full};
		for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
			rl_ops_release(ops, dev[i]);
		free(s->logits_host);
		free(s->host);
		free(s->first);
		rl_moe_acts_free(ops, &s->moe);
		free(s);
	}
	for (int l = 0; kv->k && l < m->cfg.n_layers; l++) {
		rl_ops_release(ops, kv->k[l]);
		rl_ops_release(ops, kv->v[l]);
	}
	rl_ops_release(ops, kv->table);
	free(kv->k);
	free(kv->v);
	free(kv->len);
	free(kv->held);
	free(kv->table_host);
	free(kv->refs);
	free(kv->free_ids);
}

int64_t rl_kv_blocks_for(int n_slots, int max_len, int block)
{
	if (n_slots <= 0 || max_len <= 0 || block <= 0)
		return 0;
	return (int64_t)n_slots * (((int64_t)max_len + block - 1) / block);
}

size_t rl_kv_block_bytes(const struct rl_model *m, int block)
{
	return 2 * (size_t)m->shard.n_layers * (size_t)block * (size_t)m->shard.n_kv_heads *
	       (size_t)m->cfg.head_dim * sizeof(float);
}

/* The decode scratch's backend buffers, sized once here for both the
 * allocation and rl_kv_scratch_bytes' estimate. */
enum {
	SB_IDS,
	SB_POS,
	SB_ROWS,
	SB_OFF,
	SB_X,
	SB_XN,
	SB_Q,
	SB_QN,
	SB_K,
	SB_KN,
	SB_V,
	SB_ATT,
	SB_GATE,
	SB_UP,
	SB_H,
	SB_LAST,
	SB_LOGITS,
	SB_LOGITS_FULL, /* 0 bytes without tensor or pipeline parallelism */
	SB_N
};

static void scratch_sizes(const struct rl_model *m, int n_slots, int max_tokens, size_t sz[SB_N])
{
	const struct rl_model_shard *sh = &m->shard;
	size_t f = sizeof(float), i = sizeof(int32_t), T = (size_t)max_tokens, S = (size_t)n_slots;
	size_t D = (size_t)m->cfg.head_dim, d = (size_t)m->cfg.hidden_size;
	size_t kvd = (size_t)sh->n_kv_heads * D, qd = (size_t)sh->n_heads * D,
	       inter = (size_t)sh->intermediate;

	sz[SB_IDS] = sz[SB_POS] = sz[SB_ROWS] = sz[SB_OFF] = T * i;
	sz[SB_X] = sz[SB_XN] = T * d * f;
	sz[SB_Q] = sz[SB_QN] = sz[SB_ATT] = T * qd * f;
	sz[SB_K] = sz[SB_KN] = sz[SB_V] = T * kvd * f;
	sz[SB_GATE] = sz[SB_UP] = sz[SB_H] = T * inter * f;
	sz[SB_LAST] = S * d * f;
	sz[SB_LOGITS] = S * (size_t)sh->vocab * f;
	sz[SB_LOGITS_FULL] =
	    sh->tp.size > 1 || sh->pp.size > 1 ? S * (size_t)m->cfg.vocab_size * f : 0;
}

size_t rl_kv_scratch_bytes(const struct rl_model *m, int n_slots, int max_tokens)
{
	size_t sz[SB_N], sum = 0;

	scratch_sizes(m, n_slots, max_tokens, sz);
	for (int b = 0; b < SB_N; b++)
		sum += sz[b];
	return sum;
}

static int alloc_scratch(const struct rl_model *m, struct rl_kv_cache *kv)
{
	const struct rl_ops *ops = m->ops;
	struct rl_decode_scratch *s = kv->scratch;
	size_t sz[SB_N], T = (size_t)kv->max_tokens, S = (size_t)kv->n_slots;

	scratch_sizes(m, kv->n_slots, kv->max_tokens, sz);
	s->ids = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_IDS]);
	s->pos = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_POS]);
	s->rows = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_ROWS]);
	s->off = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_OFF]);
	s->x = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_X]);
	s->xn = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_XN]);
	s->q = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_Q]);
	s->qn = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_QN]);
	s->k = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_K]);
	s->kn = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_KN]);
	s->v = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_V]);
	s->att = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_ATT]);
	s->gate = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_GATE]);
	s->up = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_UP]);
	s->h = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_H]);
	s->last = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_LAST]);
	s->logits = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_LOGITS]);
	if (sz[SB_LOGITS_FULL]) {
		s->logits_full = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sz[SB_LOGITS_FULL]);
		s->logits_host = malloc(sz[SB_LOGITS_FULL]);
	}
	s->host = malloc(4 * T * sizeof(int32_t));
	s->first = malloc((S + 1) * sizeof(int));
	return s->ids && s->pos && s->rows && s->off && s->x && s->xn && s->q && s->qn && s->k &&
	       s->kn && s->v && s->att && s->gate && s->up && s->h && s->last && s->logits &&
	       (!sz[SB_LOGITS_FULL] || (s->logits_full && s->logits_host)) && s->host && s->first;
}

struct rl_kv_cache *rl_kv_cache_new(const struct rl_model *m, int n_slots, int max_len,
                                    int max_tokens, int block, int n_blocks)
{
	const struct rl_model_config *c = &m->cfg;
	const struct rl_ops *ops = m->ops;
	const struct rl_model_shard *sh = &m->shard;
	struct rl_kv_cache *kv = calloc(1, sizeof *kv);
	size_t kvd = (size_t)sh->n_kv_heads * (size_t)c->head_dim;
	int64_t worst = rl_kv_blocks_for(n_slots, max_len, block);
	int ok = 1;

	if (!kv || worst <= 0 || max_tokens <= 0 || worst > INT32_MAX) {
		free(kv);
		return NULL;
	}
	kv->n_slots = n_slots;
	kv->max_len = max_len;
	kv->max_tokens = max_tokens;
	kv->block = block;
	kv->n_blocks = n_blocks > 0 ? n_blocks : (int)worst;
	kv->max_blocks = (max_len + block - 1) / block;
	kv->len = calloc((size_t)n_slots, sizeof *kv->len);
	kv->held = calloc((size_t)n_slots, sizeof *kv->held);
	kv->table_host = calloc((size_t)worst, sizeof *kv->table_host);
	kv->refs = calloc((size_t)kv->n_blocks, sizeof *kv->refs);
	kv->free_ids = malloc((size_t)kv->n_blocks * sizeof *kv->free_ids);
	kv->k = calloc((size_t)c->n_layers, sizeof *kv->k);
	kv->v = calloc((size_t)c->n_layers, sizeof *kv->v);
	kv->scratch = calloc(1, sizeof *kv->scratch);
	kv->table = rl_ops_alloc(ops, RL_MEM_KV_CACHE, (size_t)worst * sizeof(int32_t));
	if (!kv->len || !kv->held || !kv->table_host || !kv->refs || !kv->free_ids || !kv->k ||
	    !kv->v || !kv->scratch || !kv->table) {
		release_all(m, kv);
		free(kv);
		return NULL;
	}
	/* popped from the end: block 0 first */
	for (int b = 0; b < kv->n_blocks; b++)
		kv->free_ids[b] = kv->n_blocks - 1 - b;
	kv->n_free = kv->n_blocks;
	kv->table_dirty = true;
	size_t per_layer = (size_t)kv->n_blocks * (size_t)block * kvd * sizeof(float);
	for (int l = sh->first_layer; l < sh->first_layer + sh->n_layers; l++) {
		kv->k[l] = rl_ops_alloc(ops, RL_MEM_KV_CACHE, per_layer);
		kv->v[l] = rl_ops_alloc(ops, RL_MEM_KV_CACHE, per_layer);
		ok &= kv->k[l] && kv->v[l];
	}
	if (!ok || !alloc_scratch(m, kv)) {
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

static int32_t *row_of(struct rl_kv_cache *kv, int slot)
{
	return kv->table_host + (size_t)slot * (size_t)kv->max_blocks;
}

void rl_kv_slot_release(struct rl_kv_cache *kv, int slot)
{
	int32_t *row = row_of(kv, slot);

	for (int i = 0; i < kv->held[slot]; i++) {
		if (--kv->refs[row[i]] == 0)
			kv->free_ids[kv->n_free++] = row[i];
	}
	kv->held[slot] = 0;
	kv->len[slot] = 0;
}

int rl_kv_slot_share(struct rl_kv_cache *kv, int dst, int src, int n, char *err, size_t errlen)
{
	if (dst == src || kv->held[dst] || n < 0 || n > kv->len[src]) {
		snprintf(err, errlen, "kv cache: cannot share %d tokens of slot %d with slot %d", n,
		         src, dst);
		return -1;
	}
	int blocks = (n + kv->block - 1) / kv->block;
	int32_t *from = row_of(kv, src), *to = row_of(kv, dst);

	for (int i = 0; i < blocks; i++) {
		to[i] = from[i];
		kv->refs[from[i]]++;
	}
	kv->held[dst] = blocks;
	kv->len[dst] = n;
	kv->table_dirty = true;
	return 0;
}

static int take_block(struct rl_kv_cache *kv, int32_t *id, char *err, size_t errlen)
{
	if (kv->n_free == 0) {
		snprintf(err, errlen,
		         "kv cache: all %d blocks of %d tokens are in use (raise the cache's "
		         "size or lower the concurrent sequences)",
		         kv->n_blocks, kv->block);
		return -1;
	}
	*id = kv->free_ids[--kv->n_free];
	kv->refs[*id] = 1;
	return 0;
}

/* Blocks for slot's tokens len .. len + n - 1: new ones past its last, and
 * a private copy of a shared block it is about to write into. */
static int make_room(struct rl_model *m, struct rl_kv_cache *kv, int slot, int n, char *err,
                     size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int32_t *row = row_of(kv, slot);
	int len = kv->len[slot], need = (len + n + kv->block - 1) / kv->block;

	if (len % kv->block && kv->refs[row[len / kv->block]] > 1) {
		int32_t old = row[len / kv->block], fresh;
		size_t rowf = (size_t)m->shard.n_kv_heads * (size_t)m->cfg.head_dim;
		size_t at = (size_t)old * (size_t)kv->block * rowf, to = 0,
		       bytes = (size_t)(len % kv->block) * rowf * sizeof(float);

		if (take_block(kv, &fresh, err, errlen))
			return -1;
		to = (size_t)fresh * (size_t)kv->block * rowf;
		for (int l = m->shard.first_layer; l < m->shard.first_layer + m->shard.n_layers;
		     l++) {
			RL_TRY(ops->copy(kv->k[l] + to, kv->k[l] + at, bytes, NULL) ||
			           ops->copy(kv->v[l] + to, kv->v[l] + at, bytes, NULL),
			       "kv cache: copying a shared block");
		}
		kv->refs[old]--;
		row[len / kv->block] = fresh;
		kv->table_dirty = true;
	}
	while (kv->held[slot] < need) {
		if (take_block(kv, &row[kv->held[slot]], err, errlen))
			return -1;
		kv->held[slot]++;
		kv->table_dirty = true;
	}
	return 0;
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

static int layer_decode(struct rl_model *m, struct rl_kv_cache *kv, int l, int T, char *err,
                        size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_config *c = &m->cfg;
	struct rl_decode_scratch *s = kv->scratch;
	int d = c->hidden_size;
	int H = m->shard.n_heads, Hkv = m->shard.n_kv_heads, D = c->head_dim;
	float eps = (float)c->rms_norm_eps;
	struct rl_attention_shape shape = {H, Hkv, D, (float)(1.0 / sqrt((double)D))};
	struct rl_rows rows;
	float *q = s->q, *k = s->k;

	RL_TRY(ops->rmsnorm_forward(rl_buf_f32(s->xn), NULL, rl_cbuf_f32(s->x),
	                            rl_cbuf_f32(P(ATTN_NORM)), T, d, eps, NULL),
	       "layer %d: input_layernorm", l);
	if (c->qk_norm) {
		q = s->qn;
		k = s->kn;
	}
	struct rl_qkv_out o = {s->q, s->k, s->v, q, k, NULL, NULL};
	if (rl_block_qkv(m, l, s->xn, s->pos, T, &o, err, errlen))
		return -1;
	RL_TRY(ops->kv_append(kv->k[l], kv->v[l], k, s->v, s->rows, T, Hkv * D, NULL),
	       "layer %d: cache append", l);
	RL_TRY(ops->attention_paged(s->att, NULL, q, kv->k[l], kv->v[l], kv->table, s->off, s->pos,
	                            T, kv->block, &shape, NULL),
	       "layer %d: attention", l);
	rl_rows_of(m, T, false, &rows);
	RL_TRY(ops->linear_forward(rl_buf_f32(s->xn), rl_cbuf_f32(s->att), rl_cbuf_f32(P(O)),
	                           rl_cbuf_f32(rl_tp_row_bias(m, P(O_BIAS))), T, H * D, d, NULL),
	       "layer %d: o_proj", l);
	rl_tp_sum_rows(m, &rows, s->xn, s->xn, d, "decode o_proj sum");
	RL_TRY(ops->add(rl_buf_f32(s->x), rl_cbuf_f32(s->xn), (int64_t)T * d, NULL),
	       "layer %d: residual", l);
	RL_TRY(ops->rmsnorm_forward(rl_buf_f32(s->xn), NULL, rl_cbuf_f32(s->x),
	                            rl_cbuf_f32(P(MLP_NORM)), T, d, eps, NULL),
	       "layer %d: post_attention_layernorm", l);
	/* the experts read all of xn before they write it */
	if (rl_layer_is_moe(&m->cfg, l)
	        ? rl_moe_forward(m, l, &s->moe, s->xn, T, NULL, s->xn, false, err, errlen)
	        : rl_block_mlp(m, l, s->xn, s->gate, s->up, s->h, s->xn, T, err, errlen))
		return -1;
	rl_tp_sum_rows(m, &rows, s->xn, s->xn, d, "decode down_proj sum");
	RL_TRY(ops->add(rl_buf_f32(s->x), rl_cbuf_f32(s->xn), (int64_t)T * d, NULL),
	       "layer %d: residual", l);
	return 0;
}

/* The last stage: each group's last new token through the final norm and
 * the LM head, into s->logits (this rank's share of the vocabulary). */
static int head_logits(struct rl_model *m, struct rl_kv_cache *kv, int n_groups, const int *n_new,
                       char *err, size_t errlen)
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
	RL_TRY(ops->rmsnorm_forward(rl_buf_f32(s->xn), NULL, rl_cbuf_f32(s->last),
	                            rl_cbuf_f32(m->final_norm->data), n_groups, d,
	                            (float)c->rms_norm_eps, NULL),
	       "final norm");
	RL_TRY(ops->linear_forward(rl_buf_f32(s->logits), rl_cbuf_f32(s->xn),
	                           rl_cbuf_f32(m->lm_head->data), rl_cbuf_f32(NULL), n_groups, d,
	                           m->shard.vocab, NULL),
	       "lm_head");
	return 0;
}

/* The whole vocabulary's logits on the backend of every rank and stage:
 * under tensor parallelism gathered, under pipeline parallelism sent from
 * the last stage, so that every rank samples the same tokens. */
static int share_logits(struct rl_model *m, struct rl_kv_cache *kv, int n_groups,
                        const float **logits, char *err, size_t errlen)
{
	struct rl_decode_scratch *s = kv->scratch;
	const struct rl_pp_group *pp = &m->shard.pp;
	size_t n = (size_t)n_groups * (size_t)m->cfg.vocab_size;

	if (m->shard.tp.size == 1 && pp->size == 1) {
		*logits = s->logits;
		return 0;
	}
	if (rl_model_last_stage(m) &&
	    rl_tp_gather_vocab(m, s->logits, n_groups, s->logits_host, err, errlen))
		return -1;
	if (pp->size > 1)
		pp->broadcast_host(pp->ctx, s->logits_host, n, pp->size - 1,
		                   "decode: logits from the last stage");
	RL_TRY(m->ops->from_host(s->logits_full, s->logits_host, n * sizeof(float), NULL),
	       "decode: copying the logits to the %s backend", m->ops->name);
	*logits = s->logits_full;
	return 0;
}

/* Positions, this rank's vocabulary rows, cache rows and table offsets of
 * the step's tokens, to the backend with the table if it changed. */
static int upload_step(struct rl_model *m, struct rl_kv_cache *kv, int n_groups, const int *slots,
                       const int *n_new, const int32_t *ids, int *T_out, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	struct rl_decode_scratch *s = kv->scratch;
	int T = 0;
	size_t cap = (size_t)kv->max_tokens;
	int32_t *pos = s->host, *local = s->host + cap, *rows = s->host + 2 * cap,
	        *off = s->host + 3 * cap;

	for (int g = 0; g < n_groups; g++) {
		const int32_t *row = row_of(kv, slots[g]);

		if (make_room(m, kv, slots[g], n_new[g], err, errlen))
			return -1;
		s->first[g] = T;
		for (int i = 0; i < n_new[g]; i++, T++) {
			int p = kv->len[slots[g]] + i;

			pos[T] = p;
			rows[T] = row[p / kv->block] * kv->block + p % kv->block;
			off[T] = slots[g] * kv->max_blocks;
		}
	}
	for (int t = 0; t < T; t++)
		local[t] = rl_tp_local_row(m, ids[t]);
	size_t n = (size_t)T * sizeof(int32_t);
	RL_TRY(ops->from_host(s->ids, local, n, NULL) || ops->from_host(s->pos, pos, n, NULL) ||
	           ops->from_host(s->rows, rows, n, NULL) || ops->from_host(s->off, off, n, NULL),
	       "decode: copying the tokens");
	if (kv->table_dirty) {
		RL_TRY(ops->from_host(
		           kv->table, kv->table_host,
		           (size_t)kv->n_slots * (size_t)kv->max_blocks * sizeof(int32_t), NULL),
		       "decode: copying the block table");
		kv->table_dirty = false;
	}
	*T_out = T;
	return 0;
}

int rl_model_decode(struct rl_model *m, struct rl_kv_cache *kv, int n_groups, const int *slots,
                    const int *n_new, const int32_t *ids, const float **logits, char *err,
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
		rl_model_settle(m, 0, -1);
		if (rl_model_round_weights(m, err, errlen))
			return -1;
		kv->weights_rounded = true;
	}
	if (m->shard.ep.size > 1) {
		/* a step of this rank's: the ranks draining take part (under
		 * pipeline parallelism, each stage's in its own ep group) */
		m->shard.ep.max_int(m->shard.ep.ctx, 1, "decode: a rank of ep decodes");
	}
	if (upload_step(m, kv, n_groups, slots, n_new, ids, &T, err, errlen))
		return -1;
	rl_rows_of(m, T, false, &rows);
	if (rl_model_first_stage(m)) {
		RL_TRY(ops->embedding_forward(rl_buf_f32(s->x), s->ids, rl_cbuf_f32(m->embed->data),
		                              T, d, m->shard.vocab, NULL),
		       "embedding");
		rl_tp_sum_rows(m, &rows, s->x, s->x, d, "decode vocab-parallel embedding sum");
	} else {
		pp->recv(pp->ctx, s->x, (size_t)T * (size_t)d, pp->rank - 1,
		         "decode: hidden states from the stage before");
	}
	for (int l = m->shard.first_layer; l < m->shard.first_layer + m->shard.n_layers; l++) {
		if (layer_decode(m, kv, l, T, err, errlen))
			return -1;
	}
	for (int g = 0; g < n_groups; g++)
		kv->len[slots[g]] += n_new[g];
	if (rl_model_last_stage(m)) {
		if (head_logits(m, kv, n_groups, n_new, err, errlen))
			return -1;
	} else {
		pp->send(pp->ctx, s->x, (size_t)T * (size_t)d, pp->rank + 1,
		         "decode: hidden states to the stage after");
	}
	return share_logits(m, kv, n_groups, logits, err, errlen);
}

int rl_model_decode_logprobs_tp(struct rl_model *m, struct rl_kv_cache *kv, int n_groups,
                                const int32_t *tokens, float logit_scale, int chunk, float *lp_host,
                                char *err, size_t errlen)
{
	const struct rl_pp_group *pp = &m->shard.pp;
	int V = m->shard.vocab, G = n_groups, rc = 0;

	if (rl_model_last_stage(m)) {
		const struct rl_ops *ops = m->ops;
		struct rl_lm_logprobs_shape shape = {
		    G, m->cfg.hidden_size, V, chunk <= 0 || chunk > V ? V : chunk, logit_scale};
		size_t g = (size_t)G;
		int32_t *tg = malloc(g * sizeof *tg);
		float *lse = malloc(g * sizeof *lse);
		float *scratch = malloc(g * (size_t)(m->shard.tp.size + 1) * sizeof *scratch);
		/* the op's side: targets, logprobs and lse, its work */
		int32_t *tg_dev = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, g * sizeof *tg_dev);
		float *lp_dev = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, g * sizeof *lp_dev),
		      *lse_dev = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, g * sizeof *lse_dev);
		float *work =
		    rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, g * (size_t)shape.chunk * sizeof *work);

		if (!tg || !lse || !scratch || !tg_dev || !lp_dev || !lse_dev || !work) {
			snprintf(err, errlen, "out of memory for the logprobs of %d tokens", G);
			rc = -1;
		} else {
			for (int i = 0; i < G; i++)
				tg[i] = rl_tp_local_row(m, tokens[i]);
			if (ops->from_host(tg_dev, tg, g * sizeof *tg, NULL) ||
			    ops->logits_logprobs(lp_dev, lse_dev, kv->scratch->logits, V, tg_dev,
			                         &shape, work, NULL) ||
			    ops->to_host(lp_host, lp_dev, g * sizeof *lp_host, NULL) ||
			    ops->to_host(lse, lse_dev, g * sizeof *lse, NULL)) {
				snprintf(err, errlen,
				         "decode: logprobs of this rank's vocabulary failed");
				rc = -1;
			}
		}
		/* every rank of tp reaches the collective, failed or not: the
		 * others would wait in it for ever */
		if (tg && lse && scratch)
			rl_tp_combine_logprobs(m, lp_host, lse, tg, G, scratch);
		free(tg);
		free(lse);
		free(scratch);
		rl_ops_release(ops, tg_dev);
		rl_ops_release(ops, lp_dev);
		rl_ops_release(ops, lse_dev);
		rl_ops_release(ops, work);
	}
	if (pp->size > 1)
		pp->broadcast_host(pp->ctx, lp_host, (size_t)G, pp->size - 1,
		                   "decode: logprobs from the last stage");
	return rc;
}
