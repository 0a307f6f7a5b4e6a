/* The forward pass over packed sequences, keeping what the backward pass
 * needs, and the two heads on top of it: full logits and token log-probs. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/memory_use.h"
#include "runtime/model/acts.h"
#include "runtime/model/forward_util.h"

/* The batch on the backend: positions restart with each sequence, ids and
 * targets become this rank's vocabulary rows. Under sequence parallelism
 * one more sequence of padding makes the tokens a multiple of the group;
 * its targets are -1, so it adds nothing to any gradient. */
/* Under sequence parallelism the tokens a batch is padded to: a multiple
 * of the tensor-parallel group. */
static int sp_padded(const struct rl_model *m, int n_tokens)
{
	int p = m->shard.tp.size;

	return m->shard.sequence_parallel ? (n_tokens + p - 1) / p * p : n_tokens;
}

/* The caller's token order: positions restart with each sequence, ids
 * and targets as this rank's vocabulary rows; under sequence parallelism
 * one more sequence pads the tokens to a multiple of the group (its
 * targets are -1, so it adds nothing to any gradient). Returns the rows
 * and the sequences in *n_seqs. */
static int layout_tokens(const struct rl_model *m, struct rl_acts *a, const struct rl_batch *b,
                         int32_t *ids, int32_t *pos, int32_t *tgt, int32_t *cu, int *n_seqs,
                         char *err, size_t errlen)
{
	int T = b->n_tokens, padded = sp_padded(m, T);

	if (padded > a->max_tokens) {
		snprintf(err, errlen, "a batch of %d tokens padded to %d (room for %d tokens)", T,
		         padded, a->max_tokens);
		return -1;
	}
	*n_seqs = b->n_seqs;
	for (int s = 0; s < b->n_seqs; s++)
		for (int t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++)
			pos[t] = t - b->cu_seqlens[s];
	for (int t = 0; t < T; t++) {
		int32_t y = b->targets ? b->targets[t] : -1;

		a->target_mask[t] = y >= 0 ? 1.0f : 0.0f;
		tgt[t] = rl_tp_local_row(m, y);
		ids[t] = rl_tp_local_row(m, b->ids[t]);
	}
	if (padded > T) {
		for (int t = T; t < padded; t++) {
			pos[t] = t - T;
			ids[t] = rl_tp_local_row(m, 0);
			tgt[t] = -1;
			a->target_mask[t] = 0.0f;
		}
		cu[++*n_seqs] = padded;
	}
	return padded;
}

static int check_batch(const struct rl_model *m, const struct rl_batch *b, char *err, size_t errlen)
{
	int T = b->n_tokens, n_seqs = b->n_seqs;

	if (b->cu_seqlens[0] != 0 || b->cu_seqlens[n_seqs] != T) {
		snprintf(err, errlen, "cu_seqlens must run from 0 to the %d tokens", T);
		return -1;
	}
	for (int s = 0; s < n_seqs; s++) {
		if (b->cu_seqlens[s + 1] < b->cu_seqlens[s]) {
			snprintf(err, errlen, "cu_seqlens decreases at sequence %d", s);
			return -1;
		}
	}
	for (int t = 0; t < T; t++) {
		int32_t y = b->targets ? b->targets[t] : -1;

		if (y < -1 || y >= m->cfg.vocab_size) {
			snprintf(err, errlen,
			         "target %d of token %d is outside the vocabulary (%d)", y, t,
			         m->cfg.vocab_size);
			return -1;
		}
	}
	return 0;
}

/* The batch-invariant attention reads a packed batch as a paged cache with
 * blocks of one row (the identity table a->key_rows, made with the acts):
 * key j of token t is row off[t] + j of the keys, off[t] being t - pos[t],
 * or under context parallelism the start of t's sequence in the
 * all-gathered padded batch (its chunk's key start). scratch: rows int32
 * of host memory. */
