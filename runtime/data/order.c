/* Shuffled epochs. Only the current epoch's permutation is kept: it is
 * recomputed from (seed, epoch) when an epoch starts or a position is
 * restored, which costs n draws once per epoch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/order.h"
#include "runtime/base/rng.h"

/* A uniform integer in [0, range), range >= 1: draws below 2^64 mod range
 * are rejected so that every residue is hit by equally many 64-bit words
 * (OpenBSD's arc4random_uniform). The loop repeats with probability below
 * range / 2^64. */
static uint64_t bounded(struct rl_rng *rng, uint64_t range)
{
	uint64_t threshold = (0 - range) % range, x;

	do
		x = rl_rng_next(rng);
	while (x < threshold);
	return x % range;
}

static void make_perm(struct rl_data_order *o)
{
	struct rl_rng rng;

	for (size_t i = 0; i < o->n; i++)
		o->perm[i] = i;
	if (!o->shuffle)
		return;
	rl_rng_seed(&rng, o->seed, RL_DATA_ORDER_STREAM + (uint64_t)o->epoch);
	for (size_t i = o->n - 1; i > 0; i--) {
		size_t j = (size_t)bounded(&rng, (uint64_t)i + 1), t = o->perm[i];

		o->perm[i] = o->perm[j];
		o->perm[j] = t;
	}
}

int rl_data_order_init(struct rl_data_order *o, size_t n, size_t batch, bool shuffle, uint64_t seed,
                       int64_t max_epochs, char *err, size_t errlen)
{
	memset(o, 0, sizeof *o);
	if (batch == 0) {
		snprintf(err, errlen, "data order: a step needs at least one prompt");
		return -1;
	}
	if (batch > n) {
		snprintf(err, errlen,
		         "the dataset has %zu examples, fewer than one step's %zu prompts", n,
		         batch);
		return -1;
	}
	if (max_epochs < 1) {
		snprintf(err, errlen, "data order: max_epochs is %lld, expected at least 1",
		         (long long)max_epochs);
		return -1;
	}
	o->perm = n <= SIZE_MAX / sizeof *o->perm ? malloc(n * sizeof *o->perm) : NULL;
	if (!o->perm) {
		snprintf(err, errlen, "data order: out of memory for %zu examples", n);
		return -1;
	}
	o->seed = seed;
	o->shuffle = shuffle;
	o->n = n;
	o->batch = batch;
	o->max_epochs = max_epochs;
	make_perm(o);
	return 0;
}

int rl_data_order_next(struct rl_data_order *o, size_t *idx)
{
	if (o->epoch >= o->max_epochs)
		return 0;
	if (o->n - o->pos < o->batch) {
		o->epoch++;
		o->pos = 0;
		if (o->epoch >= o->max_epochs)
			return 0;
		make_perm(o);
	}
	memcpy(idx, o->perm + o->pos, o->batch * sizeof *idx);
	o->pos += o->batch;
	return 1;
}

void rl_data_order_position(const struct rl_data_order *o, int64_t *epoch, size_t *pos)
{
	*epoch = o->epoch;
	*pos = o->pos;
}

int rl_data_order_restore(struct rl_data_order *o, int64_t epoch, size_t pos, char *err,
                          size_t errlen)
{
	if (epoch < 0 || epoch > o->max_epochs) {
		snprintf(err, errlen,
		         "data order: saved epoch %lld is outside 0..%lld (max epochs)",
		         (long long)epoch, (long long)o->max_epochs);
		return -1;
	}
	if (pos > o->n) {
		snprintf(err, errlen,
		         "data order: saved position %zu is past the dataset's %zu examples "
		         "(did the dataset change?)",
		         pos, o->n);
		return -1;
	}
	o->epoch = epoch;
	o->pos = pos;
	if (epoch < o->max_epochs)
		make_perm(o);
	return 0;
}

void rl_data_order_free(struct rl_data_order *o)
{
	free(o->perm);
	memset(o, 0, sizeof *o);
}
