/* Which examples each GRPO step uses: a PyTorch DataLoader with
 * shuffle=True and drop_last=True, made reproducible and resumable.
 *
 * Epoch e visits a permutation of 0..n-1: the identity without shuffling,
 * otherwise a Fisher-Yates shuffle driven by rl_rng seeded with
 * (seed, RL_DATA_ORDER_STREAM + e), with unbiased bounded draws (rejection
 * sampling on rl_rng_next). So epoch e's order depends only on (seed, e, n):
 * nothing about earlier epochs has to be replayed to resume, and the
 * generation sampler's streams (one per sequence, small numbers) never meet
 * these. Steps take `batch` consecutive entries of the permutation; a step
 * never spans two epochs (the incomplete tail of each epoch is dropped, as
 * drop_last does), and after max_epochs epochs the order is exhausted.
 * defines: struct rl_data_order, RL_DATA_ORDER_STREAM, rl_data_order_init,
 * rl_data_order_next, rl_data_order_position, rl_data_order_restore,
 * rl_data_order_free */
#ifndef RL_DATA_ORDER_H
#define RL_DATA_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The rl_rng stream of epoch 0 ("dataordr" in ASCII); epoch e uses this + e. */
#define RL_DATA_ORDER_STREAM 0x646174616f726472ULL

struct rl_data_order {
	uint64_t seed;
	bool shuffle;
	size_t n, batch;
	int64_t max_epochs;
	int64_t epoch; /* the current epoch; max_epochs once exhausted */
	size_t pos;    /* entries of epoch `epoch` already handed out */
	size_t *perm;  /* epoch `epoch`'s order, n entries */
};

/* n examples, `batch` per step, max_epochs >= 1 epochs. Errors when batch is
 * 0 or larger than n ("the dataset has N examples, fewer than one step's P
 * prompts"). Returns 0, or -1 with the message in err. */
int rl_data_order_init(struct rl_data_order *o, size_t n, size_t batch, bool shuffle, uint64_t seed,
                       int64_t max_epochs, char *err, size_t errlen);

/* Fills idx[0..batch) with the next step's example indices and returns 1,
 * or returns 0 when the epochs are exhausted (and from then on). */
int rl_data_order_next(struct rl_data_order *o, size_t *idx);

/* The position as two integers for a checkpoint. */
void rl_data_order_position(const struct rl_data_order *o, int64_t *epoch, size_t *pos);

/* Moves an order made by rl_data_order_init with the same (n, shuffle, seed)
 * to a position from rl_data_order_position; the next rl_data_order_next then
 * gives exactly what the saved order would have given. pos need not be a
 * multiple of batch, so a resume may change the batch size. The caller must
 * check that n is the same: a different dataset cannot be detected here
 * unless pos is past its end. Returns 0, or -1 with the message in err and
 * the order unchanged. */
int rl_data_order_restore(struct rl_data_order *o, int64_t epoch, size_t pos, char *err,
                          size_t errlen);

void rl_data_order_free(struct rl_data_order *o);

#endif