static int upload_key_off(struct rl_model *m, struct rl_acts *a, const int32_t *pos,
                          int32_t *scratch, int rows)
{
	if (!m->invariant)
		return 0;
	if (m->shard.cp.size > 1) {
		const struct rl_attention_chunks *c = &a->chunks_host;

		for (int n = 0; n < c->n; n++)
			for (int i = 0; i < c->len[n]; i++)
				scratch[c->q_start[n] + i] = c->k_start[n];
	} else {
		for (int t = 0; t < rows; t++)
			scratch[t] = t - pos[t];
	}
	return m->ops->from_host(a->key_off, scratch, (size_t)rows * sizeof *scratch, NULL);
}

/* The batch on the backend, as this rank's rows of it. */
static int upload_batch(struct rl_model *m, struct rl_acts *a, const struct rl_batch *b, char *err,
                        size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	size_t cap = (size_t)a->max_tokens;
	int32_t *pos = malloc(cap * sizeof *pos);
	int32_t *ids = malloc(cap * sizeof *ids);
	int32_t *cu = malloc((size_t)(b->n_seqs + 2) * sizeof *cu);
	int32_t *tgt = a->targets_host;
	int rc = -1, rows, n_seqs = b->n_seqs;

	if (!pos || !ids || !cu) {
		snprintf(err, errlen, "out of memory for a batch of %d tokens", b->n_tokens);
		goto out;
	}
	if (check_batch(m, b, err, errlen))
		goto out;
	/* (context parallelism runs attention by chunks, not by cu_seqlens) */
	memcpy(cu, b->cu_seqlens, (size_t)(b->n_seqs + 1) * sizeof *cu);
	rows = m->shard.cp.size > 1
	           ? rl_cp_layout(m, a, b, ids, pos, tgt, err, errlen)
	           : layout_tokens(m, a, b, ids, pos, tgt, cu, &n_seqs, err, errlen);
	if (rows < 0)
		goto out;
	size_t n = (size_t)rows * sizeof(int32_t);
	if (ops->from_host(a->ids, ids, n, NULL) || ops->from_host(a->pos, pos, n, NULL) ||
	    ops->from_host(a->targets, tgt, n, NULL) || upload_key_off(m, a, pos, ids, rows) ||
	    ops->from_host(a->cu_seqlens, cu, (size_t)(n_seqs + 1) * sizeof(int32_t), NULL)) {
		snprintf(err, errlen, "copying the batch to the %s backend failed", ops->name);
		goto out;
	}
	a->n_tokens = rows;
	a->n_real = b->n_tokens;
	for (int t = 0; t < rows; t++)
		a->row_real[t] =
		    m->shard.cp.size > 1 ? rl_cp_origin(m, a, t) >= 0 : t < b->n_tokens;
	a->n_seqs = n_seqs;
	rl_rows_of(m, rows, m->shard.sequence_parallel, &a->rows);
	rc = 0;
out:
	free(pos);
	free(ids);
	free(cu);
	return rc;
}

