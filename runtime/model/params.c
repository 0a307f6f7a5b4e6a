#define _GNU_SOURCE
/* The parameter table of a model: which tensors a family has, their names and
 * shapes, their place in the flat buffers; loading them from safetensors and
 * saving them back in the source's dtype. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/model/model.h"
#include "kernels/memory_use.h"
#include "runtime/base/rng.h"
#include "runtime/model/safetensors.h"
#include "runtime/model/split.h"

static const char *const layer_suffix[RL_P_PER_LAYER] = {
    [RL_P_ATTN_NORM] = "input_layernorm.weight",
    [RL_P_Q] = "self_attn.q_proj.weight",
    [RL_P_Q_BIAS] = "self_attn.q_proj.bias",
    [RL_P_K] = "self_attn.k_proj.weight",
    [RL_P_K_BIAS] = "self_attn.k_proj.bias",
    [RL_P_V] = "self_attn.v_proj.weight",
    [RL_P_V_BIAS] = "self_attn.v_proj.bias",
    [RL_P_O] = "self_attn.o_proj.weight",
    [RL_P_O_BIAS] = "self_attn.o_proj.bias",
    [RL_P_Q_NORM] = "self_attn.q_norm.weight",
    [RL_P_K_NORM] = "self_attn.k_norm.weight",
    [RL_P_MLP_NORM] = "post_attention_layernorm.weight",
    [RL_P_GATE] = "mlp.gate_proj.weight",
    [RL_P_GATE_BIAS] = "mlp.gate_proj.bias",
    [RL_P_UP] = "mlp.up_proj.weight",
    [RL_P_UP_BIAS] = "mlp.up_proj.bias",
    [RL_P_DOWN] = "mlp.down_proj.weight",
    [RL_P_DOWN_BIAS] = "mlp.down_proj.bias",
    [RL_P_ROUTER] = "mlp.gate.weight",
    /* each expert's, under mlp.experts.E (add_expert_stack) */
    [RL_P_EXPERT_GATE] = "gate_proj.weight",
    [RL_P_EXPERT_UP] = "up_proj.weight",
    [RL_P_EXPERT_DOWN] = "down_proj.weight",
    [RL_P_SHARED_GATE] = "mlp.shared_expert.gate_proj.weight",
    [RL_P_SHARED_UP] = "mlp.shared_expert.up_proj.weight",
    [RL_P_SHARED_DOWN] = "mlp.shared_expert.down_proj.weight",
    [RL_P_SHARED_EXPERT_GATE] = "mlp.shared_expert_gate.weight",
};

bool rl_layer_param_is_expert(enum rl_layer_param p)
{
	return p == RL_P_EXPERT_GATE || p == RL_P_EXPERT_UP || p == RL_P_EXPERT_DOWN;
}

void rl_expert_name(char *out, size_t n, int layer, int e, enum rl_layer_param p)
{
	snprintf(out, n, "model.layers.%d.mlp.experts.%d.%s", layer, e, layer_suffix[p]);
}

static bool is_moe_param(enum rl_layer_param p)
{
	return p >= RL_P_ROUTER && p <= RL_P_SHARED_EXPERT_GATE;
}

static bool layer_has(const struct rl_model_config *c, int l, enum rl_layer_param p)
{
	bool moe = rl_layer_is_moe(c, l);

	if (p >= RL_P_GATE && p <= RL_P_DOWN_BIAS && moe)
		return false;
	if (is_moe_param(p) && !moe)
		return false;
	switch (p) {
	case RL_P_SHARED_GATE:
	case RL_P_SHARED_UP:
	case RL_P_SHARED_DOWN:
	case RL_P_SHARED_EXPERT_GATE:
		return c->moe.shared_intermediate > 0;
	case RL_P_Q_BIAS:
	case RL_P_K_BIAS:
	case RL_P_V_BIAS:
		return c->qkv_bias;
	case RL_P_O_BIAS:
		return c->o_bias;
	case RL_P_Q_NORM:
	case RL_P_K_NORM:
		return c->qk_norm;
	case RL_P_GATE_BIAS:
	case RL_P_UP_BIAS:
	case RL_P_DOWN_BIAS:
		return c->mlp_bias;
	default:
		return true;
	}
}

/* [rows, cols] of the whole tensor, cols 0 for a vector of rows elements,
 * and the dimension tensor parallelism cuts (-1: none). */
