/* The loss of supervised fine-tuning: NeMo-RL's NLLLossFn, the negative
 * log-likelihood of the tokens that count, averaged over every such token
 * of the optimizer step (token-level over the global batch, not a mean of
 * per-sequence means), and its gradient with respect to the policy's token
 * log-probabilities.
 * defines: rl_sft_loss_compute */
#ifndef RL_ALGO_SFT_LOSS_H
#define RL_ALGO_SFT_LOSS_H

#include "runtime/grpo/loss.h"

/* This micro-batch's share of the step's loss:
 *   loss = -sum_t w_t * curr[t] / norm->valid_tokens,  w_t = token_mask[t] * sample_mask[s]
 * over the tokens t of every sequence s. Only curr, token_mask, sample_mask
 * and cu_seqlens of b are read (no old, generation or reference
 * logprobs, no advantage). With dcurr != NULL, writes
 * d(loss)/d(curr[t]) = -w_t / valid_tokens for every t < n_tokens (0
 * where the token does not count). acc, when not NULL, gets the share added
 * to its loss (and to actor_loss: the whole loss is the likelihood term).
 * A valid_tokens of 0 gives 0 and a zero gradient. */
double rl_sft_loss_compute(const struct rl_loss_batch *b, const struct rl_loss_norm *norm,
                           float *dcurr, struct rl_loss_stats *acc);

#endif
