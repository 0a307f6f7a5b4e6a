/* A mixture-of-experts layer, forward and backward. The router runs on the
 * host (its choices size everything after it); every row-sized step is an
 * op of the table: the gather into send order is the embedding gather, the
 * experts are grouped GEMMs, the weighted sum is the combine, whose k + 1-th
 * copy per token is the shared expert's output scaled by its sigmoid gate.
 * Buffers are allocated per pass: their sizes follow the routing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/memory_use.h"
#include "runtime/model/forward_util.h"
#include "runtime/model/moe.h"

static int own(void ***list, int *n, int *cap, void *p)
{
	if (*n == *cap) {
		int c = *cap ? 2 * *cap : 32;
		void **l = realloc(*list, (size_t)c * sizeof *l);

		if (!l)
			return -1;
		*list = l;
		*cap = c;
	}
	(*list)[(*n)++] = p;
	return 0;
}

/* Backend memory for this pass; NULL sets *failed. */
static void *dev(const struct rl_ops *ops, struct rl_moe_acts *s, size_t bytes, int *failed)
{
	void *p = *failed ? NULL : rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, bytes ? bytes : 4);

	if (p && own(&s->owned, &s->n_owned, &s->cap_owned, p)) {
		rl_ops_release(ops, p);
		p = NULL;
	}
	*failed |= !p;
	return p;
}

static void *host(struct rl_moe_acts *s, size_t bytes, int *failed)
{
	void *p = *failed ? NULL : calloc(1, bytes ? bytes : 4);

	if (p && own(&s->host_owned, &s->n_host, &s->cap_host, p)) {
		free(p);
		p = NULL;
	}
	*failed |= !p;
	return p;
}

static void reset(const struct rl_ops *ops, struct rl_moe_acts *s)
{
	for (int i = 0; i < s->n_owned; i++)
		rl_ops_release(ops, s->owned[i]);
	for (int i = 0; i < s->n_host; i++)
		free(s->host_owned[i]);
	s->n_owned = s->n_host = 0;
	rl_moe_plan_free(&s->plan);
}

void rl_moe_acts_free(const struct rl_ops *ops, struct rl_moe_acts *s)
{
	if (!s)
		return;
	reset(ops, s);
	free(s->owned);
	free(s->host_owned);
	memset(s, 0, sizeof *s);
}

/* Rows go to the experts' ranks and come back by all-to-all, in floats;
 * counts: 2 x ep.size of scratch. */
static void exchange(const struct rl_ep_group *ep, size_t *counts, const float *send,
                     const int32_t *send_rows, float *recv, const int32_t *recv_rows, int n_local,
                     int d, const char *what)
{
	size_t *sc = counts, *rc = counts + ep->size;

	for (int r = 0; r < ep->size; r++) {
		sc[r] = rc[r] = 0;
		for (int e = 0; e < n_local; e++) {
			sc[r] += (size_t)send_rows[r * n_local + e] * (size_t)d;
			rc[r] += (size_t)recv_rows[r * n_local + e] * (size_t)d;
		}
	}
	ep->all_to_all_v(ep->ctx, send, sc, recv, rc, what);
}

/* Upload n int32 from the host; NULL sets *failed. */
static int32_t *upload_ints(const struct rl_ops *ops, struct rl_moe_acts *s, const int32_t *h,
                            size_t n, int *failed)
{
	int32_t *p = dev(ops, s, n * sizeof *p, failed);

	if (p && n && ops->from_host(p, h, n * sizeof *p, NULL))
		*failed = 1;
	return p;
}

