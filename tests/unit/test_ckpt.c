/* The checkpoint format (runtime/ckpt): global tensors written as the pieces
 * of one layout (row blocks, column blocks, flat runs that start and end
 * mid-row as the distributed optimizer owns them) and read back as the blocks
 * of another equal the values computed here by index; the shard files are
 * safetensors for the general reader; broken files and manifests fail naming
 * the file; the directory moves and the retention choice against tables
 * worked out by hand. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <criterion/criterion.h>

#include "runtime/ckpt/manifest.h"
#include "runtime/ckpt/reshard.h"
#include "runtime/ckpt/retain.h"
#include "runtime/ckpt/run_state.h"
#include "runtime/ckpt/shard.h"
#include "runtime/ckpt/store.h"
#include "runtime/model/safetensors.h"
#include "tests/unit/helpers.h"

static char err[1024];

static char *path_in(const char *dir, const char *name)
{
	char *p = NULL;
	cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

static bool exists(const char *dir, const char *name)
{
	char *p = path_in(dir, name);
	struct stat st;
	bool yes = stat(p, &st) == 0;
	free(p);
	return yes;
}

/* ---- global tensors and the pieces a writer layout makes of them ---- */

struct tensor_def {
	const char *name;
	int ndim;
	int64_t rows, cols; /* a 1-D tensor is one row */
};

static const struct tensor_def tensors[] = {
    {"model.layers.0.mlp.down_proj.weight", 2, 7, 5},
    {"model.layers.0.self_attn.k_proj.weight", 2, 13, 3},
    {"model.norm.weight", 1, 1, 11},
};
#define N_TENSORS 3
#define N_FILES   3

/* Every kind, tensor and element its own value, exact in fp32. */
static float truth(int kind, int t, int64_t r, int64_t c)
{
	return (float)(kind * 100000 + t * 10000 + r * 100 + c) + 0.5f;
}

struct written {
	struct rl_ckpt_piece p[N_FILES][16];
	int n[N_FILES];
	struct rl_ckpt_file_sum sum[N_FILES];
};

/* Floats [start, start + len) of the h x w block at (r0, c0) of tensor t,
 * row-major in the block, into file f. */
static void add_run(struct written *w, int f, int t, enum rl_ckpt_kind k, int64_t r0, int64_t c0,
                    int64_t h, int64_t wd, int64_t start, int64_t len)
{
	const struct tensor_def *td = &tensors[t];
	struct rl_ckpt_piece *p = &w->p[f][w->n[f]++];
	float *v = malloc((size_t)len * sizeof *v);

	cr_assert_not_null(v);
	for (int64_t i = 0; i < len; i++)
		v[i] = truth(k, t, r0 + (start + i) / wd, c0 + (start + i) % wd);
	memset(p, 0, sizeof *p);
	snprintf(p->tensor, sizeof p->tensor, "%s", td->name);
	p->kind = k;
	p->ndim = td->ndim;
	if (td->ndim == 2) {
		p->global_shape[0] = td->rows, p->global_shape[1] = td->cols;
		p->block_offset[0] = r0, p->block_offset[1] = c0;
		p->block_shape[0] = h, p->block_shape[1] = wd;
	} else {
		p->global_shape[0] = td->cols;
		p->block_offset[0] = c0;
		p->block_shape[0] = wd;
	}
	p->flat_start = start;
	p->flat_len = len;
	p->data = v;
}

static void add_block(struct written *w, int f, int t, enum rl_ckpt_kind k, int64_t r0, int64_t c0,
                      int64_t h, int64_t wd)
{
	add_run(w, f, t, k, r0, c0, h, wd, 0, h * wd);
}

enum layout { ROW_BLOCKS, COL_BLOCKS, FLAT_RUNS };

/* One file never holds two pieces with the same key (kind/tensor@start). */
static void write_layout(struct written *w, int t, enum rl_ckpt_kind k, enum layout lay)
{
	int64_t R = tensors[t].rows, C = tensors[t].cols, h = (R + 1) / 2;
	bool one_d = tensors[t].ndim == 1;

	switch (lay) {
	case ROW_BLOCKS: /* tensor-parallel rows, uneven: 4 + 3, 7 + 6; 1-D 6 + 5 */
		if (one_d) {
			add_block(w, 0, t, k, 0, 0, 1, 6);
			add_block(w, 1, t, k, 0, 6, 1, C - 6);
		} else {
			add_block(w, 0, t, k, 0, 0, h, C);
			add_block(w, 1, t, k, h, 0, R - h, C);
		}
		break;
	case COL_BLOCKS: /* 2 + 3 columns, 2 + 1; 1-D 4 + 7 */
		add_block(w, 1, t, k, 0, 0, R, one_d ? 4 : 2);
		add_block(w, 2, t, k, 0, one_d ? 4 : 2, R, C - (one_d ? 4 : 2));
		break;
	case FLAT_RUNS: /* runs of blocks, cut mid-row, over all three files */
		if (one_d) {
			add_run(w, 0, t, k, 0, 0, 1, C, 0, 3);
			add_run(w, 1, t, k, 0, 0, 1, C, 3, 5);
			add_run(w, 2, t, k, 0, 0, 1, C, 8, 3);
		} else {
			int64_t n = h * C, m = (R - h) * C, s = m / 2 + 1;
			add_run(w, 0, t, k, 0, 0, h, C, 0, 7);
			add_run(w, 1, t, k, 0, 0, h, C, 7, 6);
			add_run(w, 2, t, k, 0, 0, h, C, 13, n - 13);
			add_run(w, 1, t, k, h, 0, R - h, C, 0, s);
			add_run(w, 2, t, k, h, 0, R - h, C, s, m - s);
		}
		break;
	}
}

static void write_files(const char *dir, struct written *w)
{
	for (int f = 0; f < N_FILES; f++) {
		char name[64];
		snprintf(name, sizeof name, "rank_%d.safetensors", f);
		char *path = path_in(dir, name);
		cr_assert_eq(
		    rl_ckpt_shard_write(path, w->p[f], w->n[f], &w->sum[f], err, sizeof err), 0,
		    "%s", err);
		free(path);
	}
}

static void free_written(struct written *w)
{
	for (int f = 0; f < N_FILES; f++)
		for (int i = 0; i < w->n[f]; i++)
			free((void *)w->p[f][i].data);
}

