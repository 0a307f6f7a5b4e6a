/* Reading safetensors: every file is mapped read-only and its header checked
 * whole before any tensor is handed out, so that a truncated download or a
 * hostile file fails here, with the file and tensor named, and never as a
 * fault deep inside a kernel. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/model/safetensors.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader copies it as is"
#endif

/* The Rust reference refuses headers over 100 MB; so do we, before any
 * allocation sized by the file. */
#define MAX_HEADER_BYTES (100u << 20)

struct st_file {
	char *path;
	void *map;
	size_t size;
};

struct rl_st_archive {
	char *origin; /* the path given to open, for "not found" messages */
	struct st_file *files;
	int n_files;
	struct rl_st_tensor *tensors; /* sorted by name */
	int n;
	int cap;
};

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct rl_st_tensor *)a)->name,
	              ((const struct rl_st_tensor *)b)->name);
}

static int by_offset(const void *a, const void *b)
{
	const struct rl_st_tensor *x = a, *y = b;
	const char *px = x->data, *py = y->data;

	if (px != py)
		return px < py ? -1 : 1;
	return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

void rl_st_close(struct rl_st_archive *a)
{
	if (!a)
		return;
	for (int i = 0; i < a->n; i++)
		free((char *)a->tensors[i].name);
	for (int i = 0; i < a->n_files; i++) {
		if (a->files[i].map)
			munmap(a->files[i].map, a->files[i].size);
		free(a->files[i].path);
	}
	free(a->tensors);
	free(a->files);
	free(a->origin);
	free(a);
}

static struct rl_st_archive *archive_new(const char *origin, int n_files)
{
	struct rl_st_archive *a = calloc(1, sizeof *a);

	if (!a)
		return NULL;
	a->origin = strdup(origin);
	a->files = calloc((size_t)(n_files > 0 ? n_files : 1), sizeof *a->files);
	if (!a->origin || !a->files) {
		rl_st_close(a);
		return NULL;
	}
	return a;
}

static int map_file(struct st_file *f, const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	const char *why = NULL;

	if (fd < 0 || fstat(fd, &st) < 0)
		why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_size < 8)
		why = "too short for a safetensors file (no 8-byte header length)";
	else if (!(f->path = strdup(path)))
		why = "out of memory";
	if (!why) {
		f->size = (size_t)st.st_size;
		f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (f->map == MAP_FAILED) {
			f->map = NULL;
			why = strerror(errno);
		}
	}
	if (fd >= 0)
		close(fd);
	if (!why)
		return 0;
	snprintf(err, errlen, "%s: %s", path, why);
	free(f->path);
	f->path = NULL;
	return -1;
}

static int dtype_from_name(const char *s, enum rl_dtype *t)
{
	if (!strcmp(s, "F32"))
		*t = RL_F32;
	else if (!strcmp(s, "BF16"))
		*t = RL_BF16;
	else if (!strcmp(s, "F16"))
		*t = RL_F16;
	else
		return -1;
	return 0;
}

