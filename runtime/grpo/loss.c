/* NeMo-RL's ClippedPGLossFn and its gradient (see loss.h).
 *
 * Everything reduces to one sum over the tokens that count:
 *   loss = sum_t c_t * (w_t * clip_loss_t + penalty * wkl_t * kl_t)
 * with c_t = sample_mask / valid_tokens (token-level loss) or
 * sample_mask / (n_s * valid_seqs) (sequence-level: n_s tokens of the
 * sequence's mean) or sample_mask / (C * valid_seqs) (Dr. GRPO's constant
 * C in place of n_s). Because c_t only depends on the token's own sequence
 * and the step's denominators, any split into micro-batches sums to the
 * same loss and gradient. */
#include "runtime/grpo/loss.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *key, const char *msg)
{
	snprintf(err, errlen, "loss_fn.%s: %s", key, msg);
	return -1;
}

static int parse_tis(struct rl_loss *l, const struct rl_cfg_loss_fn *cfg, char *err, size_t errlen)
{
	const char *type = cfg->truncated_importance_sampling_type;
	const struct rl_opt_float *max = &cfg->truncated_importance_sampling_ratio;
	const struct rl_opt_float *min = &cfg->truncated_importance_sampling_ratio_min;

	l->tis = RL_TIS_NONE;
	if (!type && !max->set)
		return 0;
	if (!type)
		return fail(
		    err, errlen, "truncated_importance_sampling_ratio",
		    "needs truncated_importance_sampling_type (tis, icepop or seq-mask-tis)");
	if (strcmp(type, "tis") == 0)
		l->tis = RL_TIS_TIS;
	else if (strcmp(type, "icepop") == 0)
		l->tis = RL_TIS_ICEPOP;
	else if (strcmp(type, "seq-mask-tis") == 0)
		l->tis = RL_TIS_SEQ_MASK;
	else
		return fail(err, errlen, "truncated_importance_sampling_type",
		            "must be tis, icepop or seq-mask-tis");
	if (!cfg->use_importance_sampling_correction)
		return fail(err, errlen, "truncated_importance_sampling_type",
		            "needs use_importance_sampling_correction: true");
	if (!max->set)
		return fail(err, errlen, "truncated_importance_sampling_type",
		            "needs truncated_importance_sampling_ratio");
	if (!(max->value > 0.0))
		return fail(err, errlen, "truncated_importance_sampling_ratio", "must be > 0");
	l->tis_max = max->value;
	if (l->tis == RL_TIS_TIS)
		return 0;
	if (!min->set)
		return fail(err, errlen, "truncated_importance_sampling_ratio_min",
		            "icepop and seq-mask-tis need a lower bound");
	if (!(min->value >= 0.0 && min->value <= max->value))
		return fail(err, errlen, "truncated_importance_sampling_ratio_min",
		            "must be in [0, truncated_importance_sampling_ratio]");
	if (l->tis == RL_TIS_SEQ_MASK && cfg->sequence_level_importance_ratios)
		return fail(err, errlen, "truncated_importance_sampling_type",
		            "seq-mask-tis does not go with sequence_level_importance_ratios");
	l->tis_min = min->value;
	return 0;
}

static int parse_kl(struct rl_loss *l, const struct rl_cfg_loss_fn *cfg, char *err, size_t errlen)
{
	const char *type = cfg->reference_policy_kl_type;

	if (!isfinite(cfg->reference_policy_kl_penalty))
		return fail(err, errlen, "reference_policy_kl_penalty", "must be a finite number");
	l->kl_penalty = cfg->reference_policy_kl_penalty;
	if (!type && l->kl_penalty != 0.0)
		return fail(err, errlen, "reference_policy_kl_type", "must be k1, k2 or k3");
	if (!type || strcmp(type, "k3") == 0)
		l->kl_type = RL_KL_K3;
	else if (strcmp(type, "k2") == 0)
		l->kl_type = RL_KL_K2;
	else if (strcmp(type, "k1") == 0)
		l->kl_type = RL_KL_K1;
	else
		return fail(err, errlen, "reference_policy_kl_type", "must be k1, k2 or k3");
	l->kl_input_clamp = cfg->kl_input_clamp_value.set;
	l->kl_input_clamp_value = cfg->kl_input_clamp_value.value;
	if (l->kl_input_clamp && !(l->kl_input_clamp_value > 0.0))
		return fail(err, errlen, "kl_input_clamp_value", "must be > 0 (or null)");
	l->kl_output_clamp = cfg->kl_output_clamp_value.set;
	l->kl_output_clamp_value = cfg->kl_output_clamp_value.value;
	if (l->kl_output_clamp && !(l->kl_output_clamp_value > 0.0))
		return fail(err, errlen, "kl_output_clamp_value", "must be > 0 (or null)");
	return 0;
}

