#define _GNU_SOURCE
/* The two passes of the policy over a step's samples: logprobs (of the
 * policy before the update, and of the frozen reference) and training
 * (forward, loss, backward, one optimizer update per global batch). Both
 * cut the samples into micro-batches the same way: a fixed count of
 * sequences, or first-fit-decreasing packing into a token budget. */
#include <stdlib.h>
#include <string.h>

#include "runtime/grpo/grad_dump.h"
#include "runtime/grpo/packing.h"
#include "runtime/grpo/share.h"
#include "runtime/grpo/trainer.h"
#include "runtime/parallel/pipeline.h"

int64_t rl_mb_token_budget(const struct rl_cfg_policy *p, bool training)
{
	/* the config resolves null budgets from the batch sizes, so both
	 * train_mb_tokens and logprob_mb_tokens are always set here */
	if (p->sequence_packing.enabled)
		return training ? p->sequence_packing.train_mb_tokens.value
		                : p->sequence_packing.logprob_mb_tokens.value;
	return (training ? p->train_micro_batch_size : p->logprob_batch_size) *
	       p->max_total_sequence_length;
}

/* Micro-batches of the samples which[0..n), as positions into which[]. */
static int plan_microbatches(const struct rl_trainer *t, const struct rl_rollout *r,
                             const int *which, int n, bool training, struct rl_microbatches *mb)
{
	const struct rl_cfg_policy *p = &t->cfg->policy;

	if (!p->sequence_packing.enabled)
		return rl_pack_fixed(
		    n, (int)(training ? p->train_micro_batch_size : p->logprob_batch_size), mb);
	int *len = malloc(((size_t)n + 1) * sizeof *len);
	if (!len)
		return -1;
	for (int k = 0; k < n; k++)
		len[k] = r->s[which[k]].len;
	int rc = rl_pack_ffd(len, n, (int)rl_mb_token_budget(p, training),
	                     (int)p->sequence_packing.sequence_length_round, mb);
	free(len);
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

static struct rl_loss_batch loss_view(const struct rl_packed *p, const float *curr)
{
	return (struct rl_loss_batch){
	    .n_tokens = p->batch.n_tokens,
	    .n_seqs = p->batch.n_seqs,
	    .cu_seqlens = p->cu_seqlens,
	    .curr = curr,
	    .prev = p->prev,
	    .gen = p->gen,
	    .ref = p->ref,
	    .token_mask = p->token_mask,
	    .advantage = p->advantage,
	    .sample_mask = p->sample_mask,
	};
}

/* One pass over micro-batches, as the pipeline schedule calls it back. */
struct pass {
	struct rl_trainer *t;
	struct rl_rollout *r;
	struct rl_microbatches mb;
	const int *which; /* micro-batch positions to sample indices */
	size_t field;     /* logprobs: where they go */
	/* training: the global batch's denominators, the statistics summed */
	const struct rl_loss_norm *norm;
	struct rl_loss_stats *stats;
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
	if (rl_model_forward(t->model, a, &t->packed.batch, err, errlen))
		return -1;
	return rl_model_last_stage(t->model)
	           ? rl_model_logprobs(t->model, a, t->row_lp, t->logit_scale, t->logprob_chunk,
	                               err, errlen)
	           : 0;
}

static int logprobs_forward(void *ctx, int b, struct rl_acts *a, char *err, size_t errlen)
{
	struct pass *p = ctx;
	int n, *samples = NULL;
	int rc = pass_forward(p, b, a, &samples, &n, err, errlen);

	if (rc == 0 && rl_model_last_stage(p->t->model))
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
		struct rl_loss_batch lb = loss_view(&t->packed, t->row_lp);
		rl_loss_compute(&t->loss, &lb, p->norm, t->row_grad, p->stats);
	}
	return rc;
}

static int train_backward(void *ctx, int b, struct rl_acts *a, char *err, size_t errlen)
{
	struct pass *p = ctx;
	struct rl_model *m = p->t->model;

	(void)b;
	return rl_model_backward(m, a, rl_model_last_stage(m) ? p->t->row_grad : NULL, err, errlen);
}

/* The passes this rank has no micro-batch for (ep_idle.c), in the
 * pipeline's schedule. */
static int idle_forward(void *ctx, struct rl_acts *a, char *err, size_t errlen)
{
	struct pass *p = ctx;

	return rl_model_idle_forward(p->t->model, a, err, errlen);
}

static int idle_backward(void *ctx, struct rl_acts *a, char *err, size_t errlen)
{
	struct pass *p = ctx;

	return rl_model_idle_backward(p->t->model, a, err, errlen);
}

/* most: the micro-batches of the rank of this one's ep group that has
 * the most (ep_most) */
