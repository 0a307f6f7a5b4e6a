/* Allocation of a model's activation and scratch buffers for a token budget. */
#include <stdbool.h>
#include <stdlib.h>

#include "kernels/memory_use.h"
#include "runtime/model/acts.h"

static void *take(const struct rl_model *m, struct rl_acts *a, size_t bytes, int *failed)
{
	if (*failed)
		return NULL;
	if (a->n_owned == a->cap_owned) {
		int cap = a->cap_owned ? 2 * a->cap_owned : 64;
		void **o = realloc(a->owned, (size_t)cap * sizeof *o);

		if (!o) {
			*failed = 1;
			return NULL;
		}
		a->owned = o;
		a->cap_owned = cap;
	}
	void *p = rl_ops_alloc(m->ops, RL_MEM_ACTIVATIONS, bytes ? bytes : 4);
	if (!p) {
		*failed = 1;
		return NULL;
	}
	a->owned[a->n_owned++] = p;
	return p;
}

/* The buffers a layer's forward pass writes and its backward pass reads,
 * but for its input: each layer's own, or, recomputed, one set that every
 * layer uses in turn. mlp: a dense MLP's too. */
static void layer_buffers(const struct rl_model *m, struct rl_acts *a, int l, size_t T, bool mlp,
                          int *failed)
{
	const struct rl_model_config *c = &m->cfg;
	const struct rl_model_shard *sh = &m->shard;
	struct rl_layer_acts *L = &a->layers[l];
	size_t d = (size_t)c->hidden_size, f = sizeof(float);
	size_t qd = (size_t)sh->n_heads * (size_t)c->head_dim;
	size_t kvd = (size_t)sh->n_kv_heads * (size_t)c->head_dim;
	size_t inter = (size_t)sh->intermediate;

	L->xn1 = take(m, a, T * d * f, failed);
	L->rstd1 = take(m, a, T * f, failed);
	L->q = take(m, a, T * qd * f, failed);
	L->k = take(m, a, T * kvd * f, failed);
	L->v = take(m, a, T * kvd * f, failed);
	if (c->qk_norm) {
		L->q_raw = take(m, a, T * qd * f, failed);
		L->k_raw = take(m, a, T * kvd * f, failed);
		L->q_rstd = take(m, a, T * (size_t)sh->n_heads * f, failed);
		L->k_rstd = take(m, a, T * (size_t)sh->n_kv_heads * f, failed);
	}
	L->att = take(m, a, T * qd * f, failed);
	L->lse = take(m, a, T * (size_t)sh->n_heads * f, failed);
	L->x_mid = take(m, a, T * d * f, failed);
	L->xn2 = take(m, a, T * d * f, failed);
	L->rstd2 = take(m, a, T * f, failed);
	if (!mlp)
		return;
	L->gate = take(m, a, T * inter * f, failed);
	L->up = take(m, a, T * inter * f, failed);
	L->h = take(m, a, T * inter * f, failed);
}

/* The batch-invariant attention's table (acts.h): the identity over every
 * row its keys can come from, whatever the batch, so made once. */
static int fill_key_rows(const struct rl_model *m, struct rl_acts *a, size_t rows)
{
	int32_t *iota = malloc(rows * sizeof *iota);
	int rc;

	if (!iota)
		return -1;
	for (size_t t = 0; t < rows; t++)
		iota[t] = (int32_t)t;
	rc = m->ops->from_host(a->key_rows, iota, rows * sizeof *iota, NULL);
	free(iota);
	return rc;
}

static struct rl_acts *acts_new(const struct rl_model *m, int max_tokens, bool recompute)
{
	const struct rl_model_config *c = &m->cfg;
	const struct rl_model_shard *sh = &m->shard;
	struct rl_acts *a = calloc(1, sizeof *a);
	/* room for the padding sequence parallelism adds; under context
	 * parallelism, for this rank's rows with each sequence padded to 2 x
	 * cp chunks: at most twice the tokens (one-token sequences) */
	size_t max = (size_t)(max_tokens > 0 ? max_tokens : 1), cp = (size_t)sh->cp.size;
	size_t T = cp > 1 ? 2 * max : max + (size_t)(sh->tp.size - 1);
	size_t d = (size_t)c->hidden_size;
	size_t qd = (size_t)sh->n_heads * (size_t)c->head_dim;
	size_t kvd = (size_t)sh->n_kv_heads * (size_t)c->head_dim;
	size_t inter = (size_t)sh->intermediate, f = sizeof(float);
	int failed = 0;

