/* Causal GQA attention reference over packed sequences, forward and backward.
 *
 * Work is cut into tiles of ATTN_BQ query rows of one head of one sequence;
 * a tile's keys are the sequence's rows 0 .. last query of the tile, so the
 * causal mask costs nothing beyond the diagonal block. The products are
 * cblas_sgemm calls reading q, k, v in place through their row strides. Each
 * thread owns one (forward) or two (backward) score tiles of
 * ATTN_BQ x longest-sequence floats, malloc'ed per call: 256 KiB per tile at
 * 1024 tokens, 2 MiB at 8192.
 *
 * The forward runs (sequence, head, tile) in parallel. The backward runs
 * (sequence, kv head) in parallel: the query heads that share a kv head all
 * add into the same dk and dv rows, and keeping them in one thread, in a
 * fixed order, makes the sums race-free and reproducible. Each thread then
 * also holds one head's dk and dv (2 x longest x head_dim floats). With
 * fewer such pairs than threads it runs (sequence, query head) instead, into
 * a [tokens, n_heads, head_dim] buffer for each of dk and dv, reduced after.
 * The results do not depend on the number of threads. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "kernels/attention.h"
#include "kernels/cpu/attention_tile.h"

/* The longest sequence, or -1 when cu_seqlens is not an offset table. */
static int attn_max_len(const int32_t *cu, int n_seqs)
{
	int longest = 0;

	if (!cu || cu[0] < 0)
		return -1;
	for (int s = 0; s < n_seqs; s++) {
		if (cu[s + 1] < cu[s])
			return -1;
		if (cu[s + 1] - cu[s] > longest)
			longest = cu[s + 1] - cu[s];
	}
	return longest;
}

/* The checks both passes start with: -1 for a bad shape or offset table,
 * 0 when there is nothing to do, 1 with *max_len the longest sequence. */
static int attn_begin(const struct rl_attention_shape *shape, const int32_t *cu_seqlens, int n_seqs,
                      int *max_len)
{
	if (n_seqs < 0 || !attn_shape_ok(shape))
		return -1;
	if (n_seqs == 0)
		return 0;
	*max_len = attn_max_len(cu_seqlens, n_seqs);
	if (*max_len < 0)
		return -1;
	return *max_len > 0;
}

/* tiles_per_thread tiles of ATTN_BQ x max_len floats for every thread. */
static float *attn_scratch(int max_len, int tiles_per_thread, size_t *tile)
{
	*tile = (size_t)ATTN_BQ * (size_t)max_len;
	return attn_alloc_tiles(*tile, (size_t)tiles_per_thread);
}

struct attn_item {
	int seq, head, first;
};

int rl_attention_forward_cpu(float *out, float *lse, const float *q, const float *k, const float *v,
                             const int32_t *cu_seqlens, int n_seqs,
                             const struct rl_attention_shape *shape, void *stream)
{
	(void)stream;
	int max_len;
	const int go = attn_begin(shape, cu_seqlens, n_seqs, &max_len);

	if (go <= 0)
		return go;
	if (!out || !lse || !q || !k || !v)
		return -1;

	const int H = shape->n_heads, Hkv = shape->n_kv_heads, D = shape->head_dim;
	const int rep = H / Hkv, ldq = H * D, ldkv = Hkv * D;
	size_t n_items = 0, tile;

	for (int s = 0; s < n_seqs; s++)
		n_items +=
		    (size_t)H * ((cu_seqlens[s + 1] - cu_seqlens[s] + ATTN_BQ - 1) / ATTN_BQ);

	struct attn_item *items = malloc(n_items * sizeof(*items));
	float *scratch = attn_scratch(max_len, 1, &tile);

	if (!items || !scratch) {
		free(items);
		free(scratch);
		return -1;
	}
	/* The last tiles of a sequence see the most keys: listing them first
	 * lets the dynamic schedule end with the cheap ones. */
	size_t n = 0;

	for (int s = 0; s < n_seqs; s++) {
		const int len = cu_seqlens[s + 1] - cu_seqlens[s];

		for (int first = (len - 1) / ATTN_BQ * ATTN_BQ; len > 0 && first >= 0;
		     first -= ATTN_BQ)
			for (int h = 0; h < H; h++)
				items[n++] = (struct attn_item){s, h, first};
	}

	const int parallel = n_items > 1 && attn_threads() > 1;
	const int blas_threads = attn_blas_serial_begin(parallel);

#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
#endif
	for (size_t i = 0; i < n_items; i++) {
		const struct attn_item it = items[i];
		const size_t base = (size_t)cu_seqlens[it.seq];
		const int len = cu_seqlens[it.seq + 1] - cu_seqlens[it.seq];
		const int m = len - it.first < ATTN_BQ ? len - it.first : ATTN_BQ;
		const size_t row = base + (size_t)it.first;
		const size_t qo = row * ldq + (size_t)it.head * D;
		const size_t kvo = base * ldkv + (size_t)(it.head / rep) * D;

		attn_tile_forward(out + qo, lse + row * H + it.head, H, q + qo, k + kvo, v + kvo, m,
		                  it.first, ldq, ldkv, D, shape->scale,
		                  scratch + (size_t)attn_thread_id() * tile);
	}
	attn_blas_serial_end(blas_threads);
	free(items);
	free(scratch);
	return 0;
}