static void open_all(const char *dir, struct rl_ckpt_shard *s, struct rl_ckpt_index *ix)
{
	for (int f = 0; f < N_FILES; f++) {
		char name[64];
		snprintf(name, sizeof name, "rank_%d.safetensors", f);
		char *path = path_in(dir, name);
		cr_assert_eq(rl_ckpt_shard_open(&s[f], path, err, sizeof err), 0, "%s", err);
		free(path);
	}
	cr_assert_eq(rl_ckpt_index_build(ix, s, N_FILES, err, sizeof err), 0, "%s", err);
}

static void close_all(struct rl_ckpt_shard *s, struct rl_ckpt_index *ix)
{
	rl_ckpt_index_free(ix);
	for (int f = 0; f < N_FILES; f++)
		rl_ckpt_shard_close(&s[f]);
}

static struct rl_ckpt_block block_of(int t, int64_t r0, int64_t c0, int64_t h, int64_t wd)
{
	const struct tensor_def *td = &tensors[t];
	struct rl_ckpt_block b = {.tensor = td->name, .ndim = td->ndim};

	if (td->ndim == 2)
		b = (struct rl_ckpt_block){td->name, 2, {td->rows, td->cols}, {r0, c0}, {h, wd}};
	else
		b = (struct rl_ckpt_block){td->name, 1, {td->cols, 0}, {c0, 0}, {wd, 0}};
	return b;
}

/* Fills one block of tensor t and checks each element against truth() and
 * that nothing past the block is written. */
static void check_block(const struct rl_ckpt_index *ix, enum rl_ckpt_kind k, int t, int64_t r0,
                        int64_t c0, int64_t h, int64_t wd)
{
	const char *name = tensors[t].name;
	struct rl_ckpt_block b = block_of(t, r0, c0, h, wd);
	float *dst = malloc((size_t)(h * wd + 1) * sizeof *dst);

	cr_assert_not_null(dst);
	for (int64_t i = 0; i < h * wd; i++)
		dst[i] = NAN;
	dst[h * wd] = -7.0f;
	cr_assert_eq(rl_ckpt_fill(ix, k, &b, dst, err, sizeof err), 0, "%s", err);
	for (int64_t i = 0; i < h * wd; i++) {
		float want = truth(k, t, r0 + i / wd, c0 + i % wd);
		cr_assert(dst[i] == want,
		          "%s of %s [%" PRId64 ", %" PRId64 "] in a %" PRId64 "x%" PRId64
		          " block: %g, expected %g",
		          rl_ckpt_kind_name(k), name, r0 + i / wd, c0 + i % wd, h, wd, dst[i],
		          want);
	}
	cr_assert(dst[h * wd] == -7.0f, "a write past the block of %s", name);
	free(dst);
}

/* Every th x tw tile of tensor t, the last ones smaller. */
static void check_tiles(const struct rl_ckpt_index *ix, enum rl_ckpt_kind k, int t, int64_t th,
                        int64_t tw)
{
	int64_t R = tensors[t].rows, C = tensors[t].cols;

	for (int64_t r0 = 0; r0 < R; r0 += th)
		for (int64_t c0 = 0; c0 < C; c0 += tw)
			check_block(ix, k, t, r0, c0, th < R - r0 ? th : R - r0,
			            tw < C - c0 ? tw : C - c0);
}

Test(ckpt_reshard, every_reader_layout_sees_the_global_tensor)
{
	char *dir = tmp_dir();
	struct written w = {0};
	struct rl_ckpt_shard s[N_FILES];
	struct rl_ckpt_index ix;
	/* whole, rows of 3, single columns, 2x2 tiles, single rows, 4x3, 1x1 */
	static const int64_t tiles[][2] = {{99, 99}, {3, 99}, {99, 1}, {2, 2},
	                                   {1, 99},  {4, 3},  {1, 1}};
	int written_pieces = 0, read_pieces = 0;

	/* every tensor in every layout, each kind in a different one */
	for (int t = 0; t < N_TENSORS; t++)
		for (int k = 0; k < RL_CKPT_N_KINDS; k++)
			write_layout(&w, t, (enum rl_ckpt_kind)k, (enum layout)((t + k) % 3));
	write_files(dir, &w);
	open_all(dir, s, &ix);
	for (int f = 0; f < N_FILES; f++) {
		cr_expect_eq(s[f].n_pieces, w.n[f], "rank_%d", f);
		written_pieces += w.n[f];
		read_pieces += s[f].n_pieces;
	}
	cr_assert_eq(ix.n, written_pieces);
	cr_assert_eq(read_pieces, written_pieces);
	for (int k = 0; k < RL_CKPT_N_KINDS; k++)
		for (int t = 0; t < N_TENSORS; t++)
			for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++)
				check_tiles(&ix, (enum rl_ckpt_kind)k, t, tiles[i][0], tiles[i][1]);
	close_all(s, &ix);
	free_written(&w);
	remove_tree(dir);
	free(dir);
}

/* Tensor 0 (7x5) as flat runs: rows 0-3 in runs [0,7) [7,13) [13,20), rows
 * 4-6 whole; skip leaves one run out, twice writes one twice. */
static void coverage_case(const char *dir, int skip, int twice, struct rl_ckpt_shard *s,
                          struct rl_ckpt_index *ix, struct written *w)
{
	static const int64_t runs[3][2] = {{0, 7}, {7, 6}, {13, 7}};

	memset(w, 0, sizeof *w);
	for (int r = 0; r < 3; r++) {
		if (r != skip)
			add_run(w, r, 0, RL_CKPT_WEIGHT, 0, 0, 4, 5, runs[r][0], runs[r][1]);
		if (r == twice)
			add_run(w, (r + 1) % 3, 0, RL_CKPT_WEIGHT, 0, 0, 4, 5, runs[r][0],
			        runs[r][1]);
	}
	add_block(w, 2, 0, RL_CKPT_WEIGHT, 4, 0, 3, 5);
	write_files(dir, w);
	open_all(dir, s, ix);
}

