/* The backward pass, mirror of forward.c. dres carries the gradient of the
 * residual stream down the layers; each block adds its own contribution to
 * it (the residual connection passes the rest through unchanged). Parameter
 * gradients are added to, so micro-batches accumulate. */
#include <math.h>
#include <stdio.h>

#include "runtime/model/acts.h"
#include "runtime/model/forward_util.h"

static int zero(const struct rl_ops *ops, float *p, size_t floats)
{
	return ops->zero(p, floats * sizeof(float), NULL);
}

/* The residual stream's gradient dres (this rank's rows) as the whole
 * [T, d] a row-parallel layer's backward reads. */
static float *whole_dres(struct rl_model *m, struct rl_acts *a)
{
	const struct rl_rows *r = &a->rows;
	int d = m->cfg.hidden_size;

	if (!r->sp)
		return a->dres;
	rl_tp_gather_rows(m, r, a->dres, a->tp_full, d, "residual gradient all-gather");
	return a->tp_full;
}

/* dxn [T, d], this rank's part of the gradient of a column-parallel
 * layer's input, summed over the group: this rank's rows. */
static float *summed_dxn(struct rl_model *m, struct rl_acts *a, const char *what)
{
	const struct rl_rows *r = &a->rows;
	float *out = r->sp ? a->tp_local : a->dxn;

	rl_tp_sum_rows(m, r, a->dxn, out, m->cfg.hidden_size, what);
	return out;
}

static int mlp_backward(struct rl_model *m, struct rl_acts *a, int l, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_config *c = &m->cfg;
	struct rl_layer_acts *L = &a->layers[l];
	int T = a->n_tokens, n = a->rows.n, d = c->hidden_size, inter = m->shard.intermediate;
	size_t ti = (size_t)T * (size_t)inter;
	float *dres = whole_dres(m, a);

	if (L->moe) {
		RL_TRY(zero(ops, a->dxn, (size_t)T * (size_t)d), "layer %d: zeroing", l);
		if (rl_moe_backward(m, l, L->moe, dres, L->xn2, a->dxn, a->aux_coef, err, errlen))
			return -1;
		goto norm;
	}
	RL_TRY(zero(ops, a->dh, ti), "layer %d: zeroing", l);
	RL_TRY(ops->linear_backward(rl_buf_f32(a->dh), G(DOWN), G(DOWN_BIAS), rl_cbuf_f32(dres),
	                            rl_cbuf_f32(L->h), rl_cbuf_f32(P(DOWN)), T, inter, d, NULL),
	       "layer %d: down_proj backward", l);
	RL_TRY(zero(ops, a->dgate, ti) || zero(ops, a->dup, ti), "layer %d: zeroing", l);
	RL_TRY(ops->swiglu_backward(rl_buf_f32(a->dgate), rl_buf_f32(a->dup), rl_cbuf_f32(a->dh),
	                            rl_cbuf_f32(L->gate), rl_cbuf_f32(L->up), (int64_t)ti, NULL),
	       "layer %d: swiglu backward", l);
	RL_TRY(zero(ops, a->dxn, (size_t)T * (size_t)d), "layer %d: zeroing", l);
	RL_TRY(ops->linear_backward(rl_buf_f32(a->dxn), G(GATE), G(GATE_BIAS),
	                            rl_cbuf_f32(a->dgate), rl_cbuf_f32(L->xn2),
	                            rl_cbuf_f32(P(GATE)), T, d, inter, NULL),
	       "layer %d: gate_proj backward", l);
	RL_TRY(ops->linear_backward(rl_buf_f32(a->dxn), G(UP), G(UP_BIAS), rl_cbuf_f32(a->dup),
	                            rl_cbuf_f32(L->xn2), rl_cbuf_f32(P(UP)), T, d, inter, NULL),
	       "layer %d: up_proj backward", l);
norm:;
	float *dxn = summed_dxn(m, a, "MLP input gradient sum");
	RL_TRY(ops->rmsnorm_backward(rl_buf_f32(a->dres), G(MLP_NORM), rl_cbuf_f32(dxn),
	                             rl_cbuf_f32(L->x_mid), rl_cbuf_f32(P(MLP_NORM)), L->rstd2, n,
	                             d, NULL),
	       "layer %d: post_attention_layernorm backward", l);
	return 0;
}

/* Context parallelism: the keys and values of the whole batch gathered
 * again (later layers reused the buffers), their gradients from this
 * rank's queries summed back to the ranks that own their rows. */
