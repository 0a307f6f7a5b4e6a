/* Causal GQA attention of query chunks against their sequences' keys, for
 * context parallelism: a rank holds a few chunks of each sequence's queries
 * and, gathered, all of its keys. The tiles are attention.c's, shifted by a
 * chunk's offset: a tile of ATTN_BQ query rows sees its sequence's keys up
 * to its last query's position, so a late chunk costs what the same rows
 * cost in the full attention.
 *
 * The forward runs (chunk, head, tile) in parallel, the tiles that see the
 * most keys first so that the dynamic schedule ends with cheap ones.
 *
 * The backward must not let two threads add into the same dk or dv rows.
 * The chunks of one sequence (Megatron's balance gives a rank two of each)
 * and the query heads of one kv head all do. So chunks whose key ranges
 * overlap form one cluster, and a (cluster, kv head) pair is one thread's
 * work, its chunks taken in (k_start, index) order and its heads in order:
 * race-free with no lock, and the order of the sums is fixed, so the bits
 * do not depend on the number of threads. Splitting one sequence's chunks
 * over threads would need a private dk and dv per chunk and a reduction
 * for no gain when there are sequences enough. With fewer pairs than threads
 * (one long sequence per rank, the case context parallelism is for) it
 * splits by query head instead, as attention.c does, into per-head rows
 * summed afterwards in head order: the same bits again. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "kernels/attention.h"
#include "kernels/cpu/attention_tile.h"

/* A non-empty chunk, to be sorted by a start row (q_start or k_start) and
 * then by its index. */
struct chunk_ref {
	int32_t start, idx;
};

static int chunk_ref_cmp(const void *pa, const void *pb)
{
	const struct chunk_ref *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return (a->idx > b->idx) - (a->idx < b->idx);
}

/* What both passes learn from the table: the non-empty chunks by k_start
 * (then index) and the most keys any of their queries sees. */
struct chunk_scan {
	struct chunk_ref *refs;
	int n, max_keys;
};

static int chunk_rows_ok(const struct rl_attention_chunks *c, int i)
{
	return c->q_start[i] >= 0 && c->k_start[i] >= 0 && c->offset[i] >= 0 && c->len[i] >= 0 &&
	       (int64_t)c->q_start[i] + c->len[i] <= INT32_MAX &&
	       (int64_t)c->k_start[i] + c->offset[i] + c->len[i] <= INT32_MAX;
}

/* -1 for a bad shape or table (a negative row, count or length; chunks
 * sharing query rows, which would race) or no memory; 0 when there is
 * nothing to do; 1 with *sc filled (the caller frees sc->refs). */
static int chunks_begin(const struct rl_attention_chunks *c, const struct rl_attention_shape *shape,
                        struct chunk_scan *sc)
{
	int n = 0;

	*sc = (struct chunk_scan){0};
	if (!attn_shape_ok(shape) || !c || c->n < 0)
		return -1;
	if (c->n == 0)
		return 0;
	if (!c->q_start || !c->k_start || !c->offset || !c->len)
		return -1;
	for (int i = 0; i < c->n; i++) {
		if (!chunk_rows_ok(c, i))
			return -1;
		n += c->len[i] > 0;
	}
	if (n == 0)
		return 0;
	sc->refs = malloc((size_t)n * sizeof(*sc->refs));
	if (!sc->refs)
		return -1;
	sc->n = n;

	n = 0;
	for (int i = 0; i < c->n; i++)
		if (c->len[i] > 0)
			sc->refs[n++] = (struct chunk_ref){c->q_start[i], i};
	qsort(sc->refs, (size_t)n, sizeof(*sc->refs), chunk_ref_cmp);
	for (int r = 1; r < n; r++) {
		const int a = sc->refs[r - 1].idx, b = sc->refs[r].idx;

		if (c->q_start[b] < c->q_start[a] + c->len[a]) {
			free(sc->refs);
			sc->refs = NULL;
			return -1;
		}
	}