Test(ckpt_reshard, a_missing_run_is_reported)
{
	char *dir = tmp_dir();
	struct written w;
	struct rl_ckpt_shard s[N_FILES];
	struct rl_ckpt_index ix;
	float dst[35];

	coverage_case(dir, 1, -1, s, &ix, &w);
	struct rl_ckpt_block whole = block_of(0, 0, 0, 7, 5);
	cr_assert_eq(rl_ckpt_fill(&ix, RL_CKPT_WEIGHT, &whole, dst, err, sizeof err), -1);
	expect_contains(err, "lacks 6 of the 35");
	expect_contains(err, tensors[0].name);
	/* rows 1 and 2 hold the gap; what is there still reads */
	struct rl_ckpt_block row1 = block_of(0, 1, 0, 1, 5);
	cr_assert_eq(rl_ckpt_fill(&ix, RL_CKPT_WEIGHT, &row1, dst, err, sizeof err), -1);
	expect_contains(err, "lacks 3 of the 5");
	check_block(&ix, RL_CKPT_WEIGHT, 0, 0, 0, 1, 5);
	check_block(&ix, RL_CKPT_WEIGHT, 0, 2, 3, 2, 2);
	check_block(&ix, RL_CKPT_WEIGHT, 0, 3, 0, 4, 5);
	/* no piece at all: another kind, another tensor */
	cr_assert_eq(rl_ckpt_fill(&ix, RL_CKPT_EXP_AVG, &whole, dst, err, sizeof err), -1);
	expect_contains(err, "lacks 35 of the 35");
	struct rl_ckpt_block other = block_of(1, 0, 0, 2, 3);
	cr_assert_eq(rl_ckpt_fill(&ix, RL_CKPT_WEIGHT, &other, dst, err, sizeof err), -1);
	expect_contains(err, tensors[1].name);
	close_all(s, &ix);
	free_written(&w);
	remove_tree(dir);
	free(dir);
}

Test(ckpt_reshard, a_run_written_twice_is_reported)
{
	char *dir = tmp_dir();
	struct written w;
	struct rl_ckpt_shard s[N_FILES];
	struct rl_ckpt_index ix;
	float dst[35];

	coverage_case(dir, -1, 1, s, &ix, &w);
	struct rl_ckpt_block whole = block_of(0, 0, 0, 7, 5);
	cr_assert_eq(rl_ckpt_fill(&ix, RL_CKPT_WEIGHT, &whole, dst, err, sizeof err), -1);
	expect_contains(err, "overlap");
	expect_contains(err, tensors[0].name);
	/* rows the duplicate does not touch are still fine */
	check_block(&ix, RL_CKPT_WEIGHT, 0, 3, 0, 4, 5);
	close_all(s, &ix);
	free_written(&w);
	remove_tree(dir);
	free(dir);
}

Test(ckpt_reshard, another_global_shape_names_both)
{
	char *dir = tmp_dir();
	struct written w;
	struct rl_ckpt_shard s[N_FILES];
	struct rl_ckpt_index ix;
	float dst[35];

	coverage_case(dir, -1, -1, s, &ix, &w);
	check_block(&ix, RL_CKPT_WEIGHT, 0, 0, 0, 7, 5);
	struct rl_ckpt_block wider = block_of(0, 0, 0, 7, 5);
	wider.global_shape[1] = 6;
	cr_assert_eq(rl_ckpt_fill(&ix, RL_CKPT_WEIGHT, &wider, dst, err, sizeof err), -1);
	expect_contains(err, tensors[0].name);
	expect_contains(err, "[7, 5]");
	expect_contains(err, "[7, 6]");
	struct rl_ckpt_block flat = {tensors[0].name, 1, {35, 0}, {0, 0}, {35, 0}};
	cr_assert_eq(rl_ckpt_fill(&ix, RL_CKPT_WEIGHT, &flat, dst, err, sizeof err), -1);
	expect_contains(err, "[35]");
	expect_contains(err, "[7, 5]");
	close_all(s, &ix);
	free_written(&w);
	remove_tree(dir);
	free(dir);
}

/* ---- shard files ---- */

Test(ckpt_shard, files_are_safetensors_for_the_general_reader)
{
	char *dir = tmp_dir();
	struct written w = {0};

	for (int t = 0; t < N_TENSORS; t++)
		for (int k = 0; k < RL_CKPT_N_KINDS; k++)
			write_layout(&w, t, (enum rl_ckpt_kind)k, (enum layout)((t + 2 * k) % 3));
	write_files(dir, &w);
	for (int f = 0; f < N_FILES; f++) {
		char name[64], key[256];
		snprintf(name, sizeof name, "rank_%d.safetensors", f);
		char *path = path_in(dir, name);
		struct rl_st_archive *a;
		size_t len;
		unsigned char *bytes = slurp(path, &len);

		/* the reported sum is the file's */
		cr_expect_eq(w.sum[f].bytes, len, "%s", path);
		cr_expect_eq(w.sum[f].xxh3, XXH3_64bits(bytes, len), "%s", path);
		uint64_t hlen = 0;
		for (int i = 0; i < 8; i++)
			hlen |= (uint64_t)bytes[i] << (8 * i);
		cr_expect_eq(hlen % 8, 0, "%s: header of %" PRIu64 " bytes", path, hlen);
		json_t *header = json_loadb((const char *)bytes + 8, hlen, 0, NULL);
		json_t *meta = json_object_get(header, "__metadata__");
		cr_assert_str_eq(json_string_value(json_object_get(meta, "format")),
		                 "slurm-rl-shard-1");

		cr_assert_eq(rl_st_open(&a, path, err, sizeof err), 0, "%s", err);
		cr_expect_eq(rl_st_count(a), w.n[f], "%s", path);
		for (int i = 0; i < w.n[f]; i++) {
			const struct rl_ckpt_piece *p = &w.p[f][i];
			bool whole = p->flat_start == 0 &&
			             p->flat_len ==
			                 p->block_shape[0] * (p->ndim == 2 ? p->block_shape[1] : 1);
			static const char *kinds[] = {"weight", "exp_avg", "exp_avg_sq"};

			if (whole)
				snprintf(key, sizeof key, "%s/%s", kinds[p->kind], p->tensor);
			else
				snprintf(key, sizeof key, "%s/%s@%" PRId64, kinds[p->kind],
				         p->tensor, p->flat_start);
			const struct rl_st_tensor *st = rl_st_find(a, key);
			cr_assert_not_null(st, "%s: no %s", path, key);
			cr_expect_eq(st->dtype, RL_F32, "%s", key);
			if (whole) {
				cr_assert_eq(st->ndim, p->ndim, "%s", key);
				for (int d = 0; d < p->ndim; d++)
					cr_expect_eq(st->shape[d], p->block_shape[d], "%s", key);
			} else {
				cr_assert_eq(st->ndim, 1, "%s", key);
				cr_expect_eq(st->shape[0], p->flat_len, "%s", key);
			}
			cr_assert_eq(st->nbytes, (size_t)p->flat_len * sizeof(float), "%s", key);
			cr_expect_eq(memcmp(st->data, p->data, st->nbytes), 0, "%s: data", key);

			/* the place in the metadata, as shard.h describes it */
			json_t *place =
			    json_loads(json_string_value(json_object_get(meta, key)), 0, NULL);
			cr_assert_not_null(place, "%s: no place", key);
			cr_expect_str_eq(json_string_value(json_object_get(place, "tensor")),
			                 p->tensor);
			cr_expect_str_eq(json_string_value(json_object_get(place, "kind")),
			                 kinds[p->kind]);
			json_t *flat = json_object_get(place, "flat");
			cr_expect_eq(json_integer_value(json_array_get(flat, 0)), p->flat_start);
			cr_expect_eq(json_integer_value(json_array_get(flat, 1)), p->flat_len);
			for (int d = 0; d < p->ndim; d++) {
				json_t *g = json_object_get(place, "global_shape");
				json_t *o = json_object_get(place, "block_offset");
				cr_expect_eq(json_integer_value(json_array_get(g, (size_t)d)),
				             p->global_shape[d], "%s", key);
				cr_expect_eq(json_integer_value(json_array_get(o, (size_t)d)),
				             p->block_offset[d], "%s", key);
			}
			json_decref(place);
		}
		rl_st_close(a);
		json_decref(header);
		free(bytes);
		free(path);
	}
	free_written(&w);
	remove_tree(dir);
	free(dir);
}