	if (!a)
		return NULL;
	a->max_tokens = (int)T;
	a->layers = calloc((size_t)c->n_layers, sizeof *a->layers);
	a->target_mask = malloc(T * f);
	a->targets_host = malloc(T * sizeof(int32_t));
	a->lm_vec_host = malloc(T * f);
	a->row_real = malloc(T);
	a->aux_coef = (float)c->moe.aux_loss_coef;
	if (sh->tp.size > 1)
		a->tp_host = malloc(T * (size_t)(sh->tp.size + 1) * f);
	if (cp > 1) {
		a->cp_full_row = malloc(cp * T * sizeof(int32_t));
		a->cp_origin = malloc(cp * T * sizeof(int32_t));
		a->cp_lp = malloc(cp * T * f);
		a->chunk_host = malloc(8 * T * sizeof(int32_t));
	}
	if (!a->layers || !a->target_mask || !a->targets_host || !a->lm_vec_host || !a->row_real ||
	    (sh->tp.size > 1 && !a->tp_host) ||
	    (cp > 1 && (!a->cp_full_row || !a->cp_origin || !a->cp_lp || !a->chunk_host))) {
		rl_acts_free(m, a);
		return NULL;
	}
	a->ids = take(m, a, T * sizeof(int32_t), &failed);
	a->pos = take(m, a, T * sizeof(int32_t), &failed);
	a->targets = take(m, a, T * sizeof(int32_t), &failed);
	a->cu_seqlens = take(m, a, (T + 1) * sizeof(int32_t), &failed);
	/* context parallelism: the identity over the padded whole batch */
	a->key_rows = take(m, a, cp * T * sizeof(int32_t), &failed);
	a->key_off = take(m, a, T * sizeof(int32_t), &failed);
	a->first_layer = sh->first_layer;
	a->recompute = recompute;
	/* recomputed, the shared buffers serve every layer: the MLP's if any
	 * layer is dense */
	bool any_dense = false;
	for (int l = sh->first_layer; l < sh->first_layer + sh->n_layers; l++)
		any_dense |= !rl_layer_is_moe(c, l);
	for (int l = sh->first_layer; l < sh->first_layer + sh->n_layers; l++) {
		struct rl_layer_acts *L = &a->layers[l];
		float *x_in = take(m, a, T * d * f, &failed);

		if (recompute && l > sh->first_layer)
			*L = a->layers[sh->first_layer];
		else
			layer_buffers(m, a, l, T, recompute ? any_dense : !rl_layer_is_moe(c, l),
			              &failed);
		L->x_in = x_in;
		L->moe = NULL;
		/* a mixture-of-experts layer's routing and experts' buffers are
		 * its own, recomputed or not: they grow with what it routes */
		if (rl_layer_is_moe(c, l)) {
			L->moe = calloc(1, sizeof *L->moe);
			failed |= !L->moe;
		}
	}
	if (recompute)
		a->recompute_out = take(m, a, T * d * f, &failed);
	a->x_final = take(m, a, T * d * f, &failed);
	a->hf = take(m, a, T * d * f, &failed);
	a->rstd_f = take(m, a, T * f, &failed);
	a->lm_lse = take(m, a, T * f, &failed);
	a->lm_vec = take(m, a, T * f, &failed);
	a->dres = take(m, a, T * d * f, &failed);
	a->dhf = take(m, a, T * d * f, &failed);
	a->dxn = take(m, a, T * d * f, &failed);
	a->dq = take(m, a, T * qd * f, &failed);
	a->dk = take(m, a, T * kvd * f, &failed);
	a->dv = take(m, a, T * kvd * f, &failed);
	if (c->qk_norm) {
		a->dq_raw = take(m, a, T * qd * f, &failed);
		a->dk_raw = take(m, a, T * kvd * f, &failed);
	}
	a->datt = take(m, a, T * qd * f, &failed);
	a->dgate = take(m, a, T * inter * f, &failed);
	a->dup = take(m, a, T * inter * f, &failed);
	a->dh = take(m, a, T * inter * f, &failed);
	if (cp > 1) {
		a->chunk_q = take(m, a, 2 * T * sizeof(int32_t), &failed);
		a->chunk_k = take(m, a, 2 * T * sizeof(int32_t), &failed);
		a->chunk_off = take(m, a, 2 * T * sizeof(int32_t), &failed);
		a->chunk_len = take(m, a, 2 * T * sizeof(int32_t), &failed);
		a->k_full = take(m, a, cp * T * kvd * f, &failed);
		a->v_full = take(m, a, cp * T * kvd * f, &failed);
		a->dk_full = take(m, a, cp * T * kvd * f, &failed);
		a->dv_full = take(m, a, cp * T * kvd * f, &failed);
		a->cp_gather = take(m, a, cp * T * kvd * f, &failed);
		a->cp_inv_dev = take(m, a, cp * T * sizeof(int32_t), &failed);
		a->cp_full_row_dev = take(m, a, cp * T * sizeof(int32_t), &failed);
	}
	if (sh->tp.size > 1) {
		a->tp_full = take(m, a, T * d * f, &failed);
		a->tp_local = take(m, a, T * d * f, &failed);
	}
	if (failed || fill_key_rows(m, a, cp * T)) {
		rl_acts_free(m, a);
		return NULL;
	}
	return a;
}

struct rl_acts *rl_acts_new(const struct rl_model *m, int max_tokens)
{
	return acts_new(m, max_tokens, false);
}

struct rl_acts *rl_acts_new_recompute(const struct rl_model *m, int max_tokens)
{
	return acts_new(m, max_tokens, true);
}

void rl_acts_free(const struct rl_model *m, struct rl_acts *a)
{
	if (!a)
		return;
	for (int i = 0; i < a->n_owned; i++)
		rl_ops_release(m->ops, a->owned[i]);
	rl_ops_release(m->ops, a->lm_work);
	free(a->owned);
	for (int l = 0; a->layers && l < m->cfg.n_layers; l++) {
		rl_moe_acts_free(m->ops, a->layers[l].moe);
		free(a->layers[l].moe);
	}
	free(a->layers);
	free(a->row_real);
	free(a->target_mask);
	free(a->targets_host);
	free(a->lm_vec_host);
	free(a->tp_host);
	free(a->cp_full_row);
	free(a->cp_origin);
	free(a->cp_lp);
	free(a->chunk_host);
	free(a);
}

void rl_acts_set_aux_loss_coef(struct rl_acts *a, float coef)
{
	a->aux_coef = coef;
}

double rl_acts_aux_loss(const struct rl_model *m, const struct rl_acts *a)
{
	double sum = 0;

	for (int l = m->shard.first_layer; l < m->shard.first_layer + m->shard.n_layers; l++)
		if (a->layers[l].moe && a->layers[l].moe->stats)
			sum += (double)a->aux_coef * a->layers[l].moe->aux;
	return sum;
}