static int json_size(const json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* Checks one header entry and fills t; data is relative to the data buffer
 * until the caller adds its base. */
static int parse_entry(struct rl_st_tensor *t, const char *path, const char *name, json_t *e,
                       size_t data_len, char *err, size_t errlen)
{
	json_t *dtype = json_object_get(e, "dtype"), *shape = json_object_get(e, "shape");
	json_t *offs = json_object_get(e, "data_offsets");
	uint64_t begin, end, count = 1;

	if (!json_is_object(e)) {
		snprintf(err, errlen, "%s: tensor %s: header entry is not an object", path, name);
		return -1;
	}
	if (!json_is_string(dtype) || !json_is_array(shape) || !json_is_array(offs)) {
		snprintf(err, errlen, "%s: tensor %s: %s missing or of the wrong type", path, name,
		         !json_is_string(dtype)  ? "dtype"
		         : !json_is_array(shape) ? "shape"
		                                 : "data_offsets");
		return -1;
	}
	if (dtype_from_name(json_string_value(dtype), &t->dtype)) {
		snprintf(err, errlen, "%s: tensor %s: dtype %s is not supported (F32, BF16, F16)",
		         path, name, json_string_value(dtype));
		return -1;
	}
	if (json_array_size(shape) > RL_ST_MAX_DIMS) {
		snprintf(err, errlen, "%s: tensor %s: %zu dimensions, at most %d supported", path,
		         name, json_array_size(shape), RL_ST_MAX_DIMS);
		return -1;
	}
	t->ndim = (int)json_array_size(shape);
	for (int d = 0; d < t->ndim; d++) {
		uint64_t dim;

		if (json_size(json_array_get(shape, (size_t)d), &dim)) {
			snprintf(err, errlen,
			         "%s: tensor %s: shape[%d] is not a non-negative integer", path,
			         name, d);
			return -1;
		}
		/* Past 2^60 elements no real tensor fits in a file anyway, and
		 * the byte count below cannot wrap. */
		if (dim != 0 && count > (UINT64_C(1) << 60) / dim) {
			snprintf(err, errlen, "%s: tensor %s: element count overflows", path, name);
			return -1;
		}
		count *= dim;
		t->shape[d] = (int64_t)dim;
	}
	if (json_array_size(offs) != 2 || json_size(json_array_get(offs, 0), &begin) ||
	    json_size(json_array_get(offs, 1), &end) || begin > end) {
		snprintf(err, errlen,
		         "%s: tensor %s: data_offsets must be [begin, end] with 0 <= begin <= end",
		         path, name);
		return -1;
	}
	if (end > data_len) {
		snprintf(err, errlen,
		         "%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64
		         "] run past the %zu bytes of data (truncated file?)",
		         path, name, begin, end, data_len);
		return -1;
	}
	if (count * rl_dtype_size(t->dtype) != end - begin) {
		snprintf(err, errlen,
		         "%s: tensor %s: %" PRIu64 " %s elements need %" PRIu64
		         " bytes, data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64,
		         path, name, count, rl_dtype_name(t->dtype),
		         count * rl_dtype_size(t->dtype), begin, end, end - begin);
		return -1;
	}
	t->data = (const void *)(uintptr_t)begin;
	t->nbytes = (size_t)(end - begin);
	return 0;
}

static int grow(struct rl_st_archive *a, size_t more)
{
	if ((size_t)a->n + more <= (size_t)a->cap)
		return 0;
	if ((size_t)a->n + more > INT32_MAX / 2)
		return -1;
	int cap = a->cap ? a->cap : 64;
	while ((size_t)cap < (size_t)a->n + more)
		cap *= 2;
	void *p = realloc(a->tensors, (size_t)cap * sizeof *a->tensors);
	if (!p)
		return -1;
	a->tensors = p;
	a->cap = cap;
	return 0;
}

/* Parses file f's header and appends its tensors to a. */
static int load_header(struct rl_st_archive *a, struct st_file *f, char *err, size_t errlen)
{
	const unsigned char *p = f->map;
	uint64_t hlen = 0;
	json_error_t jerr;
	const char *key;
	json_t *root, *v;
	int first = a->n, rc = -1;

	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)p[i] << (8 * i);
	if (hlen > MAX_HEADER_BYTES) {
		snprintf(err, errlen, "%s: header length %" PRIu64 " is absurd (limit %u bytes)",
		         f->path, hlen, MAX_HEADER_BYTES);
		return -1;
	}
	if (hlen > f->size - 8) {
		snprintf(err, errlen,
		         "%s: header length %" PRIu64 " runs past the end of the %zu-byte file",
		         f->path, hlen, f->size);
		return -1;
	}
	if (hlen < 2 || p[8] != '{') {
		snprintf(err, errlen, "%s: header is not a JSON object", f->path);
		return -1;
	}
	root = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		snprintf(err, errlen, "%s: header is not valid JSON: %s (header byte %d)", f->path,
		         jerr.text, jerr.position);
		return -1;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "%s: header is not a JSON object", f->path);
		goto out;
	}
	if ((v = json_object_get(root, "__metadata__")) && !json_is_object(v)) {
		snprintf(err, errlen, "%s: __metadata__ is not an object", f->path);
		goto out;
	}
	if (grow(a, json_object_size(root))) {
		snprintf(err, errlen, "%s: out of memory", f->path);
		goto out;
	}
	size_t data_len = f->size - 8 - (size_t)hlen;
	const char *base = (const char *)p + 8 + hlen;
	json_object_foreach(root, key, v)
	{
		if (!strcmp(key, "__metadata__"))
			continue;
		struct rl_st_tensor *t = &a->tensors[a->n];

		memset(t, 0, sizeof *t);
		if (parse_entry(t, f->path, key, v, data_len, err, errlen))
			goto out;
		if (!(t->name = strdup(key))) {
			snprintf(err, errlen, "%s: out of memory", f->path);
			goto out;
		}
		t->data = base + (uintptr_t)t->data;
		t->file = f->path;
		a->n++;
	}
	/* Sorted by offset, each tensor must start at or after the end of the
	 * previous one; empty tensors overlap nothing. */
	if (a->n > first)
		qsort(a->tensors + first, (size_t)(a->n - first), sizeof *a->tensors, by_offset);
	const struct rl_st_tensor *prev = NULL;
	for (int i = first; i < a->n; i++) {
		const struct rl_st_tensor *t = &a->tensors[i];

		if (!t->nbytes)
			continue;
		if (prev && (const char *)t->data < (const char *)prev->data + prev->nbytes) {
			snprintf(err, errlen, "%s: tensor %s: data overlaps tensor %s", f->path,
			         t->name, prev->name);
			goto out;
		}
		prev = t;
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

/* Sorts the index and refuses a name seen twice (possible across shards). */
static int finish(struct rl_st_archive *a, char *err, size_t errlen)
{
	if (a->n)
		qsort(a->tensors, (size_t)a->n, sizeof *a->tensors, by_name);
	for (int i = 1; i < a->n; i++) {
		if (!strcmp(a->tensors[i - 1].name, a->tensors[i].name)) {
			snprintf(err, errlen, "%s: tensor %s is in both %s and %s", a->origin,
			         a->tensors[i].name, a->tensors[i - 1].file, a->tensors[i].file);
			return -1;
		}
	}
	return 0;
}

int rl_st_open(struct rl_st_archive **out, const char *path, char *err, size_t errlen)
{
	struct rl_st_archive *a = archive_new(path, 1);

	*out = NULL;
	if (!a) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	a->n_files = 1;
	if (map_file(&a->files[0], path, err, errlen) ||
	    load_header(a, &a->files[0], err, errlen) || finish(a, err, errlen)) {
		rl_st_close(a);
		return -1;
	}
	*out = a;
	return 0;
}

int rl_st_count(const struct rl_st_archive *a)
{
	return a->n;
}

const struct rl_st_tensor *rl_st_at(const struct rl_st_archive *a, int i)
{
	return i >= 0 && i < a->n ? &a->tensors[i] : NULL;
}

const struct rl_st_tensor *rl_st_find(const struct rl_st_archive *a, const char *name)
{
	struct rl_st_tensor key = {.name = name};

	if (!a->n)
		return NULL;
	return bsearch(&key, a->tensors, (size_t)a->n, sizeof *a->tensors, by_name);
}

static void format_shape(char *buf, size_t len, int ndim, const int64_t *shape)
{
	size_t at = 0;

	at += (size_t)snprintf(buf, len, "[");
	for (int d = 0; d < ndim && at < len; d++)
		at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, d ? ", " : "", shape[d]);
	if (at < len)
		snprintf(buf + at, len - at, "]");
}