/* The routing of rows [first, first + n) and the plan of who gets what. */
static int route(struct rl_model *m, int l, struct rl_moe_acts *s, const float *xn,
                 const uint8_t *real, bool train, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_moe_config *mc = &m->cfg.moe;
	const struct rl_model_shard *sh = &m->shard;
	int E = mc->n_experts, k = mc->top_k, d = m->cfg.hidden_size, n = s->n, failed = 0;
	size_t nE = (size_t)n * (size_t)E, nk = (size_t)n * (size_t)k;
	float *logits = dev(ops, s, nE * sizeof(float), &failed);
	float *logits_h = host(s, nE * sizeof(float), &failed);

	s->probs = host(s, nE * sizeof(float), &failed);
	s->choice = host(s, nk * sizeof(int32_t), &failed);
	s->weight_h = host(s, nk * sizeof(float), &failed);
	s->real = host(s, (size_t)n, &failed);
	if (failed)
		goto oom;
	RL_TRY(ops->linear_forward(rl_buf_f32(logits),
	                           rl_cbuf_f32(xn + (size_t)s->first * (size_t)d),
	                           rl_cbuf_f32(P(ROUTER)), rl_cbuf_f32(NULL), n, d, E, NULL),
	       "layer %d: router", l);
	RL_TRY(ops->to_host(logits_h, logits, nE * sizeof(float), NULL),
	       "layer %d: copying the router logits", l);
	rl_moe_route(logits_h, n, E, k, mc->norm_topk_prob, s->probs, s->choice, s->weight_h);
	for (int t = 0; t < n; t++)
		s->real[t] = real ? real[s->first + t] : 1;
	s->stats = train;
	if (train) {
		float *stats = host(s, (size_t)(2 * E + 1) * sizeof(float), &failed);

		s->f = host(s, (size_t)E * sizeof(float), &failed);
		if (failed)
			goto oom;
		rl_moe_count(s->probs, s->choice, s->real, n, E, k, stats);
		if (sh->tokens.size > 1)
			sh->tokens.all_reduce_host(sh->tokens.ctx, stats, (size_t)(2 * E + 1),
			                           "router load statistics");
		double N = stats[2 * E] > 0 ? stats[2 * E] : 1, aux = 0;

		s->n_batch = stats[2 * E];
		for (int e = 0; e < E; e++) {
			s->f[e] = (float)(stats[e] / (N * k));
			aux += (double)s->f[e] * (stats[E + e] / N);
		}
		s->aux = (float)(aux * E);
	}
	if (rl_moe_plan_send(&s->plan, s->choice, n, k, s->first, sh->ep.size, sh->n_experts))
		goto oom;
	if (sh->ep.size > 1)
		sh->ep.all_to_all_int(sh->ep.ctx, s->plan.send_count, s->plan.recv_count,
		                      (size_t)sh->n_experts, "expert token counts");
	if (rl_moe_plan_recv(&s->plan))
		goto oom;
	return 0;
oom:
	snprintf(err, errlen, "layer %d: out of memory routing %d tokens", l, n);
	return -1;
}

/* The combine's table: the top-k copies, then the shared expert's row. */
static int combine_table(struct rl_model *m, int l, struct rl_moe_acts *s, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int k = m->cfg.moe.top_k, kk = s->kk, n = s->n, failed = 0;
	size_t nkk = (size_t)n * (size_t)kk;
	int32_t *slot = host(s, nkk * sizeof(int32_t), &failed);
	float *w = host(s, nkk * sizeof(float), &failed);

	if (failed) {
		snprintf(err, errlen, "layer %d: out of memory", l);
		return -1;
	}
	for (int t = 0; t < n; t++) {
		for (int j = 0; j < k; j++) {
			slot[(size_t)t * kk + j] = s->plan.slot[(size_t)t * k + j];
			w[(size_t)t * kk + j] = s->weight_h[(size_t)t * k + j];
		}
		if (kk > k) {
			slot[(size_t)t * kk + k] = s->plan.n_send + t;
			w[(size_t)t * kk + k] = s->sig[t];
		}
	}
	s->slot = upload_ints(ops, s, slot, nkk, &failed);
	s->weight = dev(ops, s, nkk * sizeof(float), &failed);
	if (failed || ops->from_host(s->weight, w, nkk * sizeof(float), NULL)) {
		snprintf(err, errlen, "layer %d: staging the expert weights failed", l);
		return -1;
	}
	return 0;
}