static void layer_shape(const struct rl_model_config *c, enum rl_layer_param p, int64_t *rows,
                        int64_t *cols, int *split_dim)
{
	int64_t d = c->hidden_size, inter = c->intermediate_size, hd = c->head_dim;
	int64_t q = (int64_t)c->n_heads * hd, kv = (int64_t)c->n_kv_heads * hd;

	*cols = 0;
	*split_dim = -1;
	switch (p) {
	case RL_P_ATTN_NORM:
	case RL_P_MLP_NORM:
	case RL_P_O_BIAS:
	case RL_P_DOWN_BIAS:
		*rows = d;
		break;
	case RL_P_Q:
		*rows = q, *cols = d, *split_dim = 0;
		break;
	case RL_P_Q_BIAS:
		*rows = q, *split_dim = 0;
		break;
	case RL_P_K:
	case RL_P_V:
		*rows = kv, *cols = d, *split_dim = 0;
		break;
	case RL_P_K_BIAS:
	case RL_P_V_BIAS:
		*rows = kv, *split_dim = 0;
		break;
	case RL_P_O:
		*rows = d, *cols = q, *split_dim = 1;
		break;
	case RL_P_Q_NORM:
	case RL_P_K_NORM:
		*rows = hd;
		break;
	case RL_P_GATE:
	case RL_P_UP:
		*rows = inter, *cols = d, *split_dim = 0;
		break;
	case RL_P_GATE_BIAS:
	case RL_P_UP_BIAS:
		*rows = inter, *split_dim = 0;
		break;
	case RL_P_DOWN:
		*rows = d, *cols = inter, *split_dim = 1;
		break;
	case RL_P_ROUTER:
		*rows = c->moe.n_experts, *cols = d;
		break;
	case RL_P_EXPERT_GATE:
	case RL_P_EXPERT_UP:
		*rows = c->moe.intermediate, *cols = d;
		break;
	case RL_P_EXPERT_DOWN:
		*rows = d, *cols = c->moe.intermediate;
		break;
	case RL_P_SHARED_GATE:
	case RL_P_SHARED_UP:
		*rows = c->moe.shared_intermediate, *cols = d;
		break;
	case RL_P_SHARED_DOWN:
		*rows = d, *cols = c->moe.shared_intermediate;
		break;
	case RL_P_SHARED_EXPERT_GATE:
		*rows = 1, *cols = d;
		break;
	case RL_P_PER_LAYER:
		*rows = 0;
		break;
	}
}

/* Whether a tensor that every rank holds whole gets only this rank's part
 * of its gradient: the q/k norms see this rank's heads; with sequence
 * parallelism, the norms and the row-parallel biases see its rows. */
static bool grad_is_partial(const struct rl_model_shard *sh, enum rl_layer_param p)
{
	if (sh->tp.size == 1)
		return false;
	/* each tensor-parallel rank routes its share of the tokens through
	 * whole experts; under expert parallelism every token of the group
	 * reaches its expert's one holder, which has the whole sum */
	if (rl_layer_param_is_expert(p))
		return sh->ep.size <= 1;
	if (is_moe_param(p))
		return true;
	switch (p) {
	case RL_P_Q_NORM:
	case RL_P_K_NORM:
		return true;
	case RL_P_ATTN_NORM:
	case RL_P_MLP_NORM:
		return sh->sequence_parallel;
	default:
		return false;
	}
}

/* A tensor of whole shape [rows, cols] (cols 0: a vector), cut along
 * split_dim for this rank; packed: right after the one before, with no
 * alignment gap (the experts of a stack). */
static struct rl_param *add_param_at(struct rl_model *m, bool packed, int64_t rows, int64_t cols,
                                     int split_dim, const char *fmt, va_list ap)
{
	const struct rl_model_shard *sh = &m->shard;
	struct rl_param *p = &m->params[m->n_params++];
	int64_t start;

	vsnprintf(p->name, sizeof p->name, fmt, ap);
	p->ndim = cols ? 2 : 1;
	p->full_shape[0] = rows;
	p->full_shape[1] = cols;
	p->split_dim = split_dim;
	p->replica = split_dim < 0 && sh->tp.rank > 0;
	if (split_dim == 0)
		rl_split_range(rows, sh->tp.size, sh->tp.rank, &start, &rows);
	else if (split_dim == 1)
		rl_split_range(cols, sh->tp.size, sh->tp.rank, &start, &cols);
	p->shape[0] = rows;
	p->shape[1] = cols;
	p->numel = cols ? rows * cols : rows;
	if (packed && m->n_params > 1) {
		const struct rl_param *prev = p - 1;

		p->offset = prev->offset + prev->numel;
	} else {
		p->offset = m->n_elems;
	}
	/* keep each tensor (each stack) 64-byte aligned inside the flat buffer */
	m->n_elems = (p->offset + p->numel + 15) & ~(int64_t)15;
	return p;
}