/* A shard file by hand: the little-endian header length (the header's own,
 * padded with spaces to 8 bytes as the writer does, when claim is 0), the
 * header, then n_floats floats i + 0.5. */
static char *raw_shard(const char *dir, const char *name, uint64_t claim, const char *header,
                       int n_floats)
{
	char *path = path_in(dir, name);
	FILE *f = fopen(path, "wb");
	size_t pad = (8 - strlen(header) % 8) % 8;
	uint64_t hlen = claim ? claim : strlen(header) + pad;
	unsigned char le[8];

	cr_assert_not_null(f);
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(hlen >> (8 * i));
	cr_assert_eq(fwrite(le, 1, 8, f), 8);
	cr_assert_eq(fwrite(header, 1, strlen(header), f), strlen(header));
	cr_assert_eq(fwrite("       ", 1, pad, f), pad);
	for (int i = 0; i < n_floats; i++) {
		float v = (float)i + 0.5f;
		cr_assert_eq(fwrite(&v, sizeof v, 1, f), 1);
	}
	cr_assert_eq(fclose(f), 0);
	return path;
}

/* Rows 2-3 of a [rows, 5] tensor "x" as one piece of 10 floats. */
static void shard_header(char *buf, size_t len, const char *format, int rows, int end)
{
	snprintf(buf, len,
	         "{\"__metadata__\":{\"format\":\"%s\",\"weight/x\":\"{\\\"tensor\\\":\\\"x\\\","
	         "\\\"kind\\\":\\\"weight\\\",\\\"global_shape\\\":[%d,5],\\\"block_offset\\\":"
	         "[2,0],\\\"block_shape\\\":[2,5],\\\"flat\\\":[0,10]}\"},"
	         "\"weight/x\":{\"dtype\":\"F32\",\"shape\":[2,5],\"data_offsets\":[0,%d]}}",
	         format, rows, end);
}

static void expect_refused(const char *path)
{
	struct rl_ckpt_shard s;

	err[0] = '\0';
	cr_expect_eq(rl_ckpt_shard_open(&s, path, err, sizeof err), -1, "%s opened", path);
	expect_contains(err, path);
	cr_expect_null(s.pieces);
	rl_ckpt_shard_close(&s);
}

Test(ckpt_shard, bad_files_are_refused_naming_the_file)
{
	char *dir = tmp_dir(), h[1024], *path;
	struct rl_ckpt_shard s;

	/* the hand-made file is right when only the fault is missing */
	shard_header(h, sizeof h, "slurm-rl-shard-1", 4, 40);
	path = raw_shard(dir, "good.safetensors", 0, h, 10);
	cr_assert_eq(rl_ckpt_shard_open(&s, path, err, sizeof err), 0, "%s", err);
	cr_assert_eq(s.n_pieces, 1);
	cr_expect_eq(s.pieces[0].block_offset[0], 2);
	cr_expect_eq(s.pieces[0].global_shape[0], 4);
	cr_expect(s.pieces[0].data[9] == 9.5f);
	rl_ckpt_shard_close(&s);
	free(path);

	shard_header(h, sizeof h, "pt", 4, 40);
	path = raw_shard(dir, "format.safetensors", 0, h, 10);
	expect_refused(path);
	expect_contains(err, "pt");
	free(path);
	shard_header(h, sizeof h, "slurm-rl-shard-1", 3, 40); /* rows 2-3 of 3 */
	path = raw_shard(dir, "outside.safetensors", 0, h, 10);
	expect_refused(path);
	expect_contains(err, "weight of x");
	free(path);
	shard_header(h, sizeof h, "slurm-rl-shard-1", 4, 40);
	path = raw_shard(dir, "past_end.safetensors", 0, h, 5); /* 20 of the 40 bytes */
	expect_refused(path);
	expect_contains(err, "weight/x");
	free(path);
	path = raw_shard(dir, "claim.safetensors", 4096, h, 10);
	expect_refused(path);
	free(path);
	path = raw_shard(dir, "not_json.safetensors", 0, "this is no JSON header at all", 0);
	expect_refused(path);
	free(path);
	path = raw_shard(dir, "short.safetensors", 0, "", 0);
	cr_assert_eq(truncate(path, 5), 0);
	expect_refused(path);
	free(path);

	/* a file the writer made, cut to half */
	struct written w = {0};
	write_layout(&w, 0, RL_CKPT_WEIGHT, ROW_BLOCKS);
	path = path_in(dir, "half.safetensors");
	cr_assert_eq(rl_ckpt_shard_write(path, w.p[0], w.n[0], &w.sum[0], err, sizeof err), 0, "%s",
	             err);
	cr_assert_eq(rl_ckpt_shard_open(&s, path, err, sizeof err), 0, "%s", err);
	rl_ckpt_shard_close(&s);
	cr_assert_eq(truncate(path, (off_t)w.sum[0].bytes / 2), 0);
	expect_refused(path);
	free(path);
	free_written(&w);
	remove_tree(dir);
	free(dir);
}