int rl_layer_forward(struct rl_model *m, struct rl_acts *a, int l, float *x_out, char *err,
                     size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_config *c = &m->cfg;
	const struct rl_rows *r = &a->rows;
	struct rl_layer_acts *L = &a->layers[l];
	int T = a->n_tokens, d = c->hidden_size;
	int H = m->shard.n_heads, Hkv = m->shard.n_kv_heads, D = c->head_dim;
	size_t mine = (size_t)r->first * (size_t)d;
	float eps = (float)c->rms_norm_eps;
	struct rl_attention_shape shape = {H, Hkv, D, (float)(1.0 / sqrt((double)D))};
	float *q = c->qk_norm ? L->q_raw : L->q, *k = c->qk_norm ? L->k_raw : L->k;

	RL_TRY(ops->rmsnorm_forward(rl_buf_f32(L->xn1 + mine), L->rstd1, rl_cbuf_f32(L->x_in),
	                            rl_cbuf_f32(P(ATTN_NORM)), r->n, d, eps, NULL),
	       "layer %d: input_layernorm", l);
	rl_tp_gather_rows(m, r, L->xn1 + mine, L->xn1, d, "attention input all-gather");
	struct rl_qkv_out o = {q, k, L->v, L->q, L->k, L->q_rstd, L->k_rstd};
	if (rl_block_qkv(m, l, L->xn1, a->pos, T, &o, err, errlen))
		return -1;
	if (m->shard.cp.size > 1) {
		int kvd = Hkv * D;

		rl_cp_gather_kv(m, a, L->k, a->k_full, kvd, "context-parallel keys all-gather");
		rl_cp_gather_kv(m, a, L->v, a->v_full, kvd, "context-parallel values all-gather");
		if (m->invariant)
			RL_TRY(ops->attention_paged(L->att, L->lse, L->q, a->k_full, a->v_full,
			                            a->key_rows, a->key_off, a->pos, T, 1, &shape,
			                            NULL),
			       "layer %d: attention", l);
		else
			RL_TRY(ops->attention_chunks_forward(L->att, L->lse, L->q, a->k_full,
			                                     a->v_full, &a->chunks, &shape, NULL),
			       "layer %d: attention", l);
	} else if (m->invariant) {
		/* generation's attention, so that a token's logprob here has
		 * the bits generation reported for it */
		RL_TRY(ops->attention_paged(L->att, L->lse, L->q, L->k, L->v, a->key_rows,
		                            a->key_off, a->pos, T, 1, &shape, NULL),
		       "layer %d: attention", l);
	} else {
		RL_TRY(ops->attention_forward(L->att, L->lse, L->q, L->k, L->v, a->cu_seqlens,
		                              a->n_seqs, &shape, NULL),
		       "layer %d: attention", l);
	}
	float *sum = rl_tp_sum_target(m, r, L->x_mid, a->tp_full);
	RL_TRY(ops->linear_forward(rl_buf_f32(sum), rl_cbuf_f32(L->att), rl_cbuf_f32(P(O)),
	                           rl_cbuf_f32(rl_tp_row_bias(m, P(O_BIAS))), T, H * D, d, NULL),
	       "layer %d: o_proj", l);
	rl_tp_sum_rows(m, r, sum, L->x_mid, d, "o_proj sum");
	RL_TRY(ops->add(rl_buf_f32(L->x_mid), rl_cbuf_f32(L->x_in), (int64_t)r->n * d, NULL),
	       "layer %d: residual", l);
	RL_TRY(ops->rmsnorm_forward(rl_buf_f32(L->xn2 + mine), L->rstd2, rl_cbuf_f32(L->x_mid),
	                            rl_cbuf_f32(P(MLP_NORM)), r->n, d, eps, NULL),
	       "layer %d: post_attention_layernorm", l);
	rl_tp_gather_rows(m, r, L->xn2 + mine, L->xn2, d, "MLP input all-gather");
	sum = rl_tp_sum_target(m, r, x_out, a->tp_full);
	if (L->moe ? rl_moe_forward(m, l, L->moe, L->xn2, T, a->row_real, sum, true, err, errlen)
	           : rl_block_mlp(m, l, L->xn2, L->gate, L->up, L->h, sum, T, err, errlen))
		return -1;
	rl_tp_sum_rows(m, r, sum, x_out, d, "down_proj sum");
	RL_TRY(ops->add(rl_buf_f32(x_out), rl_cbuf_f32(L->x_mid), (int64_t)r->n * d, NULL),
	       "layer %d: residual", l);
	return 0;
}

