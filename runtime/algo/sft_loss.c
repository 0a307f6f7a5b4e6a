/* NeMo-RL's NLLLossFn in its SFT use: -masked_mean(logprobs, mask,
 * global_normalization_factor=global_valid_toks). The denominator is the
 * whole step's count of tokens that count, given by the caller, so the
 * split of a step into micro-batches and data-parallel ranks changes
 * nothing. */
#include "runtime/algo/sft_loss.h"

double rl_sft_loss_compute(const struct rl_loss_batch *b, const struct rl_loss_norm *norm,
                           float *dcurr, struct rl_loss_stats *acc)
{
	double n = norm->valid_tokens;
	double sum = 0;

	for (int s = 0; s < b->n_seqs; s++) {
		double sm = b->sample_mask ? b->sample_mask[s] : 1.0;

		for (int t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++) {
			double w = b->token_mask[t] ? sm : 0.0;

			/* a token that does not count is not read: padding may
			 * hold anything, NaN included */
			if (w != 0)
				sum += w * (double)b->curr[t];
			if (dcurr)
				dcurr[t] = n > 0 ? (float)(-w / n) : 0.0f;
		}
	}
	/* rows past the last sequence (the packer's padding) get no gradient */
	if (dcurr)
		for (int t = b->cu_seqlens[b->n_seqs]; t < b->n_tokens; t++)
			dcurr[t] = 0.0f;
	double loss = n > 0 ? -sum / n : 0.0;
	if (acc) {
		acc->loss += loss;
		acc->actor_loss += loss;
	}
	return loss;
}
