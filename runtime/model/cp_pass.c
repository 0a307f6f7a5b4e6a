/* Context parallelism inside a pass (Megatron's all-gather variant): a
 * rank runs every token-wise layer on its own rows only, which are two
 * chunks of each sequence, the sequence padded at its end to 2 x cp
 * chunks; rank r takes chunks r and 2 x cp - 1 - r, so that every rank
 * gets as much of the causal mask's work as the others. Attention
 * all-gathers the keys and values into the padded whole batch and runs the
 * rank's query chunks against them; its backward reduce-scatters their
 * gradients back to the ranks that own the rows. The padding comes after
 * each sequence's last token, so no real token attends to it, and it has
 * no target. The maps are made on the host and uploaded once per batch;
 * the reorderings run on the backend as row gathers (the embedding op). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/model/acts.h"
#include "runtime/model/split.h"

/* A sequence's rows with the padding: a multiple of 2 x p. */
static int padded_len(int len, int p)
{
	return (len + 2 * p - 1) / (2 * p) * (2 * p);
}

int rl_cp_layout(const struct rl_model *m, struct rl_acts *a, const struct rl_batch *b,
                 int32_t *ids, int32_t *pos, int32_t *tgt, char *err, size_t errlen)
{
	const struct rl_tp_group *cp = &m->shard.cp;
	int p = cp->size, local = 0, full = 0, gathered = 0;
	size_t T2 = 2 * (size_t)a->max_tokens;
	int32_t *cq = a->chunk_host, *ck = cq + T2, *coff = ck + T2, *clen = coff + T2;

	for (int s = 0; s < b->n_seqs; s++)
		local += padded_len(b->cu_seqlens[s + 1] - b->cu_seqlens[s], p) / p;
	if (local > a->max_tokens || b->n_seqs > a->max_tokens) {
		snprintf(err, errlen,
		         "a batch of %d tokens in %d sequences padded to %d per context-parallel "
		         "rank (room for %d)",
		         b->n_tokens, b->n_seqs, local, a->max_tokens);
		return -1;
	}
	/* every rank's rows, rank-major: the order of the all-gather */
	for (int r = 0, g = 0; r < p; r++) {
		int row = 0;

		full = 0;
		for (int s = 0; s < b->n_seqs; s++) {
			int first = b->cu_seqlens[s], len = b->cu_seqlens[s + 1] - first;
			int padded = padded_len(len, p), c = padded / (2 * p);
			int which[2] = {r, 2 * p - 1 - r};

			for (int k = 0; k < 2; k++) {
				int off = which[k] * c;

				if (r == cp->rank) {
					int n = 2 * s + k;

					cq[n] = row;
					ck[n] = full;
					coff[n] = off;
					clen[n] = c;
				}
				for (int i = 0; i < c; i++, row++, g++, gathered++) {
					int at = off + i;

					a->cp_full_row[g] = full + at;
					a->cp_origin[g] = at < len ? first + at : -1;
					if (r != cp->rank)
						continue;
					int o = a->cp_origin[g];
					int32_t y = o >= 0 && b->targets ? b->targets[o] : -1;
					pos[row] = at;
					ids[row] = rl_tp_local_row(m, o >= 0 ? b->ids[o] : 0);
					tgt[row] = rl_tp_local_row(m, y);
					a->target_mask[row] = y >= 0 ? 1.0f : 0.0f;
				}
			}
			full += padded;
		}
	}
	/* every padded row of the whole batch is one gathered row */
	int32_t *inv = malloc((size_t)gathered * sizeof *inv);
	const struct rl_ops *ops = m->ops;
	size_t nc = (size_t)(2 * b->n_seqs) * sizeof(int32_t), ng = (size_t)gathered * sizeof *inv;
	int rc = inv ? 0 : -1;

	for (int g = 0; rc == 0 && g < gathered; g++)
		inv[a->cp_full_row[g]] = g;
	if (rc || ops->from_host(a->chunk_q, cq, nc, NULL) ||
	    ops->from_host(a->chunk_k, ck, nc, NULL) ||
	    ops->from_host(a->chunk_off, coff, nc, NULL) ||
	    ops->from_host(a->chunk_len, clen, nc, NULL) ||
	    ops->from_host(a->cp_inv_dev, inv, ng, NULL) ||
	    ops->from_host(a->cp_full_row_dev, a->cp_full_row, ng, NULL)) {
		snprintf(err, errlen, "copying the context-parallel maps to the %s backend failed",
		         ops->name);
		free(inv);
		return -1;
	}
	free(inv);
	a->chunks = (struct rl_attention_chunks){2 * b->n_seqs, a->chunk_q, a->chunk_k,
	                                         a->chunk_off, a->chunk_len};
	a->chunks_host = (struct rl_attention_chunks){2 * b->n_seqs, cq, ck, coff, clen};
	return local;
}

void rl_cp_gather_kv(const struct rl_model *m, struct rl_acts *a, const float *local, float *full,
                     int width, const char *what)
{
	const struct rl_tp_group *cp = &m->shard.cp;
	int rows = cp->size * a->n_tokens;

	cp->all_gather(cp->ctx, local, a->cp_gather, (size_t)a->n_tokens * (size_t)width, what);
	/* full row j is gathered row inv[j]: the embedding op's gather; a
	 * failed op leaves garbage that the loss shows, as any failed op */
	m->ops->embedding_forward(rl_buf_f32(full), a->cp_inv_dev, rl_cbuf_f32(a->cp_gather), rows,
	                          width, rows, NULL);
}

void rl_cp_scatter_kv_grad(const struct rl_model *m, struct rl_acts *a, const float *full,
                           float *local, int width, const char *what)
{
	const struct rl_tp_group *cp = &m->shard.cp;
	int rows = cp->size * a->n_tokens;

	m->ops->embedding_forward(rl_buf_f32(a->cp_gather), a->cp_full_row_dev, rl_cbuf_f32(full),
	                          rows, width, rows, NULL);
	cp->reduce_scatter(cp->ctx, a->cp_gather, local, (size_t)a->n_tokens * (size_t)width, what);
}

void rl_cp_gather_logprobs(const struct rl_model *m, struct rl_acts *a, const float *mine,
                           float *out)
{
	const struct rl_tp_group *cp = &m->shard.cp;
	size_t rows = (size_t)cp->size * (size_t)a->n_tokens;

	cp->all_gather_host(cp->ctx, mine, a->cp_lp, (size_t)a->n_tokens,
	                    "context-parallel logprobs");
	for (size_t g = 0; g < rows; g++)
		if (a->cp_origin[g] >= 0)
			out[a->cp_origin[g]] = a->cp_lp[g];
}

int32_t rl_cp_origin(const struct rl_model *m, const struct rl_acts *a, int row)
{
	return a->cp_origin[(size_t)m->shard.cp.rank * (size_t)a->n_tokens + (size_t)row];
}