/* Qwen2-MoE's shared expert on this rank's rows, its output at rows
 * [n_send, n_send + n) of ys, its gate's sigmoid into s->sig. */
static int shared_forward(struct rl_model *m, int l, struct rl_moe_acts *s, const float *x,
                          char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int d = m->cfg.hidden_size, S = m->cfg.moe.shared_intermediate, n = s->n, failed = 0;
	size_t nS = (size_t)n * (size_t)S;
	float *logit = dev(ops, s, (size_t)n * sizeof(float), &failed);

	s->sig = host(s, (size_t)n * sizeof(float), &failed);
	s->sh_gate = dev(ops, s, nS * sizeof(float), &failed);
	s->sh_up = dev(ops, s, nS * sizeof(float), &failed);
	s->sh_h = dev(ops, s, nS * sizeof(float), &failed);
	if (failed) {
		snprintf(err, errlen, "layer %d: out of memory for the shared expert", l);
		return -1;
	}
	float *y = s->ys + (size_t)s->plan.n_send * (size_t)d;
	RL_TRY(ops->linear_forward(rl_buf_f32(logit), rl_cbuf_f32(x),
	                           rl_cbuf_f32(P(SHARED_EXPERT_GATE)), rl_cbuf_f32(NULL), n, d, 1,
	                           NULL) ||
	           ops->to_host(s->sig, logit, (size_t)n * sizeof(float), NULL),
	       "layer %d: shared_expert_gate", l);
	for (int t = 0; t < n; t++)
		s->sig[t] = (float)(1.0 / (1.0 + exp(-(double)s->sig[t])));
	RL_TRY(
	    ops->linear_forward(rl_buf_f32(s->sh_gate), rl_cbuf_f32(x), rl_cbuf_f32(P(SHARED_GATE)),
	                        rl_cbuf_f32(NULL), n, d, S, NULL) ||
	        ops->linear_forward(rl_buf_f32(s->sh_up), rl_cbuf_f32(x), rl_cbuf_f32(P(SHARED_UP)),
	                            rl_cbuf_f32(NULL), n, d, S, NULL) ||
	        ops->swiglu_forward(rl_buf_f32(s->sh_h), rl_cbuf_f32(s->sh_gate),
	                            rl_cbuf_f32(s->sh_up), (int64_t)nS, NULL) ||
	        ops->linear_forward(rl_buf_f32(y), rl_cbuf_f32(s->sh_h),
	                            rl_cbuf_f32(P(SHARED_DOWN)), rl_cbuf_f32(NULL), n, S, d, NULL),
	    "layer %d: shared expert", l);
	return 0;
}

/* The experts on the rows sent to this rank, and the results back in
 * send order into ys. */