	n = 0;
	for (int i = 0; i < c->n; i++)
		if (c->len[i] > 0) {
			sc->refs[n++] = (struct chunk_ref){c->k_start[i], i};
			if (c->offset[i] + c->len[i] > sc->max_keys)
				sc->max_keys = c->offset[i] + c->len[i];
		}
	qsort(sc->refs, (size_t)n, sizeof(*sc->refs), chunk_ref_cmp);
	return 1;
}

/* One query tile of one head of one chunk; keys is how many it sees. */
struct chunk_item {
	int chunk, head, first, keys;
};

static int chunk_item_cmp(const void *pa, const void *pb)
{
	const struct chunk_item *a = pa, *b = pb;

	if (a->keys != b->keys)
		return a->keys > b->keys ? -1 : 1;
	if (a->chunk != b->chunk)
		return a->chunk < b->chunk ? -1 : 1;
	if (a->first != b->first)
		return a->first < b->first ? -1 : 1;
	return (a->head > b->head) - (a->head < b->head);
}

int rl_attention_chunks_forward_cpu(float *out, float *lse, const float *q, const float *k,
                                    const float *v, const struct rl_attention_chunks *chunks,
                                    const struct rl_attention_shape *shape, void *stream)
{
	(void)stream;
	struct chunk_scan sc;
	const int go = chunks_begin(chunks, shape, &sc);

	if (go <= 0)
		return go;
	if (!out || !lse || !q || !k || !v) {
		free(sc.refs);
		return -1;
	}

	const int H = shape->n_heads, Hkv = shape->n_kv_heads, D = shape->head_dim;
	const int rep = H / Hkv, ldq = H * D, ldkv = Hkv * D;
	const size_t tile = (size_t)ATTN_BQ * (size_t)sc.max_keys;
	size_t n_items = 0;

	for (int r = 0; r < sc.n; r++)
		n_items += (size_t)H * ((chunks->len[sc.refs[r].idx] + ATTN_BQ - 1) / ATTN_BQ);

	struct chunk_item *items = malloc(n_items * sizeof(*items));
	float *scratch = attn_alloc_tiles(tile, 1);

	if (!items || !scratch) {
		free(items);
		free(scratch);
		free(sc.refs);
		return -1;
	}

	size_t n = 0;

	for (int r = 0; r < sc.n; r++) {
		const int c = sc.refs[r].idx, len = chunks->len[c];

		for (int first = 0; first < len; first += ATTN_BQ) {
			const int m = len - first < ATTN_BQ ? len - first : ATTN_BQ;

			for (int h = 0; h < H; h++)
				items[n++] =
				    (struct chunk_item){c, h, first, chunks->offset[c] + first + m};
		}
	}
	qsort(items, n_items, sizeof(*items), chunk_item_cmp);

	const int parallel = n_items > 1 && attn_threads() > 1;
	const int blas_threads = attn_blas_serial_begin(parallel);

#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
#endif
	for (size_t i = 0; i < n_items; i++) {
		const struct chunk_item it = items[i];
		const int len = chunks->len[it.chunk];
		const int m = len - it.first < ATTN_BQ ? len - it.first : ATTN_BQ;
		const size_t row = (size_t)chunks->q_start[it.chunk] + (size_t)it.first;
		const size_t qo = row * ldq + (size_t)it.head * D;
		const size_t kvo =
		    (size_t)chunks->k_start[it.chunk] * ldkv + (size_t)(it.head / rep) * D;

		attn_tile_forward(out + qo, lse + row * H + it.head, H, q + qo, k + kvo, v + kvo, m,
		                  chunks->offset[it.chunk] + it.first, ldq, ldkv, D, shape->scale,
		                  scratch + (size_t)attn_thread_id() * tile);
	}
	attn_blas_serial_end(blas_threads);
	free(items);
	free(scratch);
	free(sc.refs);
	return 0;
}

