/* safetensors: files written by the Python safetensors / transformers
 * libraries (tests/fixtures/fixture_safetensors.py) read to the values torch
 * reads; our writer reproduces their files byte for byte; and broken files,
 * made here, fail with the file and the tensor named, never with a crash. */
#define _GNU_SOURCE
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "runtime/model/safetensors.h"
#include "tests/unit/gradcheck.h"
#include "tests/unit/helpers.h"

static char err[1024];

static char *fixture(const char *name)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *p = NULL;

	cr_assert_geq(asprintf(&p, "%s/tests/fixtures/safetensors/%s", top, name), 0);
	return p;
}

static char *join(const char *dir, const char *name)
{
	char *p = NULL;
	cr_assert_geq(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

static void spill(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f, "cannot write %s", path);
	cr_assert_eq(fwrite(p, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

static json_t *load_json(const char *name)
{
	char *p = fixture(name);
	json_error_t e;
	json_t *j = json_load_file(p, 0, &e);
	cr_assert_not_null(j, "%s: %s", p, e.text);
	free(p);
	return j;
}

#define expect_contains(text, needle)                                                              \
	cr_expect(strstr((text), (needle)) != NULL, "missing \"%s\" in:\n%s", (needle), (text))

static int64_t numel(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	for (int d = 0; d < ndim; d++)
		n *= shape[d];
	return n;
}

static void shape_from_json(json_t *j, int *ndim, int64_t *shape)
{
	*ndim = (int)json_array_size(j);
	for (int d = 0; d < *ndim; d++)
		shape[d] = json_integer_value(json_array_get(j, (size_t)d));
}

/* ---- reading what Python wrote ---- */

Test(safetensors, reads_python_files_to_torch_values)
{
	static const char *const files[] = {"read_f32.safetensors", "read_bf16.safetensors",
	                                    "read_f16.safetensors"};
	static const enum rl_dtype types[] = {RL_F32, RL_BF16, RL_F16};
	json_t *want = load_json("read_expected.json");

	for (int f = 0; f < 3; f++) {
		char *path = fixture(files[f]);
		struct rl_st_archive *a;
		json_t *tensors = json_object_get(want, files[f]), *e;
		const char *name;

		cr_assert_eq(rl_st_open(&a, path, err, sizeof err), 0, "%s", err);
		cr_expect_eq(rl_st_count(a), (int)json_object_size(tensors));
		json_object_foreach(tensors, name, e)
		{
			const struct rl_st_tensor *t = rl_st_find(a, name);
			int64_t shape[RL_ST_MAX_DIMS];
			int ndim;

			cr_assert_not_null(t, "%s: %s", files[f], name);
			cr_expect_eq(t->dtype, types[f]);
			cr_expect_str_eq(t->file, path);
			shape_from_json(json_object_get(e, "shape"), &ndim, shape);
			cr_assert_eq(t->ndim, ndim, "%s", name);
			int64_t n = numel(ndim, shape);
			cr_expect_eq(t->nbytes, (size_t)n * rl_dtype_size(types[f]));
			float *got = malloc((size_t)(n + 1) * sizeof *got);
			cr_assert_eq(rl_st_read_f32(a, name, got, ndim, shape, err, sizeof err), 0,
			             "%s", err);
			json_t *vals = json_object_get(e, "values");
			cr_assert_eq((int64_t)json_array_size(vals), n);
			for (int64_t i = 0; i < n; i++) {
				float w = (float)json_number_value(json_array_get(vals, (size_t)i));
				cr_expect(got[i] == w, "%s %s[%jd]: got %.9g, torch read %.9g",
				          files[f], name, (intmax_t)i, got[i], w);
			}
			free(got);
		}
		/* rl_st_at walks every tensor once, in name order. */
		for (int i = 1; i < rl_st_count(a); i++)
			cr_expect_lt(strcmp(rl_st_at(a, i - 1)->name, rl_st_at(a, i)->name), 0);
		cr_expect_null(rl_st_at(a, rl_st_count(a)));
		rl_st_close(a);
		free(path);
	}
	json_decref(want);
}

/* The generator's formula, independently of torch: value i of tensor k is
 * sin(0.1 i + k), within the dtype's rounding. */
Test(safetensors, values_follow_the_formula)
{
	static const char *const files[] = {"read_f32.safetensors", "read_bf16.safetensors",
	                                    "read_f16.safetensors"};
	static const double tol[] = {1e-7, 1.0 / 256, 1.0 / 2048};
	char *path;
	struct rl_st_archive *a;

	for (int f = 0; f < 3; f++) {
		path = fixture(files[f]);
		cr_assert_eq(rl_st_open(&a, path, err, sizeof err), 0, "%s", err);
		float cube[30];
		const int64_t shape[] = {2, 3, 5};
		cr_assert_eq(rl_st_read_f32(a, "cube", cube, 3, shape, err, sizeof err), 0, "%s",
		             err);
		for (int i = 0; i < 30; i++) /* cube is tensor 3 */
			cr_expect(fabs(cube[i] - sin(0.1 * i + 3)) <= tol[f], "%s cube[%d] = %g",
			          files[f], i, cube[i]);
		float s;
		cr_assert_eq(rl_st_read_f32(a, "scalar", &s, 0, NULL, err, sizeof err), 0, "%s",
		             err);
		cr_expect(fabs(s - sin(4.0)) <= tol[f]);
		const int64_t empty[] = {0, 4};
		cr_expect_eq(rl_st_read_f32(a, "empty", NULL, 2, empty, err, sizeof err), 0, "%s",
		             err);
		rl_st_close(a);
		free(path);
	}
}

Test(safetensors, shape_mismatch_and_missing_messages)
{
	char *path = fixture("read_bf16.safetensors"), want[2048];
	struct rl_st_archive *a;
	float buf[64];
	const int64_t shape[] = {128, 64};

	cr_assert_eq(rl_st_open(&a, path, err, sizeof err), 0, "%s", err);
	cr_expect_eq(
	    rl_st_read_f32(a, "model.layers.0.mlp.up_proj.weight", buf, 2, shape, err, sizeof err),
	    -1);
	snprintf(want, sizeof want,
	         "%s: tensor model.layers.0.mlp.up_proj.weight: shape [6, 4], expected [128, 64]",
	         path);
	cr_expect_str_eq(err, want);
	cr_expect_eq(rl_st_read_f32(a, "model.norm.weight", buf, 1, shape, err, sizeof err), -1);
	snprintf(want, sizeof want, "%s: tensor model.norm.weight: shape [4], expected [128]",
	         path);
	cr_expect_str_eq(err, want);
	cr_expect_eq(rl_st_read_f32(a, "lm_head.weight", buf, 2, shape, err, sizeof err), -1);
	snprintf(want, sizeof want, "%s: tensor lm_head.weight not found", path);
	cr_expect_str_eq(err, want);
	cr_expect_null(rl_st_find(a, "lm_head.weight"));
	rl_st_close(a);
	free(path);
}

Test(safetensors, reads_transformers_shards)
{
	char *dir = fixture("sharded");
	json_t *want = load_json("sharded_expected.json"), *tensors, *e;
	struct rl_st_archive *a;
	const char *name;

	tensors = json_object_get(want, "tensors");
	cr_assert_eq(rl_st_open_dir(&a, dir, err, sizeof err), 0, "%s", err);
	cr_expect_eq(rl_st_count(a), (int)json_object_size(tensors));
	json_object_foreach(tensors, name, e)
	{
		const struct rl_st_tensor *t = rl_st_find(a, name);
		int64_t shape[RL_ST_MAX_DIMS];
		int ndim;

		cr_assert_not_null(t, "%s", name);
		cr_expect_eq(t->dtype, RL_BF16);
		cr_expect_str_eq(strrchr(t->file, '/') + 1,
		                 json_string_value(json_object_get(e, "file")));
		shape_from_json(json_object_get(e, "shape"), &ndim, shape);
		int64_t n = numel(ndim, shape);
		float *v = malloc((size_t)n * sizeof *v);
		cr_assert_eq(rl_st_read_f32(a, name, v, ndim, shape, err, sizeof err), 0, "%s",
		             err);
		double sum = 0, want_sum = json_number_value(json_object_get(e, "sum"));
		for (int64_t i = 0; i < n; i++)
			sum += v[i];
		cr_expect(fabs(sum - want_sum) <= 1e-9 * (1 + fabs(want_sum)),
		          "%s: sum %.17g, %.17g", name, sum, want_sum);
		for (int i = 0; i < 4 && i < n; i++)
			cr_expect(v[i] == (float)json_number_value(json_array_get(
			                      json_object_get(e, "first"), (size_t)i)),
			          "%s[%d]", name, i);
		free(v);
	}
	float v[64 * 32];
	const int64_t up[] = {128, 64};
	cr_expect_eq(
	    rl_st_read_f32(a, "model.layers.0.mlp.up_proj.weight", v, 2, up, err, sizeof err), -1);
	char msg[2048];
	snprintf(msg, sizeof msg,
	         "%s/model-00005-of-00007.safetensors: tensor model.layers.0.mlp.up_proj.weight: "
	         "shape [64, 32], expected [128, 64]",
	         dir);
	cr_expect_str_eq(err, msg);
	cr_expect_eq(rl_st_read_f32(a, "X", v, 1, up, err, sizeof err), -1);
	snprintf(msg, sizeof msg, "%s: tensor X not found", dir);
	cr_expect_str_eq(err, msg);
	rl_st_close(a);
	json_decref(want);
	free(dir);
}

/* ---- writing what Python writes ---- */

/* fixture_safetensors.py's exact_values(): integers over a power of two. */
static float *exact_values(int64_t n, int seed, double scale)
{
	float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
	cr_assert_not_null(v);
	for (int64_t i = 0; i < n; i++)
		v[i] = (float)((double)(((i * 7919 + seed) % 65536) - 32768) * scale);
	return v;
}

static const struct {
	const char *name;
	enum rl_dtype dtype;
	int ndim;
	int64_t shape[3];
	int seed;
	double scale;
} WRITE_REF[] = {
    {"b.weight", RL_BF16, 2, {16, 8}, 1, 0x1p-10},
    {"a.weight", RL_BF16, 1, {5}, 2, 0x1p-10},
    {"h.normal", RL_F16, 2, {4, 16}, 3, 0x1p-10},
    {"h.subnormal", RL_F16, 1, {32}, 4, 0x1p-30},
    {"h.overflow", RL_F16, 1, {8}, 5, 0x1p2},
    {"f.weight", RL_F32, 2, {3, 7}, 6, 0x1p-12},
    {"f.scalar", RL_F32, 0, {0}, 7, 0x1p-3},
    {"f.empty", RL_BF16, 2, {0, 3}, 8, 1.0},
    {"odd \"name\"\\\t/\xc3\xa9", RL_F32, 1, {2}, 9, 1.0},
};
#define N_WRITE_REF (int)(sizeof WRITE_REF / sizeof WRITE_REF[0])

static void expect_same_file(const char *got_path, const char *want_path)
{
	size_t ng, nw;
	unsigned char *g = slurp(got_path, &ng), *w = slurp(want_path, &nw);

	cr_expect_eq(ng, nw, "%s: %zu bytes, %s: %zu", got_path, ng, want_path, nw);
	size_t i = 0;
	while (i < ng && i < nw && g[i] == w[i])
		i++;
	cr_expect(i == ng && i == nw, "%s differs from %s at byte %zu", got_path, want_path, i);
	free(g);
	free(w);
}

Test(safetensors, writer_reproduces_safetensors_save_file)
{
	struct rl_st_source src[N_WRITE_REF];
	char *dir = tmp_dir(), *out = join(dir, "w.safetensors"),
	     *want = fixture("write_ref.safetensors");

	for (int i = 0; i < N_WRITE_REF; i++) {
		src[i] = (struct rl_st_source){.name = WRITE_REF[i].name,
		                               .dtype = WRITE_REF[i].dtype,
		                               .ndim = WRITE_REF[i].ndim};
		memcpy(src[i].shape, WRITE_REF[i].shape, sizeof WRITE_REF[i].shape);
		src[i].data = exact_values(numel(src[i].ndim, src[i].shape), WRITE_REF[i].seed,
		                           WRITE_REF[i].scale);
	}
	cr_assert_eq(rl_st_write(out, src, N_WRITE_REF, err, sizeof err), 0, "%s", err);
	expect_same_file(out, want);
	char *tmp = join(dir, "w.safetensors.tmp");
	cr_expect_neq(access(tmp, F_OK), 0, "PATH.tmp left behind");
	for (int i = 0; i < N_WRITE_REF; i++)
		free((float *)src[i].data);
	free(tmp);
	free(want);
	free(out);
	remove_tree(dir);
	free(dir);
}

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The shards, their split and the index as transformers' save_pretrained
 * wrote them, from the same tensors in the same order. */
Test(safetensors, write_dir_reproduces_save_pretrained_shards)
{
	char *fx = fixture("sharded"), *dir = tmp_dir();
	json_t *want = load_json("sharded_expected.json");
	json_t *order = json_object_get(want, "order");
	int n = (int)json_array_size(order);
	struct rl_st_source *src = calloc((size_t)n, sizeof *src);
	struct rl_st_archive *a;

	cr_assert_eq(rl_st_open_dir(&a, fx, err, sizeof err), 0, "%s", err);
	for (int i = 0; i < n; i++) {
		const char *name = json_string_value(json_array_get(order, (size_t)i));
		const struct rl_st_tensor *t = rl_st_find(a, name);
		float *v;

		cr_assert_not_null(t, "%s", name);
		src[i] = (struct rl_st_source){.name = name, .dtype = RL_BF16, .ndim = t->ndim};
		memcpy(src[i].shape, t->shape, sizeof t->shape);
		v = malloc((size_t)numel(t->ndim, t->shape) * sizeof *v);
		cr_assert_eq(rl_st_read_f32(a, name, v, t->ndim, t->shape, err, sizeof err), 0);
		src[i].data = v;
	}
	size_t max = (size_t)json_integer_value(json_object_get(want, "max_shard_bytes"));
	cr_assert_eq(rl_st_write_dir(dir, src, n, max, err, sizeof err), 0, "%s", err);
	static const char *const files[] = {
	    "model-00001-of-00007.safetensors", "model-00002-of-00007.safetensors",
	    "model-00003-of-00007.safetensors", "model-00004-of-00007.safetensors",
	    "model-00005-of-00007.safetensors", "model-00006-of-00007.safetensors",
	    "model-00007-of-00007.safetensors", "model.safetensors.index.json"};
	for (int i = 0; i < 8; i++) {
		char *g = join(dir, files[i]), *w = join(fx, files[i]);
		expect_same_file(g, w);
		free(g);
		free(w);
	}
	cr_expect_eq(count_files(dir), 8);

	/* Saved again as one file: the shards and the index must go, or
	 * a reader could pick up the stale set. */
	cr_assert_eq(rl_st_write_dir(dir, src, n, 0, err, sizeof err), 0, "%s", err);
	cr_expect_eq(count_files(dir), 1);
	struct rl_st_archive *b;
	cr_assert_eq(rl_st_open_dir(&b, dir, err, sizeof err), 0, "%s", err);
	cr_expect_eq(rl_st_count(b), n);
	for (int i = 0; i < n; i++) {
		const struct rl_st_tensor *t = rl_st_find(b, src[i].name);
		cr_assert_not_null(t);
		cr_expect_eq(t->nbytes, rl_st_find(a, src[i].name)->nbytes);
		cr_expect_eq(memcmp(t->data, rl_st_find(a, src[i].name)->data, t->nbytes), 0, "%s",
		             src[i].name);
	}
	rl_st_close(b);
	/* And sharded again, now over a single file: that one must go. */
	cr_assert_eq(rl_st_write_dir(dir, src, n, 20000, err, sizeof err), 0, "%s", err);
	char *single = join(dir, "model.safetensors");
	cr_expect_neq(access(single, F_OK), 0);
	cr_assert_eq(rl_st_open_dir(&b, dir, err, sizeof err), 0, "%s", err);
	cr_expect_eq(rl_st_count(b), n);
	rl_st_close(b);
	free(single);

	for (int i = 0; i < n; i++)
		free((float *)src[i].data);
	free(src);
	rl_st_close(a);
	json_decref(want);
	remove_tree(dir);
	free(dir);
	free(fx);
}

Test(safetensors, round_trip_all_dtypes)
{
	char *dir = tmp_dir(), *path = join(dir, "rt.safetensors");
	uint32_t seed = 12345;
	enum { N = 1000 };
	float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
	const int64_t shape[] = {10, 100};

	for (int i = 0; i < N; i++)
		x[i] = ((float)(gc_rng(&seed) >> 8) / 16777216.0f - 0.5f) * 8.0f;
	struct rl_st_source src[] = {
	    {.name = "x.f32", .dtype = RL_F32, .ndim = 2, .shape = {10, 100}, .data = x},
	    {.name = "x.bf16", .dtype = RL_BF16, .ndim = 2, .shape = {10, 100}, .data = x},
	    {.name = "x.f16", .dtype = RL_F16, .ndim = 2, .shape = {10, 100}, .data = x},
	};
	cr_assert_eq(rl_st_write(path, src, 3, err, sizeof err), 0, "%s", err);
	struct rl_st_archive *a;
	cr_assert_eq(rl_st_open(&a, path, err, sizeof err), 0, "%s", err);
	/* Rounding to nearest: half a unit in the last place, 2^-8 (bf16, 7
	 * stored mantissa bits) and 2^-11 (f16, 10) relative. */
	static const char *const names[] = {"x.f32", "x.bf16", "x.f16"};
	static const double rel[] = {0, 1.0 / 256, 1.0 / 2048};
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(rl_st_read_f32(a, names[k], y, 2, shape, err, sizeof err), 0, "%s",
		             err);
		for (int i = 0; i < N; i++)
			cr_expect(fabsf(y[i] - x[i]) <= rel[k] * fabsf(x[i]) + 1e-7,
			          "%s[%d]: %g vs %g", names[k], i, y[i], x[i]);
	}
	/* Values already in bf16 survive a second trip unchanged. */
	cr_assert_eq(rl_st_read_f32(a, "x.bf16", y, 2, shape, err, sizeof err), 0);
	rl_st_close(a);
	struct rl_st_source again = {
	    .name = "y", .dtype = RL_BF16, .ndim = 2, .shape = {10, 100}, .data = y};
	cr_assert_eq(rl_st_write(path, &again, 1, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_st_open(&a, path, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_st_read_f32(a, "y", x, 2, shape, err, sizeof err), 0);
	cr_expect_eq(memcmp(x, y, N * sizeof *x), 0);
	rl_st_close(a);
	free(x);
	free(y);
	free(path);
	remove_tree(dir);
	free(dir);
}

Test(safetensors, writer_refuses_bad_sources)
{
	char *dir = tmp_dir(), *path = join(dir, "bad.safetensors");
	float x[4] = {0};
	struct rl_st_source twice[] = {
	    {.name = "w", .dtype = RL_F32, .ndim = 1, .shape = {4}, .data = x},
	    {.name = "w", .dtype = RL_BF16, .ndim = 1, .shape = {4}, .data = x},
	};
	cr_expect_eq(rl_st_write(path, twice, 2, err, sizeof err), -1);
	expect_contains(err, "tensor w given twice");
	struct rl_st_source neg = {
	    .name = "n", .dtype = RL_F32, .ndim = 1, .shape = {-1}, .data = x};
	cr_expect_eq(rl_st_write(path, &neg, 1, err, sizeof err), -1);
	expect_contains(err, "tensor n: bad dimension -1");
	struct rl_st_source meta = {.name = "__metadata__", .dtype = RL_F32, .ndim = 0, .data = x};
	cr_expect_eq(rl_st_write(path, &meta, 1, err, sizeof err), -1);
	expect_contains(err, "invalid name");
	cr_expect_neq(access(path, F_OK), 0);
	cr_expect_eq(count_files(dir), 0);
	free(path);
	remove_tree(dir);
	free(dir);
}

/* ---- broken files ---- */

/* An 8-byte length (hlen, or the header's own length when 0), the header,
 * then data_len zero bytes. */
static char *make_st(const char *dir, const char *name, uint64_t hlen, const char *header,
                     size_t data_len)
{
	char *path = join(dir, name);
	size_t h = strlen(header);
	unsigned char *b = calloc(1, 8 + h + data_len);
	uint64_t n = hlen ? hlen : h;

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(n >> (8 * i));
	memcpy(b + 8, header, h);
	spill(path, b, 8 + h + data_len);
	free(b);
	return path;
}

static void expect_open_fails(const char *path, const char *needle1, const char *needle2)
{
	struct rl_st_archive *a = (struct rl_st_archive *)1;

	cr_expect_eq(rl_st_open(&a, path, err, sizeof err), -1, "%s opened", path);
	cr_expect_null(a);
	expect_contains(err, path);
	expect_contains(err, needle1);
	if (needle2)
		expect_contains(err, needle2);
}

Test(safetensors, broken_files_name_file_and_tensor)
{
	char *d = tmp_dir(), *p;

	p = join(d, "short.safetensors");
	spill(p, "\x10\0\0\0", 4);
	expect_open_fails(p, "too short", NULL);
	free(p);

	p = make_st(d, "past_eof.safetensors", 1000, "{}", 0);
	expect_open_fails(p, "header length 1000 runs past the end", NULL);
	free(p);

	p = make_st(d, "absurd.safetensors", UINT64_C(1) << 40, "{}", 0);
	expect_open_fails(p, "absurd", NULL);
	free(p);

	p = make_st(d, "garbage.safetensors", 0, "{\"a\": {\"dtype\": F32", 0);
	expect_open_fails(p, "header is not valid JSON", NULL);
	free(p);

	p = make_st(d, "array.safetensors", 0, "[1, 2]  ", 0);
	expect_open_fails(p, "header is not a JSON object", NULL);
	free(p);

	p = make_st(d, "i64.safetensors", 0,
	            "{\"idx\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16);
	expect_open_fails(p, "tensor idx: dtype I64 is not supported", NULL);
	free(p);

	p = make_st(d, "f8.safetensors", 0,
	            "{\"q\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
	expect_open_fails(p, "tensor q: dtype F8_E4M3 is not supported", NULL);
	free(p);

	p = make_st(d, "nodtype.safetensors", 0, "{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}",
	            8);
	expect_open_fails(p, "tensor w: dtype missing", NULL);
	free(p);

	p = make_st(d, "noshape.safetensors", 0,
	            "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8);
	expect_open_fails(p, "tensor w: shape missing", NULL);
	free(p);

	p = make_st(d, "nooffsets.safetensors", 0, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8);
	expect_open_fails(p, "tensor w: data_offsets missing", NULL);
	free(p);

	p = make_st(d, "negdim.safetensors", 0,
	            "{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8);
	expect_open_fails(p, "tensor w: shape[0] is not a non-negative integer", NULL);
	free(p);

	p = make_st(d, "dims.safetensors", 0,
	            "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
	            "\"data_offsets\":[0,4]}}",
	            4);
	expect_open_fails(p, "tensor w: 9 dimensions", NULL);
	free(p);

	p = make_st(d, "huge.safetensors", 0,
	            "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
	            "\"data_offsets\":[0,4]}}",
	            4);
	expect_open_fails(p, "tensor w: element count overflows", NULL);
	free(p);

	/* 2^63 BF16 elements would wrap to 0 bytes. */
	p = make_st(d, "wrap.safetensors", 0,
	            "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,4611686018427387904],"
	            "\"data_offsets\":[0,0]}}",
	            0);
	expect_open_fails(p, "tensor w: element count overflows", NULL);
	free(p);

	p = make_st(d, "size.safetensors", 0,
	            "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24);
	expect_open_fails(p, "tensor w: 6 F32 elements need 24 bytes", NULL);
	free(p);

	p = make_st(d, "reversed.safetensors", 0,
	            "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8);
	expect_open_fails(p, "tensor w: data_offsets must be", NULL);
	free(p);

	p = make_st(d, "truncated.safetensors", 0,
	            "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
	            "\"b\":{\"dtype\":\"BF16\",\"shape\":[8],\"data_offsets\":[16,32]}}",
	            20);
	expect_open_fails(p, "tensor b: data_offsets [16, 32] run past the 20 bytes", "truncated");
	free(p);

	p = make_st(d, "overlap.safetensors", 0,
	            "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
	            "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
	            12);
	expect_open_fails(p, "tensor b: data overlaps tensor a", NULL);
	free(p);

	p = make_st(d, "dupkey.safetensors", 0,
	            "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
	            "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
	            8);
	expect_open_fails(p, "duplicate", NULL);
	free(p);

	p = make_st(d, "badmeta.safetensors", 0, "{\"__metadata__\":[1]}", 0);
	expect_open_fails(p, "__metadata__ is not an object", NULL);
	free(p);

	p = join(d, "absent.safetensors");
	expect_open_fails(p, "No such file", NULL);
	free(p);

	/* A file of no tensors is valid. */
	struct rl_st_archive *a;
	static const char *const empty[] = {"{}", "{\"__metadata__\":{\"format\":\"pt\"}}"};
	for (int i = 0; i < 2; i++) {
		p = make_st(d, "empty.safetensors", 0, empty[i], 0);
		cr_expect_eq(rl_st_open(&a, p, err, sizeof err), 0, "%s", err);
		cr_expect_eq(rl_st_count(a), 0);
		cr_expect_null(rl_st_find(a, "x"));
		rl_st_close(a);
		free(p);
	}

	/* Empty tensors overlap nothing, gaps are tolerated. */
	p = make_st(d, "ok.safetensors", 0,
	            "{\"e\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[2,2]},"
	            "\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,2]},"
	            "\"b\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[4,6]}}",
	            6);
	cr_expect_eq(rl_st_open(&a, p, err, sizeof err), 0, "%s", err);
	rl_st_close(a);
	free(p);

	remove_tree(d);
	free(d);
}

static void write_text(const char *dir, const char *name, const char *text)
{
	char *p = join(dir, name);
	spill(p, text, strlen(text));
	free(p);
}

static void expect_dir_fails(const char *dir, const char *needle1, const char *needle2)
{
	struct rl_st_archive *a = (struct rl_st_archive *)1;

	cr_expect_eq(rl_st_open_dir(&a, dir, err, sizeof err), -1);
	cr_expect_null(a);
	expect_contains(err, needle1);
	if (needle2)
		expect_contains(err, needle2);
}

#define SHARD_A "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"
#define SHARD_B "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"

Test(safetensors, broken_index)
{
	char *d = tmp_dir();

	expect_dir_fails(d, d, "neither model.safetensors nor model.safetensors.index.json");
	free(make_st(d, "s1.safetensors", 0, SHARD_A, 4));
	free(make_st(d, "s2.safetensors", 0, SHARD_B, 4));

	write_text(d, "model.safetensors.index.json",
	           "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s3.safetensors\"}}");
	expect_dir_fails(d, "s3.safetensors: No such file", "names for b");

	write_text(d, "model.safetensors.index.json",
	           "{\"weight_map\":{\"a\":\"s1.safetensors\",\"c\":\"s2.safetensors\"}}");
	expect_dir_fails(d, "tensor c not found in s2.safetensors", "model.safetensors.index.json");

	write_text(d, "model.safetensors.index.json",
	           "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s1.safetensors\"}}");
	expect_dir_fails(d, "tensor b not found in s1.safetensors", NULL);

	free(make_st(d, "s3.safetensors", 0, SHARD_A, 4));
	write_text(d, "model.safetensors.index.json",
	           "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s3.safetensors\"}}");
	expect_dir_fails(d, "tensor a is in both", "s3.safetensors");

	write_text(d, "model.safetensors.index.json",
	           "{\"weight_map\":{\"a\":\"../s1.safetensors\"}}");
	expect_dir_fails(d, "weight_map.a: not a shard file name", NULL);

	write_text(d, "model.safetensors.index.json", "{\"metadata\":{}}");
	expect_dir_fails(d, "weight_map missing", NULL);

	write_text(d, "model.safetensors.index.json", "{\"weight_map\":");
	expect_dir_fails(d, "model.safetensors.index.json: not valid JSON", NULL);

	/* A broken shard names itself. */
	free(make_st(d, "s4.safetensors", 0,
	             "{\"z\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", 4));
	write_text(d, "model.safetensors.index.json",
	           "{\"weight_map\":{\"a\":\"s1.safetensors\",\"z\":\"s4.safetensors\"}}");
	expect_dir_fails(d, "s4.safetensors: tensor z: data_offsets [0, 12] run past", NULL);

	write_text(d, "model.safetensors.index.json",
	           "{\"metadata\":{\"total_size\":8},"
	           "\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"}}");
	struct rl_st_archive *a;
	cr_assert_eq(rl_st_open_dir(&a, d, err, sizeof err), 0, "%s", err);
	cr_expect_eq(rl_st_count(a), 2);
	float x;
	int64_t one = 1;
	cr_expect_eq(rl_st_read_f32(a, "b", &x, 1, &one, err, sizeof err), 0);
	cr_expect_eq(rl_st_read_f32(a, "c", &x, 1, &one, err, sizeof err), -1);
	char want[1024];
	snprintf(want, sizeof want, "%s: tensor c not found", d);
	cr_expect_str_eq(err, want);
	rl_st_close(a);
	remove_tree(d);
	free(d);
}

/* Mutated and random files either open, and then every tensor reads (ASan
 * watches the bounds), or fail with a message. */
Test(safetensors, fuzz_never_crashes)
{
	char *d = tmp_dir(), *p = join(d, "fuzz.safetensors"),
	     *src = fixture("read_bf16.safetensors");
	size_t n;
	unsigned char *orig = slurp(src, &n), *b = malloc(n + 64);
	uint32_t s = 2024;
	int opened = 0;
	float *buf = malloc(4096 * sizeof *buf);

	for (int it = 0; it < 3000; it++) {
		size_t len = n;
		memcpy(b, orig, n);
		switch (it % 4) {
		case 0: /* flip a few bytes in the header */
			for (int k = 0; k < 1 + (int)(gc_rng(&s) % 4); k++)
				b[8 + gc_rng(&s) % 200] = (unsigned char)gc_rng(&s);
			break;
		case 1: /* truncate */
			len = gc_rng(&s) % n;
			break;
		case 2: /* random bytes after a plausible length */
			len = 8 + gc_rng(&s) % 64;
			for (size_t i = 8; i < len; i++) {
				uint32_t r = gc_rng(&s);
				b[i] = r % 2 ? (unsigned char)(r >> 8)
				             : (unsigned char)"{}[]\":,0123"[(r >> 8) % 11];
			}
			b[0] = (unsigned char)(len - 8);
			memset(b + 1, 0, 7);
			break;
		default: /* digits of offsets and shapes changed */
			for (size_t i = 8; i < n && i < 300; i++)
				if (b[i] >= '0' && b[i] <= '9' && gc_rng(&s) % 8 == 0)
					b[i] = (unsigned char)('0' + gc_rng(&s) % 10);
		}
		spill(p, b, len);
		struct rl_st_archive *a;
		err[0] = '\0';
		if (rl_st_open(&a, p, err, sizeof err)) {
			cr_assert_neq(err[0], '\0');
			continue;
		}
		opened++;
		for (int i = 0; i < rl_st_count(a); i++) {
			const struct rl_st_tensor *t = rl_st_at(a, i);
			if (t->nbytes / rl_dtype_size(t->dtype) <= 4096)
				cr_assert_eq(rl_st_read_f32(a, t->name, buf, t->ndim, t->shape, err,
				                            sizeof err),
				             0, "%s", err);
		}
		rl_st_close(a);
	}
	cr_expect_gt(opened, 0);
	free(buf);
	free(orig);
	free(b);
	free(src);
	free(p);
	remove_tree(d);
	free(d);
}
