/* A piece is walked as the rows of its block that its run touches; each
 * such row segment is contiguous in the global tensor, so its overlap with
 * the wanted block is one memcpy. One-dimensional tensors are one row. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/reshard.h"

static int by_kind_tensor(const struct rl_ckpt_piece *a, enum rl_ckpt_kind kind, const char *tensor)
{
	if (a->kind != kind)
		return a->kind < kind ? -1 : 1;
	return strcmp(a->tensor, tensor);
}

static int cmp_pieces(const void *x, const void *y)
{
	const struct rl_ckpt_piece *a = *(const struct rl_ckpt_piece *const *)x;
	const struct rl_ckpt_piece *b = *(const struct rl_ckpt_piece *const *)y;
	int c = by_kind_tensor(a, b->kind, b->tensor);

	if (c)
		return c;
	for (int d = 0; d < a->ndim && d < b->ndim; d++)
		if (a->block_offset[d] != b->block_offset[d])
			return a->block_offset[d] < b->block_offset[d] ? -1 : 1;
	return a->flat_start < b->flat_start ? -1 : a->flat_start > b->flat_start;
}

int rl_ckpt_index_build(struct rl_ckpt_index *ix, const struct rl_ckpt_shard *shards, int n_shards,
                        char *err, size_t errlen)
{
	int n = 0;

	memset(ix, 0, sizeof *ix);
	for (int i = 0; i < n_shards; i++)
		n += shards[i].n_pieces;
	ix->pieces = calloc((size_t)n + 1, sizeof *ix->pieces);
	if (!ix->pieces) {
		snprintf(err, errlen, "out of memory indexing %d checkpoint pieces", n);
		return -1;
	}
	for (int i = 0; i < n_shards; i++)
		for (int k = 0; k < shards[i].n_pieces; k++)
			ix->pieces[ix->n++] = &shards[i].pieces[k];
	qsort(ix->pieces, (size_t)ix->n, sizeof *ix->pieces, cmp_pieces);
	return 0;
}

void rl_ckpt_index_free(struct rl_ckpt_index *ix)
{
	free(ix->pieces);
	memset(ix, 0, sizeof *ix);
}

static bool is_shard(const char *name)
{
	static const char ext[] = ".safetensors";
	size_t n = strlen(name);

	return n >= sizeof ext && strcmp(name + n - (sizeof ext - 1), ext) == 0;
}

int rl_ckpt_shard_set_open(struct rl_ckpt_shard_set *set, const char *dir,
                           const struct rl_ckpt_manifest *man, char *err, size_t errlen)
{
	memset(set, 0, sizeof *set);
	set->shards = calloc((size_t)man->n_files + 1, sizeof *set->shards);
	if (!set->shards) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < man->n_files; i++) {
		char path[4300];

		if (!is_shard(man->files[i].name))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, man->files[i].name);
		if (rl_ckpt_shard_open(&set->shards[set->n], path, err, errlen))
			return -1;
		set->n++;
	}
	return rl_ckpt_index_build(&set->ix, set->shards, set->n, err, errlen);
}

void rl_ckpt_shard_set_close(struct rl_ckpt_shard_set *set)
{
	rl_ckpt_index_free(&set->ix);
	for (int i = 0; i < set->n; i++)
		rl_ckpt_shard_close(&set->shards[i]);
	free(set->shards);
	memset(set, 0, sizeof *set);
}

/* Rows and columns of a block, a one-dimensional one as a single row. */
struct grid {
	int64_t row0, rows, col0, cols;
};