/* Tensor NAME, checked to exist with exactly shape [shape[0], ...]. */
static const struct rl_st_tensor *find_shaped(const struct rl_st_archive *a, const char *name,
                                              int ndim, const int64_t *shape, char *err,
                                              size_t errlen)
{
	const struct rl_st_tensor *t = rl_st_find(a, name);

	if (!t) {
		snprintf(err, errlen, "%s: tensor %s not found", a->origin, name);
		return NULL;
	}
	bool same = t->ndim == ndim;
	for (int d = 0; same && d < ndim; d++)
		same = t->shape[d] == shape[d];
	if (!same) {
		char got[256], want[256];

		format_shape(got, sizeof got, t->ndim, t->shape);
		format_shape(want, sizeof want, ndim, shape);
		snprintf(err, errlen, "%s: tensor %s: shape %s, expected %s", t->file, name, got,
		         want);
		return NULL;
	}
	return t;
}

/* n elements of t from element at on, as fp32: only their bytes of the
 * mapping are read. */
static void convert(const struct rl_st_tensor *t, size_t at, size_t n, float *dst)
{
	const unsigned char *p = (const unsigned char *)t->data + at * rl_dtype_size(t->dtype);

	switch (t->dtype) {
	case RL_F32:
		if (n)
			memcpy(dst, p, n * sizeof *dst);
		break;
	case RL_BF16:
		for (size_t i = 0; i < n; i++)
			dst[i] = rl_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
		break;
	case RL_F16:
		for (size_t i = 0; i < n; i++)
			dst[i] = rl_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
		break;
	}
}