/* ---- manifest ---- */

Test(ckpt_manifest, roundtrip_verify_and_damage)
{
	char *dir = tmp_dir();
	static const char small[] = "hello, checkpoint";
	unsigned char big[3000];
	struct rl_ckpt_file files[2];
	struct rl_ckpt_manifest m = {.step = 42, .world_size = 3, .files = files, .n_files = 2};
	struct rl_ckpt_manifest back;

	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (unsigned char)(i * 7 + 3);
	snprintf(files[0].name, sizeof files[0].name, "small.bin");
	snprintf(files[1].name, sizeof files[1].name, "rank_1.safetensors");
	cr_assert_eq(rl_ckpt_write_file(dir, files[0].name, small, sizeof small, &files[0].sum, err,
	                                sizeof err),
	             0, "%s", err);
	cr_assert_eq(
	    rl_ckpt_write_file(dir, files[1].name, big, sizeof big, &files[1].sum, err, sizeof err),
	    0, "%s", err);
	cr_expect_eq(files[0].sum.xxh3, XXH3_64bits(small, sizeof small));
	cr_expect_eq(files[1].sum.xxh3, XXH3_64bits(big, sizeof big));
	/* created, never replaced */
	struct rl_ckpt_file_sum again;
	cr_expect_eq(rl_ckpt_write_file(dir, "small.bin", "x", 1, &again, err, sizeof err), -1);

	cr_assert_eq(rl_ckpt_manifest_write(dir, &m, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_ckpt_manifest_read(dir, &back, err, sizeof err), 0, "%s", err);
	cr_expect_eq(back.step, 42);
	cr_expect_eq(back.world_size, 3);
	cr_assert_eq(back.n_files, 2);
	cr_expect_str_eq(back.files[0].name, "small.bin");
	cr_expect_str_eq(back.files[1].name, "rank_1.safetensors");
	cr_expect_eq(back.files[0].sum.bytes, sizeof small);
	cr_expect_eq(back.files[1].sum.bytes, sizeof big);
	cr_expect_eq(back.files[0].sum.xxh3, XXH3_64bits(small, sizeof small));
	cr_expect_eq(back.files[1].sum.xxh3, XXH3_64bits(big, sizeof big));
	for (int i = 0; i < 2; i++)
		cr_expect_eq(rl_ckpt_file_verify(dir, &back.files[i], err, sizeof err), 0, "%s",
		             err);

	/* the text itself: 16 lower-case hex digits */
	char *mpath = path_in(dir, "manifest.json"), hex[17];
	json_t *doc = json_load_file(mpath, 0, NULL);
	snprintf(hex, sizeof hex, "%016" PRIx64, XXH3_64bits(big, sizeof big));
	json_t *f1 = json_array_get(json_object_get(doc, "files"), 1);
	cr_expect_str_eq(json_string_value(json_object_get(f1, "xxh3_64")), hex);
	cr_expect_str_eq(json_string_value(json_object_get(doc, "format")),
	                 "slurm-rl-checkpoint-1");
	json_decref(doc);
	free(mpath);

	/* one byte flipped: same size, other sum */
	char *p1 = path_in(dir, "rank_1.safetensors");
	big[1234] ^= 0x10;
	FILE *f = fopen(p1, "r+b");
	cr_assert_not_null(f);
	cr_assert_eq(fseek(f, 1234, SEEK_SET), 0);
	cr_assert_eq(fputc(big[1234], f), big[1234]);
	cr_assert_eq(fclose(f), 0);
	cr_expect_eq(rl_ckpt_file_verify(dir, &back.files[1], err, sizeof err), -1);
	expect_contains(err, "xxh3");
	expect_contains(err, p1);
	free(p1);
	char *p0 = path_in(dir, "small.bin");
	cr_assert_eq(truncate(p0, 4), 0);
	cr_expect_eq(rl_ckpt_file_verify(dir, &back.files[0], err, sizeof err), -1);
	expect_contains(err, "bytes");
	expect_contains(err, p0);
	free(p0);
	rl_ckpt_manifest_free(&back);
	remove_tree(dir);
	free(dir);
}

Test(ckpt_manifest, bad_manifests_are_refused)
{
	char *dir = tmp_dir();
	struct rl_ckpt_manifest m;
#define HEAD "{\"format\":\"slurm-rl-checkpoint-1\",\"step\":3,\"world_size\":2,\"files\":["
#define A    "{\"name\":\"a.bin\",\"bytes\":5,\"xxh3_64\":\"00000000000000ff\"}"
	static const char *const bad[] = {
	    HEAD "{\"name\":\"../x\",\"bytes\":5,\"xxh3_64\":\"00000000000000ff\"}]}",
	    HEAD "{\"name\":\"..\",\"bytes\":5,\"xxh3_64\":\"00000000000000ff\"}]}",
	    HEAD A "," A "]}",
	    "{\"format\":\"slurm-rl-checkpoint-0\",\"step\":3,\"world_size\":2,\"files\":[" A "]}",
	    "{\"step\":3,\"world_size\":2,\"files\":[" A "]}",
	    "{\"format\":\"slurm-rl-checkpoint-1\",\"step\":-1,\"world_size\":2,\"files\":[" A "]}",
	    HEAD "]}",
	    HEAD "{\"name\":\"a.bin\",\"bytes\":5,\"xxh3_64\":\"ff\"}]}",
	    "not json",
	};

	free(write_file(dir, "manifest.json", HEAD A "]}"));
	cr_assert_eq(rl_ckpt_manifest_read(dir, &m, err, sizeof err), 0, "%s", err);
	cr_expect_eq(m.step, 3);
	cr_expect_eq(m.world_size, 2);
	cr_assert_eq(m.n_files, 1);
	cr_expect_eq(m.files[0].sum.bytes, 5);
	cr_expect_eq(m.files[0].sum.xxh3, 0xff);
	rl_ckpt_manifest_free(&m);
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		free(write_file(dir, "manifest.json", bad[i]));
		err[0] = '\0';
		cr_expect_eq(rl_ckpt_manifest_read(dir, &m, err, sizeof err), -1, "accepted: %s",
		             bad[i]);
		expect_contains(err, "manifest.json");
		cr_expect_null(m.files);
	}
	free(write_file(dir, "manifest.json", bad[2]));
	cr_assert_eq(rl_ckpt_manifest_read(dir, &m, err, sizeof err), -1);
	expect_contains(err, "a.bin");
#undef HEAD
#undef A
	remove_tree(dir);
	free(dir);
}

