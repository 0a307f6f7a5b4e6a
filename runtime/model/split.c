/* A rank's cut of a model: tensor parallelism's column- and row-parallel
 * layers (Megatron-LM's), which rows or columns of each tensor a rank
 * holds, and pipeline parallelism's stages, which layers; building a rank's
 * model from the whole one, and putting whole tensors back together from
 * the tensor-parallel ranks' parts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/memory_use.h"
#include "runtime/model/builtin_files.h"
#include "runtime/model/safetensors.h"
#include "runtime/model/split.h"
#include "topology/model_fit.h"

void rl_split_range(int64_t total, int size, int r, int64_t *start, int64_t *len)
{
	int64_t base = total / size, extra = total % size;

	*len = base + (r < extra);
	*start = r * base + (r < extra ? r : extra);
}

void rl_model_shard_whole(struct rl_model_shard *s, const struct rl_model_config *c)
{
	memset(s, 0, sizeof *s);
	s->tp.size = 1;
	s->n_heads = c->n_heads;
	s->n_kv_heads = c->n_kv_heads;
	s->intermediate = c->intermediate_size;
	s->vocab = s->vocab_max = c->vocab_size;
	s->pp.size = 1;
	s->n_layers = c->n_layers;
	s->cp.size = 1;
	s->ep.size = 1;
	s->n_experts = c->moe.n_experts;
	s->tokens.size = 1;
}

bool rl_model_first_stage(const struct rl_model *m)
{
	return m->shard.pp.rank == 0;
}

bool rl_model_last_stage(const struct rl_model *m)
{
	return m->shard.pp.rank == m->shard.pp.size - 1;
}

/* Megatron's stages: the first and the last may be given their own count,
 * the layers left are divided evenly among the stages between (the counts
 * are checked by rl_model_fit_check). */
static void stage_layers(struct rl_model_shard *s, const struct rl_model_config *c,
                         const struct rl_model_cut *cut)
{
	int p = cut->pp.size, first = cut->first_stage_layers, last = cut->last_stage_layers;
	int left = c->n_layers, between = p;

	if (p == 1)
		return;
	if (first > 0) {
		left -= first;
		between--;
	}
	if (last > 0) {
		left -= last;
		between--;
	}
	int each = between ? left / between : 0, r = cut->pp.rank;
	int count[2] = {first > 0 ? first : each, last > 0 ? last : each};

	s->pp = cut->pp;
	s->first_layer = r == 0 ? 0 : count[0] + (r - 1) * each;
	s->n_layers = r == 0 ? count[0] : r == p - 1 ? count[1] : each;
}

/* Expert parallelism: each rank of ep holds an equal share of every sparse
 * layer's experts, whole (expert tensor parallelism is 1). */
static void expert_cut(struct rl_model_shard *s, const struct rl_model_config *c,
                       const struct rl_model_cut *cut)
{
	int p = cut->ep.size;

	if (cut->tokens.size > 1)
		s->tokens = cut->tokens;
	if (p <= 1)
		return;
	s->ep = cut->ep;
	s->n_experts = c->moe.n_experts / p;
	s->first_expert = cut->ep.rank * s->n_experts;
}

/* The layout's rule (topology/model_fit.h), the one the plan checks before
 * the job starts: a layout the plan accepts is one this cut takes. */
static int fit_check(const struct rl_model_config *c, const char *dir,
                     const struct rl_model_cut *cut, char *err, size_t errlen)
{
	struct rl_plan_model shape;
	char model[512];
	int size[] = {cut->tp.size, cut->pp.size, cut->cp.size, cut->ep.size};

	for (size_t i = 0; i < sizeof size / sizeof *size; i++)
		size[i] = size[i] > 1 ? size[i] : 1; /* 0: no group, this rank alone */
	struct rl_fit_layout l = {
	    .tp = size[0],
	    .pp = size[1],
	    .cp = size[2],
	    .ep = size[3],
	    .etp = 1,
	    .sequence_parallel = cut->sequence_parallel,
	    .first_stage_layers = cut->first_stage_layers,
	    .last_stage_layers = cut->last_stage_layers,
	};
	rl_model_config_shape(c, &shape);
	if (rl_builtin_is(dir))
		snprintf(model, sizeof model, "%s", dir);
	else
		snprintf(model, sizeof model, "%s/config.json", dir);
	return rl_model_fit_check(&shape, &l, model, err, errlen);
}

