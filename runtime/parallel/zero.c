/* Megatron-Core's bucket layout: rank r of a group of size P owns the r-th
 * P-th of every bucket, so that each bucket's reduce-scatter and
 * all-gather are single collectives over contiguous memory, and a rank's
 * slices lie end to end in its shard. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/parallel/zero.h"
#include "kernels/memory_use.h"

static int64_t bucket_start(const struct rl_zero *z, int b)
{
	return (int64_t)b * z->bucket;
}

/* floats of bucket b, padding included: a multiple of the group size */
static int64_t bucket_len(const struct rl_zero *z, int b)
{
	int64_t p = rl_comm_size(z->group), left = z->n - bucket_start(z, b);
	int64_t len = left < z->bucket ? left : z->bucket;

	return (len + p - 1) / p * p;
}

/* where bucket b's slice starts in the shard */
static int64_t shard_offset(const struct rl_zero *z, int b)
{
	return bucket_start(z, b) / rl_comm_size(z->group);
}

/* Adds the region's floats [from, from + real), which sit at shard index
 * at onwards, minus the replicas, to z's pieces. */
static void add_pieces(struct rl_zero *z, const struct rl_model *m, int64_t from, int64_t real,
                       int64_t at)
{
	int64_t x = from, end = from + real;

	/* parameters lie in increasing offsets; a replica cuts a hole */
	for (int i = 0; i < m->n_params && x < end; i++) {
		const struct rl_param *p = &m->params[i];
		int64_t lo = p->offset - z->base, hi = lo + p->numel;

		if (!p->replica || hi <= x || lo >= end)
			continue;
		if (lo > x)
			z->pieces[z->n_pieces++] = (struct rl_zero_piece){at + (x - from), lo - x};
		x = hi;
	}
	if (x < end)
		z->pieces[z->n_pieces++] = (struct rl_zero_piece){at + (x - from), end - x};
}

int rl_zero_init(struct rl_zero *z, struct rl_comm *group, struct rl_comm *mp,
                 const struct rl_model *m, int64_t base, int64_t n,
                 const struct rl_adamw_hparams *hp, int64_t bucket_floats, char *err, size_t errlen)
{
	const struct rl_ops *ops = m->ops;
	int64_t p = rl_comm_size(group);

	memset(z, 0, sizeof *z);
	z->group = group;
	z->mp = mp;
	z->ops = ops;
	z->hp = *hp;
	z->base = base;
	z->n = n;
	z->bucket = (bucket_floats < p ? p : bucket_floats) / p * p;
	z->n_buckets = (int)((z->n + z->bucket - 1) / z->bucket);
	for (int b = 0; b < z->n_buckets; b++)
		z->shard += bucket_len(z, b) / p;
	size_t bytes = (size_t)z->shard * sizeof(float);
	z->master = rl_ops_alloc(ops, RL_MEM_OPTIMIZER, bytes);
	z->grad = rl_ops_alloc(ops, RL_MEM_GRADS, bytes);
	z->m = rl_ops_alloc(ops, RL_MEM_OPTIMIZER, bytes);
	z->v = rl_ops_alloc(ops, RL_MEM_OPTIMIZER, bytes);
	/* only the last bucket can run past n: the scratch is its size, not
	 * a whole bucket's (160 MB by default) */
	z->scratch = rl_ops_alloc(ops, RL_MEM_GRADS,
	                          (size_t)bucket_len(z, z->n_buckets - 1) * sizeof(float));
	if (!z->master || !z->grad || !z->m || !z->v || !z->scratch ||
	    ops->zero(z->m, bytes, NULL) || ops->zero(z->v, bytes, NULL)) {
		snprintf(err, errlen, "cannot allocate %zu bytes of distributed optimizer state",
		         5 * bytes);
		rl_zero_free(z);
		return -1;
	}
	/* a piece per bucket, and one more per replica at most */
	z->pieces = calloc((size_t)(z->n_buckets + m->n_params + 1), sizeof *z->pieces);
	if (!z->pieces) {
		snprintf(err, errlen, "out of memory for the distributed optimizer");
		rl_zero_free(z);
		return -1;
	}
	int r = rl_comm_rank(group);
	for (int b = 0; b < z->n_buckets; b++) {
		int64_t slice = bucket_len(z, b) / p, from = bucket_start(z, b) + r * slice;
		int64_t real = z->n - from < slice ? z->n - from : slice;
		float *dst = z->master + shard_offset(z, b);

		if (real > 0)
			add_pieces(z, m, from, real, shard_offset(z, b));

		if (real < slice &&
		    ops->zero(dst, (size_t)slice * sizeof(float), NULL)) /* padding */
			goto copy_failed;
		if (real > 0 &&
		    ops->copy(dst, m->flat + base + from, (size_t)real * sizeof(float), NULL))
			goto copy_failed;
	}
	return 0;
copy_failed:
	snprintf(err, errlen, "the %s backend cannot copy the master weights", ops->name);
	rl_zero_free(z);
	return -1;
}