static struct rl_pipeline pipeline_of(struct rl_trainer *t, struct pass *p, int most)
{
	return (struct rl_pipeline){
	    t->pp,        t->model,         t->acts,        t->n_acts,      p,
	    pass_tokens,  logprobs_forward, train_backward, most - p->mb.n, idle_forward,
	    idle_backward};
}

/* Expert parallelism: the most micro-batches a rank of this one's ep
 * group has (asked before any pass: a rank asking after its own passes
 * would wait for ranks waiting for it in an exchange); n without. */
static int ep_most(const struct rl_trainer *t, int n)
{
	const struct rl_ep_group *ep = &t->model->shard.ep;

	return ep->size > 1 ? ep->max_int(ep->ctx, n, "micro-batches of the ep group") : n;
}

int rl_policy_logprobs(struct rl_trainer *t, struct rl_rollout *r, bool reference, char *err,
                       size_t errlen)
{
	struct pass p = {.t = t, .r = r};
	int *all = malloc(((size_t)r->n + 1) * sizeof *all);
	int rc = -1, lo, hi;

	p.field =
	    reference ? offsetof(struct rl_sample, ref_lp) : offsetof(struct rl_sample, prev_lp);
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
	int most = ep_most(t, p.mb.n);
	if (reference)
		rl_model_swap_weights(t->model, &t->ref_weights);
	struct rl_pipeline pl = pipeline_of(t, &p, most);
	rc = rl_pipeline_forward(&pl, p.mb.n, err, errlen);
	if (reference)
		rl_model_swap_weights(t->model, &t->ref_weights);
	if (rc == 0 &&
	    (rl_share_stage_logprobs(t->pp, r, p.field, lo, hi, err, errlen) ||
	     rl_share_logprobs(t->dp, r, p.field, (int)t->cfg->policy.max_total_sequence_length,
	                       err, errlen)))
		rc = -1;
out:
	rl_microbatches_free(&p.mb);
	free(all);
	return rc;
}

int rl_policy_gradients(struct rl_trainer *t, struct rl_rollout *r, const int *which, int n,
                        struct rl_loss_stats *stats, char *err, size_t errlen)
{
	struct rl_loss_norm norm = {0};
	struct pass p = {.t = t, .r = r, .norm = &norm, .stats = stats};
	int rc = -1, lo, hi;

	/* the denominators of the whole global batch, before any micro-batch
	 * and on every data-parallel rank: that is what makes the split (into
	 * micro-batches, and among ranks) invisible in the result */
	for (int k = 0; k < n; k++) {
		const struct rl_sample *s = &r->s[which[k]];
		norm.valid_seqs += s->loss_mult;
		norm.valid_tokens += s->loss_mult * (double)(s->len - s->prompt_len);
	}
	rl_share_range(t->dp, n, &lo, &hi);
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
	int most = ep_most(t, p.mb.n);
	struct rl_pipeline pl = pipeline_of(t, &p, most);
	pl.forward = train_forward;
	rc = rl_pipeline_1f1b(&pl, p.mb.n, err, errlen);
out:
	rl_microbatches_free(&p.mb);
	return rc;
}

/* The loss statistics of every data-parallel rank's part of the batch:
 * their terms already carry the global denominators, so they add up. */
