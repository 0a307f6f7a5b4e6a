/* Writing safetensors byte for byte as the Rust writer behind
 * safetensors.torch.save_file (and so transformers' save_pretrained) does:
 * tensors ordered by dtype, widest first, then by name; a compact header with
 * {"format":"pt"} metadata, padded with spaces to a multiple of 8; data in
 * header order. Shards follow huggingface_hub's split. Every file goes through
 * PATH.tmp, fsync and rename, so a crash leaves the old file or the new one. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/durable.h"
#include "runtime/model/safetensors.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this writer copies memory as is"
#endif

/* A growing byte string; on allocation failure it stays failed. */
struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void buf_put(struct buf *b, const void *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void buf_str(struct buf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

static void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(struct buf *b, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	buf_put(b, tmp, (size_t)n);
}

/* A JSON string as serde_json escapes it: quote, backslash and control
 * characters only; UTF-8 passes through. */
static void buf_json_string(struct buf *b, const char *s)
{
	buf_str(b, "\"");
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		switch (*c) {
		case '"':
			buf_str(b, "\\\"");
			break;
		case '\\':
			buf_str(b, "\\\\");
			break;
		case '\b':
			buf_str(b, "\\b");
			break;
		case '\f':
			buf_str(b, "\\f");
			break;
		case '\n':
			buf_str(b, "\\n");
			break;
		case '\r':
			buf_str(b, "\\r");
			break;
		case '\t':
			buf_str(b, "\\t");
			break;
		default:
			if (*c < 0x20)
				buf_printf(b, "\\u%04x", *c);
			else
				buf_put(b, c, 1);
		}
	}
	buf_str(b, "\"");
}

static uint64_t n_elems(const struct rl_st_source *t)
{
	uint64_t n = 1;

	for (int d = 0; d < t->ndim; d++)
		n *= (uint64_t)t->shape[d];
	return n;
}

static uint64_t n_bytes(const struct rl_st_source *t)
{
	return n_elems(t) * rl_dtype_size(t->dtype);
}

/* The Rust writer's order: dtype descending in its enum (F16 < BF16 < F32),
 * then name. */
static int dtype_rank(enum rl_dtype t)
{
	return t == RL_F32 ? 0 : t == RL_BF16 ? 1 : 2;
}

static int write_order(const void *a, const void *b)
{
	const struct rl_st_source *x = *(const struct rl_st_source *const *)a;
	const struct rl_st_source *y = *(const struct rl_st_source *const *)b;

	if (dtype_rank(x->dtype) != dtype_rank(y->dtype))
		return dtype_rank(x->dtype) - dtype_rank(y->dtype);
	return strcmp(x->name, y->name);
}

static int by_src_name(const void *a, const void *b)
{
	return strcmp((*(const struct rl_st_source *const *)a)->name,
	              (*(const struct rl_st_source *const *)b)->name);
}

/* Refuses what would make a file the reader (or safetensors) rejects. */
static int check_sources(const char *path, const struct rl_st_source *t, int n, char *err,
                         size_t errlen)
{
	const struct rl_st_source **v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
	int rc = 0;

	if (!v) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	for (int i = 0; i < n && !rc; i++) {
		const char *name = t[i].name ? t[i].name : "(null)";
		uint64_t count = 1;

		v[i] = &t[i];
		rc = -1;
		if (!t[i].name || !strcmp(t[i].name, "__metadata__"))
			snprintf(err, errlen, "%s: tensor %d: invalid name %s", path, i, name);
		else if (t[i].dtype != RL_F32 && t[i].dtype != RL_BF16 && t[i].dtype != RL_F16)
			snprintf(err, errlen, "%s: tensor %s: unknown dtype %d", path, name,
			         (int)t[i].dtype);
		else if (t[i].ndim < 0 || t[i].ndim > RL_ST_MAX_DIMS)
			snprintf(err, errlen, "%s: tensor %s: %d dimensions", path, name,
			         t[i].ndim);
		else
			rc = 0;
		for (int d = 0; !rc && d < t[i].ndim; d++) {
			int64_t dim = t[i].shape[d];
			if (dim < 0 || (dim && count > (UINT64_C(1) << 60) / (uint64_t)dim)) {
				snprintf(err, errlen, "%s: tensor %s: bad dimension %" PRId64, path,
				         name, dim);
				rc = -1;
			} else {
				count *= (uint64_t)dim;
			}
		}
		if (!rc && count && !t[i].data) {
			snprintf(err, errlen, "%s: tensor %s: no data", path, name);
			rc = -1;
		}
	}
	if (!rc) {
		qsort(v, (size_t)n, sizeof *v, by_src_name);
		for (int i = 1; i < n && !rc; i++) {
			if (!strcmp(v[i - 1]->name, v[i]->name)) {
				snprintf(err, errlen, "%s: tensor %s given twice", path,
				         v[i]->name);
				rc = -1;
			}
		}
	}
	free(v);
	return rc;
}

/* Converts in slices so that a multi-GB tensor needs no second full copy. */
static int write_data(int fd, const struct rl_st_source *t)
{
	enum { SLICE = 1 << 15 };
	uint16_t half[SLICE];
	uint64_t n = n_elems(t);

	if (t->dtype == RL_F32)
		return n ? rl_write_all(fd, t->data, n * sizeof(float)) : 0;
	for (uint64_t i = 0; i < n; i += SLICE) {
		size_t k = n - i < SLICE ? (size_t)(n - i) : SLICE;
		for (size_t j = 0; j < k; j++)
			half[j] = t->dtype == RL_BF16 ? rl_f32_to_bf16(t->data[i + j])
			                              : rl_f32_to_f16(t->data[i + j]);
		if (rl_write_all(fd, half, k * sizeof *half))
			return -1;
	}
	return 0;
}

/* Writes head (and, when given, the tensors' data) to PATH through PATH.tmp. */
static int commit(const char *path, const struct buf *head, const struct rl_st_source *const *v,
                  int n, char *err, size_t errlen)
{
	char *tmp = NULL;
	int fd = -1, rc = -1;
	const char *what = "write";

	if (asprintf(&tmp, "%s.tmp", path) < 0) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		free(tmp);
		return -1;
	}
	if (rl_write_all(fd, head->p, head->len))
		goto fail;
	for (int i = 0; i < n; i++)
		if (write_data(fd, v[i]))
			goto fail;
	what = "fsync";
	if (fsync(fd))
		goto fail;
	what = "close";
	rc = close(fd);
	fd = -1;
	if (rc)
		goto fail;
	what = "rename";
	if ((rc = rename(tmp, path)))
		goto fail;
	what = "fsync of the directory";
	if ((rc = rl_sync_parent(path)))
		goto fail;
	free(tmp);
	return 0;
fail:
	snprintf(err, errlen, "%s: %s: %s", tmp, what, strerror(errno));
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(tmp);
	return -1;
}