/* Heads stay whole and each rank keeps whole GQA groups (its query heads
 * and the kv heads they read), as Megatron requires. */
static int shard_init(struct rl_model_shard *s, const struct rl_model_config *c, const char *dir,
                      const struct rl_model_cut *cut, char *err, size_t errlen)
{
	const struct rl_tp_group *tp = &cut->tp;
	int p = tp->size;
	int64_t start, len;

	if (fit_check(c, dir, cut, err, errlen))
		return -1;
	rl_model_shard_whole(s, c);
	stage_layers(s, c, cut);
	expert_cut(s, c, cut);
	s->cp = cut->cp;
	s->tp = *tp;
	s->sequence_parallel = cut->sequence_parallel && p > 1;
	s->n_heads = c->n_heads / p;
	s->n_kv_heads = c->n_kv_heads / p;
	s->intermediate = c->intermediate_size / p;
	rl_split_range(c->vocab_size, p, tp->rank, &start, &len);
	s->vocab_start = (int)start;
	s->vocab = (int)len;
	rl_split_range(c->vocab_size, p, 0, &start, &len);
	s->vocab_max = (int)len;
	return 0;
}

/* This rank's part of a whole tensor (host memory on both sides). */
static void cut_part(const struct rl_param *whole, const struct rl_param *part, int rank, int size,
                     float *dst, const float *src)
{
	int64_t start, len;

	if (part->split_dim < 0) {
		memcpy(dst, src, (size_t)part->numel * sizeof *dst);
		return;
	}
	if (part->split_dim == 0) {
		int64_t row = whole->ndim == 2 ? whole->shape[1] : 1;

		rl_split_range(whole->shape[0], size, rank, &start, &len);
		memcpy(dst, src + start * row, (size_t)(len * row) * sizeof *dst);
		return;
	}
	rl_split_range(whole->shape[1], size, rank, &start, &len);
	for (int64_t i = 0; i < whole->shape[0]; i++)
		memcpy(dst + i * len, src + i * whole->shape[1] + start, (size_t)len * sizeof *dst);
}

static const struct rl_param *find_param(const struct rl_model *m, const char *name)
{
	for (int i = 0; i < m->n_params; i++)
		if (strcmp(m->params[i].name, name) == 0)
			return &m->params[i];
	return NULL;
}

/* Where a cut's tensors come from: read puts this rank's part of the
 * whole tensor that part stands for into dst (host memory, part->numel
 * floats). */
struct cut_source {
	int (*read)(void *ctx, const struct rl_param *part, float *dst, int rank, int size,
	            char *err, size_t errlen);
	void *ctx;
};

/* From the whole model in memory (a built-in model, made whole on every
 * rank): its tensor by name, through the host when it is backend memory. */
static int read_whole(void *ctx, const struct rl_param *part, float *dst, int rank, int size,
                      char *err, size_t errlen)
{
	const struct rl_model *whole = ctx;
	const struct rl_param *from = find_param(whole, part->name);

	if (!from) {
		snprintf(err, errlen, "%s: the whole model has no %s", whole->dir, part->name);
		return -1;
	}
	size_t bytes = (size_t)from->numel * sizeof(float);
	float *host = whole->base_ops == &rl_ops_cpu ? from->master : malloc(bytes ? bytes : 1);

	if (!host ||
	    (host != from->master && whole->ops->to_host(host, from->master, bytes, NULL))) {
		snprintf(err, errlen, "%s: cannot read %s to cut it", whole->dir, part->name);
		if (host != from->master)
			free(host);
		return -1;
	}
	cut_part(from, part, rank, size, dst, host);
	if (host != from->master)
		free(host);
	return 0;
}

/* From the model's files: only the bytes of this rank's part. */
static int read_files(void *ctx, const struct rl_param *part, float *dst, int rank, int size,
                      char *err, size_t errlen)
{
	int64_t start = 0, len = 0;

	if (part->split_dim >= 0)
		rl_split_range(part->full_shape[part->split_dim], size, rank, &start, &len);
	return rl_st_read_f32_part(ctx, part->name, dst, part->ndim, part->full_shape,
	                           part->split_dim, start, len, err, errlen);
}