static int cp_attention_backward(struct rl_model *m, struct rl_acts *a, struct rl_layer_acts *L,
                                 const struct rl_attention_shape *shape, char *err, size_t errlen)
{
	int kvd = shape->n_kv_heads * shape->head_dim;
	size_t full = (size_t)m->shard.cp.size * (size_t)a->n_tokens * (size_t)kvd;

	rl_cp_gather_kv(m, a, L->k, a->k_full, kvd, "context-parallel keys all-gather");
	rl_cp_gather_kv(m, a, L->v, a->v_full, kvd, "context-parallel values all-gather");
	RL_TRY(zero(m->ops, a->dk_full, full) || zero(m->ops, a->dv_full, full),
	       "attention backward: zeroing");
	RL_TRY(m->ops->attention_chunks_backward(a->dq, a->dk_full, a->dv_full, a->datt, L->q,
	                                         a->k_full, a->v_full, L->att, L->lse, &a->chunks,
	                                         shape, NULL),
	       "attention backward");
	rl_cp_scatter_kv_grad(m, a, a->dk_full, a->dk, kvd, "context-parallel key gradient sum");
	rl_cp_scatter_kv_grad(m, a, a->dv_full, a->dv, kvd, "context-parallel value gradient sum");
	return 0;
}

static int attention_backward(struct rl_model *m, struct rl_acts *a, int l, char *err,
                              size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_config *c = &m->cfg;
	struct rl_layer_acts *L = &a->layers[l];
	int T = a->n_tokens, n = a->rows.n, d = c->hidden_size;
	int H = m->shard.n_heads, Hkv = m->shard.n_kv_heads, D = c->head_dim;
	size_t qn = (size_t)T * (size_t)H * (size_t)D, kvn = (size_t)T * (size_t)Hkv * (size_t)D;
	struct rl_attention_shape shape = {H, Hkv, D, 0};
	float *dq = a->dq, *dk = a->dk, *dres = whole_dres(m, a);

	shape.scale = (float)(1.0 / sqrt((double)D));
	RL_TRY(zero(ops, a->datt, qn), "layer %d: zeroing", l);
	RL_TRY(ops->linear_backward(rl_buf_f32(a->datt), G(O), G(O_BIAS), rl_cbuf_f32(dres),
	                            rl_cbuf_f32(L->att), rl_cbuf_f32(P(O)), T, H * D, d, NULL),
	       "layer %d: o_proj backward", l);
	RL_TRY(zero(ops, a->dq, qn) || zero(ops, a->dk, kvn) || zero(ops, a->dv, kvn),
	       "layer %d: zeroing", l);
	if (m->shard.cp.size > 1) {
		if (cp_attention_backward(m, a, L, &shape, err, errlen))
			return -1;
	} else {
		RL_TRY(ops->attention_backward(a->dq, a->dk, a->dv, a->datt, L->q, L->k, L->v,
		                               L->att, L->lse, a->cu_seqlens, a->n_seqs, &shape,
		                               NULL),
		       "layer %d: attention backward", l);
	}
	RL_TRY(ops->rope_backward(rl_buf_f32(a->dq), a->pos, m->inv_freq, T, H, D, NULL),
	       "layer %d: rope backward (q)", l);
	RL_TRY(ops->rope_backward(rl_buf_f32(a->dk), a->pos, m->inv_freq, T, Hkv, D, NULL),
	       "layer %d: rope backward (k)", l);
	if (c->qk_norm) {
		RL_TRY(zero(ops, a->dq_raw, qn) || zero(ops, a->dk_raw, kvn), "layer %d: zeroing",
		       l);
		RL_TRY(ops->rmsnorm_backward(rl_buf_f32(a->dq_raw), G(Q_NORM), rl_cbuf_f32(a->dq),
		                             rl_cbuf_f32(L->q_raw), rl_cbuf_f32(P(Q_NORM)),
		                             L->q_rstd, T * H, D, NULL),
		       "layer %d: q_norm backward", l);
		RL_TRY(ops->rmsnorm_backward(rl_buf_f32(a->dk_raw), G(K_NORM), rl_cbuf_f32(a->dk),
		                             rl_cbuf_f32(L->k_raw), rl_cbuf_f32(P(K_NORM)),
		                             L->k_rstd, T * Hkv, D, NULL),
		       "layer %d: k_norm backward", l);
		dq = a->dq_raw;
		dk = a->dk_raw;
	}
	RL_TRY(zero(ops, a->dxn, (size_t)T * (size_t)d), "layer %d: zeroing", l);
	RL_TRY(ops->linear_backward(rl_buf_f32(a->dxn), G(Q), G(Q_BIAS), rl_cbuf_f32(dq),
	                            rl_cbuf_f32(L->xn1), rl_cbuf_f32(P(Q)), T, d, H * D, NULL),
	       "layer %d: q_proj backward", l);
	RL_TRY(ops->linear_backward(rl_buf_f32(a->dxn), G(K), G(K_BIAS), rl_cbuf_f32(dk),
	                            rl_cbuf_f32(L->xn1), rl_cbuf_f32(P(K)), T, d, Hkv * D, NULL),
	       "layer %d: k_proj backward", l);
	RL_TRY(ops->linear_backward(rl_buf_f32(a->dxn), G(V), G(V_BIAS), rl_cbuf_f32(a->dv),
	                            rl_cbuf_f32(L->xn1), rl_cbuf_f32(P(V)), T, d, Hkv * D, NULL),
	       "layer %d: v_proj backward", l);
	float *dxn = summed_dxn(m, a, "attention input gradient sum");
	RL_TRY(ops->rmsnorm_backward(rl_buf_f32(a->dres), G(ATTN_NORM), rl_cbuf_f32(dxn),
	                             rl_cbuf_f32(L->x_in), rl_cbuf_f32(P(ATTN_NORM)), L->rstd1, n,
	                             d, NULL),
	       "layer %d: input_layernorm backward", l);
	return 0;
}