static int experts_forward(struct rl_model *m, int l, struct rl_moe_acts *s, const float *xn,
                           char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_shard *sh = &m->shard;
	const struct rl_moe_plan *p = &s->plan;
	int d = m->cfg.hidden_size, I = m->cfg.moe.intermediate, L = sh->n_experts, failed = 0;
	size_t ns = (size_t)p->n_send, nr = (size_t)p->n_recv, nrI = nr * (size_t)I;
	bool ep = sh->ep.size > 1;
	float *xs = dev(ops, s, ns * d * sizeof(float), &failed);
	float *xr = ep ? dev(ops, s, nr * d * sizeof(float), &failed) : xs;
	/* one rank: the expert order is the send order, so the experts'
	 * outputs go straight to ys */
	float *yp = ep ? dev(ops, s, nr * d * sizeof(float), &failed) : s->ys;
	size_t *counts = host(s, 2 * (size_t)sh->ep.size * sizeof(size_t), &failed);

	s->src = upload_ints(ops, s, p->src, ns, &failed);
	s->perm = ep ? upload_ints(ops, s, p->perm, nr, &failed) : NULL;
	s->inv = ep ? upload_ints(ops, s, p->inv, nr, &failed) : NULL;
	s->xp = ep ? dev(ops, s, nr * d * sizeof(float), &failed) : xs;
	s->gate = dev(ops, s, nrI * sizeof(float), &failed);
	s->up = dev(ops, s, nrI * sizeof(float), &failed);
	s->h = dev(ops, s, nrI * sizeof(float), &failed);
	if (failed) {
		snprintf(err, errlen, "layer %d: out of memory for %d routed tokens", l, p->n_send);
		return -1;
	}
	if (ns)
		RL_TRY(ops->embedding_forward(rl_buf_f32(xs), s->src, rl_cbuf_f32(xn), (int)ns, d,
		                              s->T, NULL),
		       "layer %d: gathering the routed tokens", l);
	if (ep) {
		exchange(&sh->ep, counts, xs, p->send_count, xr, p->recv_count, L, d,
		         "expert dispatch");
		if (nr)
			RL_TRY(ops->embedding_forward(rl_buf_f32(s->xp), s->perm, rl_cbuf_f32(xr),
			                              (int)nr, d, (int)nr, NULL),
			       "layer %d: ordering the received tokens by expert", l);
	}
	RL_TRY(ops->grouped_linear_forward(rl_buf_f32(s->gate), rl_cbuf_f32(s->xp),
	                                   rl_cbuf_f32(P(EXPERT_GATE)), p->offsets, L, d, I, NULL),
	       "layer %d: experts' gate_proj", l);
	RL_TRY(ops->grouped_linear_forward(rl_buf_f32(s->up), rl_cbuf_f32(s->xp),
	                                   rl_cbuf_f32(P(EXPERT_UP)), p->offsets, L, d, I, NULL),
	       "layer %d: experts' up_proj", l);
	RL_TRY(ops->swiglu_forward(rl_buf_f32(s->h), rl_cbuf_f32(s->gate), rl_cbuf_f32(s->up),
	                           (int64_t)nrI, NULL),
	       "layer %d: experts' swiglu", l);
	RL_TRY(ops->grouped_linear_forward(rl_buf_f32(yp), rl_cbuf_f32(s->h),
	                                   rl_cbuf_f32(P(EXPERT_DOWN)), p->offsets, L, I, d, NULL),
	       "layer %d: experts' down_proj", l);
	if (!ep)
		return 0;
	if (nr)
		RL_TRY(ops->embedding_forward(rl_buf_f32(xr), s->inv, rl_cbuf_f32(yp), (int)nr, d,
		                              (int)nr, NULL),
		       "layer %d: ordering the expert outputs by sender", l);
	exchange(&sh->ep, counts, xr, p->recv_count, s->ys, p->send_count, L, d, "expert combine");
	return 0;
}

int rl_moe_forward(struct rl_model *m, int l, struct rl_moe_acts *s, const float *xn, int T,
                   const uint8_t *real, float *out, bool train, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_shard *sh = &m->shard;
	int d = m->cfg.hidden_size, shared = m->cfg.moe.shared_intermediate > 0, failed = 0;
	int64_t first, n;

	reset(ops, s);
	rl_split_range(T, sh->tp.size, sh->tp.rank, &first, &n);
	s->T = T;
	s->first = (int)first;
	s->n = (int)n;
	s->kk = m->cfg.moe.top_k + shared;
	if (route(m, l, s, xn, real, train, err, errlen))
		return -1;
	s->ys =
	    dev(ops, s, (size_t)(s->plan.n_send + (shared ? n : 0)) * d * sizeof(float), &failed);
	if (failed) {
		snprintf(err, errlen, "layer %d: out of memory for the expert outputs", l);
		return -1;
	}
	const float *x = xn + first * d;
	float *o = out + first * d;
	if (experts_forward(m, l, s, xn, err, errlen) ||
	    (shared && shared_forward(m, l, s, x, err, errlen)) ||
	    combine_table(m, l, s, err, errlen))
		return -1;
	if (sh->tp.size > 1)
		RL_TRY(ops->zero(out, (size_t)T * d * sizeof(float), NULL), "layer %d: zeroing", l);
	RL_TRY(ops->moe_combine_forward(rl_buf_f32(o), rl_cbuf_f32(s->ys), s->slot, s->weight,
	                                (int)n, s->kk, d, s->plan.n_send + (shared ? (int)n : 0),
	                                NULL),
	       "layer %d: combining the experts' outputs", l);
	return 0;
}