/* ---- the checkpoint directory ---- */

static char *read_all(const char *dir, const char *name)
{
	char *path = path_in(dir, name);
	size_t len;
	char *text = slurp(path, &len);
	free(path);
	return text;
}

/* ROOT/tmp_step_N with one file NAME and a manifest naming it. */
static void stage(const char *root, int64_t step, const char *name)
{
	char tmp[512];
	struct rl_ckpt_file f;
	struct rl_ckpt_manifest m = {.step = step, .world_size = 1, .files = &f, .n_files = 1};

	snprintf(tmp, sizeof tmp, "%s/tmp_step_%" PRId64, root, step);
	snprintf(f.name, sizeof f.name, "%s", name);
	cr_assert_eq(rl_ckpt_begin(root, step, err, sizeof err), 0, "%s", err);
	cr_assert(exists(root, strrchr(tmp, '/') + 1));
	cr_assert_eq(rl_ckpt_write_file(tmp, name, name, strlen(name), &f.sum, err, sizeof err), 0,
	             "%s", err);
	cr_assert_eq(rl_ckpt_manifest_write(tmp, &m, err, sizeof err), 0, "%s", err);
}

static void make_dir(const char *root, const char *name, bool manifest)
{
	char *p = path_in(root, name);
	cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
	free(write_file(p, manifest ? "manifest.json" : "notes.txt", "{}"));
	free(p);
}

Test(ckpt_store, commit_scan_and_leftovers)
{
	char *top = tmp_dir(), *root = path_in(top, "runs/ckpt"), *text;
	struct rl_ckpt_listing l;
	char buf[64];

	cr_assert_eq(rl_ckpt_scan(root, &l, err, sizeof err), 0, "%s", err);
	cr_expect_eq(l.n, 0);
	cr_expect_eq(l.n_leftovers, 0);
	rl_ckpt_listing_free(&l);
	cr_assert_eq(rl_ckpt_path(buf, sizeof buf, "/r", 12, false, err, sizeof err), 0);
	cr_expect_str_eq(buf, "/r/step_12");
	cr_assert_eq(rl_ckpt_path(buf, sizeof buf, "/r", 12, true, err, sizeof err), 0);
	cr_expect_str_eq(buf, "/r/tmp_step_12");
	cr_expect_eq(rl_ckpt_path(buf, 8, "/r", 12, true, err, sizeof err), -1);

	stage(root, 5, "a.bin");
	cr_assert_eq(rl_ckpt_commit(root, 5, err, sizeof err), 0, "%s", err);
	cr_expect(exists(root, "step_5/a.bin"));
	cr_expect(exists(root, "step_5/manifest.json"));
	cr_expect(!exists(root, "tmp_step_5"));
	cr_expect_str_eq(text = read_all(root, "latest"), "step_5\n");
	free(text);
	/* the same step again replaces it whole */
	stage(root, 5, "b.bin");
	cr_assert_eq(rl_ckpt_commit(root, 5, err, sizeof err), 0, "%s", err);
	cr_expect(exists(root, "step_5/b.bin"));
	cr_expect(!exists(root, "step_5/a.bin"));
	cr_expect(!exists(root, "tmp_step_5"));
	cr_expect(!exists(root, "removing_step_5"));
	cr_expect_str_eq(text = read_all(root, "latest"), "step_5\n");
	free(text);
	stage(root, 100, "c.bin");
	cr_assert_eq(rl_ckpt_commit(root, 100, err, sizeof err), 0, "%s", err);
	cr_expect_str_eq(text = read_all(root, "latest"), "step_100\n");
	free(text);

	make_dir(root, "step_10", true);
	make_dir(root, "step_2", true);
	make_dir(root, "step_7", false); /* no manifest: not a checkpoint */
	make_dir(root, "step_01", true);
	make_dir(root, "step_x", true);
	make_dir(root, "step_", true);
	make_dir(root, "tmp_step_3", false);
	make_dir(root, "removing_step_2", true);
	cr_assert_eq(rl_ckpt_scan(root, &l, err, sizeof err), 0, "%s", err);
	cr_assert_eq(l.n, 4);
	static const int64_t want[] = {2, 5, 10, 100};
	for (int i = 0; i < 4; i++)
		cr_expect_eq(l.steps[i], want[i], "steps[%d]", i);
	cr_assert_eq(l.n_leftovers, 2);
	bool tmp3 = false, rm2 = false;
	for (int i = 0; i < 2; i++) {
		tmp3 |= strcmp(l.leftovers[i], "tmp_step_3") == 0;
		rm2 |= strcmp(l.leftovers[i], "removing_step_2") == 0;
	}
	cr_expect(tmp3 && rm2, "leftovers %s, %s", l.leftovers[0], l.leftovers[1]);
	rl_ckpt_listing_free(&l);

	cr_assert_eq(rl_ckpt_clean_leftovers(root, err, sizeof err), 0, "%s", err);
	cr_expect(!exists(root, "tmp_step_3"));
	cr_expect(!exists(root, "removing_step_2"));
	static const char *const kept[] = {"step_2",  "step_5", "step_7", "step_10", "step_100",
	                                   "step_01", "step_x", "step_",  "latest"};
	for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
		cr_expect(exists(root, kept[i]), "%s removed", kept[i]);
	cr_expect(exists(root, "step_7/notes.txt"));

	cr_assert_eq(rl_ckpt_remove(root, "step_2", err, sizeof err), 0, "%s", err);
	cr_expect(!exists(root, "step_2"));
	cr_expect(!exists(root, "removing_step_2"));
	free(root);
	remove_tree(top);
	free(top);
}