int rl_st_read_f32(const struct rl_st_archive *a, const char *name, float *dst, int ndim,
                   const int64_t *shape, char *err, size_t errlen)
{
	const struct rl_st_tensor *t = find_shaped(a, name, ndim, shape, err, errlen);

	if (!t)
		return -1;
	convert(t, 0, t->nbytes / rl_dtype_size(t->dtype), dst);
	return 0;
}

int rl_st_read_f32_part(const struct rl_st_archive *a, const char *name, float *dst, int ndim,
                        const int64_t *shape, int split_dim, int64_t start, int64_t len, char *err,
                        size_t errlen)
{
	const struct rl_st_tensor *t = find_shaped(a, name, ndim, shape, err, errlen);

	if (!t)
		return -1;
	if (split_dim < 0)
		return rl_st_read_f32(a, name, dst, ndim, shape, err, errlen);
	int64_t rows = shape[0], cols = ndim == 2 ? shape[1] : 1;
	int64_t cut = split_dim == 0 ? rows : cols;
	if (split_dim > 1 || (split_dim == 1 && ndim != 2) || start < 0 || len < 0 || start > cut ||
	    len > cut - start) {
		snprintf(err, errlen, "%s: tensor %s: no part [%lld, %lld) of dimension %d",
		         t->file, name, (long long)start, (long long)(start + len), split_dim);
		return -1;
	}
	if (split_dim == 0) {
		convert(t, (size_t)(start * cols), (size_t)(len * cols), dst);
		return 0;
	}
	for (int64_t r = 0; r < rows; r++)
		convert(t, (size_t)(r * cols + start), (size_t)len, dst + r * len);
	return 0;
}

static char *path_join(const char *dir, const char *name)
{
	char *s = NULL;

	if (asprintf(&s, "%s/%s", dir, name) < 0)
		return NULL;
	return s;
}

