/* On-policy distillation's loss (see distill_loss.h).
 *
 * Why the gradient is a policy gradient. At one position with context c,
 * the reverse KL of the student pi to the teacher q is
 *   KL(c) = sum_y pi(y|c) (log pi(y|c) - log q(y|c)).
 * For y drawn from pi, k(y) = log pi(y|c) - log q(y|c) has E[k] = KL(c):
 * the mean of k_t over the sampled tokens is an unbiased estimate of the
 * reverse KL, and it is what the step reports. Its gradient:
 *   dKL = sum_y dpi(y) (log pi(y) - log q(y)) + sum_y pi(y) dlog pi(y)
 *       = sum_y pi(y) dlog pi(y) k(y) + d(sum_y pi(y))
 *       = E_y[k(y) dlog pi(y)]           (sum_y pi(y) = 1 has no slope)
 * so the surrogate sg(k_t) * log pi(y_t), k_t held constant, has the
 * reverse KL's gradient in expectation: the policy gradient with the
 * per-token advantage A_t = -k_t (token loss -A_t * log pi). Descending
 * through k_t itself would add dlog pi(y_t), whose expectation is 0: no
 * bias, only noise, so it is held constant.
 *
 * Several updates per step: the samples came from the policy before the
 * step (prev), so the token loss is the importance-weighted form
 *   loss_t = r_t * k_t,   r_t = exp(curr_t - prev_t),   k_t = prev_t - ref_t,
 * with k_t fixed at the step's start as PPO fixes its advantages; its
 * gradient d loss_t / d curr_t = r_t * k_t is the one above at r_t = 1,
 * where the loss's value is the mean k_t. There is no clip: the teacher's
 * signal is dense and bounded by the step's own samples.
 *
 * Per token, as on-policy distillation does it (Agarwal et al. 2024, GKD
 * on the student's samples; Thinking Machines, "On-Policy Distillation",
 * 2025): a token is credited with its own KL only, not with the KL of the
 * tokens after it (a discount of 0), which keeps the estimate's variance
 * that of one token. The denominator is NeMo-RL's DistillationLossFn's,
 * a token mean over the step (global_valid_toks). */
#include "runtime/algo/distill_loss.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int rl_distill_loss_init(struct rl_distill_loss *l, const char *kl_type, double mixed_kl_weight,
                         bool zero_outside_topk, char *err, size_t errlen)
{
	memset(l, 0, sizeof *l);
	if (kl_type && (strcmp(kl_type, "forward") == 0 || strcmp(kl_type, "mixed") == 0)) {
		snprintf(err, errlen,
		         "loss_fn.kl_type: %s is not implemented: the forward KL (and the mixed "
		         "one) needs the teacher's top-k logits, which this release does not "
		         "compute; use reverse (the per-token reverse KL on the student's samples)",
		         kl_type);
		return -1;
	}
	if (kl_type && strcmp(kl_type, "reverse") != 0) {
		snprintf(err, errlen,
		         "loss_fn.kl_type: must be reverse (forward and mixed are not "
		         "implemented), not %s",
		         kl_type);
		return -1;
	}
	if (!(mixed_kl_weight >= 0.0 && mixed_kl_weight <= 1.0)) {
		snprintf(err, errlen, "loss_fn.mixed_kl_weight: must be in [0, 1]");
		return -1;
	}
	if (zero_outside_topk) {
		snprintf(err, errlen,
		         "loss_fn.zero_outside_topk: true is not implemented: it corrects a KL "
		         "summed over the teacher's top-k logits, and the reverse KL here is "
		         "estimated on the sampled token; set it to false");
		return -1;
	}
	l->kl = RL_DISTILL_KL_REVERSE;
	return 0;
}

double rl_distill_loss_compute(const struct rl_distill_loss *l, const struct rl_loss_batch *b,
                               const struct rl_loss_norm *norm, float *dcurr,
                               struct rl_loss_stats *acc)
{
	struct rl_loss_stats st = {0};
	double inv_tok = norm->valid_tokens > 0.0 ? 1.0 / norm->valid_tokens : 0.0;

	(void)l; /* one kind of KL */
	if (!b->ref)
		return NAN;
	if (dcurr)
		memset(dcurr, 0, (size_t)b->n_tokens * sizeof *dcurr);
	for (int s = 0; s < b->n_seqs; s++) {
		double c = b->sample_mask[s] * inv_tok;

		if (c == 0.0)
			continue;
		for (int32_t t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++) {
			double curr = b->curr[t], prev = b->prev[t], ref = b->ref[t];
			double k = prev - ref, r = exp(curr - prev);

			if (!b->token_mask[t])
				continue;
			st.actor_loss += c * r * k;
			if (dcurr)
				dcurr[t] = (float)(c * r * k);
			st.kl += c * (curr - ref);
			st.probs_ratio += c * r;
			st.token_mult_prob_error += c * exp(fabs((double)b->gen[t] - prev));
			st.importance_weight += c;
		}
	}
	st.loss = st.actor_loss;
	st.probs_ratio_clamped = st.probs_ratio; /* no clip */
	if (acc)
		rl_loss_stats_add(acc, &st);
	return st.loss;
}
