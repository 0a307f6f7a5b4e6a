/* The forward pass over packed sequences, keeping what the backward pass
 * needs, and the two heads on top of it: full logits and token log-probs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/model/acts.h"
#include "runtime/model/forward_util.h"

static int upload_batch(struct rl_model *m, struct rl_acts *a, const struct rl_batch *b, char *err,
                        size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int32_t *pos = malloc((size_t)b->n_tokens * sizeof *pos);
	int32_t *tgt = malloc((size_t)b->n_tokens * sizeof *tgt);
	int rc = -1;

	if (!pos || !tgt) {
		snprintf(err, errlen, "out of memory for a batch of %d tokens", b->n_tokens);
		goto out;
	}
	if (b->cu_seqlens[0] != 0 || b->cu_seqlens[b->n_seqs] != b->n_tokens) {
		snprintf(err, errlen, "cu_seqlens must run from 0 to the %d tokens", b->n_tokens);
		goto out;
	}
	for (int s = 0; s < b->n_seqs; s++) {
		if (b->cu_seqlens[s + 1] < b->cu_seqlens[s]) {
			snprintf(err, errlen, "cu_seqlens decreases at sequence %d", s);
			goto out;
		}
		for (int t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++)
			pos[t] = t - b->cu_seqlens[s];
	}
	for (int t = 0; t < b->n_tokens; t++) {
		int32_t y = b->targets ? b->targets[t] : -1;

		if (y < -1 || y >= m->cfg.vocab_size) {
			snprintf(err, errlen,
			         "target %d of token %d is outside the vocabulary (%d)", y, t,
			         m->cfg.vocab_size);
			goto out;
		}
		a->target_mask[t] = y >= 0 ? 1.0f : 0.0f;
		tgt[t] = y >= 0 ? y : 0;
	}
	size_t n = (size_t)b->n_tokens * sizeof(int32_t);
	if (ops->from_host(a->ids, b->ids, n, NULL) || ops->from_host(a->pos, pos, n, NULL) ||
	    ops->from_host(a->targets, tgt, n, NULL) ||
	    ops->from_host(a->cu_seqlens, b->cu_seqlens, (size_t)(b->n_seqs + 1) * sizeof(int32_t),
	                   NULL)) {
		snprintf(err, errlen, "copying the batch to the %s backend failed", ops->name);
		goto out;
	}
	a->n_tokens = b->n_tokens;
	a->n_seqs = b->n_seqs;
	rc = 0;
out:
	free(pos);
	free(tgt);
	return rc;
}

static int layer_forward(struct rl_model *m, struct rl_acts *a, int l, float *x_out, char *err,
                         size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_config *c = &m->cfg;
	struct rl_layer_acts *L = &a->layers[l];
	int T = a->n_tokens, d = c->hidden_size;
	int H = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim;
	float eps = (float)c->rms_norm_eps;
	struct rl_attention_shape shape = {H, Hkv, D, (float)(1.0 / sqrt((double)D))};
	float *q = c->qk_norm ? L->q_raw : L->q, *k = c->qk_norm ? L->k_raw : L->k;

	RL_TRY(ops->rmsnorm_forward(L->xn1, L->rstd1, L->x_in, P(ATTN_NORM), T, d, eps, NULL),
	       "layer %d: input_layernorm", l);
	struct rl_qkv_out o = {q, k, L->v, L->q, L->k, L->q_rstd, L->k_rstd};
	if (rl_block_qkv(m, l, L->xn1, a->pos, T, &o, err, errlen))
		return -1;
	RL_TRY(ops->attention_forward(L->att, L->lse, L->q, L->k, L->v, a->cu_seqlens, a->n_seqs,
	                              &shape, NULL),
	       "layer %d: attention", l);
	RL_TRY(ops->linear_forward(L->x_mid, L->att, P(O), P(O_BIAS), T, H * D, d, NULL),
	       "layer %d: o_proj", l);
	RL_TRY(ops->add(L->x_mid, L->x_in, (int64_t)T * d, NULL), "layer %d: residual", l);
	RL_TRY(ops->rmsnorm_forward(L->xn2, L->rstd2, L->x_mid, P(MLP_NORM), T, d, eps, NULL),
	       "layer %d: post_attention_layernorm", l);
	if (rl_block_mlp(m, l, L->xn2, L->gate, L->up, L->h, x_out, T, err, errlen))
		return -1;
	RL_TRY(ops->add(x_out, L->x_mid, (int64_t)T * d, NULL), "layer %d: residual", l);
	return 0;
}

int rl_model_forward(struct rl_model *m, struct rl_acts *a, const struct rl_batch *b, char *err,
                     size_t errlen)
{
	const struct rl_model_config *c = &m->cfg;
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
	if (upload_batch(m, a, b, err, errlen))
		return -1;
	RL_TRY(m->ops->embedding_forward(a->layers[0].x_in, a->ids, m->embed->data, b->n_tokens, d,
	                                 c->vocab_size, NULL),
	       "embedding");
	for (int l = 0; l < c->n_layers; l++) {
		float *x_out = l + 1 < c->n_layers ? a->layers[l + 1].x_in : a->x_final;

		if (layer_forward(m, a, l, x_out, err, errlen))
			return -1;
	}
	RL_TRY(m->ops->rmsnorm_forward(a->hf, a->rstd_f, a->x_final, m->final_norm->data,
	                               b->n_tokens, d, (float)c->rms_norm_eps, NULL),
	       "final norm");
	return 0;
}

int rl_model_logits(struct rl_model *m, struct rl_acts *a, float *logits_host, char *err,
                    size_t errlen)
{
	size_t bytes = (size_t)a->n_tokens * (size_t)m->cfg.vocab_size * sizeof(float);
	float *dev = m->ops == &rl_ops_cpu ? logits_host : m->ops->alloc(bytes);
	int rc = -1;

	if (!dev) {
		snprintf(err, errlen, "cannot allocate %zu bytes of logits", bytes);
		return -1;
	}
	if (m->ops->linear_forward(dev, a->hf, m->lm_head->data, NULL, a->n_tokens,
	                           m->cfg.hidden_size, m->cfg.vocab_size, NULL)) {
		snprintf(err, errlen, "lm_head failed");
		goto out;
	}
	if (dev != logits_host && m->ops->to_host(logits_host, dev, bytes, NULL)) {
		snprintf(err, errlen, "copying the logits to the host failed");
		goto out;
	}
	rc = 0;
out:
	if (dev != logits_host)
		m->ops->release(dev);
	return rc;
}

int rl_model_logprobs(struct rl_model *m, struct rl_acts *a, float *logprob_host, float logit_scale,
                      int vocab_chunk, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int V = m->cfg.vocab_size;
	struct rl_lm_logprobs_shape shape = {a->n_tokens, m->cfg.hidden_size, V,
	                                     vocab_chunk <= 0 || vocab_chunk > V ? V : vocab_chunk,
	                                     logit_scale};
	long need = rl_lm_logprobs_work_floats(&shape);
	float *dev = ops == &rl_ops_cpu ? logprob_host : a->lm_vec;

	if (need > a->lm_work_floats) {
		ops->release(a->lm_work);
		a->lm_work = ops->alloc((size_t)need * sizeof(float));
		a->lm_work_floats = a->lm_work ? need : 0;
		if (!a->lm_work) {
			snprintf(err, errlen, "cannot allocate %zu bytes for log-probabilities",
			         (size_t)need * sizeof(float));
			return -1;
		}
	}
	if (ops->lm_logprobs_forward(dev, a->lm_lse, a->hf, m->lm_head->data, a->targets, &shape,
	                             a->lm_work, NULL)) {
		snprintf(err, errlen, "lm_head log-probabilities failed");
		return -1;
	}
	if (dev != logprob_host &&
	    ops->to_host(logprob_host, dev, (size_t)a->n_tokens * sizeof(float), NULL)) {
		snprintf(err, errlen, "copying the log-probabilities to the host failed");
		return -1;
	}
	for (int t = 0; t < a->n_tokens; t++)
		logprob_host[t] *= a->target_mask[t];
	a->logit_chunk = shape.chunk;
	a->logit_scale = logit_scale;
	return 0;
}