/* ---- retention ---- */

struct retain_case {
	const char *what;
	int n, k;
	bool by_metric, higher;
	struct rl_ckpt_rank c[6];
	bool remove[6];
};

/* clang-format off */
#define M(step, v)  {step, true, v}
#define NO(step, v) {step, false, v} /* v would win if it counted */
#define BY_STEP(s)  {s, false, 0}
static const struct retain_case retain_cases[] = {
	{"newest two, steps unordered", 5, 2, false, false,
	 {BY_STEP(3), BY_STEP(1), BY_STEP(4), BY_STEP(10), BY_STEP(5)},
	 {true, true, true, false, false}},
	{"higher is better", 5, 2, true, true,
	 {M(1, 0.5), M(2, 0.9), M(3, 0.1), M(4, 0.7), M(5, 0.2)},
	 {true, false, true, false, false}},
	{"lower is better", 5, 2, true, false,
	 {M(1, 0.5), M(2, 0.9), M(3, 0.1), M(4, 0.7), M(5, 0.2)},
	 {true, true, false, true, false}},
	{"the newest stays though worst: k + 1 remain", 4, 2, true, true,
	 {M(1, 0.4), M(2, 0.3), M(3, 0.2), M(4, 0.1)},
	 {false, false, true, false}},
	{"without the metric ranks last", 5, 3, true, true,
	 {NO(1, 9.0), M(2, 0.1), M(3, 0.3), NO(4, 9.0), M(5, 0.2)},
	 {true, false, false, true, false}},
	{"without the metric ranks last, lower is better", 5, 1, true, false,
	 {NO(1, -9.0), M(2, 0.1), M(3, 0.3), NO(4, -9.0), M(5, 0.2)},
	 {true, false, true, true, false}},
	{"the only one with the metric beats newer ones", 3, 1, true, true,
	 {M(1, 0.5), NO(2, 9.0), NO(3, 9.0)}, {false, true, false}},
	{"among those without the metric, the newer first", 4, 3, true, true,
	 {M(1, 0.5), NO(2, 9.0), NO(3, 1.0), M(4, 0.1)}, {false, true, false, false}},
	{"ties go to the newer", 4, 2, true, true,
	 {M(3, 0.5), M(1, 0.5), M(4, 0.5), M(2, 0.5)},
	 {false, true, false, true}},
	{"keep_top_k 0 keeps all", 3, 0, false, false,
	 {BY_STEP(1), BY_STEP(2), BY_STEP(3)}, {false, false, false}},
	{"keep_top_k -1 keeps all", 3, -1, true, true,
	 {M(1, 0.1), M(2, 0.2), M(3, 0.3)}, {false, false, false}},
	{"n == k keeps all", 3, 3, true, true,
	 {M(1, 0.1), M(2, 0.2), M(3, 0.3)}, {false, false, false}},
	{"n < k keeps all", 2, 5, false, false, {BY_STEP(1), BY_STEP(2)}, {false, false}},
};
/* clang-format on */

Test(ckpt_retain, removals_match_hand_tables)
{
	for (size_t i = 0; i < sizeof retain_cases / sizeof *retain_cases; i++) {
		const struct retain_case *rc = &retain_cases[i];
		bool remove[6] = {true, true, true, true, true, true}; /* each entry is written */

		rl_ckpt_choose_removals(rc->c, rc->n, rc->k, rc->by_metric, rc->higher, remove);
		for (int j = 0; j < rc->n; j++)
			cr_expect_eq(remove[j], rc->remove[j], "%s: step %" PRId64 " %s", rc->what,
			             rc->c[j].step, remove[j] ? "removed" : "kept");
	}
}

static void retain_by(const char *metric_name)
{
	char *root = tmp_dir();
	static const double reward[] = {0.9, 0.1, NAN, 0.2}; /* steps 1-4; step 3 has none */

	for (int i = 0; i < 4; i++) {
		char name[32];
		struct rl_ckpt_run_state s = {.step = i + 1};
		snprintf(name, sizeof name, "step_%d", i + 1);
		make_dir(root, name, true);
		if (!isnan(reward[i]))
			s.metrics = json_pack("{s:f}", "reward", reward[i]);
		char *text = rl_ckpt_run_state_json(&s), *dir = path_in(root, name);
		free(write_file(dir, RL_CKPT_RUN_STATE, text));
		json_decref(s.metrics);
		free(text);
		free(dir);
	}
	cr_assert_eq(rl_ckpt_retain(root, 1, metric_name, true, err, sizeof err), 0, "%s", err);
	cr_expect(exists(root, "step_1"), "%s: the best was removed", metric_name);
	cr_expect(!exists(root, "step_2"));
	cr_expect(!exists(root, "step_3"));
	cr_expect(exists(root, "step_4"), "the newest was removed");
	remove_tree(root);
	free(root);
}

Test(ckpt_retain, retain_reads_the_metric_from_run_state)
{
	retain_by("reward");
}

/* NeMo-RL's spelling of checkpointing.metric_name: "val:" or "train:",
 * then the name in the step's line */
Test(ckpt_retain, nemo_rl_prefixes_name_the_same_metric)
{
	retain_by("val:reward");
	retain_by("train:reward");
}

/* ---- run state ---- */