static void sum_stats(struct rl_trainer *t, struct rl_loss_stats *st)
{
	double v[] = {st->loss,
	              st->actor_loss,
	              st->kl,
	              st->token_mult_prob_error,
	              st->probs_ratio,
	              st->probs_ratio_clamped,
	              st->clip_fraction,
	              st->importance_weight,
	              st->moe_aux_loss};

	rl_share_sum(t->dp, v, (int)(sizeof v / sizeof *v), "loss statistics");
	/* only the last pipeline stage has them, but for the load-balancing
	 * term, which each stage has of its own layers */
	rl_share_sum(t->pp, v, (int)(sizeof v / sizeof *v), "loss statistics from the last stage");
	*st = (struct rl_loss_stats){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
}

/* policy.moe.freeze_router: a frozen router gets no gradient, but AdamW's
 * weight decay would still shrink it (torch leaves a parameter that
 * requires no gradient out of the optimizer): its weights are copied
 * before each update (keep) and put back after (!keep). */
static int frozen_routers(struct rl_trainer *t, bool keep)
{
	struct rl_model *m = t->model;
	const struct rl_ops *ops = m->ops;
	int64_t at = 0;

	if (!t->frozen) {
		for (int l = 0; l < m->cfg.n_layers; l++) {
			const struct rl_param *r = m->layer[l * RL_P_PER_LAYER + RL_P_ROUTER];
			at += r ? r->numel : 0;
		}
		if (!(t->frozen = malloc((size_t)at * sizeof(float) + 1)))
			return -1;
		at = 0;
	}
	for (int l = 0; l < m->cfg.n_layers; l++) {
		struct rl_param *r = m->layer[l * RL_P_PER_LAYER + RL_P_ROUTER];
		size_t bytes = r ? (size_t)r->numel * sizeof(float) : 0;

		if (r && (keep ? ops->to_host(t->frozen + at, r->data, bytes, NULL)
		               : ops->from_host(r->data, t->frozen + at, bytes, NULL)))
			return -1;
		at += r ? r->numel : 0;
	}
	return 0;
}

/* One optimizer update over the global batch which[0..n). */
static int train_global_batch(struct rl_trainer *t, struct rl_rollout *r, const int *which, int n,
                              struct rl_loss_stats *stats, double *grad_norm, char *err,
                              size_t errlen)
{
	if (rl_policy_gradients(t, r, which, n, stats, err, errlen))
		return -1;
	sum_stats(t, stats);
	double max_norm = t->cfg->policy.max_grad_norm.set ? t->cfg->policy.max_grad_norm.value : 0;
	float lr = (float)rl_lr_at(&t->lr, t->optimizer_steps);
	/* the first update of this process: of the run, or after a resume */
	bool dump = t->grad_dump && !t->grad_dumped;
	bool freeze = t->model->freeze_router;
	if (freeze && frozen_routers(t, true)) {
		snprintf(err, errlen, "out of memory keeping the frozen routers");
		return -1;
	}
	if (t->dist) {
		struct rl_zero *experts = t->zero_experts.group ? &t->zero_experts : NULL;

		t->zero.hp.lr = lr;
		if (experts)
			experts->hp.lr = lr;
		if (rl_model_reduce_grads(t->model, err, errlen) ||
		    rl_zero_reduce_grads(&t->zero, t->model, err, errlen) ||
		    (experts && rl_zero_reduce_grads(experts, t->model, err, errlen)) ||
		    (dump && rl_grad_dump_write(t, stats->loss, err, errlen)) ||
		    rl_zero_update(&t->zero, experts, t->model, max_norm, grad_norm, err, errlen))
			return -1;
	} else {
		t->opt.hp.lr = lr;
		if (dump && rl_grad_dump_write(t, stats->loss, err, errlen))
			return -1;
		if (rl_clip_grad_norm(t->model, max_norm, grad_norm) ||
		    rl_optimizer_step(&t->opt, t->model)) {
			snprintf(err, errlen, "the %s backend failed during the update",
			         t->model->ops->name);
			return -1;
		}
	}
	if (freeze && frozen_routers(t, false)) {
		snprintf(err, errlen, "the %s backend cannot restore the frozen routers",
		         t->model->ops->name);
		return -1;
	}
	t->grad_dumped |= dump;
	t->optimizer_steps++;
	return 0;
}

int rl_policy_train(struct rl_trainer *t, struct rl_rollout *r, struct rl_step_metrics *m,
                    char *err, size_t errlen)
{
	int B = (int)t->cfg->policy.train_global_batch_size;
	int *which = malloc(((size_t)B + 1) * sizeof *which);
	struct rl_loss_stats sum = {0};
	int updates = 0;

	if (!which) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* global batches are consecutive runs of samples, as NeMo-RL cuts
	 * the step's batch */
	for (int start = 0; start < r->n; start += B, updates++) {
		struct rl_loss_stats st = {0};
		double gn = 0;
		int n = r->n - start < B ? r->n - start : B;

		for (int k = 0; k < n; k++)
			which[k] = start + k;
		m->lr = rl_lr_at(&t->lr, t->optimizer_steps);
		if (train_global_batch(t, r, which, n, &st, &gn, err, errlen)) {
			free(which);
			return -1;
		}
		m->grad_norm = gn;
		sum.loss += st.loss;
		sum.actor_loss += st.actor_loss;
		sum.kl += st.kl;
		sum.probs_ratio += st.probs_ratio;
		sum.clip_fraction += st.clip_fraction;
		sum.importance_weight += st.importance_weight;
		sum.moe_aux_loss += st.moe_aux_loss;
	}
	free(which);
	/* each global batch's stats are already its mean; the step reports
	 * the mean over its updates */
	m->loss = sum.loss / updates;
	m->actor_loss = sum.actor_loss / updates;
	m->kl = sum.kl / updates;
	m->probs_ratio = sum.probs_ratio / updates;
	m->clip_fraction = sum.clip_fraction / updates;
	m->importance_weight = sum.importance_weight / updates;
	m->moe = t->model->cfg.moe.n_experts > 0;
	m->moe_aux_loss = sum.moe_aux_loss / updates;
	return 0;
}
