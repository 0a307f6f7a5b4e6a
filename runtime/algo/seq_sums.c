#include "runtime/algo/seq_sums.h"

void rl_seq_token_sums(const struct rl_loss_batch *b, const float *v, double *sum, double *count)
{
	for (int s = 0; s < b->n_seqs; s++) {
		double acc = 0, n = 0;

		for (int t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++)
			if (b->token_mask[t]) {
				acc += (double)v[t];
				n += 1;
			}
		sum[s] = acc;
		if (count)
			count[s] = n;
	}
}