/* Every tensor of part from src, into its backend memory. */
static int fill(struct rl_model *part, const struct rl_model_cut *cut, const struct cut_source *src,
                char *err, size_t errlen)
{
	bool host = part->base_ops == &rl_ops_cpu;
	float *buf = NULL;
	int rc = 0;

	for (int i = 0; rc == 0 && i < part->n_params; i++) {
		struct rl_param *p = &part->params[i];
		size_t bytes = (size_t)p->numel * sizeof(float);

		if (!host) {
			free(buf);
			if (!(buf = malloc(bytes ? bytes : 1))) {
				snprintf(err, errlen, "out of memory for %s", p->name);
				rc = -1;
				break;
			}
		}
		rc = src->read(src->ctx, p, host ? p->master : buf, cut->tp.rank, cut->tp.size, err,
		               errlen);
		if (rc == 0 && !host && part->ops->from_host(p->master, buf, bytes, NULL)) {
			snprintf(err, errlen, "the %s backend could not take %s", part->ops->name,
			         p->name);
			rc = -1;
		}
	}
	free(buf);
	return rc;
}

/* This rank's model, empty, for the cut. */
static int new_part(struct rl_model **part, const struct rl_model_config *cfg, const char *dir,
                    const struct rl_ops *ops, const struct rl_model_cut *cut, char *err,
                    size_t errlen)
{
	struct rl_model_shard s;

	return shard_init(&s, cfg, dir, cut, err, errlen) ||
	       rl_model_new_shard(part, cfg, &s, dir, ops, err, errlen);
}

static bool cuts_nothing(const struct rl_model_cut *cut)
{
	return cut->tp.size == 1 && cut->pp.size == 1 && cut->cp.size == 1 && cut->ep.size <= 1;
}

int rl_model_split(struct rl_model **m, const struct rl_model_cut *cut, char *err, size_t errlen)
{
	struct rl_model *whole = *m, *part;

	if (cuts_nothing(cut)) {
		/* data parallelism alone: the same model, balanced over the batch */
		if (cut->tokens.size > 1)
			whole->shard.tokens = cut->tokens;
		return 0;
	}
	struct cut_source src = {read_whole, whole};
	if (new_part(&part, &whole->cfg, whole->dir, whole->base_ops, cut, err, errlen))
		return -1;
	/* a bf16 model's cut computes in bf16 too */
	if (fill(part, cut, &src, err, errlen) ||
	    rl_model_set_precision(part, whole->precision, err, errlen)) {
		rl_model_free(part);
		return -1;
	}
	rl_model_free(whole);
	*m = part;
	return 0;
}

int rl_model_load_cut(struct rl_model **out, const char *dir, const struct rl_ops *ops,
                      const struct rl_model_cut *cut, char *err, size_t errlen)
{
	struct rl_model_config cfg;
	struct rl_st_archive *st;
	struct rl_model *m;

	*out = NULL;
	if (cuts_nothing(cut)) {
		if (rl_model_load(&m, dir, ops, err, errlen))
			return -1;
		if (cut->tokens.size > 1)
			m->shard.tokens = cut->tokens;
		*out = m;
		return 0;
	}
	if (rl_model_config_load(&cfg, dir, err, errlen) ||
	    new_part(&m, &cfg, dir, ops, cut, err, errlen))
		return -1;
	if (rl_st_open_dir(&st, dir, err, errlen)) {
		rl_model_free(m);
		return -1;
	}
	struct cut_source src = {read_files, st};
	int rc = fill(m, cut, &src, err, errlen);
	rl_st_close(st);
	if (rc) {
		rl_model_free(m);
		return -1;
	}
	*out = m;
	return 0;
}