int rl_loss_init(struct rl_loss *l, const struct rl_cfg_loss_fn *cfg, char *err, size_t errlen)
{
	memset(l, 0, sizeof(*l));
	if (parse_kl(l, cfg, err, errlen) || parse_tis(l, cfg, err, errlen))
		return -1;
	if (!(cfg->ratio_clip_min >= 0.0 && cfg->ratio_clip_min <= 1.0))
		return fail(err, errlen, "ratio_clip_min", "must be in [0, 1]");
	if (!(cfg->ratio_clip_max >= 0.0 && isfinite(cfg->ratio_clip_max)))
		return fail(err, errlen, "ratio_clip_max", "must be a finite number >= 0");
	l->ratio_lo = 1.0 - cfg->ratio_clip_min;
	l->ratio_hi = 1.0 + cfg->ratio_clip_max;
	l->dual_clip = cfg->ratio_clip_c.set;
	l->ratio_clip_c = cfg->ratio_clip_c.value;
	if (l->dual_clip && !(l->ratio_clip_c > 1.0))
		return fail(err, errlen, "ratio_clip_c", "must be > 1 (or null)");
	if (cfg->sequence_level_importance_ratios && cfg->token_level_loss)
		return fail(err, errlen, "sequence_level_importance_ratios",
		            "needs token_level_loss: false");
	if (cfg->token_sum_normalizer.set) {
		if (!(cfg->token_sum_normalizer.value > 0.0 &&
		      isfinite(cfg->token_sum_normalizer.value)))
			return fail(err, errlen, "token_sum_normalizer",
			            "must be a finite number > 0 (or null)");
		if (cfg->token_level_loss)
			return fail(err, errlen, "token_sum_normalizer",
			            "needs token_level_loss: false");
		if (cfg->sequence_level_importance_ratios)
			return fail(err, errlen, "token_sum_normalizer",
			            "does not go with sequence_level_importance_ratios");
	}
	if (cfg->disable_ppo_ratio && cfg->force_on_policy_ratio)
		return fail(err, errlen, "force_on_policy_ratio",
		            "does not go with disable_ppo_ratio (there is no ratio to force)");
	l->on_policy_kl = cfg->use_on_policy_kl_approximation;
	l->is_correction = cfg->use_importance_sampling_correction;
	l->token_level = cfg->token_level_loss;
	l->seq_ratio = cfg->sequence_level_importance_ratios;
	l->disable_ppo_ratio = cfg->disable_ppo_ratio;
	l->force_on_policy_ratio = cfg->force_on_policy_ratio;
	l->token_sum = cfg->token_sum_normalizer.set;
	l->token_sum_normalizer = cfg->token_sum_normalizer.value;
	return 0;
}

void rl_loss_norm_add(struct rl_loss_norm *n, const struct rl_loss_batch *b)
{
	for (int s = 0; s < b->n_seqs; s++) {
		double sm = b->sample_mask[s];
		int tokens = 0;

		for (int32_t t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++)
			tokens += b->token_mask[t] != 0;
		n->valid_tokens += sm * tokens;
		n->valid_seqs += sm;
	}
}

/* torch.nan_to_num(x, nan=0, posinf=0, neginf=0) */
static double finite_or_0(double x)
{
	return isfinite(x) ? x : 0.0;
}

/* torch.clamp passes the gradient on the closed interval */
static bool inside(double x, double lo, double hi)
{
	return lo <= x && x <= hi;
}