/* One file from the pointers v (already checked). */
static int write_file(const char *path, const struct rl_st_source **v, int n, char *err,
                      size_t errlen)
{
	struct buf h = {0};
	uint64_t at = 0;
	int rc;

	qsort(v, (size_t)n, sizeof *v, write_order);
	buf_put(&h, "\0\0\0\0\0\0\0\0", 8);
	buf_str(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (int i = 0; i < n; i++) {
		buf_str(&h, ",");
		buf_json_string(&h, v[i]->name);
		buf_printf(&h, ":{\"dtype\":\"%s\",\"shape\":[", rl_dtype_name(v[i]->dtype));
		for (int d = 0; d < v[i]->ndim; d++)
			buf_printf(&h, "%s%" PRId64, d ? "," : "", v[i]->shape[d]);
		buf_printf(&h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", at,
		           at + n_bytes(v[i]));
		at += n_bytes(v[i]);
	}
	buf_str(&h, "}");
	while ((h.len - 8) % 8)
		buf_str(&h, " ");
	if (h.oom) {
		free(h.p);
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	uint64_t hlen = h.len - 8;
	for (int i = 0; i < 8; i++)
		h.p[i] = (char)(hlen >> (8 * i));
	rc = commit(path, &h, v, n, err, errlen);
	free(h.p);
	return rc;
}

int rl_st_write(const char *path, const struct rl_st_source *tensors, int n, char *err,
                size_t errlen)
{
	if (n < 0) {
		snprintf(err, errlen, "%s: negative tensor count", path);
		return -1;
	}
	if (check_sources(path, tensors, n, err, errlen))
		return -1;
	const struct rl_st_source **v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
	if (!v) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	for (int i = 0; i < n; i++)
		v[i] = &tensors[i];
	int rc = write_file(path, v, n, err, errlen);
	free(v);
	return rc;
}

/* huggingface_hub's split_torch_state_dict_into_shards, in the caller's
 * order: a tensor over the limit gets a shard of its own, appended to the
 * list at once; the shard being filled is appended when the next tensor
 * would take it past the limit, or at the end. Shards are numbered in the
 * order they are appended. shard[i] is tensor i's shard. */
static int split(const struct rl_st_source *t, int n, size_t max, int *shard)
{
	int n_shards = 0, cur = -1;
	uint64_t cur_bytes = 0;

	/* First shard[i] holds -1 - (index of its first tensor) for tensors in
	 * the shard being filled, which gets its number only when appended. */
	for (int i = 0; i < n; i++) {
		uint64_t b = n_bytes(&t[i]);

		if (b > max) {
			shard[i] = n_shards++;
			continue;
		}
		if (cur >= 0 && cur_bytes + b > max) {
			for (int j = cur; j < i; j++)
				if (shard[j] == -1 - cur)
					shard[j] = n_shards;
			n_shards++;
			cur = -1;
		}
		if (cur < 0) {
			cur = i;
			cur_bytes = 0;
		}
		shard[i] = -1 - cur;
		cur_bytes += b;
	}
	if (cur >= 0) {
		for (int j = cur; j < n; j++)
			if (shard[j] == -1 - cur)
				shard[j] = n_shards;
		n_shards++;
	}
	return n_shards;
}

static char *shard_name(int k, int n)
{
	char *s = NULL;

	if (asprintf(&s, "model-%05d-of-%05d.safetensors", k + 1, n) < 0)
		return NULL;
	return s;
}

static int write_index(const char *dir, const struct rl_st_source *t, int n, const int *shard,
                       int n_shards, char *err, size_t errlen)
{
	json_t *root = json_object(), *meta = json_object(), *map = json_object();
	uint64_t size = 0, params = 0;
	struct buf b = {0};
	char *path = NULL, *text = NULL;
	bool oom = !root || !meta || !map;
	int rc = -1;

	for (int i = 0; i < n && !oom; i++) {
		char *file = shard_name(shard[i], n_shards);
		oom = !file || json_object_set_new(map, t[i].name, json_string(file));
		free(file);
		size += n_bytes(&t[i]);
		params += n_elems(&t[i]);
	}
	oom = oom ||
	      json_object_set_new(meta, "total_parameters", json_integer((json_int_t)params)) ||
	      json_object_set_new(meta, "total_size", json_integer((json_int_t)size)) ||
	      json_object_set(root, "metadata", meta) || json_object_set(root, "weight_map", map);
	/* As transformers writes it: json.dumps(indent=2, sort_keys=True) + "\n". */
	if (!oom)
		text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
	if (text) {
		buf_str(&b, text);
		buf_str(&b, "\n");
	}
	if (!text || b.oom || asprintf(&path, "%s/model.safetensors.index.json", dir) < 0) {
		path = NULL;
		snprintf(err, errlen, "%s: out of memory writing model.safetensors.index.json",
		         dir);
	} else {
		rc = commit(path, &b, NULL, 0, err, errlen);
	}
	free(b.p);
	free(text);
	free(path);
	json_decref(meta);
	json_decref(map);
	json_decref(root);
	return rc;
}

/* After the new files are in place: drop a model.safetensors or index that
 * would shadow them, and shards of an earlier save that are not ours, as
 * transformers does. */
static void remove_stale(const char *dir, bool sharded, int n_shards)
{
	char *p = NULL;

	if (asprintf(&p, "%s/%s", dir,
	             sharded ? "model.safetensors" : "model.safetensors.index.json") >= 0)
		unlink(p);
	free(p);
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		int k, of, end = 0;

		if (sscanf(e->d_name, "model-%5d-of-%5d.safetensors%n", &k, &of, &end) != 2 ||
		    end != (int)strlen(e->d_name) || strlen(e->d_name) != 32)
			continue;
		if (sharded && of == n_shards && k >= 1 && k <= n_shards)
			continue;
		if (asprintf(&p, "%s/%s", dir, e->d_name) >= 0)
			unlink(p);
		free(p);
	}
	closedir(d);
}

int rl_st_write_dir(const char *dir, const struct rl_st_source *tensors, int n,
                    size_t max_shard_bytes, char *err, size_t errlen)
{
	const struct rl_st_source **v = NULL;
	int *shard = NULL, n_shards = 1, rc = -1;
	char *path = NULL;

	if (n < 0) {
		snprintf(err, errlen, "%s: negative tensor count", dir);
		return -1;
	}
	if (check_sources(dir, tensors, n, err, errlen))
		return -1;
	if (mkdir(dir, 0755) && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
	shard = calloc((size_t)(n > 0 ? n : 1), sizeof *shard);
	if (!v || !shard)
		goto oom;
	if (max_shard_bytes)
		n_shards = split(tensors, n, max_shard_bytes, shard);
	if (n_shards <= 1) {
		if (asprintf(&path, "%s/model.safetensors", dir) < 0)
			goto oom;
		for (int i = 0; i < n; i++)
			v[i] = &tensors[i];
		if (write_file(path, v, n, err, errlen))
			goto out;
		remove_stale(dir, false, 0);
		rc = 0;
		goto out;
	}
	for (int k = 0; k < n_shards; k++) {
		int m = 0;
		char *name = shard_name(k, n_shards);

		for (int i = 0; i < n; i++)
			if (shard[i] == k)
				v[m++] = &tensors[i];
		free(path);
		path = NULL;
		if (!name || asprintf(&path, "%s/%s", dir, name) < 0) {
			free(name);
			path = NULL;
			goto oom;
		}
		free(name);
		if (write_file(path, v, m, err, errlen))
			goto out;
	}
	/* The index after its shards, then the stale files: a previous
	 * single-file save stays what readers see until the index is whole. */
	if (write_index(dir, tensors, n, shard, n_shards, err, errlen))
		goto out;
	remove_stale(dir, true, n_shards);
	rc = 0;
	goto out;
oom:
	snprintf(err, errlen, "%s: out of memory", dir);
out:
	free(path);
	free(shard);
	free(v);
	return rc;
}