/* The shared expert's backward pass from dy (its rows of the combine's
 * gradient) and dsig (its gate's), into dx (this rank's rows). */
static int shared_backward(struct rl_model *m, int l, struct rl_moe_acts *s, const float *dy,
                           const float *dsig, const float *x, float *dx, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int d = m->cfg.hidden_size, S = m->cfg.moe.shared_intermediate, n = s->n, failed = 0;
	size_t nS = (size_t)n * (size_t)S;
	float *dlogit_h = host(s, (size_t)n * sizeof(float), &failed);
	float *dlogit = dev(ops, s, (size_t)n * sizeof(float), &failed);
	float *dh = dev(ops, s, nS * sizeof(float), &failed);
	float *dgate = dev(ops, s, nS * sizeof(float), &failed);
	float *dup = dev(ops, s, nS * sizeof(float), &failed);

	if (failed) {
		snprintf(err, errlen, "layer %d: out of memory for the shared expert", l);
		return -1;
	}
	for (int t = 0; t < n; t++)
		dlogit_h[t] = dsig[t] * s->sig[t] * (1.0f - s->sig[t]);
	RL_TRY(ops->zero(dh, nS * sizeof(float), NULL) ||
	           ops->zero(dgate, nS * sizeof(float), NULL) ||
	           ops->zero(dup, nS * sizeof(float), NULL) ||
	           ops->from_host(dlogit, dlogit_h, (size_t)n * sizeof(float), NULL),
	       "layer %d: shared expert staging", l);
	RL_TRY(ops->linear_backward(rl_buf_f32(dh), G(SHARED_DOWN), NULL, rl_cbuf_f32(dy),
	                            rl_cbuf_f32(s->sh_h), rl_cbuf_f32(P(SHARED_DOWN)), n, S, d,
	                            NULL) ||
	           ops->swiglu_backward(rl_buf_f32(dgate), rl_buf_f32(dup), rl_cbuf_f32(dh),
	                                rl_cbuf_f32(s->sh_gate), rl_cbuf_f32(s->sh_up), (int64_t)nS,
	                                NULL) ||
	           ops->linear_backward(rl_buf_f32(dx), G(SHARED_GATE), NULL, rl_cbuf_f32(dgate),
	                                rl_cbuf_f32(x), rl_cbuf_f32(P(SHARED_GATE)), n, d, S,
	                                NULL) ||
	           ops->linear_backward(rl_buf_f32(dx), G(SHARED_UP), NULL, rl_cbuf_f32(dup),
	                                rl_cbuf_f32(x), rl_cbuf_f32(P(SHARED_UP)), n, d, S, NULL) ||
	           ops->linear_backward(rl_buf_f32(dx), G(SHARED_EXPERT_GATE), NULL,
	                                rl_cbuf_f32(dlogit), rl_cbuf_f32(x),
	                                rl_cbuf_f32(P(SHARED_EXPERT_GATE)), n, d, 1, NULL),
	       "layer %d: shared expert backward", l);
	return 0;
}

