/* Reading a shard file through mmap: the header is parsed and every entry
 * checked against the file's size and its own metadata before any piece
 * is handed out. */
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

#include "runtime/ckpt/shard.h"

void rl_ckpt_shard_close(struct rl_ckpt_shard *s)
{
	if (s->map && s->map != MAP_FAILED)
		munmap(s->map, s->size);
	free(s->pieces);
	free(s->path);
	memset(s, 0, sizeof *s);
}

static int read_dims(json_t *a, int64_t *out, int max, int *n)
{
	size_t i;
	json_t *v;

	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > (size_t)max)
		return -1;
	json_array_foreach(a, i, v)
	{
		if (!json_is_integer(v))
			return -1;
		out[i] = json_integer_value(v);
	}
	*n = (int)json_array_size(a);
	return 0;
}

/* The piece's description from the metadata string of its key. */
static int parse_place(struct rl_ckpt_piece *p, const char *text)
{
	json_t *o = json_loads(text, 0, NULL);
	int n_global, n_off, n_block, n_flat, rc = -1;
	int64_t flat[2];
	const char *tensor, *kind;

	if (!json_is_object(o))
		goto out;
	tensor = json_string_value(json_object_get(o, "tensor"));
	kind = json_string_value(json_object_get(o, "kind"));
	if (!tensor || strlen(tensor) >= sizeof p->tensor || !kind ||
	    rl_ckpt_kind_parse(kind, &p->kind) ||
	    read_dims(json_object_get(o, "global_shape"), p->global_shape, 2, &n_global) ||
	    read_dims(json_object_get(o, "block_offset"), p->block_offset, 2, &n_off) ||
	    read_dims(json_object_get(o, "block_shape"), p->block_shape, 2, &n_block) ||
	    read_dims(json_object_get(o, "flat"), flat, 2, &n_flat) || n_off != n_global ||
	    n_block != n_global || n_flat != 2)
		goto out;
	strcpy(p->tensor, tensor);
	p->ndim = n_global;
	p->flat_start = flat[0];
	p->flat_len = flat[1];
	rc = 0;
out:
	json_decref(o);
	return rc;
}

/* One header entry: its data range, dtype and shape against its place. */
static int parse_entry(struct rl_ckpt_shard *s, struct rl_ckpt_piece *p, const char *key, json_t *e,
                       json_t *meta, const uint8_t *data, uint64_t data_len, char *err,
                       size_t errlen)
{
	json_t *off = json_object_get(e, "data_offsets");
	const char *dtype = json_string_value(json_object_get(e, "dtype"));
	const char *place = json_string_value(json_object_get(meta, key));
	int64_t shape[8];
	int ndim;
	char expect[RL_CKPT_MAX_NAME + 48];

	if (!place || parse_place(p, place)) {
		snprintf(err, errlen, "%s: tensor %s has no valid place in __metadata__", s->path,
		         key);
		return -1;
	}
	if (!dtype || strcmp(dtype, "F32") != 0) {
		snprintf(err, errlen, "%s: tensor %s is %s, not F32", s->path, key,
		         dtype ? dtype : "untyped");
		return -1;
	}
	if (read_dims(json_object_get(e, "shape"), shape, 8, &ndim)) {
		snprintf(err, errlen, "%s: tensor %s has no valid shape", s->path, key);
		return -1;
	}
	int64_t numel = 1;
	for (int d = 0; d < ndim; d++) {
		if (shape[d] < 0 || shape[d] > RL_CKPT_MAX_DIM) {
			snprintf(err, errlen, "%s: tensor %s has a dimension of %" PRId64, s->path,
			         key, shape[d]);
			return -1;
		}
		/* up to 8 dimensions of 2^31 each: the product can overflow */
		if (__builtin_mul_overflow(numel, shape[d], &numel)) {
			snprintf(err, errlen, "%s: tensor %s: its shape's element count overflows",
			         s->path, key);
			return -1;
		}
	}
	if (!json_is_array(off) || json_array_size(off) != 2 ||
	    !json_is_integer(json_array_get(off, 0)) || !json_is_integer(json_array_get(off, 1))) {
		snprintf(err, errlen, "%s: tensor %s has no valid data_offsets", s->path, key);
		return -1;
	}
	json_int_t a = json_integer_value(json_array_get(off, 0));
	json_int_t b = json_integer_value(json_array_get(off, 1));
	/* counts of floats compared, never bytes multiplied from a count: 2^62
	 * floats are 0 bytes in 64 bits */
	if (a < 0 || b < a || (uint64_t)b > data_len || a % 4 || (b - a) % 4 || p->flat_len < 0 ||
	    (b - a) / 4 != p->flat_len || numel != p->flat_len) {
		snprintf(err, errlen,
		         "%s: tensor %s: bytes [%lld, %lld) do not hold its %" PRId64
		         " floats inside the file's %" PRIu64 " bytes of data",
		         s->path, key, (long long)a, (long long)b, p->flat_len, data_len);
		return -1;
	}
	if (rl_ckpt_piece_check(p, err, errlen)) {
		char why[512];

		snprintf(why, sizeof why, "%s", err);
		snprintf(err, errlen, "%s: %s", s->path, why);
		return -1;
	}
	bool whole = p->flat_len == rl_ckpt_block_numel(p);
	bool shape_ok = whole ? ndim == p->ndim : ndim == 1;
	for (int d = 0; shape_ok && whole && d < ndim; d++)
		shape_ok = shape[d] == p->block_shape[d];
	if (!shape_ok) {
		snprintf(err, errlen, "%s: tensor %s: its shape is not its block's", s->path, key);
		return -1;
	}
	rl_ckpt_piece_key(p, expect, sizeof expect);
	if (strcmp(expect, key) != 0) {
		snprintf(err, errlen, "%s: tensor %s is described as %s", s->path, key, expect);
		return -1;
	}
	p->data = (const float *)(data + a);
	return 0;
}

