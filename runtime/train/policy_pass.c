#define _GNU_SOURCE
/* Both passes cut the samples into micro-batches the same way: a fixed
 * count of sequences, or first-fit-decreasing packing into a token
 * budget; under pipeline parallelism they run in its schedule. */
#include <stdlib.h>
#include <string.h>

#include "runtime/grpo/packing.h"
#include "runtime/parallel/pipeline.h"
#include "runtime/rollout/share.h"
#include "runtime/train/policy_pass.h"

int64_t rl_mb_token_budget(const struct rl_cfg_policy *p, bool training, int unit)
{
	/* the config resolves null budgets from the batch sizes, so both
	 * train_mb_tokens and logprob_mb_tokens are always set here */
	if (p->sequence_packing.enabled)
		return training ? p->sequence_packing.train_mb_tokens.value
		                : p->sequence_packing.logprob_mb_tokens.value;
	return (training ? p->train_micro_batch_size * (unit > 1 ? unit : 1)
	                 : p->logprob_batch_size) *
	       p->max_total_sequence_length;
}

/* Micro-batches of the samples which[0..n), as positions into which[].
 * In the gradient pass of an algorithm whose loss reads several
 * consecutive samples together (t->algo->unit: DPO's pair), micro-batches
 * hold whole units: they are planned over the units (n / unit of them,
 * each as long as its samples together), then read back as samples, a
 * unit's in order. */
static int plan_microbatches(const struct rl_trainer *t, const struct rl_rollout *r,
                             const int *which, int n, bool training, struct rl_microbatches *mb)
{
	const struct rl_cfg_policy *p = &t->cfg->policy;
	int unit = training && t->algo->unit > 1 ? t->algo->unit : 1, n_units = n / unit, rc;
	struct rl_microbatches units = {0}, *plan = unit > 1 ? &units : mb;

	if (!p->sequence_packing.enabled) {
		rc = rl_pack_fixed(
		    n_units, (int)(training ? p->train_micro_batch_size : p->logprob_batch_size),
		    plan);
	} else {
		int *len = calloc((size_t)n_units + 1, sizeof *len);
		if (!len)
			return -1;
		for (int k = 0; k < n; k++)
			len[k / unit] += r->s[which[k]].len;
		rc = rl_pack_ffd(len, n_units, (int)rl_mb_token_budget(p, training, unit),
		                 (int)p->sequence_packing.sequence_length_round, plan);
		free(len);
	}
	if (rc == 0 && unit > 1)
		rc = rl_microbatches_expand(&units, unit, mb);
	rl_microbatches_free(&units);
	return rc;
}

/* which[] of one micro-batch, mapped from positions to sample indices. */
static int *mb_samples(const struct rl_microbatches *mb, int b, const int *which, int *n)
{
	*n = mb->start[b + 1] - mb->start[b];
	int *s = malloc(((size_t)*n + 1) * sizeof *s);
	if (s)
		for (int k = 0; k < *n; k++)
			s[k] = which[mb->items[mb->start[b] + k]];
	return s;
}

/* One pass over micro-batches, as the pipeline schedule calls it back. */
struct pass {
	struct rl_trainer *t;
	struct rl_model *model; /* the policy, or the teacher */
	struct rl_rollout *r;
	struct rl_microbatches mb;
	const int *which; /* micro-batch positions to sample indices */
	size_t field;     /* logprobs: where they go */
	/* training: the global batch's denominators, the statistics summed */
	const struct rl_loss_norm *norm;
	struct rl_loss_stats *stats;
	bool overlap; /* the last micro-batch's backward starts the gradient buckets */
};

static int pass_tokens(void *ctx, int b)
{
	const struct pass *p = ctx;
	int n = 0;

	for (int k = p->mb.start[b]; k < p->mb.start[b + 1]; k++)
		n += p->r->s[p->which[p->mb.items[k]]].len;
	return n;
}

/* Micro-batch b through this stage, and on the last stage its logprobs
 * into t->row_lp; *samples (free it) are its sample indices. */
static int pass_forward(struct pass *p, int b, struct rl_acts *a, int **samples, int *n, char *err,
                        size_t errlen)
{
	struct rl_trainer *t = p->t;

	*samples = mb_samples(&p->mb, b, p->which, n);
	if (!*samples) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (rl_packed_build(&t->packed, p->r, *samples, *n)) {
		snprintf(err, errlen, "out of memory packing %d sequences", *n);
		return -1;
	}
	if (t->packed.batch.n_tokens > t->max_mb_tokens) {
		snprintf(err, errlen, "a micro-batch of %d tokens exceeds the %d planned",
		         t->packed.batch.n_tokens, t->max_mb_tokens);
		return -1;
	}
	if (rl_model_forward(p->model, a, &t->packed.batch, err, errlen))
		return -1;
	return rl_model_last_stage(p->model)
	           ? rl_model_logprobs(p->model, a, t->row_lp, t->logit_scale, t->logprob_chunk,
	                               err, errlen)
	           : 0;
}