void rl_zero_free(struct rl_zero *z)
{
	/* an all-gather still in flight reads the master and writes the
	 * model: it ends before either goes */
	if (z->pending)
		rl_zero_settle(z, 0, -1);
	if (z->ops) {
		rl_ops_release(z->ops, z->master);
		rl_ops_release(z->ops, z->grad);
		rl_ops_release(z->ops, z->m);
		rl_ops_release(z->ops, z->v);
		rl_ops_release(z->ops, z->scratch);
	}
	free(z->pieces);
	free(z->pending);
	free(z->started);
	free(z->late);
	memset(z, 0, sizeof *z);
}

/* Bucket b of buf (n floats), padded with zeros into the scratch when it
 * runs past the end. */
static const float *bucket_source(struct rl_zero *z, const float *buf, int b)
{
	int64_t s = bucket_start(z, b), len = bucket_len(z, b);

	if (s + len <= z->n)
		return buf + s;
	z->ops->zero(z->scratch, (size_t)len * sizeof(float), NULL);
	z->ops->copy(z->scratch, buf + s, (size_t)(z->n - s) * sizeof(float), NULL);
	return z->scratch;
}

/* Bucket b's reduce-scatter, started or run to its end. */
static struct rl_comm_request *reduce_bucket(struct rl_zero *z, const struct rl_model *m, int b,
                                             bool start)
{
	int64_t p = rl_comm_size(z->group);
	const float *src = bucket_source(z, m->flat_grad + z->base, b);
	float *dst = z->grad + shard_offset(z, b);
	size_t count = (size_t)(bucket_len(z, b) / p);
	struct rl_comm *dev = rl_comm_device(z->group);

	if (start)
		return rl_comm_start_reduce_scatter(dev, src, dst, count, RL_COMM_F32, RL_COMM_SUM,
		                                    "gradient reduce-scatter (overlapped)");
	rl_comm_reduce_scatter(dev, src, dst, count, RL_COMM_F32, RL_COMM_SUM,
	                       "gradient reduce-scatter");
	return NULL;
}

int rl_zero_reduce_grads(struct rl_zero *z, struct rl_model *m, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	rl_zero_settle(z, 0, -1); /* a gather still in flight is no reduction */
	/* the buckets the backward pass did not start, in order, then the
	 * started ones, in any order: every rank started the same ones */
	for (int b = 0; b < z->n_buckets; b++)
		if (!z->started || !z->started[b])
			reduce_bucket(z, m, b, false);
	for (int b = 0; z->started && b < z->n_buckets; b++) {
		rl_comm_wait(z->pending[b]);
		z->pending[b] = NULL;
		z->started[b] = false;
	}
	z->early_total += z->early;
	z->buckets_total += z->n_buckets;
	z->early = 0;
	return 0;
}

/* The model's hook: every gradient from flat offset lo on is final. The
 * buckets that lie there, the late ones aside, start, the last first (the
 * order the backward pass finishes them in, the same on every rank). */
static void grads_ready(void *ctx, int64_t lo)
{
	struct rl_zero *z = ctx;

	for (int b = z->n_buckets - 1; b >= 0; b--) {
		if (z->started[b] || z->late[b])
			continue;
		if (z->base + bucket_start(z, b) < lo)
			break;
		z->pending[b] = reduce_bucket(z, z->model, b, true);
		z->started[b] = true;
		/* lo 0 is the end of the pass: no layer is left to overlap */
		z->early += lo > 0;
	}
}