int rl_model_forward(struct rl_model *m, struct rl_acts *a, const struct rl_batch *b, char *err,
                     size_t errlen)
{
	const struct rl_model_config *c = &m->cfg;
	const struct rl_rows *r = &a->rows;
	int d = c->hidden_size;

	if (b->n_tokens <= 0 || b->n_tokens > a->max_tokens || b->n_seqs <= 0) {
		snprintf(err, errlen, "a batch of %d tokens in %d sequences (room for %d tokens)",
		         b->n_tokens, b->n_seqs, a->max_tokens);
		return -1;
	}
	for (int t = 0; t < b->n_tokens; t++) {
		if (b->ids[t] < 0 || b->ids[t] >= c->vocab_size) {
			snprintf(err, errlen,
			         "token id %d at position %d is outside the vocabulary (%d)",
			         b->ids[t], t, c->vocab_size);
			return -1;
		}
	}
	if (upload_batch(m, a, b, err, errlen) || rl_model_round_weights(m, err, errlen))
		return -1;
	int first = m->shard.first_layer, end = first + m->shard.n_layers;
	int64_t lo, hi;
	/* the weights a collective still brings in are waited for where they
	 * are first read: what lies before the first layer (the embedding,
	 * or the last stage's tied copy), each layer, then the rest */
	rl_model_layer_span(m, first, &lo, &hi);
	rl_model_settle(m, 0, lo);
	if (rl_model_first_stage(m)) {
		float *x0 = a->layers[first].x_in, *sum = rl_tp_sum_target(m, r, x0, a->tp_full);

		RL_TRY(m->ops->embedding_forward(rl_buf_f32(sum), a->ids,
		                                 rl_cbuf_f32(m->embed->data), a->n_tokens, d,
		                                 m->shard.vocab, NULL),
		       "embedding");
		rl_tp_sum_rows(m, r, sum, x0, d, "vocab-parallel embedding sum");
	}
	for (int l = first; l < end; l++) {
		float *x_out = l + 1 < end ? a->layers[l + 1].x_in : a->x_final;

		rl_model_layer_span(m, l, &lo, &hi);
		rl_model_settle(m, lo, hi);
		if (rl_layer_forward(m, a, l, x_out, err, errlen))
			return -1;
	}
	rl_model_settle(m, hi, -1);
	if (!rl_model_last_stage(m))
		return 0;
	RL_TRY(m->ops->rmsnorm_forward(rl_buf_f32(a->hf + (size_t)r->first * (size_t)d), a->rstd_f,
	                               rl_cbuf_f32(a->x_final), rl_cbuf_f32(m->final_norm->data),
	                               r->n, d, (float)c->rms_norm_eps, NULL),
	       "final norm");
	rl_tp_gather_rows(m, r, a->hf + (size_t)r->first * (size_t)d, a->hf, d,
	                  "final norm all-gather");
	return 0;
}

size_t rl_model_stage_floats(const struct rl_model *m, int n_tokens)
{
	struct rl_rows r;

	rl_rows_of(m, sp_padded(m, n_tokens), m->shard.sequence_parallel, &r);
	return (size_t)r.n * (size_t)m->cfg.hidden_size;
}

float *rl_acts_stage_input(struct rl_acts *a)
{
	return a->layers[a->first_layer].x_in;
}

float *rl_acts_stage_output(struct rl_acts *a)
{
	return a->x_final;
}

float *rl_acts_stage_grad(struct rl_acts *a)
{
	return a->dres;
}

int rl_model_logits(struct rl_model *m, struct rl_acts *a, float *logits_host, char *err,
                    size_t errlen)
{
	int rows = a->n_real, V = m->shard.vocab;

	if (m->shard.cp.size > 1) {
		snprintf(err, errlen, "full logits under context parallelism are not implemented");
		return -1;
	}
	size_t bytes = (size_t)a->n_tokens * (size_t)V * sizeof(float);
	bool direct = m->base_ops == &rl_ops_cpu && m->shard.tp.size == 1;
	float *dev = direct ? logits_host : rl_ops_alloc(m->ops, RL_MEM_ACTIVATIONS, bytes);
	int rc = -1;

	if (!dev) {
		snprintf(err, errlen, "cannot allocate %zu bytes of logits", bytes);
		return -1;
	}
	if (m->ops->linear_forward(rl_buf_f32(dev), rl_cbuf_f32(a->hf),
	                           rl_cbuf_f32(m->lm_head->data), rl_cbuf_f32(NULL), rows,
	                           m->cfg.hidden_size, V, NULL)) {
		snprintf(err, errlen, "lm_head failed");
		goto out;
	}
	if (!direct && rl_tp_gather_vocab(m, dev, rows, logits_host, err, errlen))
		goto out;
	rc = 0;
out:
	if (!direct)
		rl_ops_release(m->ops, dev);
	return rc;
}