static int logprobs_forward(void *ctx, int b, struct rl_acts *a, char *err, size_t errlen)
{
	struct pass *p = ctx;
	int n, *samples = NULL;
	int rc = pass_forward(p, b, a, &samples, &n, err, errlen);

	if (rc == 0 && rl_model_last_stage(p->model))
		rl_packed_scatter(&p->t->packed, p->r, samples, n, p->t->row_lp, p->field);
	free(samples);
	return rc;
}

/* On the last stage the loss of the micro-batch, whose gradient its
 * backward pass (next in 1F1B there) starts from. */
static int train_forward(void *ctx, int b, struct rl_acts *a, char *err, size_t errlen)
{
	struct pass *p = ctx;
	struct rl_trainer *t = p->t;
	int n, *samples = NULL;
	int rc = pass_forward(p, b, a, &samples, &n, err, errlen);

	free(samples);
	if (rc == 0)
		p->stats->moe_aux_loss += rl_acts_aux_loss(t->model, a);
	if (rc == 0 && rl_model_last_stage(t->model)) {
		struct rl_loss_batch lb = rl_packed_loss_batch(&t->packed, t->row_lp);
		t->algo->loss(t, &lb, p->norm, t->row_grad, p->stats);
	}
	return rc;
}

static int train_backward(void *ctx, int b, struct rl_acts *a, char *err, size_t errlen)
{
	struct pass *p = ctx;
	struct rl_model *m = p->t->model;

	m->overlap.last_microbatch = p->overlap && b == p->mb.n - 1;
	int rc =
	    rl_model_backward(m, a, rl_model_last_stage(m) ? p->t->row_grad : NULL, err, errlen);
	m->overlap.last_microbatch = false;
	return rc;
}

/* The passes this rank has no micro-batch for (ep_idle.c), in the
 * pipeline's schedule. */
static int idle_forward(void *ctx, struct rl_acts *a, char *err, size_t errlen)
{
	struct pass *p = ctx;

	return rl_model_idle_forward(p->model, a, err, errlen);
}

static int idle_backward(void *ctx, struct rl_acts *a, char *err, size_t errlen)
{
	struct pass *p = ctx;

	return rl_model_idle_backward(p->t->model, a, err, errlen);
}

/* most: the micro-batches of the rank of this one's ep group that has
 * the most (ep_most); acts: the buffers of p->model */
static struct rl_pipeline pipeline_of(struct rl_trainer *t, struct pass *p, struct rl_acts **acts,
                                      int n_acts, int most)
{
	return (struct rl_pipeline){
	    t->pp,        p->model,         acts,           n_acts,         p,
	    pass_tokens,  logprobs_forward, train_backward, most - p->mb.n, idle_forward,
	    idle_backward};
}

/* Expert parallelism: the most micro-batches a rank of this one's ep
 * group has (asked before any pass: a rank asking after its own passes
 * would wait for ranks waiting for it in an exchange); n without. */
static int ep_most(const struct rl_model *m, int n)
{
	const struct rl_ep_group *ep = &m->shard.ep;

	return ep->size > 1 ? ep->max_int(ep->ctx, n, "micro-batches of the ep group") : n;
}

int rl_model_logprobs_pass(struct rl_trainer *t, struct rl_rollout *r, const struct rl_scorer *sc,
                           size_t field, char *err, size_t errlen)
{
	struct pass p = {.t = t, .model = sc->model, .r = r, .field = field};
	int *all = malloc(((size_t)r->n + 1) * sizeof *all);
	int rc = -1, lo, hi;

	p.which = all;
	if (!all) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	/* this rank's share, then everyone's */
	rl_share_range(t->dp, r->n, &lo, &hi);
	for (int i = lo; i < hi; i++)
		all[i - lo] = i;
	if (plan_microbatches(t, r, all, hi - lo, false, &p.mb)) {
		snprintf(err, errlen, "out of memory planning micro-batches");
		goto out;
	}
	int most = ep_most(sc->model, p.mb.n);
	if (sc->weights && rl_model_use_weights(sc->model, sc->weights, err, errlen))
		goto out;
	struct rl_pipeline pl = pipeline_of(t, &p, sc->acts, sc->n_acts, most);
	bool was = rl_model_set_invariant(sc->model, sc->invariant);
	rc = rl_pipeline_forward(&pl, p.mb.n, err, errlen);
	rl_model_set_invariant(sc->model, was);
	if (sc->weights && rl_model_use_weights(sc->model, NULL, rc ? NULL : err, rc ? 0 : errlen))
		rc = -1;
	if (rc == 0 &&
	    (rl_share_stage_logprobs(t->pp, r, field, lo, hi, err, errlen) ||
	     rl_share_logprobs(t->dp, r, field, (int)t->cfg->policy.max_total_sequence_length, err,
	                       errlen)))
		rc = -1;
out:
	rl_microbatches_free(&p.mb);
	free(all);
	return rc;
}