int rl_model_reduce_grads(struct rl_model *m, char *err, size_t errlen)
{
	const struct rl_tp_group *tp = &m->shard.tp;
	const struct rl_pp_group *pp = &m->shard.pp;
	int64_t n = 0;

	/* the tied embedding: the first stage's gradient is the input side's,
	 * the last stage's the output side's, and both copies need the sum */
	struct rl_param *tied = rl_model_first_stage(m) ? m->embed : m->lm_head;
	if (pp->size > 1 && m->cfg.tie_word_embeddings && tied)
		pp->embedding_all_reduce(pp->embedding_ctx, tied->grad, (size_t)tied->numel,
		                         "tied embedding gradient");
	if (tp->size == 1)
		return 0;
	for (int i = 0; i < m->n_params; i++)
		n += m->params[i].partial_grad ? m->params[i].numel : 0;
	if (n == 0)
		return 0;
	/* one collective for all of them: they are small and many */
	const struct rl_ops *ops = m->ops;
	float *pack = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, (size_t)n * sizeof *pack);
	int rc = pack ? 0 : -1;
	int64_t at = 0;
	for (int i = 0; rc == 0 && i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];

		if (p->partial_grad) {
			rc = ops->copy(pack + at, p->grad, (size_t)p->numel * sizeof *pack, NULL);
			at += p->numel;
		}
	}
	/* every rank reaches the collective, failed or not: the others would
	 * wait in it for ever */
	if (pack)
		tp->all_reduce(tp->ctx, pack, (size_t)n, "tensor-parallel norm gradients");
	at = 0;
	for (int i = 0; rc == 0 && i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];

		if (p->partial_grad) {
			rc = ops->copy(p->grad, pack + at, (size_t)p->numel * sizeof *pack, NULL);
			at += p->numel;
		}
	}
	rl_ops_release(ops, pack);
	if (rc)
		snprintf(err, errlen,
		         "summing %lld tensor-parallel gradients failed on the %s backend",
		         (long long)n, ops->name);
	return rc;
}

int rl_tp_gather_split(const struct rl_tp_group *tp, const float *local, float *full, int64_t rows,
                       int64_t cols, int split_dim, const char *what, char *err, size_t errlen)
{
	int64_t cut = split_dim == 0 ? rows : cols, other = split_dim == 0 ? cols : rows;
	int64_t most, start, len;

	/* one all-gather needs the same count everywhere: the largest part */
	rl_split_range(cut, tp->size, 0, &start, &most);
	int64_t block = most * other;
	float *all = malloc((size_t)(block * tp->size) * sizeof *all);
	if (!all) {
		snprintf(err, errlen, "out of memory gathering %s", what);
		return -1;
	}
	rl_split_range(cut, tp->size, tp->rank, &start, &len);
	memcpy(all + block * tp->rank, local, (size_t)(len * other) * sizeof *all);
	tp->all_gather_host(tp->ctx, all + block * tp->rank, all, (size_t)block, what);
	for (int r = 0; r < tp->size; r++) {
		const float *src = all + block * r;

		rl_split_range(cut, tp->size, r, &start, &len);
		if (split_dim == 0) {
			memcpy(full + start * cols, src, (size_t)(len * cols) * sizeof *src);
			continue;
		}
		for (int64_t row = 0; row < rows; row++)
			memcpy(full + row * cols + start, src + row * len,
			       (size_t)len * sizeof *src);
	}
	free(all);
	return 0;
}

int rl_model_gather_param(const struct rl_model *m, int i, const float *local_host,
                          float *full_host, char *err, size_t errlen)
{
	const struct rl_tp_group *tp = &m->shard.tp;
	const struct rl_param *p = &m->params[i];
	int64_t rows = p->full_shape[0], cols = p->full_shape[1] ? p->full_shape[1] : 1;

	if (tp->size == 1 || p->split_dim < 0) {
		memcpy(full_host, local_host, (size_t)(rows * cols) * sizeof *full_host);
		return 0;
	}
	return rl_tp_gather_split(tp, local_host, full_host, rows, cols, p->split_dim, p->name, err,
	                          errlen);
}

int rl_model_scatter_param(struct rl_model *m, int i, const float *full_host, char *err,
                           size_t errlen)
{
	const struct rl_param *p = &m->params[i];
	struct rl_param whole = {.ndim = p->ndim, .shape = {p->full_shape[0], p->full_shape[1]}};
	size_t bytes = (size_t)p->numel * sizeof(float);
	float *mine = m->base_ops == &rl_ops_cpu ? p->master : malloc(bytes ? bytes : 1);

	if (!mine) {
		snprintf(err, errlen, "out of memory for %s", p->name);
		return -1;
	}
	cut_part(&whole, p, m->shard.tp.rank, m->shard.tp.size, mine, full_host);
	if (mine == p->master)
		return 0;
	int rc = m->ops->from_host(p->master, mine, bytes, NULL);
	free(mine);
	if (rc)
		snprintf(err, errlen, "the %s backend could not take %s", m->ops->name, p->name);
	return rc ? -1 : 0;
}