static double clamp(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

/* Per-token KL estimate between curr and ref; *dkl = d kl / d curr. */
static double kl_token(const struct rl_loss *l, double curr, double ref, double *dkl)
{
	double logr = ref - curr, dlogr = -1.0, kl, d;

	if (l->kl_input_clamp) {
		double v = l->kl_input_clamp_value;

		if (!inside(logr, -v, v))
			dlogr = 0.0;
		logr = clamp(logr, -v, v);
	}
	switch (l->kl_type) {
	case RL_KL_K1:
		kl = -logr;
		d = -dlogr;
		break;
	case RL_KL_K2:
		kl = 0.5 * logr * logr;
		d = logr * dlogr;
		break;
	default:
		kl = exp(logr) - 1.0 - logr;
		d = (exp(logr) - 1.0) * dlogr;
		break;
	}
	if (l->kl_output_clamp) {
		double v = l->kl_output_clamp_value;

		if (!inside(kl, -v, v))
			d = 0.0;
		kl = clamp(kl, -v, v);
	}
	*dkl = d;
	return kl;
}

/* What a sequence shares among its tokens. */
struct seq {
	double sm, adv, coef; /* coef: c_t of each token that counts */
	int n_tok;            /* token_mask count */
	double r;             /* GSPO: the sequence's ratio */
	double w;             /* GSPO with correction: the sequence's importance weight */
	bool keep;            /* seq-mask-tis: the sequence passed the filter */
};

static double is_weight(const struct rl_loss *l, const struct seq *q, double prev, double gen)
{
	double w;

	if (!l->is_correction)
		return 1.0;
	w = l->seq_ratio ? q->w : finite_or_0(exp(prev - gen));
	switch (l->tis) {
	case RL_TIS_TIS:
		return fmin(w, l->tis_max);
	case RL_TIS_ICEPOP:
		return inside(w, l->tis_min, l->tis_max) ? w : 0.0;
	case RL_TIS_SEQ_MASK:
		return q->keep ? w : 0.0;
	default:
		return w;
	}
}

/* The per-sequence sums: GSPO's ratio and weight, seq-mask-tis's filter. */
static void seq_setup(const struct rl_loss *l, const struct rl_loss_batch *b, int s,
                      const struct rl_loss_norm *norm, struct seq *q)
{
	int32_t t0 = b->cu_seqlens[s], t1 = b->cu_seqlens[s + 1];
	double log_ratio = 0.0, log_w = 0.0, log_is = 0.0;

	memset(q, 0, sizeof(*q));
	q->sm = b->sample_mask[s];
	q->adv = b->advantage[s];
	for (int32_t t = t0; t < t1; t++) {
		if (!b->token_mask[t])
			continue;
		q->n_tok++;
		log_ratio += (double)b->curr[t] - b->prev[t];
		log_w += q->sm * ((double)b->prev[t] - b->gen[t]);
		log_is += finite_or_0((double)b->prev[t] - b->gen[t]);
	}
	if (l->token_level)
		q->coef = norm->valid_tokens > 0.0 ? q->sm / norm->valid_tokens : 0.0;
	else if (l->token_sum)
		q->coef = norm->valid_seqs > 0.0
		              ? q->sm / (l->token_sum_normalizer * norm->valid_seqs)
		              : 0.0;
	else
		q->coef = norm->valid_seqs > 0.0 && q->n_tok > 0
		              ? q->sm / (q->n_tok * norm->valid_seqs)
		              : 0.0;
	q->r = exp(q->n_tok ? log_ratio / q->n_tok : 0.0);
	q->w = finite_or_0(exp(log_w));
	q->keep = inside(exp(q->n_tok ? log_is / q->n_tok : 0.0), l->tis_min, l->tis_max);
}

/* One token's clipped surrogate. *r and *rc: ratio and clipped ratio; *g:
 * d clip_loss / d r along the branch taken; *clipped: a clip cut it. */
static double surrogate(const struct rl_loss *l, const struct seq *q, double curr, double prev,
                        double *r, double *rc, double *g, bool *clipped)
{
	double a = q->adv, l1, l2, loss;
	bool pass = true;

	if (l->force_on_policy_ratio) {
		*r = *rc = 1.0;
	} else if (l->disable_ppo_ratio) {
		*r = *rc = curr;
	} else {
		*r = l->seq_ratio ? q->r : exp(curr - prev);
		*rc = clamp(*r, l->ratio_lo, l->ratio_hi);
		pass = inside(*r, l->ratio_lo, l->ratio_hi);
	}
	l1 = -a * *r;
	l2 = -a * *rc;
	/* On a tie loss1's gradient is right: a tie with r outside the range
	 * needs a = 0, where every branch's gradient is 0. */
	if (l2 > l1) {
		loss = l2;
		*g = pass ? -a : 0.0;
		*clipped = !pass;
	} else {
		loss = l1;
		*g = -a;
		*clipped = false;
	}
	if (l->dual_clip && a < 0.0 && -a * l->ratio_clip_c < loss) {
		loss = -a * l->ratio_clip_c;
		*g = 0.0;
		*clipped = true;
	}
	return loss;
}

double rl_loss_compute(const struct rl_loss *l, const struct rl_loss_batch *b,
                       const struct rl_loss_norm *norm, float *dcurr, struct rl_loss_stats *acc)
{
	struct rl_loss_stats st = {0};
	double inv_tok = norm->valid_tokens > 0.0 ? 1.0 / norm->valid_tokens : 0.0;
	bool kl_on = l->kl_penalty != 0.0;

	if (kl_on && !b->ref)
		return NAN;
	if (dcurr)
		memset(dcurr, 0, (size_t)b->n_tokens * sizeof(*dcurr));
	for (int s = 0; s < b->n_seqs; s++) {
		struct seq q;

		if (b->sample_mask[s] == 0.0)
			continue;
		seq_setup(l, b, s, norm, &q);
		for (int32_t t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++) {
			double curr = b->curr[t], prev = b->prev[t], gen = b->gen[t];
			double m = q.sm * inv_tok, r, rc, g, w, surr, grad = 0.0;
			bool clipped;

			if (!b->token_mask[t])
				continue;
			surr = surrogate(l, &q, curr, prev, &r, &rc, &g, &clipped);
			w = is_weight(l, &q, prev, gen);
			st.actor_loss += q.coef * w * surr;
			/* d r / d curr is r, or 1 for the ratios that are curr itself
			 * or forced. GSPO's r = exp(mean log-ratio) moves by r / n_tok
			 * with each of its n_tok tokens, and each of them carries the
			 * same w * g: the sum over them is again w * g * r. */
			if (l->disable_ppo_ratio || l->force_on_policy_ratio)
				grad += q.coef * w * g;
			else
				grad += q.coef * w * g * r;
			if (kl_on) {
				double dkl, kl = kl_token(l, curr, b->ref[t], &dkl);
				double wkl = l->on_policy_kl ? finite_or_0(exp(curr - gen)) : 1.0;

				st.kl += q.coef * l->kl_penalty * wkl * kl;
				grad += q.coef * l->kl_penalty * wkl * dkl;
			}
			if (dcurr)
				dcurr[t] = (float)grad;
			st.token_mult_prob_error += m * exp(fabs(gen - prev));
			st.probs_ratio += m * r;
			st.probs_ratio_clamped += m * rc;
			st.clip_fraction += clipped ? m : 0.0;
			st.importance_weight += m * w;
		}
	}
	st.loss = st.actor_loss + st.kl;
	if (acc)
		rl_loss_stats_add(acc, &st);
	return st.loss;
}

void rl_loss_stats_add(struct rl_loss_stats *acc, const struct rl_loss_stats *st)
{
	acc->loss += st->loss;
	acc->actor_loss += st->actor_loss;
	acc->kl += st->kl;
	acc->token_mult_prob_error += st->token_mult_prob_error;
	acc->probs_ratio += st->probs_ratio;
	acc->probs_ratio_clamped += st->probs_ratio_clamped;
	acc->clip_fraction += st->clip_fraction;
	acc->importance_weight += st->importance_weight;
	acc->moe_aux_loss += st->moe_aux_loss;
}

struct rl_loss_batch rl_packed_loss_batch(const struct rl_packed *p, const float *curr)
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