static struct grid grid_of(int ndim, const int64_t *offset, const int64_t *shape)
{
	if (ndim == 1)
		return (struct grid){0, 1, offset[0], shape[0]};
	return (struct grid){offset[0], shape[0], offset[1], shape[1]};
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* One bit per element of the wanted block: which ones a piece has filled,
 * so that a gap is never hidden by an overlap of the same size. */
struct filled {
	uint64_t *bits;
	int64_t overlaps;
};

/* bits lo..hi-1 of one word */
static uint64_t bit_range(int64_t lo, int64_t hi)
{
	uint64_t upto_hi = hi == 64 ? ~UINT64_C(0) : (UINT64_C(1) << hi) - 1;

	return upto_hi & ~((UINT64_C(1) << lo) - 1);
}

/* a word at a time: a resume marks every element of every tensor */
static void mark(struct filled *f, int64_t at, int64_t n)
{
	int64_t end = at + n;

	while (at < end) {
		int64_t word = at >> 6, lo = at & 63;
		int64_t hi = end - (word << 6) < 64 ? end - (word << 6) : 64;
		uint64_t bits = bit_range(lo, hi);

		f->overlaps += __builtin_popcountll(f->bits[word] & bits);
		f->bits[word] |= bits;
		at = (word << 6) + hi;
	}
}

/* Copies what piece p holds of the wanted block into dst; returns the
 * number of elements copied. */
static int64_t copy_overlap(const struct rl_ckpt_piece *p, struct grid want, float *dst,
                            struct filled *f)
{
	struct grid src = grid_of(p->ndim, p->block_offset, p->block_shape);
	int64_t first = p->flat_start, last = p->flat_start + p->flat_len - 1;
	int64_t r_lo = max64(first / src.cols, want.row0 - src.row0);
	int64_t r_hi = min64(last / src.cols, want.row0 + want.rows - 1 - src.row0);
	int64_t copied = 0;

	for (int64_t r = r_lo; r <= r_hi; r++) {
		/* the run's columns of row r, in the global tensor */
		int64_t c_lo = r == first / src.cols ? first % src.cols : 0;
		int64_t c_hi = r == last / src.cols ? last % src.cols + 1 : src.cols;
		int64_t g_lo = max64(src.col0 + c_lo, want.col0);
		int64_t g_hi = min64(src.col0 + c_hi, want.col0 + want.cols);

		if (g_lo >= g_hi)
			continue;
		const float *from = p->data + (r * src.cols + (g_lo - src.col0) - first);
		int64_t at = (src.row0 + r - want.row0) * want.cols + (g_lo - want.col0);
		memcpy(dst + at, from, (size_t)(g_hi - g_lo) * sizeof *dst);
		mark(f, at, g_hi - g_lo);
		copied += g_hi - g_lo;
	}
	return copied;
}

static void format_dims(char *buf, size_t len, int ndim, const int64_t *v)
{
	if (ndim == 1)
		snprintf(buf, len, "[%" PRId64 "]", v[0]);
	else
		snprintf(buf, len, "[%" PRId64 ", %" PRId64 "]", v[0], v[1]);
}

int rl_ckpt_fill(const struct rl_ckpt_index *ix, enum rl_ckpt_kind kind,
                 const struct rl_ckpt_block *want, float *dst, char *err, size_t errlen)
{
	struct grid g = grid_of(want->ndim, want->offset, want->shape);
	int64_t need = g.rows * g.cols, got = 0;
	int lo = 0, hi = ix->n;
	struct filled f = {calloc((size_t)(need + 63) / 64 + 1, sizeof *f.bits), 0};

	if (!f.bits) {
		snprintf(err, errlen, "out of memory reading %s", want->tensor);
		return -1;
	}

	/* the first piece of (kind, tensor) */
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (by_kind_tensor(ix->pieces[mid], kind, want->tensor) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (int i = lo; i < ix->n && by_kind_tensor(ix->pieces[i], kind, want->tensor) == 0; i++) {
		const struct rl_ckpt_piece *p = ix->pieces[i];
		bool same = p->ndim == want->ndim;

		for (int d = 0; same && d < p->ndim; d++)
			same = p->global_shape[d] == want->global_shape[d];
		if (!same) {
			char a[64], b[64];

			format_dims(a, sizeof a, p->ndim, p->global_shape);
			format_dims(b, sizeof b, want->ndim, want->global_shape);
			snprintf(err, errlen,
			         "%s of %s is %s in the checkpoint but %s in the model",
			         rl_ckpt_kind_name(kind), want->tensor, a, b);
			free(f.bits);
			return -1;
		}
		got += copy_overlap(p, g, dst, &f);
	}
	free(f.bits);
	if (f.overlaps) {
		snprintf(err, errlen,
		         "the checkpoint holds %" PRId64
		         " values of %s of %s twice (pieces overlap)",
		         f.overlaps, rl_ckpt_kind_name(kind), want->tensor);
		return -1;
	}
	if (got != need) {
		snprintf(err, errlen,
		         "the checkpoint lacks %" PRId64 " of the %" PRId64
		         " values of %s of %s this rank needs",
		         need - got + f.overlaps, need, rl_ckpt_kind_name(kind), want->tensor);
		return -1;
	}
	return 0;
}