static char *slurp(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long sz;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	if (fseek(f, 0, SEEK_END) || (sz = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		snprintf(err, errlen, "%s: cannot read", path);
	} else if (sz > (long)MAX_HEADER_BYTES) {
		snprintf(err, errlen, "%s: larger than %u bytes", path, MAX_HEADER_BYTES);
	} else if (!(buf = malloc((size_t)sz + 1))) {
		snprintf(err, errlen, "%s: out of memory", path);
	} else if (fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
		snprintf(err, errlen, "%s: short read", path);
		free(buf);
		buf = NULL;
	} else {
		buf[sz] = '\0';
		*len = (size_t)sz;
	}
	fclose(f);
	return buf;
}

/* The index lists every tensor and its shard; each shard is opened once, and
 * each listed tensor must be where the index says. */
static int open_index(struct rl_st_archive **out, const char *dir, const char *index, char *err,
                      size_t errlen)
{
	struct rl_st_archive *a = NULL;
	json_error_t jerr;
	json_t *root = NULL, *map;
	const char *key;
	json_t *v;
	size_t len;
	int rc = -1;
	char *text = slurp(index, &len, err, errlen);

	if (!text)
		return -1;
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	free(text);
	if (!root) {
		snprintf(err, errlen, "%s: not valid JSON: %s (line %d)", index, jerr.text,
		         jerr.line);
		return -1;
	}
	map = json_object_get(root, "weight_map");
	if (!json_is_object(map) || json_object_size(map) == 0) {
		snprintf(err, errlen, "%s: weight_map missing, empty or not an object", index);
		goto out;
	}
	if (!(a = archive_new(dir, (int)json_object_size(map)))) {
		snprintf(err, errlen, "%s: out of memory", index);
		goto out;
	}
	json_object_foreach(map, key, v)
	{
		const char *file = json_string_value(v);
		int k;

		if (!file || !*file || strchr(file, '/') || !strcmp(file, "..")) {
			snprintf(err, errlen, "%s: weight_map.%s: not a shard file name", index,
			         key);
			goto out;
		}
		for (k = 0; k < a->n_files; k++)
			if (!strcmp(strrchr(a->files[k].path, '/') + 1, file))
				break;
		if (k < a->n_files)
			continue;
		char *path = path_join(dir, file);
		if (!path) {
			snprintf(err, errlen, "%s: out of memory", index);
			goto out;
		}
		int bad = map_file(&a->files[a->n_files], path, err, errlen);
		free(path);
		if (bad) {
			size_t at = strlen(err);
			snprintf(err + at, errlen - at, " (the shard %s names for %s)", index, key);
			goto out;
		}
		a->n_files++;
		if (load_header(a, &a->files[a->n_files - 1], err, errlen))
			goto out;
	}
	if (finish(a, err, errlen))
		goto out;
	json_object_foreach(map, key, v)
	{
		const struct rl_st_tensor *t = rl_st_find(a, key);
		const char *file = json_string_value(v);

		if (!t) {
			snprintf(err, errlen, "%s: tensor %s not found in %s, where %s puts it",
			         dir, key, file, index);
			goto out;
		}
		if (strcmp(strrchr(t->file, '/') + 1, file)) {
			snprintf(err, errlen, "%s: tensor %s is in %s, but %s puts it in %s", dir,
			         key, t->file, index, file);
			goto out;
		}
	}
	*out = a;
	a = NULL;
	rc = 0;
out:
	rl_st_close(a);
	json_decref(root);
	return rc;
}

int rl_st_open_dir(struct rl_st_archive **out, const char *dir, char *err, size_t errlen)
{
	char *single = path_join(dir, "model.safetensors");
	char *index = path_join(dir, "model.safetensors.index.json");
	int rc = -1;

	*out = NULL;
	if (!single || !index) {
		snprintf(err, errlen, "%s: out of memory", dir);
	} else if (access(single, F_OK) == 0) {
		/* transformers prefers the single file too when both exist. */
		rc = rl_st_open(out, single, err, errlen);
		if (!rc) {
			free((*out)->origin);
			if (!((*out)->origin = strdup(dir))) {
				rl_st_close(*out);
				*out = NULL;
				snprintf(err, errlen, "%s: out of memory", dir);
				rc = -1;
			}
		}
	} else if (access(index, F_OK) == 0) {
		rc = open_index(out, dir, index, err, errlen);
	} else {
		snprintf(err, errlen,
		         "%s: neither model.safetensors nor model.safetensors.index.json", dir);
	}
	free(single);
	free(index);
	return rc;
}