int rl_attention_backward_cpu(float *dq, float *dk, float *dv, const float *dout, const float *q,
                              const float *k, const float *v, const float *out, const float *lse,
                              const int32_t *cu_seqlens, int n_seqs,
                              const struct rl_attention_shape *shape, void *stream)
{
	(void)stream;
	int max_len;
	const int go = attn_begin(shape, cu_seqlens, n_seqs, &max_len);

	if (go <= 0)
		return go;
	if (!dq || !dk || !dv || !dout || !q || !k || !v || !out || !lse)
		return -1;

	const int H = shape->n_heads, Hkv = shape->n_kv_heads, D = shape->head_dim;
	const int rep = H / Hkv, ldq = H * D, ldkv = Hkv * D, threads = attn_threads();
	const size_t first_tok = (size_t)cu_seqlens[0];
	const size_t n_tok = (size_t)cu_seqlens[n_seqs] - first_tok;
	/* Too few (sequence, kv head) pairs to keep the threads busy: split by
	 * query head instead, each head's dk and dv into its own rows of a
	 * [tokens, n_heads, head_dim] buffer, summed per kv head afterwards. */
	const int by_head = rep > 1 && (long)n_seqs * Hkv < threads;
	const int n_items = by_head ? n_seqs * H : n_seqs * Hkv;
	const size_t part = by_head ? 0 : 2 * (size_t)max_len * D;
	size_t tile;
	float *scratch = attn_scratch(max_len, 2, &tile), *heads = NULL, *per_thread = NULL;

	if (by_head)
		heads = calloc(2 * n_tok * ldq, sizeof(float));
	else
		per_thread = malloc((size_t)threads * part * sizeof(float));
	if (!scratch || (by_head ? !heads : !per_thread)) {
		free(scratch);
		free(heads);
		free(per_thread);
		return -1;
	}

	const int parallel = n_items > 1 && threads > 1;
	const int blas_threads = attn_blas_serial_begin(parallel);

	/* Either way a head's dk and dv start from zero and are added to the kv
	 * head's rows in head order, so the sums, bit for bit, do not depend on
	 * the split (nor on the number of threads). */
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
#endif
	for (int i = 0; i < n_items; i++) {
		const int s = i / (by_head ? H : Hkv);
		const size_t base = (size_t)cu_seqlens[s];
		const int len = cu_seqlens[s + 1] - cu_seqlens[s];
		const int id = attn_thread_id();
		float *p = scratch + (size_t)id * 2 * tile, *ds = p + tile;

		if (by_head) {
			const int h = i % H;
			const size_t qo = base * ldq + (size_t)h * D;
			const size_t kvo = base * ldkv + (size_t)(h / rep) * D;
			float *hk = heads + (base - first_tok) * ldq + (size_t)h * D;

			attn_head_backward(dq + qo, hk, hk + n_tok * ldq, dout + qo, q + qo,
			                   k + kvo, v + kvo, out + qo, lse + base * H + h, 0, len,
			                   ldq, ldq, ldkv, H, D, shape->scale, p, ds);
			continue;
		}

		const int g = i % Hkv;
		const size_t kvo = base * ldkv + (size_t)g * D;
		float *hk = per_thread + (size_t)id * part, *hv = hk + (size_t)max_len * D;

		for (int h = g * rep; h < (g + 1) * rep; h++) {
			const size_t qo = base * ldq + (size_t)h * D;

			memset(hk, 0, (size_t)len * D * sizeof(float));
			memset(hv, 0, (size_t)len * D * sizeof(float));
			attn_head_backward(dq + qo, hk, hv, dout + qo, q + qo, k + kvo, v + kvo,
			                   out + qo, lse + base * H + h, 0, len, ldq, D, ldkv, H, D,
			                   shape->scale, p, ds);
			attn_add_rows(dk + kvo, ldkv, hk, D, len, D);
			attn_add_rows(dv + kvo, ldkv, hv, D, len, D);
		}
	}
	attn_blas_serial_end(blas_threads);

	if (by_head) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (parallel)
#endif
		for (size_t t = 0; t < n_tok; t++)
			for (int h = 0; h < H; h++) {
				const size_t o = (first_tok + t) * ldkv + (size_t)(h / rep) * D;
				const size_t src = t * ldq + (size_t)h * D;

				attn_add_rows(dk + o, 0, heads + src, 0, 1, D);
				attn_add_rows(dv + o, 0, heads + n_tok * ldq + src, 0, 1, D);
			}
	}
	free(scratch);
	free(heads);
	free(per_thread);
	return 0;
}