static struct rl_param *add_param(struct rl_model *m, int64_t rows, int64_t cols, int split_dim,
                                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static struct rl_param *add_param(struct rl_model *m, int64_t rows, int64_t cols, int split_dim,
                                  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	struct rl_param *p = add_param_at(m, false, rows, cols, split_dim, fmt, ap);
	va_end(ap);
	return p;
}

static struct rl_param *add_packed(struct rl_model *m, int64_t rows, int64_t cols, const char *fmt,
                                   ...) __attribute__((format(printf, 4, 5)));
static struct rl_param *add_packed(struct rl_model *m, int64_t rows, int64_t cols, const char *fmt,
                                   ...)
{
	va_list ap;

	va_start(ap, fmt);
	struct rl_param *p = add_param_at(m, true, rows, cols, -1, fmt, ap);
	va_end(ap);
	return p;
}

/* One kind of a sparse layer's experts: this rank's, one tensor each, end
 * to end, so that the grouped GEMM reads them as one [experts, rows,
 * cols] weight. */
static struct rl_param *add_expert_stack(struct rl_model *m, int layer, enum rl_layer_param p,
                                         int64_t rows, int64_t cols)
{
	const struct rl_model_shard *sh = &m->shard;
	struct rl_param *first = NULL;

	for (int e = sh->first_expert; e < sh->first_expert + sh->n_experts; e++) {
		char name[96];

		rl_expert_name(name, sizeof name, layer, e, p);
		struct rl_param *x = first ? add_packed(m, rows, cols, "%s", name)
		                           : add_param(m, rows, cols, -1, "%s", name);
		x->replica = sh->tp.rank > 0 && sh->ep.size <= 1;
		x->partial_grad = grad_is_partial(sh, p);
		if (!first)
			first = x;
	}
	return first;
}

/* Lays out this stage's table; pointers into the flat buffers are set
 * afterwards, since params[] must not move once layer[] points into it. */
static int build_table(struct rl_model *m)
{
	const struct rl_model_config *c = &m->cfg;
	const struct rl_model_shard *sh = &m->shard;
	bool first = rl_model_first_stage(m), last = rl_model_last_stage(m);
	int max = 3 + c->n_layers * (RL_P_PER_LAYER + 3 * sh->n_experts);
	int64_t embed = -1, norm = -1, head = -1;
	bool experts_apart = sh->ep.size > 1;

	m->params = calloc((size_t)max, sizeof *m->params);
	m->layer = calloc((size_t)c->n_layers * RL_P_PER_LAYER, sizeof *m->layer);
	if (!m->params || !m->layer)
		return -1;
	if (first || (last && c->tie_word_embeddings)) {
		struct rl_param *e =
		    add_param(m, c->vocab_size, c->hidden_size, 0, "model.embed_tokens.weight");
		/* the last stage's copy: counted once in the gradient norm,
		 * its gradient summed with the first stage's */
		e->tied_copy = !first;
		e->replica |= e->tied_copy;
		embed = e - m->params;
	}
	for (int i = sh->first_layer; i < sh->first_layer + sh->n_layers; i++) {
		for (int p = 0; p < RL_P_PER_LAYER; p++) {
			int64_t rows, cols;
			int split;

			if (!layer_has(c, i, (enum rl_layer_param)p))
				continue;
			layer_shape(c, (enum rl_layer_param)p, &rows, &cols, &split);
			if (rl_layer_param_is_expert((enum rl_layer_param)p)) {
				if (!experts_apart)
					m->layer[i * RL_P_PER_LAYER + p] = add_expert_stack(
					    m, i, (enum rl_layer_param)p, rows, cols);
				continue;
			}
			struct rl_param *x = add_param(m, rows, cols, split, "model.layers.%d.%s",
			                               i, layer_suffix[p]);
			x->partial_grad = grad_is_partial(sh, (enum rl_layer_param)p);
			m->layer[i * RL_P_PER_LAYER + p] = x;
		}
	}
	if (last) {
		struct rl_param *n = add_param(m, c->hidden_size, 0, -1, "model.norm.weight");

		n->partial_grad = sh->sequence_parallel;
		norm = n - m->params;
		head = c->tie_word_embeddings
		           ? embed
		           : add_param(m, c->vocab_size, c->hidden_size, 0, "lm_head.weight") -
		                 m->params;
	}
	/* under expert parallelism the experts are reduced and updated over
	 * other ranks than the dense tensors: they get a region of their own
	 * at the end of the flat buffers */
	m->expert_start = m->n_elems;
	for (int i = sh->first_layer; experts_apart && i < sh->first_layer + sh->n_layers; i++)
		for (int p = 0; p < RL_P_PER_LAYER; p++) {
			int64_t rows, cols;
			int split;

			if (!layer_has(c, i, (enum rl_layer_param)p) ||
			    !rl_layer_param_is_expert((enum rl_layer_param)p))
				continue;
			layer_shape(c, (enum rl_layer_param)p, &rows, &cols, &split);
			m->layer[i * RL_P_PER_LAYER + p] =
			    add_expert_stack(m, i, (enum rl_layer_param)p, rows, cols);
		}
	m->embed = first ? &m->params[embed] : NULL;
	m->final_norm = last ? &m->params[norm] : NULL;
	m->lm_head = last ? &m->params[head] : NULL;
	return 0;
}

static void set_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int load_weights(struct rl_model *m, char *err, size_t errlen)
{
	struct rl_st_archive *st;
	float *host = NULL;
	int rc = -1;

	if (rl_st_open_dir(&st, m->dir, err, errlen))
		return -1;
	for (int i = 0; i < m->n_params; i++) {
		struct rl_param *p = &m->params[i];

		if (m->base_ops == &rl_ops_cpu) { /* host memory: no staging copy */
			if (rl_st_read_f32(st, p->name, p->master, p->ndim, p->shape, err, errlen))
				goto out;
			continue;
		}
		free(host);
		host = malloc((size_t)p->numel * sizeof *host);
		if (!host) {
			set_errf(err, errlen, "%s: out of memory reading %s", m->dir, p->name);
			goto out;
		}
		if (rl_st_read_f32(st, p->name, host, p->ndim, p->shape, err, errlen) ||
		    m->ops->from_host(p->master, host, (size_t)p->numel * sizeof *host, NULL))
			goto out;
	}
	rc = 0;
out:
	free(host);
	rl_st_close(st);
	return rc;
}

int rl_model_new_shard(struct rl_model **out, const struct rl_model_config *cfg,
                       const struct rl_model_shard *shard, const char *dir,
                       const struct rl_ops *ops, char *err, size_t errlen)
{
	struct rl_model *m = calloc(1, sizeof *m);
	const char *missing = rl_ops_missing(ops);

	*out = NULL;
	if (missing) {
		set_errf(err, errlen, "the %s backend has no %s op yet", ops->name, missing);
		free(m);
		return -1;
	}
	if (!m || !(m->dir = strdup(dir))) {
		set_errf(err, errlen, "%s: out of memory", dir);
		free(m);
		return -1;
	}
	m->ops = ops;
	m->base_ops = ops;
	m->cfg = *cfg;
	m->shard = *shard;
	if (build_table(m)) {
		set_errf(err, errlen, "%s: out of memory", dir);
		goto fail;
	}
	size_t bytes = (size_t)m->n_elems * sizeof(float);
	m->flat = rl_ops_alloc(ops, RL_MEM_WEIGHTS, bytes);
	m->flat_grad = rl_ops_alloc(ops, RL_MEM_GRADS, bytes);
	m->inv_freq =
	    rl_ops_alloc(ops, RL_MEM_WEIGHTS, (size_t)m->cfg.head_dim / 2 * sizeof(float));
	if (!m->flat || !m->flat_grad || !m->inv_freq) {
		set_errf(err, errlen, "%s: cannot allocate %zu bytes of parameters", dir,
		         2 * bytes);
		goto fail;
	}
	ops->zero(m->flat, bytes, NULL);
	ops->zero(m->flat_grad, bytes, NULL);
	for (int i = 0; i < m->n_params; i++) {
		m->params[i].master = m->params[i].data = m->flat + m->params[i].offset;
		m->params[i].grad = m->flat_grad + m->params[i].offset;
	}
	m->precision = RL_F32;

	float inv_freq[512];
	if (m->cfg.head_dim / 2 > (int)(sizeof inv_freq / sizeof *inv_freq)) {
		set_errf(err, errlen, "%s/config.json: head_dim %d is larger than 1024", dir,
		         m->cfg.head_dim);
		goto fail;
	}
	rl_rope_inv_freq(inv_freq, m->cfg.head_dim, m->cfg.rope_theta, &m->cfg.rope_scaling);
	ops->from_host(m->inv_freq, inv_freq, (size_t)m->cfg.head_dim / 2 * sizeof(float), NULL);
	*out = m;
	return 0;
fail:
	rl_model_free(m);
	return -1;
}

static int model_new(struct rl_model **out, const struct rl_model_config *cfg, const char *dir,
                     const struct rl_ops *ops, char *err, size_t errlen)
{
	struct rl_model_shard whole;

	rl_model_shard_whole(&whole, cfg);
	return rl_model_new_shard(out, cfg, &whole, dir, ops, err, errlen);
}

int rl_model_load(struct rl_model **out, const char *dir, const struct rl_ops *ops, char *err,
                  size_t errlen)
{
	struct rl_model_config cfg;
	struct rl_model *m;

	*out = NULL;
	if (rl_model_config_load(&cfg, dir, err, errlen) ||
	    model_new(&m, &cfg, dir, ops, err, errlen))
		return -1;
	if (load_weights(m, err, errlen)) {
		rl_model_free(m);
		return -1;
	}
	*out = m;
	return 0;
}

/* A standard normal draw by Box-Muller; 1 - u keeps the logarithm finite. */
static double normal_draw(struct rl_rng *rng)
{
	double u = 1.0 - rl_rng_uniform(rng), v = rl_rng_uniform(rng);

	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static bool is_norm_or_bias(const struct rl_param *p)
{
	return p->ndim == 1;
}

int rl_model_new_random(struct rl_model **out, const struct rl_model_config *cfg, const char *name,
                        const struct rl_ops *ops, uint64_t seed, double init_std, char *err,
                        size_t errlen)
{
	struct rl_model *m;
	float *host = NULL;

	if (model_new(&m, cfg, name, ops, err, errlen))
		return -1;
	for (int i = 0; i < m->n_params; i++) {
		struct rl_param *p = &m->params[i];
		struct rl_rng rng;

		/* a stream per tensor: one tensor's values do not depend on
		 * which tensors the family has before it */
		rl_rng_seed(&rng, seed, 0x696e6974ull + (uint64_t)i);
		free(host);
		host = malloc((size_t)p->numel * sizeof *host);
		if (!host) {
			set_errf(err, errlen, "%s: out of memory initialising %s", name, p->name);
			goto fail;
		}
		/* 1-D tensors are norm weights (ones) or biases (zeros), as
		 * transformers' _init_weights leaves a new model */
		for (int64_t k = 0; k < p->numel; k++)
			host[k] = is_norm_or_bias(p) ? (strstr(p->name, "norm") ? 1.0f : 0.0f)
			                             : (float)(init_std * normal_draw(&rng));
		if (ops->from_host(p->master, host, (size_t)p->numel * sizeof *host, NULL)) {
			set_errf(err, errlen, "%s: cannot copy %s to the %s backend", name, p->name,
			         ops->name);
			goto fail;
		}
	}
	free(host);
	*out = m;
	return 0;
fail:
	free(host);
	rl_model_free(m);
	return -1;
}

size_t rl_model_weights_bytes(const struct rl_model *m)
{
	return (size_t)m->n_elems * (m->precision == RL_BF16 ? sizeof(uint16_t) : sizeof(float));
}

void rl_model_settle(const struct rl_model *m, int64_t lo, int64_t hi)
{
	if (m->overlap.settle)
		m->overlap.settle(m->overlap.ctx, lo, hi);
}

void rl_model_layer_span(const struct rl_model *m, int l, int64_t *lo, int64_t *hi)
{
	*lo = m->n_elems;
	*hi = 0;
	for (int p = 0; p < RL_P_PER_LAYER; p++) {
		const struct rl_param *x = m->layer[(size_t)l * RL_P_PER_LAYER + (size_t)p];

		if (!x || x->offset >= m->expert_start)
			continue;
		if (x->offset < *lo)
			*lo = x->offset;
		if (x->offset + x->numel > *hi)
			*hi = x->offset + x->numel;
	}
	if (*hi < *lo)
		*hi = *lo;
}

int rl_model_copy_weights(const struct rl_model *m, void *dst, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;

	rl_model_settle(m, 0, -1);
	int rc = m->precision == RL_BF16
	             ? ops->to_bf16(dst, m->flat, m->n_elems, NULL)
	             : ops->copy(dst, m->flat, (size_t)m->n_elems * sizeof(float), NULL);

	if (rc)
		set_errf(err, errlen, "%s: copying the weights on the %s backend failed", m->dir,
		         ops->name);
	return rc ? -1 : 0;
}

int rl_model_use_weights(struct rl_model *m, const void *w, char *err, size_t errlen)
{
	m->other = w;
	if (m->precision == RL_BF16)
		return rl_model_round_weights(m, err, errlen);
	for (int i = 0; i < m->n_params; i++) {
		struct rl_param *p = &m->params[i];

		p->data = w ? (float *)(uintptr_t)w + p->offset : p->master;
	}
	return 0;
}

int rl_model_set_precision(struct rl_model *m, enum rl_dtype precision, char *err, size_t errlen)
{
	if (precision != RL_F32 && precision != RL_BF16) {
		set_errf(err, errlen, "%s: computing in %s is not supported (float32 or bfloat16)",
		         m->dir, rl_dtype_name(precision));
		return -1;
	}
	if (precision == RL_BF16 && !m->view) {
		size_t bytes = (size_t)m->n_elems * sizeof(float);

		if (!(m->view = rl_ops_alloc(m->ops, RL_MEM_WEIGHTS, bytes ? bytes : 1))) {
			set_errf(err, errlen, "%s: cannot allocate %zu bytes for the bf16 weights",
			         m->dir, bytes);
			return -1;
		}
	}
	if (m->other) {
		set_errf(err, errlen, "%s: the precision changes only with the model's own weights",
		         m->dir);
		return -1;
	}
	m->precision = precision;
	for (int i = 0; i < m->n_params; i++) {
		struct rl_param *p = &m->params[i];

		p->data = precision == RL_BF16 ? m->view + p->offset : p->master;
	}
	if (precision == RL_F32 && m->view) {
		rl_ops_release(m->ops, m->view);
		m->view = NULL;
	}
	return rl_model_round_weights(m, err, errlen);
}

int rl_model_round_weights(struct rl_model *m, char *err, size_t errlen)
{
	if (m->precision != RL_BF16)
		return 0;
	rl_model_settle(m, 0, -1); /* the view is made of all of them */
	if (m->other ? m->ops->from_bf16(m->view, m->other, m->n_elems, NULL)
	             : m->ops->round_bf16(m->view, m->flat, m->n_elems, NULL)) {
		set_errf(err, errlen, "%s: rounding the weights to bf16 on the %s backend failed",
		         m->dir, m->ops->name);
		return -1;
	}
	return 0;
}

void rl_model_free(struct rl_model *m)
{
	if (!m)
		return;
	if (m->ops) {
		rl_ops_release(m->ops, m->flat);
		rl_ops_release(m->ops, m->view);
		rl_ops_release(m->ops, m->flat_grad);
		rl_ops_release(m->ops, m->inv_freq);
	}
	free(m->params);
	free(m->layer);
	free(m->dir);
	free(m);
}

const float *rl_model_host_weights(const struct rl_model *m)
{
	size_t bytes = (size_t)m->n_elems * sizeof(float);
	float *host;

	rl_model_settle(m, 0, -1);
	if (m->base_ops == &rl_ops_cpu)
		return m->flat;
	host = malloc(bytes ? bytes : 1);
	if (host && m->ops->to_host(host, m->flat, bytes, NULL)) {
		free(host);
		return NULL;
	}
	return host;
}

void rl_model_host_weights_release(const struct rl_model *m, const float *host)
{
	if (host != m->flat)
		free((void *)host);
}

int rl_model_zero_grad(struct rl_model *m)
{
	return m->ops->zero(m->flat_grad, (size_t)m->n_elems * sizeof(float), NULL);
}

bool rl_model_set_invariant(struct rl_model *m, bool on)
{
	bool was = m->invariant;

	/* made here, not at load: a model copied by value keeps no pointer
	 * into another's table */
	m->invariant_ops = *m->base_ops;
	m->invariant_ops.linear_forward = m->base_ops->linear_forward_invariant;
	m->invariant_ops.lm_logprobs_forward = m->base_ops->lm_logprobs_forward_invariant;
	m->invariant_ops.grouped_linear_forward = m->base_ops->grouped_linear_forward_invariant;
	m->ops = on ? &m->invariant_ops : m->base_ops;
	m->invariant = on;
	return was;
}