/* Bucket b, if it is the last one and runs past n, was gathered into the
 * scratch: its first floats go into place. */
static int gathered(struct rl_zero *z, float *full, int b)
{
	int64_t s = bucket_start(z, b);

	if (s + bucket_len(z, b) <= z->n)
		return 0;
	return z->ops->copy(full + s, z->scratch, (size_t)(z->n - s) * sizeof(float), NULL);
}

/* The slices of buffer shard (master or grad) gathered into full (n
 * floats): bucket by bucket, straight into place except for the last.
 * start: left in flight, for rl_zero_settle. */
static int gather(struct rl_zero *z, const float *shard, float *full, bool start, const char *what)
{
	int64_t p = rl_comm_size(z->group);
	struct rl_comm *dev = rl_comm_device(z->group);

	for (int b = 0; b < z->n_buckets; b++) {
		int64_t s = bucket_start(z, b), len = bucket_len(z, b);
		float *dst = s + len <= z->n ? full + s : z->scratch;
		const float *src = shard + shard_offset(z, b);

		if (start) {
			z->pending[b] = rl_comm_start_all_gather(dev, src, dst, (size_t)(len / p),
			                                         RL_COMM_F32, what);
			z->started[b] = true;
			z->gather_into = full;
			continue;
		}
		rl_comm_all_gather(dev, src, dst, (size_t)(len / p), RL_COMM_F32, what);
		if (gathered(z, full, b))
			return -1;
	}
	return 0;
}

void rl_zero_settle(struct rl_zero *z, int64_t lo, int64_t hi)
{
	bool left = false;

	if (!z->gather_into)
		return;
	for (int b = 0; b < z->n_buckets; b++) {
		int64_t s = z->base + bucket_start(z, b), e = s + bucket_len(z, b);

		if (!z->started[b])
			continue;
		if (e <= lo || (hi >= 0 && s >= hi)) {
			left = true;
			continue;
		}
		rl_comm_wait(z->pending[b]);
		z->pending[b] = NULL;
		z->started[b] = false;
		/* queued before any reader of the weights */
		if (gathered(z, z->gather_into, b))
			fprintf(stderr, "rlrun: the %s backend cannot copy the gathered weights\n",
			        z->ops->name);
	}
	if (!left)
		z->gather_into = NULL;
}

static void settle(void *ctx, int64_t lo, int64_t hi)
{
	rl_zero_settle(ctx, lo, hi);
}

int rl_zero_overlap(struct rl_zero *z, struct rl_model *m, bool grads, bool gather_params,
                    char *err, size_t errlen)
{
	z->pending = calloc((size_t)z->n_buckets, sizeof *z->pending);
	z->started = calloc((size_t)z->n_buckets, sizeof *z->started);
	z->late = calloc((size_t)z->n_buckets, sizeof *z->late);
	if (!z->pending || !z->started || !z->late) {
		snprintf(err, errlen, "out of memory for the overlap's buckets");
		return -1;
	}
	/* what rl_model_reduce_grads sums before the data-parallel reduction:
	 * its buckets wait for it, so that the sums are the same ones */
	bool tied = m->shard.pp.size > 1 && m->cfg.tie_word_embeddings;
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *x = &m->params[i];
		int64_t lo = x->offset - z->base, hi = lo + x->numel;

		if (!x->partial_grad && !(tied && (x == m->embed || x == m->lm_head)))
			continue;
		for (int b = 0; b < z->n_buckets; b++)
			if (lo < bucket_start(z, b) + bucket_len(z, b) && hi > bucket_start(z, b))
				z->late[b] = true;
	}
	z->model = m;
	z->overlap_gather = gather_params;
	m->overlap.ctx = z;
	m->overlap.grads_ready = grads ? grads_ready : NULL;
	m->overlap.settle = gather_params ? settle : NULL;
	return 0;
}

int rl_zero_gather_grads(struct rl_zero *z, float *full, char *err, size_t errlen)
{
	if (gather(z, z->grad, full, false, "gradient all-gather")) {
		snprintf(err, errlen, "the %s backend cannot copy the gathered gradient",
		         z->ops->name);
		return -1;
	}
	return 0;
}