/* Chunks refs[first .. first + count) (by k_start) whose key rows overlap,
 * together key rows lo .. lo + span - 1; base is where its rows start in
 * the per-head buffer of the split by query head. */
struct chunk_cluster {
	int first, count, lo, span;
	size_t base;
	double cost;
};

static int chunk_cluster_cmp(const void *pa, const void *pb)
{
	const struct chunk_cluster *a = pa, *b = pb;

	if (a->cost != b->cost)
		return a->cost > b->cost ? -1 : 1;
	return (a->first > b->first) - (a->first < b->first);
}

/* Cuts sc's refs (sorted by k_start) into clusters; returns how many, or
 * -1 when out of memory. *rows: their spans summed, *max_span: the longest. */
static int chunk_clusters(const struct rl_attention_chunks *c, const struct chunk_scan *sc,
                          struct chunk_cluster **out, size_t *rows, int *max_span)
{
	struct chunk_cluster *cl = malloc((size_t)sc->n * sizeof(*cl));
	int n = 0;
	int64_t hi = 0;

	if (!cl)
		return -1;
	*rows = 0;
	*max_span = 0;
	for (int r = 0; r < sc->n; r++) {
		const int i = sc->refs[r].idx;
		const int64_t end = (int64_t)c->k_start[i] + c->offset[i] + c->len[i];

		if (n == 0 || c->k_start[i] >= hi) {
			if (n > 0)
				cl[n - 1].span = (int)(hi - cl[n - 1].lo);
			cl[n++] = (struct chunk_cluster){r, 0, c->k_start[i], 0, 0, 0.0};
			hi = end;
		}
		cl[n - 1].count++;
		/* the score tiles' size: len queries by offset + len / 2 keys */
		cl[n - 1].cost += (double)c->len[i] * (c->offset[i] + 0.5 * c->len[i]);
		if (end > hi)
			hi = end;
	}
	cl[n - 1].span = (int)(hi - cl[n - 1].lo);
	for (int j = 0; j < n; j++) {
		cl[j].base = *rows;
		*rows += (size_t)cl[j].span;
		if (cl[j].span > *max_span)
			*max_span = cl[j].span;
	}
	/* the dearest first, for the dynamic schedule */
	qsort(cl, (size_t)n, sizeof(*cl), chunk_cluster_cmp);
	*out = cl;
	return n;
}

/* What one backward call shares with its work items. */
struct chunk_bwd {
	float *dq;
	const float *dout, *q, *k, *v, *out, *lse;
	const struct rl_attention_chunks *c;
	const struct chunk_ref *refs;
	int H, rep, D, ldq, ldkv;
	float scale;
};

/* Query head h over the chunks of cluster cl, in order, into hk and hv:
 * the cluster's key rows, stride ldd, zeroed by the caller. */
static void chunk_cluster_head(const struct chunk_bwd *b, const struct chunk_cluster *cl, int h,
                               float *hk, float *hv, int ldd, float *p, float *ds)
{
	const struct rl_attention_chunks *c = b->c;

	for (int r = cl->first; r < cl->first + cl->count; r++) {
		const int i = b->refs[r].idx;
		const size_t qo = (size_t)c->q_start[i] * b->ldq + (size_t)h * b->D;
		const size_t kvo = (size_t)c->k_start[i] * b->ldkv + (size_t)(h / b->rep) * b->D;
		const size_t ko = (size_t)(c->k_start[i] - cl->lo) * ldd;

		attn_head_backward(b->dq + qo, hk + ko, hv + ko, b->dout + qo, b->q + qo,
		                   b->k + kvo, b->v + kvo, b->out + qo,
		                   b->lse + (size_t)c->q_start[i] * b->H + h, c->offset[i],
		                   c->len[i], b->ldq, ldd, b->ldkv, b->H, b->D, b->scale, p, ds);
	}
}

