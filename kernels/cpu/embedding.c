/* Token embedding. The backward is a scatter-add: tokens repeat, so threads
 * split the hidden dimension, never the tokens, and every element of dtable
 * receives its additions in token order whatever the thread count. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/embedding.h"

#define PAR_MIN (1L << 16)
/* Columns per thread task in the backward: four cache lines of floats. */
#define COL_BLOCK 64

int rl_embedding_forward_cpu(float *out, const int32_t *ids, const float *table, int n, int dim,
                             int vocab, void *stream)
{
	(void)stream;
	if (!out || !ids || !table || n < 0 || dim < 0 || vocab < 0)
		return -1;

	int bad = 0;
	size_t row_bytes = (size_t)dim * sizeof(*out);

#pragma omp parallel for if ((long)n * dim >= PAR_MIN) schedule(static) reduction(| : bad)
	for (int t = 0; t < n; t++) {
		int32_t id = ids[t];

		if (id == -1) { /* the row lives on another tensor-parallel rank */
			memset(out + (size_t)t * dim, 0, row_bytes);
			continue;
		}
		if (id < 0 || id >= vocab) {
			bad = 1;
			continue;
		}
		memcpy(out + (size_t)t * dim, table + (size_t)id * dim, row_bytes);
	}
	return bad ? -1 : 0;
}

int rl_embedding_backward_cpu(float *dtable, const float *dout, const int32_t *ids, int n, int dim,
                              void *stream)
{
	(void)stream;
	if (!dtable || !dout || !ids || n < 0 || dim < 0)
		return -1;

	int nblk = (dim + COL_BLOCK - 1) / COL_BLOCK;

#pragma omp parallel for if ((long)n * dim >= PAR_MIN && nblk > 1) schedule(static)
	for (int b = 0; b < nblk; b++) {
		int c0 = b * COL_BLOCK;
		int len = dim - c0 < COL_BLOCK ? dim - c0 : COL_BLOCK;

		for (int t = 0; t < n; t++) {
			if (ids[t] < 0)
				continue;
			float *restrict dst = dtable + (size_t)ids[t] * dim + c0;
			const float *restrict src = dout + (size_t)t * dim + c0;

			for (int j = 0; j < len; j++)
				dst[j] += src[j];
		}
	}
	return 0;
}