/* dys (send order) through the experts back to dxs (send order). */
static int experts_backward(struct rl_model *m, int l, struct rl_moe_acts *s, const float *dys,
                            float *dxs, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_model_shard *sh = &m->shard;
	const struct rl_moe_plan *p = &s->plan;
	int d = m->cfg.hidden_size, I = m->cfg.moe.intermediate, L = sh->n_experts, failed = 0;
	size_t nr = (size_t)p->n_recv, nrI = nr * (size_t)I;
	bool ep = sh->ep.size > 1;
	float *dr = ep ? dev(ops, s, nr * d * sizeof(float), &failed) : NULL;
	float *dyp = ep ? dev(ops, s, nr * d * sizeof(float), &failed) : (float *)dys;
	float *dxp = ep ? dev(ops, s, nr * d * sizeof(float), &failed) : dxs;
	float *dh = dev(ops, s, nrI * sizeof(float), &failed);
	float *dgate = dev(ops, s, nrI * sizeof(float), &failed);
	float *dup = dev(ops, s, nrI * sizeof(float), &failed);
	size_t *counts = host(s, 2 * (size_t)sh->ep.size * sizeof(size_t), &failed);

	if (failed) {
		snprintf(err, errlen, "layer %d: out of memory for %d routed tokens", l, p->n_send);
		return -1;
	}
	if (ep) {
		exchange(&sh->ep, counts, dys, p->send_count, dr, p->recv_count, L, d,
		         "expert output gradient dispatch");
		if (nr)
			RL_TRY(ops->embedding_forward(rl_buf_f32(dyp), s->perm, rl_cbuf_f32(dr),
			                              (int)nr, d, (int)nr, NULL),
			       "layer %d: ordering the gradients by expert", l);
	}
	RL_TRY(ops->zero(dh, nrI * sizeof(float), NULL) ||
	           ops->zero(dgate, nrI * sizeof(float), NULL) ||
	           ops->zero(dup, nrI * sizeof(float), NULL) ||
	           ops->zero(dxp, nr * d * sizeof(float), NULL),
	       "layer %d: zeroing", l);
	RL_TRY(ops->grouped_linear_backward(rl_buf_f32(dh), G(EXPERT_DOWN), rl_cbuf_f32(dyp),
	                                    rl_cbuf_f32(s->h), rl_cbuf_f32(P(EXPERT_DOWN)),
	                                    p->offsets, L, I, d, NULL),
	       "layer %d: experts' down_proj backward", l);
	RL_TRY(ops->swiglu_backward(rl_buf_f32(dgate), rl_buf_f32(dup), rl_cbuf_f32(dh),
	                            rl_cbuf_f32(s->gate), rl_cbuf_f32(s->up), (int64_t)nrI, NULL),
	       "layer %d: experts' swiglu backward", l);
	RL_TRY(ops->grouped_linear_backward(rl_buf_f32(dxp), G(EXPERT_GATE), rl_cbuf_f32(dgate),
	                                    rl_cbuf_f32(s->xp), rl_cbuf_f32(P(EXPERT_GATE)),
	                                    p->offsets, L, d, I, NULL),
	       "layer %d: experts' gate_proj backward", l);
	RL_TRY(ops->grouped_linear_backward(rl_buf_f32(dxp), G(EXPERT_UP), rl_cbuf_f32(dup),
	                                    rl_cbuf_f32(s->xp), rl_cbuf_f32(P(EXPERT_UP)),
	                                    p->offsets, L, d, I, NULL),
	       "layer %d: experts' up_proj backward", l);
	if (!ep)
		return 0;
	if (nr)
		RL_TRY(ops->embedding_forward(rl_buf_f32(dr), s->inv, rl_cbuf_f32(dxp), (int)nr, d,
		                              (int)nr, NULL),
		       "layer %d: ordering the input gradients by sender", l);
	exchange(&sh->ep, counts, dr, p->recv_count, dxs, p->send_count, L, d,
	         "expert input gradient combine");
	return 0;
}

/* The router's gradient: the weights' through the top-k and the softmax,
 * plus the load-balancing loss's, d aux / d p[t, e] = E f_e / N. */