int rl_attention_chunks_backward_cpu(float *dq, float *dk, float *dv, const float *dout,
                                     const float *q, const float *k, const float *v,
                                     const float *out, const float *lse,
                                     const struct rl_attention_chunks *chunks,
                                     const struct rl_attention_shape *shape, void *stream)
{
	(void)stream;
	struct chunk_scan sc;
	const int go = chunks_begin(chunks, shape, &sc);

	if (go <= 0)
		return go;
	if (!dq || !dk || !dv || !dout || !q || !k || !v || !out || !lse) {
		free(sc.refs);
		return -1;
	}

	const int H = shape->n_heads, Hkv = shape->n_kv_heads, D = shape->head_dim;
	const int rep = H / Hkv, ldq = H * D, ldkv = Hkv * D, threads = attn_threads();
	const struct chunk_bwd b = {dq,      dout, q,   k, v,   out,  lse,         chunks,
	                            sc.refs, H,    rep, D, ldq, ldkv, shape->scale};
	struct chunk_cluster *cl = NULL;
	size_t rows;
	int max_span;
	const int n_cl = chunk_clusters(chunks, &sc, &cl, &rows, &max_span);

	if (n_cl < 0) {
		free(sc.refs);
		return -1;
	}

	const int by_head = rep > 1 && (long)n_cl * Hkv < threads;
	const int per = by_head ? H : Hkv, n_items = n_cl * per;
	const size_t part = by_head ? 0 : 2 * (size_t)max_span * D;
	const size_t tile = (size_t)ATTN_BQ * (size_t)sc.max_keys;
	float *scratch = attn_alloc_tiles(tile, 2), *heads = NULL, *per_thread = NULL;

	if (by_head)
		heads = calloc(2 * rows * ldq, sizeof(float));
	else
		per_thread = malloc((size_t)threads * part * sizeof(float));
	if (!scratch || (by_head ? !heads : !per_thread)) {
		free(scratch);
		free(heads);
		free(per_thread);
		free(cl);
		free(sc.refs);
		return -1;
	}

	const int parallel = n_items > 1 && threads > 1;
	const int blas_threads = attn_blas_serial_begin(parallel);

#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
#endif
	for (int i = 0; i < n_items; i++) {
		const struct chunk_cluster *c = &cl[i / per];
		const int id = attn_thread_id();
		float *p = scratch + (size_t)id * 2 * tile, *ds = p + tile;

		if (by_head) {
			float *hk = heads + c->base * ldq + (size_t)(i % per) * D;

			chunk_cluster_head(&b, c, i % per, hk, hk + rows * ldq, ldq, p, ds);
			continue;
		}

		const int g = i % per;
		const size_t kvo = (size_t)c->lo * ldkv + (size_t)g * D;
		float *hk = per_thread + (size_t)id * part, *hv = hk + (size_t)max_span * D;

		for (int h = g * rep; h < (g + 1) * rep; h++) {
			memset(hk, 0, (size_t)c->span * D * sizeof(float));
			memset(hv, 0, (size_t)c->span * D * sizeof(float));
			chunk_cluster_head(&b, c, h, hk, hv, D, p, ds);
			attn_add_rows(dk + kvo, ldkv, hk, D, c->span, D);
			attn_add_rows(dv + kvo, ldkv, hv, D, c->span, D);
		}
	}
	attn_blas_serial_end(blas_threads);

	/* each kv head's rows take its query heads in order, as above */
	for (int j = 0; by_head && j < n_cl; j++) {
		const struct chunk_cluster *c = &cl[j];

#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (parallel)
#endif
		for (int t = 0; t < c->span; t++)
			for (int h = 0; h < H; h++) {
				const size_t o = ((size_t)c->lo + t) * ldkv + (size_t)(h / rep) * D;
				const size_t src = (c->base + t) * ldq + (size_t)h * D;

				attn_add_rows(dk + o, 0, heads + src, 0, 1, D);
				attn_add_rows(dv + o, 0, heads + rows * ldq + src, 0, 1, D);
			}
	}
	free(scratch);
	free(heads);
	free(per_thread);
	free(cl);
	free(sc.refs);
	return 0;
}