/* The logprobs of all T rows (dev, backend memory) under tensor or
 * context parallelism, on the host. Vocabulary-parallel log-softmax
 * (Megatron's): each rank has the lse of its slice and the target's logit
 * where it holds the target; the lse of the whole vocabulary is their
 * logsumexp, and the target's logit comes from the one rank that has it.
 * The whole lse replaces the slice's for the backward pass. Context
 * parallelism then gathers every rank's rows into the caller's order. */
static int combine_parallel(struct rl_model *m, struct rl_acts *a, const float *dev,
                            float *logprob_host, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int T = a->n_tokens, rc = -1;
	size_t bytes = (size_t)T * sizeof(float);
	float *lp = malloc(bytes ? bytes : 1), *lse = malloc(bytes ? bytes : 1);

	if (!lp || !lse || ops->to_host(lp, dev, bytes, NULL) ||
	    (m->shard.tp.size > 1 && ops->to_host(lse, a->lm_lse, bytes, NULL))) {
		snprintf(err, errlen, "copying the log-probabilities to the host failed");
		goto out;
	}
	if (m->shard.tp.size > 1) {
		rl_tp_combine_logprobs(m, lp, lse, a->targets_host, T, a->tp_host);
		if (ops->from_host(a->lm_lse, lse, bytes, NULL)) {
			snprintf(err, errlen, "copying the whole lse to the %s backend failed",
			         ops->name);
			goto out;
		}
	}
	for (int t = 0; t < T; t++)
		lp[t] *= a->target_mask[t];
	if (m->shard.cp.size > 1)
		rl_cp_gather_logprobs(m, a, lp, logprob_host);
	else
		memcpy(logprob_host, lp, (size_t)a->n_real * sizeof *lp);
	rc = 0;
out:
	free(lp);
	free(lse);
	return rc;
}

/* The logprob of each row's target, masked, into logprob_host. */
int rl_model_logprobs(struct rl_model *m, struct rl_acts *a, float *logprob_host, float logit_scale,
                      int vocab_chunk, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int V = m->shard.vocab, T = a->n_tokens;
	struct rl_lm_logprobs_shape shape = {T, m->cfg.hidden_size, V,
	                                     vocab_chunk <= 0 || vocab_chunk > V ? V : vocab_chunk,
	                                     logit_scale};
	long need = rl_lm_logprobs_work_floats(&shape, RL_F32);
	/* padded rows need room the caller did not give */
	bool direct = m->base_ops == &rl_ops_cpu && T == a->n_real && m->shard.cp.size == 1;
	float *dev = direct ? logprob_host : a->lm_vec;

	if (need > a->lm_work_floats) {
		rl_ops_release(ops, a->lm_work);
		a->lm_work = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, (size_t)need * sizeof(float));
		a->lm_work_floats = a->lm_work ? need : 0;
		if (!a->lm_work) {
			snprintf(err, errlen, "cannot allocate %zu bytes for log-probabilities",
			         (size_t)need * sizeof(float));
			return -1;
		}
	}
	if (ops->lm_logprobs_forward(dev, a->lm_lse, rl_cbuf_f32(a->hf),
	                             rl_cbuf_f32(m->lm_head->data), a->targets, &shape, a->lm_work,
	                             NULL)) {
		snprintf(err, errlen, "lm_head log-probabilities failed");
		return -1;
	}
	a->logit_chunk = shape.chunk;
	a->logit_scale = logit_scale;
	if (m->shard.tp.size == 1 && m->shard.cp.size == 1) {
		if (dev != logprob_host &&
		    ops->to_host(logprob_host, dev, (size_t)a->n_real * sizeof(float), NULL)) {
			snprintf(err, errlen, "copying the log-probabilities to the host failed");
			return -1;
		}
		for (int t = 0; t < a->n_real; t++)
			logprob_host[t] *= a->target_mask[t];
		return 0;
	}
	return combine_parallel(m, a, dev, logprob_host, err, errlen);
}