/* The stage's layers, from dres (the gradient of the stage's output),
 * down to the embedding on the first stage; elsewhere dres is left holding
 * the gradient of the stage's input. */
static int stage_backward(struct rl_model *m, struct rl_acts *a, int first, int end, char *err,
                          size_t errlen)
{
	for (int l = end - 1; l >= first; l--) {
		/* checkpointed: the layer's activations again, from its input;
		 * its output is already known, and is not overwritten */
		if (a->recompute && rl_layer_forward(m, a, l, a->recompute_out, err, errlen))
			return -1;
		if (mlp_backward(m, a, l, err, errlen) || attention_backward(m, a, l, err, errlen))
			return -1;
		/* the update's last micro-batch: this layer's gradients, and
		 * everything after it in the flat buffer, are final */
		if (m->overlap.grads_ready && m->overlap.last_microbatch) {
			int64_t lo, hi;

			rl_model_layer_span(m, l, &lo, &hi);
			m->overlap.grads_ready(m->overlap.ctx, lo);
		}
	}
	if (rl_model_first_stage(m))
		RL_TRY(m->ops->embedding_backward(m->embed->grad, rl_cbuf_f32(whole_dres(m, a)),
		                                  a->ids, a->n_tokens, m->cfg.hidden_size, NULL),
		       "embedding backward");
	if (m->overlap.grads_ready && m->overlap.last_microbatch)
		m->overlap.grads_ready(m->overlap.ctx, 0);
	return 0;
}

int rl_model_backward(struct rl_model *m, struct rl_acts *a, const float *dlogprob_host, char *err,
                      size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_config *c = &m->cfg;
	int T = a->n_tokens, n = a->rows.n, d = c->hidden_size;
	struct rl_lm_logprobs_shape shape = {T, d, m->shard.vocab, a->logit_chunk, a->logit_scale};
	size_t td = (size_t)T * (size_t)d;
	float *masked = a->lm_vec_host;

	int first = m->shard.first_layer, end = first + m->shard.n_layers;

	if (!rl_model_last_stage(m)) {
		if (dlogprob_host) {
			snprintf(err, errlen,
			         "backward: a loss gradient on a stage before the last");
			return -1;
		}
		return stage_backward(m, a, first, end, err, errlen);
	}
	if (a->logit_chunk <= 0) {
		snprintf(err, errlen, "backward without a log-probability forward pass");
		return -1;
	}
	/* tokens without a target, and the padding, get no gradient */
	for (int t = 0; t < T; t++) {
		int32_t o = m->shard.cp.size > 1 ? rl_cp_origin(m, a, t) : t < a->n_real ? t : -1;

		masked[t] = o >= 0 ? dlogprob_host[o] * a->target_mask[t] : 0.0f;
	}
	RL_TRY(ops->from_host(a->lm_vec, masked, (size_t)T * sizeof(float), NULL) ||
	           zero(ops, a->dhf, td) || zero(ops, a->dres, td),
	       "backward: staging the loss gradient");
	RL_TRY(ops->lm_logprobs_backward(rl_buf_f32(a->dhf), m->lm_head->grad, a->lm_vec,
	                                 rl_cbuf_f32(a->hf), rl_cbuf_f32(m->lm_head->data),
	                                 a->targets, a->lm_lse, &shape, a->lm_work, NULL),
	       "lm_head backward");
	float *dhf = a->rows.sp ? a->tp_local : a->dhf;
	rl_tp_sum_rows(m, &a->rows, a->dhf, dhf, d, "vocab-parallel LM head gradient sum");
	RL_TRY(ops->rmsnorm_backward(rl_buf_f32(a->dres), m->final_norm->grad, rl_cbuf_f32(dhf),
	                             rl_cbuf_f32(a->x_final), rl_cbuf_f32(m->final_norm->data),
	                             a->rstd_f, n, d, NULL),
	       "final norm backward");
	return stage_backward(m, a, first, end, err, errlen);
}
