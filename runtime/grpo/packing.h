/* Which samples go into each micro-batch: a fixed count per micro-batch, or
 * sequence packing by first-fit-decreasing into a token budget.
 * defines: struct rl_microbatches, rl_pack_fixed, rl_pack_ffd,
 * rl_microbatches_expand, rl_microbatches_free */
#ifndef RL_GRPO_PACKING_H
#define RL_GRPO_PACKING_H

#include <stddef.h>

/* Micro-batch b holds items[start[b] .. start[b + 1]), positions into the
 * caller's list of samples. */
struct rl_microbatches {
	int n;
	int *start; /* n + 1 */
	int *items;
};

/* Consecutive runs of per_batch items (the last may be shorter). */
int rl_pack_fixed(int n_items, int per_batch, struct rl_microbatches *out);

/* First-fit-decreasing: items by length rounded up to a multiple of round,
 * longest first (ties by position, so the result is deterministic), each
 * into the first micro-batch with room left under capacity, a new one when
 * none has; an item that the rounding takes past the capacity fills one of
 * its own (a budget of one sequence of max_total_sequence_length under a
 * coarser rounding). Items keep the order they were placed in. -1 when an
 * item alone exceeds the capacity (the caller checks lengths against it
 * first) or memory runs out. */
int rl_pack_ffd(const int *len, int n_items, int capacity, int round, struct rl_microbatches *out);

/* Micro-batches planned over units of `unit` consecutive items (unit k is
 * items k * unit .. k * unit + unit - 1) read back as items: each unit's
 * items together, in order, where the unit was. -1 when memory runs out. */
int rl_microbatches_expand(const struct rl_microbatches *units, int unit,
                           struct rl_microbatches *out);

void rl_microbatches_free(struct rl_microbatches *mb);

#endif