static int router_backward(struct rl_model *m, int l, struct rl_moe_acts *s, const float *dw_h,
                           const float *x, float *dx, float aux_coef, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	const struct rl_moe_config *mc = &m->cfg.moe;
	int E = mc->n_experts, k = mc->top_k, kk = s->kk, d = m->cfg.hidden_size, n = s->n;
	int failed = 0;
	size_t nE = (size_t)n * (size_t)E;
	float *dweight = host(s, (size_t)n * k * sizeof(float), &failed);
	float *dall = host(s, (size_t)E * sizeof(float), &failed);
	float *dlogits_h = host(s, nE * sizeof(float), &failed);
	float *dlogits = dev(ops, s, nE * sizeof(float), &failed);

	if (failed) {
		snprintf(err, errlen, "layer %d: out of memory for the router's gradient", l);
		return -1;
	}
	for (int t = 0; t < n; t++)
		for (int j = 0; j < k; j++)
			dweight[(size_t)t * k + j] = dw_h[(size_t)t * kk + j];
	bool aux = s->stats && aux_coef != 0.0f && s->n_batch > 0;
	for (int e = 0; e < E && aux; e++)
		dall[e] = (float)((double)aux_coef * E * s->f[e] / s->n_batch);
	if (rl_moe_route_backward(s->probs, s->choice, s->weight_h, dweight, aux ? dall : NULL,
	                          s->real, n, E, k, mc->norm_topk_prob, dlogits_h)) {
		snprintf(err, errlen, "layer %d: out of memory for the router's gradient", l);
		return -1;
	}
	RL_TRY(ops->from_host(dlogits, dlogits_h, nE * sizeof(float), NULL),
	       "layer %d: staging the router's gradient", l);
	RL_TRY(ops->linear_backward(rl_buf_f32(dx), m->freeze_router ? NULL : G(ROUTER), NULL,
	                            rl_cbuf_f32(dlogits), rl_cbuf_f32(x), rl_cbuf_f32(P(ROUTER)), n,
	                            d, E, NULL),
	       "layer %d: router backward", l);
	return 0;
}

int rl_moe_backward(struct rl_model *m, int l, struct rl_moe_acts *s, const float *dout,
                    const float *xn, float *dxn, float aux_coef, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int d = m->cfg.hidden_size, k = m->cfg.moe.top_k, kk = s->kk, n = s->n, failed = 0;
	int ns = s->plan.n_send, rows = ns + (kk > k ? n : 0);
	size_t nkk = (size_t)n * (size_t)kk;
	float *dys = dev(ops, s, (size_t)rows * d * sizeof(float), &failed);
	float *dxs = dev(ops, s, (size_t)ns * d * sizeof(float), &failed);
	float *dw = dev(ops, s, nkk * sizeof(float), &failed);
	float *dw_h = host(s, nkk * sizeof(float), &failed);
	float *dsig = host(s, (size_t)n * sizeof(float), &failed);
	const float *x = xn + (size_t)s->first * d;
	float *dx = dxn + (size_t)s->first * d;

	if (failed) {
		snprintf(err, errlen, "layer %d: out of memory for the experts' backward pass", l);
		return -1;
	}
	if (!s->stats) {
		snprintf(err, errlen, "layer %d: experts' backward without a training forward", l);
		return -1;
	}
	RL_TRY(ops->zero(dys, (size_t)rows * d * sizeof(float), NULL), "layer %d: zeroing", l);
	RL_TRY(ops->moe_combine_backward(rl_buf_f32(dys), dw,
	                                 rl_cbuf_f32(dout + (size_t)s->first * d),
	                                 rl_cbuf_f32(s->ys), s->slot, s->weight, n, kk, d, NULL) ||
	           ops->to_host(dw_h, dw, nkk * sizeof(float), NULL),
	       "layer %d: combine backward", l);
	if (experts_backward(m, l, s, dys, dxs, err, errlen))
		return -1;
	if (ns)
		RL_TRY(ops->embedding_backward(dxn, rl_cbuf_f32(dxs), s->src, ns, d, NULL),
		       "layer %d: scattering the routed tokens' gradients", l);
	if (kk > k) {
		for (int t = 0; t < n; t++)
			dsig[t] = dw_h[(size_t)t * kk + k];
		if (shared_backward(m, l, s, dys + (size_t)ns * d, dsig, x, dx, err, errlen))
			return -1;
	}
	return router_backward(m, l, s, dw_h, x, dx, aux_coef, err, errlen);
}
