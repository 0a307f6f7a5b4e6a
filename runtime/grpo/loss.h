/* The policy-gradient loss of GRPO: NeMo-RL's ClippedPGLossFn (PPO clip,
 * dual clip, REINFORCE, GSPO, importance-sampling corrections) plus its KL
 * penalty to a reference policy, and its gradient with respect to the
 * trained policy's token log-probabilities.
 * defines: struct rl_loss, rl_loss_init, struct rl_loss_batch,
 * rl_packed_loss_batch, struct rl_loss_norm, rl_loss_norm_add, struct rl_loss_stats,
 * rl_loss_stats_add, rl_loss_compute */
#ifndef RL_GRPO_LOSS_H
#define RL_GRPO_LOSS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/config/config.h"
#include "runtime/grpo/rollout.h"

enum rl_kl_type { RL_KL_K1, RL_KL_K2, RL_KL_K3 };
enum rl_tis_type { RL_TIS_NONE, RL_TIS_TIS, RL_TIS_ICEPOP, RL_TIS_SEQ_MASK };

/* The loss_fn options, checked. Per token: r is the ratio of the trained
 * policy to the one before this step (exp(curr - prev)), A the sequence's
 * advantage, w the actor's importance weight, logr = ref - curr.
 *
 * reference_policy_kl_penalty: weight of the KL term; 0 turns it off (and ref may be NULL).
 * reference_policy_kl_type: KL estimator: k1 = -logr, k2 = logr^2 / 2, k3 = e^logr - 1 - logr.
 * kl_input_clamp_value: logr is clamped to [-v, v] before the estimator; null: no clamp.
 * kl_output_clamp_value: the per-token KL is clamped to [-v, v]; null: no clamp.
 * ratio_clip_min, ratio_clip_max: r is clipped to [1 - min, 1 + max] (PPO/DAPO clip).
 * ratio_clip_c: dual clip: for A < 0 the token loss is at most -A * c (c > 1); null: off.
 * use_on_policy_kl_approximation: KL weighted by exp(curr - gen), held constant.
 * use_importance_sampling_correction: actor loss weighted by w = exp(prev - gen), held constant.
 * truncated_importance_sampling_ratio: upper bound "max" of w for the truncation type below.
 * truncated_importance_sampling_type: tis caps w at max; icepop zeroes w outside [min, max];
 *   seq-mask-tis zeroes the sequences whose geometric-mean w is outside [min, max].
 * truncated_importance_sampling_ratio_min: lower bound "min" for icepop and seq-mask-tis.
 * token_level_loss: true: mean over the step's tokens; false: mean of per-sequence token means.
 * sequence_level_importance_ratios: GSPO: one r per sequence, exp(mean of its log-ratios), and
 *   one w, exp(sum of its prev - gen); needs token_level_loss false.
 * disable_ppo_ratio: REINFORCE/RLOO: no ratio and no clip, the token loss is -A * curr.
 * force_on_policy_ratio: r = 1 with dr/dcurr = 1 (one update per rollout).
 * token_sum_normalizer: Dr. GRPO: with token_level_loss false, a sequence's
 *   token losses are summed and divided by this constant C (the generation
 *   budget) instead of by its token count: (1 / valid_seqs) sum_s sum_t / C. */
struct rl_loss {
	double kl_penalty;
	enum rl_kl_type kl_type;
	bool kl_input_clamp, kl_output_clamp;
	double kl_input_clamp_value, kl_output_clamp_value;
	double ratio_lo, ratio_hi; /* 1 - ratio_clip_min, 1 + ratio_clip_max */
	bool dual_clip;
	double ratio_clip_c;
	bool on_policy_kl;
	bool is_correction;
	enum rl_tis_type tis;
	double tis_max, tis_min;
	bool token_level;
	bool seq_ratio;
	bool disable_ppo_ratio;
	bool force_on_policy_ratio;
	bool token_sum;              /* token_sum_normalizer set */
	double token_sum_normalizer; /* C */
};

/* Checks cfg and fills *l. Returns 0, or -1 with a message naming the
 * loss_fn key at fault in err. */
int rl_loss_init(struct rl_loss *l, const struct rl_cfg_loss_fn *cfg, char *err, size_t errlen);

/* One micro-batch of packed sequences. Entry t of each token array belongs
 * to the token that FOLLOWS position t (the model's output convention);
 * sequence s owns tokens [cu_seqlens[s], cu_seqlens[s + 1]). A token counts
 * where token_mask[t] * sample_mask[s] != 0; nothing else of a token that
 * does not count is read, so padding may hold anything. */
struct rl_loss_batch {
	int n_tokens, n_seqs;
	const int32_t *cu_seqlens;
	const float
	    *curr; /* log-probs of the policy being trained (gradient flows through these) */
	const float *prev; /* log-probs of the policy before this step's updates ("old") */
	const float *gen;  /* log-probs the generation engine reported */
	const float
	    *ref; /* log-probs of the reference policy; NULL allowed when the penalty is 0 */
	const uint8_t *token_mask; /* 1: a response token that counts */
	const double *advantage;   /* per sequence */
	const double *sample_mask; /* per sequence: 1 counts, 0 excluded (overlong filtering) */
};

/* A packed micro-batch (rollout.h) as the loss reads it, with curr its
 * rows' log-probs under the policy being trained. */
struct rl_loss_batch rl_packed_loss_batch(const struct rl_packed *p, const float *curr);

/* Denominators of the whole optimizer step (all micro-batches, later all
 * data-parallel ranks), so that any split of it gives the same loss and
 * gradient: valid_tokens = sum of token_mask * sample_mask, valid_seqs =
 * sum of sample_mask. Start from zero and add every micro-batch. */
struct rl_loss_norm {
	double valid_tokens, valid_seqs;
};
void rl_loss_norm_add(struct rl_loss_norm *n, const struct rl_loss_batch *b);

/* The step's metrics. rl_loss_compute adds each micro-batch's share (already
 * divided by the step's denominators) so the sum over the step is its value.
 * loss = actor_loss + kl; kl is the weighted KL term (penalty included).
 * token_mult_prob_error: token mean of exp(|gen - prev|) (1 = engines agree).
 * probs_ratio, probs_ratio_clamped: token means of r and clip(r).
 * clip_fraction: share of tokens whose ratio gradient a clip cut (PPO or dual).
 * importance_weight: token mean of the actor weight w (1 without correction). */
struct rl_loss_stats {
	double loss, actor_loss, kl, token_mult_prob_error, probs_ratio, probs_ratio_clamped,
	    clip_fraction, importance_weight;
	/* a mixture of experts' load-balancing term, coefficient included: the
	 * model's, which the policy pass adds (rl_loss_compute leaves it) */
	double moe_aux_loss;
};

/* *acc += *st, field by field (a micro-batch's share into the step's). */
void rl_loss_stats_add(struct rl_loss_stats *acc, const struct rl_loss_stats *st);

/* This micro-batch's share of the step's loss. With dcurr != NULL, writes
 * d(loss)/d(curr[t]) for every t < n_tokens (0 where the token does not
 * count). acc, when not NULL, is added to. A denominator of 0 makes its
 * terms 0. Returns NAN (and touches nothing) when the KL penalty is on and
 * b->ref is NULL. */
double rl_loss_compute(const struct rl_loss *l, const struct rl_loss_batch *b,
                       const struct rl_loss_norm *norm, float *dcurr, struct rl_loss_stats *acc);

#endif
