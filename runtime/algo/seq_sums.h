/* The algorithms beside GRPO's (SFT, DPO, on-policy distillation): their
 * losses, pure maths on a packed micro-batch as grpo/loss.h describes it,
 * with no communication and no I/O. This file: what several of them take
 * from a micro-batch, each sequence's sum over its tokens that count.
 * defines: rl_seq_token_sums */
#ifndef RL_ALGO_SEQ_SUMS_H
#define RL_ALGO_SEQ_SUMS_H

#include "runtime/grpo/loss.h"

/* For each sequence s of b: sum[s] = the sum of v[t] over its tokens that
 * count (token_mask[t] != 0; the sample mask is not applied), count[s] =
 * how many there are. v may be b->curr, b->ref or any per-token array;
 * count may be NULL. In double, whatever the sequence's length. */
void rl_seq_token_sums(const struct rl_loss_batch *b, const float *v, double *sum, double *count);

#endif