/* The squares of this region's gradient, each tensor once, summed over
 * every rank: the op adds each piece into one double in backend memory,
 * which comes back once. */
static int sum_squares(struct rl_zero *z, double *ss)
{
	const struct rl_ops *ops = z->ops;
	double *total = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sizeof *total);
	int rc = !total || ops->zero(total, sizeof *total, NULL);

	for (int i = 0; rc == 0 && i < z->n_pieces; i++)
		rc = ops->sum_squares(total, z->grad + z->pieces[i].at, z->pieces[i].len, NULL);
	*ss = 0;
	if (rc == 0)
		rc = ops->to_host(ss, total, sizeof *ss, NULL);
	rl_ops_release(ops, total);
	/* every rank reaches the sums, failed or not */
	rl_comm_all_reduce(z->group, ss, 1, RL_COMM_F64, RL_COMM_SUM, "gradient norm");
	if (z->mp)
		rl_comm_all_reduce(z->mp, ss, 1, RL_COMM_F64, RL_COMM_SUM,
		                   "gradient norm over the model's parts");
	return rc ? -1 : 0;
}

/* The slices clipped by coef (< 1) or not, one AdamW step, and the new
 * weights gathered into m. */
static int step(struct rl_zero *z, struct rl_model *m, float coef)
{
	const struct rl_ops *ops = z->ops;

	if (coef < 1.0f && ops->scale(z->grad, z->shard, coef, NULL))
		return -1;
	z->step++;
	return ops->adamw_step(z->master, z->grad, z->m, z->v, z->shard, &z->hp, z->step, NULL) ||
	       gather(z, z->master, m->flat + z->base, z->overlap_gather,
	              z->overlap_gather ? "parameter all-gather (overlapped)"
	                                : "parameter all-gather");
}

int rl_zero_update(struct rl_zero *z, struct rl_zero *experts, struct rl_model *m, double max_norm,
                   double *norm, char *err, size_t errlen)
{
	double ss, expert_ss = 0;
	float coef = 1.0f;

	if (sum_squares(z, &ss) || (experts && sum_squares(experts, &expert_ss)))
		goto failed;
	*norm = sqrt(ss + expert_ss);
	/* torch computes the coefficient in fp32 from the fp32 norm */
	if (max_norm > 0)
		coef = (float)max_norm / ((float)*norm + 1e-6f);
	if (step(z, m, coef) || (experts && step(experts, m, coef)))
		goto failed;
	return 0;
failed:
	snprintf(err, errlen, "the %s backend failed during the distributed update", z->ops->name);
	return -1;
}

void rl_zero_slice(const struct rl_zero *z, int b, int64_t *from, int64_t *len, int64_t *at)
{
	int64_t slice = bucket_len(z, b) / rl_comm_size(z->group);

	int64_t start = bucket_start(z, b) + rl_comm_rank(z->group) * slice;

	*len = z->n - start < slice ? z->n - start : slice;
	if (*len < 0)
		*len = 0;
	*from = z->base + start;
	*at = shard_offset(z, b);
}

int rl_zero_restore(struct rl_zero *z, const struct rl_model *m, const float *exp_avg,
                    const float *exp_avg_sq, int64_t step, char *err, size_t errlen)
{
	const struct rl_ops *ops = z->ops;

	for (int b = 0; b < z->n_buckets; b++) {
		int64_t from, len, at;

		rl_zero_slice(z, b, &from, &len, &at);
		if (len == 0)
			continue;
		size_t bytes = (size_t)len * sizeof(float);
		/* host to backend: the cpu backend's copy is memcpy, a device
		 * backend's is a host-to-device copy */
		if (ops->copy(z->master + at, m->flat + from, bytes, NULL) ||
		    ops->from_host(z->m + at, exp_avg + from, bytes, NULL) ||
		    ops->from_host(z->v + at, exp_avg_sq + from, bytes, NULL)) {
			snprintf(err, errlen, "the %s backend cannot restore the optimizer state",
			         ops->name);
			return -1;
		}
	}
	z->step = step;
	return 0;
}