int rl_policy_logprobs(struct rl_trainer *t, struct rl_rollout *r, bool reference, char *err,
                       size_t errlen)
{
	/* The policy's with generation's kernels, so that generation's
	 * logprobs are these to the bit. The reference's only meet the
	 * training pass's (in the KL term), so they are computed with its
	 * kernels: at the first step, where the two policies are one, the KL
	 * and its gradient stay at their rounding floor. */
	if (reference && !t->ref_weights) {
		/* NULL weights would be the policy's own (rl_model_use_weights) */
		snprintf(err, errlen, "the %s run holds no reference policy", t->algo->name);
		return -1;
	}
	struct rl_scorer sc = {
	    .model = t->model,
	    .weights = reference ? t->ref_weights : NULL,
	    .acts = t->acts,
	    .n_acts = t->n_acts,
	    .invariant = t->gen.batch_invariant && !reference,
	};

	return rl_model_logprobs_pass(t, r, &sc,
	                              reference ? offsetof(struct rl_sample, ref_lp)
	                                        : offsetof(struct rl_sample, prev_lp),
	                              err, errlen);
}

/* The buckets start in the last micro-batch's backward pass, on every rank
 * of the data-parallel group alike: a rank without any micro-batch would
 * start none, and run the group's reduce-scatters in another order, so
 * then none does. */
static bool overlap_agreed(const struct rl_trainer *t, int n)
{
	struct rl_comm *group = t->zero.group;

	if (!t->model->overlap.grads_ready)
		return false;
	if (group && rl_comm_size(group) > 1)
		rl_comm_all_reduce(group, &n, 1, RL_COMM_I32, RL_COMM_MIN,
		                   "overlap: micro-batches of every data-parallel rank");
	return n > 0;
}

int rl_policy_gradients(struct rl_trainer *t, struct rl_rollout *r, const int *which, int n,
                        struct rl_loss_stats *stats, char *err, size_t errlen)
{
	struct rl_loss_norm norm = {0};
	struct pass p = {.t = t, .model = t->model, .r = r, .norm = &norm, .stats = stats};
	int rc = -1, lo, hi;

	/* the denominators of the whole global batch, before any micro-batch
	 * and on every data-parallel rank: that is what makes the split (into
	 * micro-batches, and among ranks) invisible in the result */
	for (int k = 0; k < n; k++) {
		const struct rl_sample *s = &r->s[which[k]];
		norm.valid_seqs += s->loss_mult;
		norm.valid_tokens += s->loss_mult * (double)rl_sample_loss_tokens(s);
	}
	if (t->algo->unit > 1) {
		/* whole units to each rank (n is a multiple of the unit) */
		rl_share_range(t->dp, n / t->algo->unit, &lo, &hi);
		lo *= t->algo->unit;
		hi *= t->algo->unit;
	} else {
		rl_share_range(t->dp, n, &lo, &hi);
	}
	p.which = which + lo;
	if (plan_microbatches(t, r, p.which, hi - lo, true, &p.mb)) {
		snprintf(err, errlen, "out of memory planning micro-batches");
		return -1;
	}
	if (rl_model_zero_grad(t->model)) {
		snprintf(err, errlen, "the %s backend cannot zero the gradients",
		         t->model->ops->name);
		goto out;
	}
	/* a mixture of experts' load-balancing loss: a mean over the
	 * micro-batches of every data-parallel rank, as Megatron scales it */
	int ranks = t->dp ? rl_comm_size(t->dp) : 1;
	const struct rl_opt_float *coef = &t->cfg->policy.moe.aux_loss_coef;
	double aux_coef = coef->set ? coef->value : t->model->cfg.moe.aux_loss_coef;
	float aux = (float)(aux_coef / ((p.mb.n > 0 ? p.mb.n : 1) * ranks));
	for (int i = 0; i < t->n_acts; i++)
		rl_acts_set_aux_loss_coef(t->acts[i], aux);
	int most = ep_most(t->model, p.mb.n);
	p.overlap = overlap_agreed(t, p.mb.n);
	struct rl_pipeline pl = pipeline_of(t, &p, t->acts, t->n_acts, most);
	pl.forward = train_forward;
	rc = rl_pipeline_1f1b(&pl, p.mb.n, err, errlen);
out:
	rl_microbatches_free(&p.mb);
	return rc;
}
