/* The pieces of a decoder layer that the training forward pass and the
 * KV-cache step share: the q/k/v projections with the Qwen3 norms and the
 * rotation, and the SwiGLU MLP, over this rank's heads and columns (the
 * MLP's output is this rank's part of the sum over the tensor-parallel
 * group). */
#include "runtime/model/forward_util.h"

int rl_block_qkv(struct rl_model *m, int l, const float *xn, const int32_t *pos, int T,
                 const struct rl_qkv_out *o, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_config *c = &m->cfg;
	int d = c->hidden_size, H = m->shard.n_heads, Hkv = m->shard.n_kv_heads, D = c->head_dim;
	float eps = (float)c->rms_norm_eps;

	RL_TRY(ops->linear_forward(rl_buf_f32(o->q_proj), rl_cbuf_f32(xn), rl_cbuf_f32(P(Q)),
	                           rl_cbuf_f32(P(Q_BIAS)), T, d, H * D, NULL),
	       "layer %d: q_proj", l);
	RL_TRY(ops->linear_forward(rl_buf_f32(o->k_proj), rl_cbuf_f32(xn), rl_cbuf_f32(P(K)),
	                           rl_cbuf_f32(P(K_BIAS)), T, d, Hkv * D, NULL),
	       "layer %d: k_proj", l);
	RL_TRY(ops->linear_forward(rl_buf_f32(o->v), rl_cbuf_f32(xn), rl_cbuf_f32(P(V)),
	                           rl_cbuf_f32(P(V_BIAS)), T, d, Hkv * D, NULL),
	       "layer %d: v_proj", l);
	if (c->qk_norm) {
		RL_TRY(ops->rmsnorm_forward(rl_buf_f32(o->q), o->q_rstd, rl_cbuf_f32(o->q_proj),
		                            rl_cbuf_f32(P(Q_NORM)), T * H, D, eps, NULL),
		       "layer %d: q_norm", l);
		RL_TRY(ops->rmsnorm_forward(rl_buf_f32(o->k), o->k_rstd, rl_cbuf_f32(o->k_proj),
		                            rl_cbuf_f32(P(K_NORM)), T * Hkv, D, eps, NULL),
		       "layer %d: k_norm", l);
	}
	RL_TRY(ops->rope_forward(rl_buf_f32(o->q), pos, m->inv_freq, T, H, D, NULL),
	       "layer %d: rope (q)", l);
	RL_TRY(ops->rope_forward(rl_buf_f32(o->k), pos, m->inv_freq, T, Hkv, D, NULL),
	       "layer %d: rope (k)", l);
	return 0;
}

int rl_block_mlp(struct rl_model *m, int l, const float *xn, float *gate, float *up, float *h,
                 float *out, int T, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int d = m->cfg.hidden_size, inter = m->shard.intermediate;

	RL_TRY(ops->linear_forward(rl_buf_f32(gate), rl_cbuf_f32(xn), rl_cbuf_f32(P(GATE)),
	                           rl_cbuf_f32(P(GATE_BIAS)), T, d, inter, NULL),
	       "layer %d: gate_proj", l);
	RL_TRY(ops->linear_forward(rl_buf_f32(up), rl_cbuf_f32(xn), rl_cbuf_f32(P(UP)),
	                           rl_cbuf_f32(P(UP_BIAS)), T, d, inter, NULL),
	       "layer %d: up_proj", l);
	RL_TRY(ops->swiglu_forward(rl_buf_f32(h), rl_cbuf_f32(gate), rl_cbuf_f32(up),
	                           (int64_t)T * inter, NULL),
	       "layer %d: swiglu", l);
	RL_TRY(ops->linear_forward(rl_buf_f32(out), rl_cbuf_f32(h), rl_cbuf_f32(P(DOWN)),
	                           rl_cbuf_f32(rl_tp_row_bias(m, P(DOWN_BIAS))), T, inter, d, NULL),
	       "layer %d: down_proj", l);
	return 0;
}