Test(ckpt_run_state, roundtrip_every_field)
{
	/* each field its own value; the seed and the reference sum use the top bit */
	struct rl_ckpt_run_state s = {.model_signature = "LlamaForCausalLM x"}, b;

	s.step = 11, s.optimizer_steps = 22, s.consumed_samples = 33;
	s.seed = 0xF000000000000001ull, s.reference_xxh3 = 0xFEDCBA9876543210ull;
	s.data_epoch = 44, s.data_position = 55, s.data_examples = 66, s.data_next_problem = 77;
	s.world_size = 210, s.tensor = 2, s.pipeline = 3, s.context = 5, s.data = 7;
	s.slurm_job_id = 123456789, s.restart_count = 4;
	s.metrics = json_pack("{s:f,s:i}", "reward", 0.25, "tokens", 1000);
	char *text = rl_ckpt_run_state_json(&s);
	cr_assert_not_null(text);
	cr_assert_eq(
	    rl_ckpt_run_state_parse(&b, text, strlen(text), "/x/run_state.json", err, sizeof err),
	    0, "%s", err);
	cr_expect_eq(b.step, 11);
	cr_expect_eq(b.optimizer_steps, 22);
	cr_expect_eq(b.consumed_samples, 33);
	cr_expect_eq(b.seed, 0xF000000000000001ull);
	cr_expect_eq(b.data_epoch, 44);
	cr_expect_eq(b.data_position, 55);
	cr_expect_eq(b.data_examples, 66);
	cr_expect_eq(b.data_next_problem, 77);
	cr_expect_str_eq(b.model_signature, "LlamaForCausalLM x");
	cr_expect_eq(b.reference_xxh3, 0xFEDCBA9876543210ull);
	cr_expect_eq(b.world_size, 210);
	cr_expect_eq(b.tensor, 2);
	cr_expect_eq(b.pipeline, 3);
	cr_expect_eq(b.context, 5);
	cr_expect_eq(b.data, 7);
	cr_expect_eq(b.slurm_job_id, 123456789);
	cr_expect_eq(b.restart_count, 4);
	cr_expect(json_equal(b.metrics, s.metrics));
	json_decref(b.metrics);

	/* the text as rlrun(1) readers see it */
	json_t *o = json_loads(text, 0, NULL);
	cr_expect_str_eq(
	    json_string_value(json_object_get(json_object_get(o, "model"), "reference_xxh3_64")),
	    "fedcba9876543210");
	cr_expect_eq(json_integer_value(json_object_get(o, "step")), 11);

	/* a missing or negative counter is named */
	static const struct {
		const char *a, *b, *named;
		json_int_t v; /* 0: removed */
	} bad[] = {{"step", NULL, ": step is", 0},
	           {"step", NULL, ": step is", -1},
	           {"data", "epoch", "data.epoch", -3},
	           {"optimizer_steps", NULL, "optimizer_steps", 0}};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		json_t *c = json_deep_copy(o), *at = bad[i].b ? json_object_get(c, bad[i].a) : c;
		const char *key = bad[i].b ? bad[i].b : bad[i].a;
		if (bad[i].v)
			json_object_set_new(at, key, json_integer(bad[i].v));
		else
			json_object_del(at, key);
		char *t = json_dumps(c, 0);
		err[0] = '\0';
		cr_expect_eq(
		    rl_ckpt_run_state_parse(&b, t, strlen(t), "/x/run_state.json", err, sizeof err),
		    -1, "accepted %s", t);
		expect_contains(err, bad[i].named);
		expect_contains(err, "/x/run_state.json");
		free(t);
		json_decref(c);
	}
	json_decref(o);
	json_decref(s.metrics);
	free(text);
}

Test(ckpt_run_state, model_signature_sees_each_field)
{
	struct rl_model_config base = {0}, c[6];
	char a[512], b[512];

	snprintf(base.architecture, sizeof base.architecture, "LlamaForCausalLM");
	base.n_layers = 2;
	base.vocab_size = 32;
	base.hidden_size = 16;
	base.n_heads = 2;
	base.rope_theta = 10000.0;
	base.rms_norm_eps = 1e-5;
	rl_ckpt_model_signature(&base, a, sizeof a);
	c[0] = base;
	rl_ckpt_model_signature(&c[0], b, sizeof b);
	cr_expect_str_eq(a, b);
	for (int i = 0; i < 6; i++)
		c[i] = base;
	snprintf(c[0].architecture, sizeof c[0].architecture, "Qwen2ForCausalLM");
	c[1].n_layers = 3;
	c[2].vocab_size = 33;
	c[3].tie_word_embeddings = true;
	c[4].rope_theta = 500000.0;
	c[5].rope_theta = nextafter(10000.0, 1e9); /* one ulp */
	for (int i = 0; i < 6; i++) {
		rl_ckpt_model_signature(&c[i], b, sizeof b);
		cr_expect_str_neq(a, b, "change %d not seen: %s", i, b);
	}
}

/* rl_ckpt_shard_write: two pieces with the same key in one file must be
 * refused; today the second silently replaces the first in the header (the
 * first one's floats stay in the file, unreachable). */
Test(ckpt_shard, one_key_twice_in_a_file_is_refused)
{
	char *dir = tmp_dir(), *path = path_in(dir, "dup.safetensors");
	struct written w = {0};
	struct rl_ckpt_file_sum sum;

	add_block(&w, 0, 0, RL_CKPT_WEIGHT, 0, 0, 4, 5);
	add_block(&w, 0, 0, RL_CKPT_WEIGHT, 4, 0, 3, 5); /* same key: weight/<name> */
	cr_expect_eq(rl_ckpt_shard_write(path, w.p[0], 2, &sum, err, sizeof err), -1,
	             "two pieces named %s/%s written to one file", "weight", tensors[0].name);
	free_written(&w);
	free(path);
	remove_tree(dir);
	free(dir);
}

/* rl_ckpt_fill counts copied elements only: a duplicated run and a missing
 * run of the same length cancel out, and the block is returned with holes. */
Test(ckpt_reshard, a_duplicate_does_not_hide_a_gap)
{
	char *dir = tmp_dir();
	struct written w = {0};
	struct rl_ckpt_shard s[N_FILES];
	struct rl_ckpt_index ix;
	float dst[35];

	add_run(&w, 0, 0, RL_CKPT_WEIGHT, 0, 0, 4, 5, 0, 7);
	add_run(&w, 1, 0, RL_CKPT_WEIGHT, 0, 0, 4, 5, 0, 6);  /* [0,6) twice */
	add_run(&w, 2, 0, RL_CKPT_WEIGHT, 0, 0, 4, 5, 13, 7); /* [7,13) never */
	add_block(&w, 2, 0, RL_CKPT_WEIGHT, 4, 0, 3, 5);
	write_files(dir, &w);
	open_all(dir, s, &ix);
	struct rl_ckpt_block whole = block_of(0, 0, 0, 7, 5);
	cr_expect_eq(rl_ckpt_fill(&ix, RL_CKPT_WEIGHT, &whole, dst, err, sizeof err), -1,
	             "a block with 6 values missing was filled");
	close_all(s, &ix);
	free_written(&w);
	remove_tree(dir);
	free(dir);
}
