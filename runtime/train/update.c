#define _GNU_SOURCE
/* One optimizer update per global batch: the gradients (the gradient
 * pass), their reduction over the ranks, the clipped AdamW step, the
 * frozen routers put back, and the first update's gradient dump. */
#include <stdlib.h>
#include <string.h>

#include "runtime/rollout/share.h"
#include "runtime/train/grad_dump.h"
#include "runtime/train/policy_pass.h"
#include "runtime/train/update.h"

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

	rl_model_settle(m, 0, -1); /* the update's all-gather writes them */
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

		if (r && (keep ? ops->to_host(t->frozen + at, r->master, bytes, NULL)
		               : ops->from_host(r->master, t->frozen + at, bytes, NULL)))
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
	return rl_policy_update(t, stats->loss, grad_norm, err, errlen);
}

int rl_policy_update(struct rl_trainer *t, double loss, double *grad_norm, char *err, size_t errlen)
{
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
		    (dump && rl_grad_dump_write(t, loss, err, errlen)) ||
		    rl_zero_update(&t->zero, experts, t->model, max_norm, grad_norm, err, errlen))
			return -1;
	} else {
		t->opt.hp.lr = lr;
		if (dump && rl_grad_dump_write(t, loss, err, errlen))
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
