/* Token embedding. The backward is a scatter-add: tokens repeat, so threads
 * split the hidden dimension, never the tokens, and every element of dtable
 * receives its additions in token order whatever the thread count. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/typed.h"
#include "kernels/embedding.h"

#define PAR_MIN (1L << 16)
/* Columns per thread task in the backward: four cache lines of floats. */
#define COL_BLOCK 64

int rl_embedding_forward_cpu(struct rl_buf out, const int32_t *ids, struct rl_cbuf table, int n,
                             int dim, int vocab, void *stream)
{
	(void)stream;
	if (!out.p || !ids || !table.p || n < 0 || dim < 0 || vocab < 0 ||
	    !rl_act_type_ok(table.t) || out.t != table.t)
		return -1;

	int bad = 0;
	size_t row_bytes = rl_buf_bytes(out.t, (size_t)dim);
	char *o = out.p;
	const char *tab = table.p;

#pragma omp parallel for if ((long)n * dim >= PAR_MIN) schedule(static) reduction(| : bad)
	for (int t = 0; t < n; t++) {
		int32_t id = ids[t];

		if (id == -1) { /* the row lives on another tensor-parallel rank */
			memset(o + (size_t)t * row_bytes, 0, row_bytes);
			continue;
		}
		if (id < 0 || id >= vocab) {
			bad = 1;
			continue;
		}
		memcpy(o + (size_t)t * row_bytes, tab + (size_t)id * row_bytes, row_bytes);
	}
	return bad ? -1 : 0;
}

RL_TYPED_BODY void backward_block(float *dtable, const void *dout, const int32_t *ids, int n,
                                  int dim, int c0, int len, const bool bf16)
{
	for (int t = 0; t < n; t++) {
		if (ids[t] < 0)
			continue;
		float *restrict dst = dtable + (size_t)ids[t] * dim + c0;
		size_t src = (size_t)t * dim + c0;

		for (int j = 0; j < len; j++)
			dst[j] += rl_ld(dout, bf16, src + j);
	}
}

int rl_embedding_backward_cpu(float *dtable, struct rl_cbuf dout, const int32_t *ids, int n,
                              int dim, void *stream)
{
	(void)stream;
	if (!dtable || !dout.p || !ids || n < 0 || dim < 0 || !rl_act_type_ok(dout.t))
		return -1;

	int nblk = (dim + COL_BLOCK - 1) / COL_BLOCK;

#pragma omp parallel for if ((long)n * dim >= PAR_MIN && nblk > 1) schedule(static)
	for (int b = 0; b < nblk; b++) {
		int c0 = b * COL_BLOCK;
		int len = dim - c0 < COL_BLOCK ? dim - c0 : COL_BLOCK;

		if (dout.t == RL_BF16)
			backward_block(dtable, dout.p, ids, n, dim, c0, len, true);
		else
			backward_block(dtable, dout.p, ids, n, dim, c0, len, false);
	}
	return 0;
}
