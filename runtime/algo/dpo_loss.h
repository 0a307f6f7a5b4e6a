/* The loss of Direct Preference Optimization (Rafailov et al. 2023) as
 * NeMo-RL's DPOLossFn computes it, with its optional SFT term on the chosen
 * response, and its gradient with respect to the trained policy's token
 * log-probabilities.
 *
 * A micro-batch holds whole pairs: sequence 2j is pair j's chosen response,
 * 2j + 1 its rejected one. For a sequence s with response tokens t (those
 * with token_mask), pi_s = sum_t curr[t], ref_s = sum_t ref[t], n_s its
 * token count, and the reward
 *   r_s = (pi_s - ref_s) / (preference_average_log_probs ? max(n_s, 1) : 1).
 * Pair j (chosen c, rejected r) contributes, with beta the
 * reference_policy_kl_penalty,
 *   pref_j = -log sigmoid(beta * (r_c - r_r))
 *   sft_j  = -pi_c / (sft_average_log_probs ? max(n_c, 1) : 1)
 *   loss_j = preference_loss_weight * pref_j + sft_loss_weight * sft_j
 * and the step's loss is sum_j m_j * loss_j / P, where m_j is the chosen
 * sequence's sample_mask (0 for a pair dropped as too long) and P the
 * step's number of valid pairs (norm->valid_seqs / 2, as NeMo-RL divides
 * global_valid_seqs by 2). The rewards are reported without beta, as
 * NeMo-RL reports them.
 * defines: struct rl_dpo_loss, struct rl_dpo_stats, rl_dpo_loss_compute */
#ifndef RL_ALGO_DPO_LOSS_H
#define RL_ALGO_DPO_LOSS_H

#include <stdbool.h>

#include "runtime/grpo/loss.h"

struct rl_dpo_loss {
	double beta; /* dpo.reference_policy_kl_penalty */
	double preference_loss_weight, sft_loss_weight;
	bool preference_average_log_probs, sft_average_log_probs;
};

/* The step's metrics under NeMo-RL's names, each a mean over the step's
 * valid pairs; rl_dpo_loss_compute adds each micro-batch's share.
 * sft_loss is 0 when sft_loss_weight is 0 (NeMo-RL does not compute it
 * then); accuracy is the share of pairs with r_c > r_r; the margin is the
 * mean of r_c - r_r. */
struct rl_dpo_stats {
	double loss, preference_loss, sft_loss, accuracy, rewards_chosen_mean,
	    rewards_rejected_mean, rewards_margin_mean;
	double pairs; /* the valid pairs this share counted (not divided) */
};

/* This micro-batch's share of the step's loss (b->ref is required; prev,
 * gen and advantage are not read). With dcurr != NULL, writes d(loss) /
 * d(curr[t]) for every t < n_tokens (0 where the token does not count).
 * acc, when not NULL, is added to. pairs <= 0 makes every term 0. Returns
 * NAN (and touches nothing) when b->n_seqs is odd, b->ref is NULL or
 * memory runs out. */
double rl_dpo_loss_compute(const struct rl_dpo_loss *l, const struct rl_loss_batch *b, double pairs,
                           float *dcurr, struct rl_dpo_stats *acc);

#endif