static int parse_header(struct rl_ckpt_shard *s, char *err, size_t errlen)
{
	const uint8_t *bytes = s->map;
	uint64_t hlen = 0;
	json_error_t jerr;
	int rc = -1;

	for (int i = 0; i < 8; i++)
		hlen |= (uint64_t)bytes[i] << (8 * i);
	if (hlen % 4) {
		/* every float must be aligned in the mapping */
		snprintf(err, errlen, "%s: a header of %" PRIu64 " bytes leaves the data unaligned",
		         s->path, hlen);
		return -1;
	}
	if (hlen > s->size - 8) {
		snprintf(err, errlen, "%s: the header claims %" PRIu64 " bytes of a %zu-byte file",
		         s->path, hlen, s->size);
		return -1;
	}
	json_t *root = json_loadb((const char *)bytes + 8, (size_t)hlen, 0, &jerr);
	json_t *meta = json_object_get(root, "__metadata__");
	const char *format = json_string_value(json_object_get(meta, "format"));
	if (!json_is_object(root)) {
		snprintf(err, errlen, "%s: the header is not a JSON object: %s", s->path,
		         jerr.text);
		goto out;
	}
	if (!format || strcmp(format, RL_CKPT_SHARD_FORMAT) != 0) {
		snprintf(err, errlen, "%s: not a slurm-rl shard (metadata format %s, expected %s)",
		         s->path, format ? format : "missing", RL_CKPT_SHARD_FORMAT);
		goto out;
	}
	s->pieces = calloc(json_object_size(root), sizeof *s->pieces);
	if (!s->pieces) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	const char *key;
	json_t *e;
	json_object_foreach(root, key, e)
	{
		if (strcmp(key, "__metadata__") == 0)
			continue;
		if (!json_is_object(e) ||
		    parse_entry(s, &s->pieces[s->n_pieces], key, e, meta, bytes + 8 + hlen,
		                s->size - 8 - hlen, err, errlen)) {
			if (!json_is_object(e))
				snprintf(err, errlen, "%s: tensor %s is not an object", s->path,
				         key);
			goto out;
		}
		s->n_pieces++;
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

int rl_ckpt_shard_open(struct rl_ckpt_shard *s, const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd;

	memset(s, 0, sizeof *s);
	s->path = strdup(path);
	if (!s->path) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		rl_ckpt_shard_close(s);
		return -1;
	}
	if (st.st_size < 8) {
		snprintf(err, errlen, "%s: %lld bytes is too short for a shard file", path,
		         (long long)st.st_size);
		close(fd);
		rl_ckpt_shard_close(s);
		return -1;
	}
	s->size = (size_t)st.st_size;
	s->map = mmap(NULL, s->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (s->map == MAP_FAILED) {
		snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
		rl_ckpt_shard_close(s);
		return -1;
	}
	if (parse_header(s, err, errlen)) {
		rl_ckpt_shard_close(s);
		return -1;
	}
	return 0;
}
