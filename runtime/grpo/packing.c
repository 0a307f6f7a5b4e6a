#include <stdlib.h>
#include <string.h>

#include "runtime/grpo/packing.h"

static int mb_alloc(struct rl_microbatches *out, int n_items)
{
	out->n = 0;
	out->start = calloc((size_t)n_items + 1, sizeof *out->start);
	out->items = calloc((size_t)n_items + 1, sizeof *out->items);
	if (!out->start || !out->items) {
		rl_microbatches_free(out);
		return -1;
	}
	return 0;
}

int rl_pack_fixed(int n_items, int per_batch, struct rl_microbatches *out)
{
	if (per_batch < 1 || mb_alloc(out, n_items))
		return -1;
	for (int i = 0; i < n_items; i++)
		out->items[i] = i;
	for (int s = 0; s < n_items; s += per_batch)
		out->start[out->n++] = s;
	out->start[out->n] = n_items;
	return 0;
}

struct ffd_key {
	int len, pos;
};

static int by_length_desc(const void *pa, const void *pb)
{
	const struct ffd_key *a = pa, *b = pb;

	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	return (a->pos > b->pos) - (a->pos < b->pos);
}

int rl_pack_ffd(const int *len, int n_items, int capacity, int round, struct rl_microbatches *out)
{
	struct ffd_key *order = malloc(((size_t)n_items + 1) * sizeof *order);
	int *bin_of = malloc(((size_t)n_items + 1) * sizeof *bin_of);
	int *room = malloc(((size_t)n_items + 1) * sizeof *room);
	int *fill = calloc((size_t)n_items + 1, sizeof *fill);
	int rc = -1;

	if (round < 1)
		round = 1;
	if (!order || !bin_of || !room || !fill || mb_alloc(out, n_items))
		goto out;
	for (int i = 0; i < n_items; i++) {
		if (len[i] > capacity)
			goto fail;
		/* one that fits only unrounded fills a micro-batch of its own */
		order[i].len = (len[i] + round - 1) / round * round;
		order[i].len = order[i].len < capacity ? order[i].len : capacity;
		order[i].pos = i;
	}
	qsort(order, (size_t)n_items, sizeof *order, by_length_desc);
	int bins = 0;
	for (int k = 0; k < n_items; k++) {
		int b = 0;

		while (b < bins && room[b] < order[k].len)
			b++;
		if (b == bins)
			room[bins++] = capacity;
		room[b] -= order[k].len;
		bin_of[k] = b;
		fill[b]++;
	}
	/* counting sort of the placements by bin keeps each bin's items in
	 * the order they were placed */
	out->n = bins;
	out->start[0] = 0;
	for (int b = 0; b < bins; b++)
		out->start[b + 1] = out->start[b] + fill[b];
	memset(fill, 0, (size_t)bins * sizeof *fill);
	for (int k = 0; k < n_items; k++) {
		int b = bin_of[k];
		out->items[out->start[b] + fill[b]++] = order[k].pos;
	}
	rc = 0;
	goto out;
fail:
	rl_microbatches_free(out);
out:
	free(order);
	free(bin_of);
	free(room);
	free(fill);
	return rc;
}

int rl_microbatches_expand(const struct rl_microbatches *units, int unit,
                           struct rl_microbatches *out)
{
	int n_units = units->start[units->n];

	if (unit < 1 || mb_alloc(out, n_units * unit))
		return -1;
	out->n = units->n;
	for (int b = 0; b <= units->n; b++)
		out->start[b] = units->start[b] * unit;
	for (int k = 0; k < n_units; k++)
		for (int i = 0; i < unit; i++)
			out->items[k * unit + i] = units->items[k] * unit + i;
	return 0;
}

void rl_microbatches_free(struct rl_microbatches *mb)
{
	free(mb->start);
	free(mb->items);
	mb->start = mb->items = NULL;
	mb->n = 0;
}
