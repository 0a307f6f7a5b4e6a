/* Writing a shard file: the header first, then each piece's floats in the
 * order given, hashed as they go out so that the checksum costs no second
 * pass over the data. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "runtime/ckpt/shard.h"
#include "runtime/base/durable.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this writer copies memory as is"
#endif

static const char *const kind_names[RL_CKPT_N_KINDS] = {"weight", "exp_avg", "exp_avg_sq"};

const char *rl_ckpt_kind_name(enum rl_ckpt_kind k)
{
	return (unsigned)k < RL_CKPT_N_KINDS ? kind_names[k] : "?";
}

int rl_ckpt_kind_parse(const char *s, enum rl_ckpt_kind *k)
{
	for (int i = 0; i < RL_CKPT_N_KINDS; i++)
		if (strcmp(s, kind_names[i]) == 0) {
			*k = (enum rl_ckpt_kind)i;
			return 0;
		}
	return -1;
}

int64_t rl_ckpt_block_numel(const struct rl_ckpt_piece *p)
{
	return p->block_shape[0] * (p->ndim == 2 ? p->block_shape[1] : 1);
}

int rl_ckpt_piece_check(const struct rl_ckpt_piece *p, char *err, size_t errlen)
{
	const char *what = rl_ckpt_kind_name(p->kind);

	if (p->ndim != 1 && p->ndim != 2) {
		snprintf(err, errlen, "%s of %s: %d dimensions (1 or 2 expected)", what, p->tensor,
		         p->ndim);
		return -1;
	}
	for (int d = 0; d < p->ndim; d++)
		if (p->global_shape[d] <= 0 || p->global_shape[d] > RL_CKPT_MAX_DIM ||
		    p->block_shape[d] <= 0 || p->block_offset[d] < 0 ||
		    p->block_offset[d] > p->global_shape[d] - p->block_shape[d]) {
			snprintf(err, errlen,
			         "%s of %s: block [%" PRId64 ", +%" PRId64 ") of dimension %d "
			         "is outside the tensor's %" PRId64,
			         what, p->tensor, p->block_offset[d], p->block_shape[d], d,
			         p->global_shape[d]);
			return -1;
		}
	int64_t numel = rl_ckpt_block_numel(p);
	if (p->flat_start < 0 || p->flat_len <= 0 || p->flat_start > numel - p->flat_len) {
		snprintf(err, errlen,
		         "%s of %s: floats [%" PRId64 ", +%" PRId64 ") are outside the block of "
		         "%" PRId64,
		         what, p->tensor, p->flat_start, p->flat_len, numel);
		return -1;
	}
	return 0;
}

void rl_ckpt_piece_key(const struct rl_ckpt_piece *p, char *key, size_t len)
{
	if (p->flat_start == 0 && p->flat_len == rl_ckpt_block_numel(p))
		snprintf(key, len, "%s/%s", rl_ckpt_kind_name(p->kind), p->tensor);
	else
		snprintf(key, len, "%s/%s@%" PRId64, rl_ckpt_kind_name(p->kind), p->tensor,
		         p->flat_start);
}

static json_t *dims(int ndim, const int64_t *v)
{
	json_t *a = json_array();

	for (int d = 0; d < ndim; d++)
		json_array_append_new(a, json_integer(v[d]));
	return a;
}

/* The piece's place in its tensor, as the string the metadata holds. */
static char *describe(const struct rl_ckpt_piece *p)
{
	json_t *o = json_object();
	int64_t flat[2] = {p->flat_start, p->flat_len};

	json_object_set_new(o, "tensor", json_string(p->tensor));
	json_object_set_new(o, "kind", json_string(rl_ckpt_kind_name(p->kind)));
	json_object_set_new(o, "global_shape", dims(p->ndim, p->global_shape));
	json_object_set_new(o, "block_offset", dims(p->ndim, p->block_offset));
	json_object_set_new(o, "block_shape", dims(p->ndim, p->block_shape));
	json_object_set_new(o, "flat", dims(2, flat));
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	return s;
}

/* The safetensors header, padded with spaces to a multiple of 8. */
static char *header(const struct rl_ckpt_piece *pieces, int n, size_t *len, char *err,
                    size_t errlen)
{
	json_t *root = json_object(), *meta = json_object();
	uint64_t at = 0;
	char key[RL_CKPT_MAX_NAME + 48];

	json_object_set_new(meta, "format", json_string(RL_CKPT_SHARD_FORMAT));
	json_object_set_new(root, "__metadata__", meta);
	for (int i = 0; i < n; i++) {
		const struct rl_ckpt_piece *p = &pieces[i];
		bool whole = p->flat_start == 0 && p->flat_len == rl_ckpt_block_numel(p);
		json_t *e = json_object(), *off = json_array();
		char *where = describe(p);

		if (rl_ckpt_piece_check(p, err, errlen) || !where) {
			if (!where)
				snprintf(err, errlen, "out of memory");
			free(where);
			json_decref(e);
			json_decref(off);
			json_decref(root);
			return NULL;
		}
		rl_ckpt_piece_key(p, key, sizeof key);
		if (json_object_get(root, key)) {
			snprintf(err, errlen, "%s is in the shard twice", key);
			free(where);
			json_decref(e);
			json_decref(off);
			json_decref(root);
			return NULL;
		}
		json_object_set_new(e, "dtype", json_string("F32"));
		json_object_set_new(e, "shape",
		                    whole ? dims(p->ndim, p->block_shape) : dims(1, &p->flat_len));
		json_array_append_new(off, json_integer((json_int_t)at));
		at += (uint64_t)p->flat_len * sizeof(float);
		json_array_append_new(off, json_integer((json_int_t)at));
		json_object_set_new(e, "data_offsets", off);
		json_object_set_new(root, key, e);
		json_object_set_new(meta, key, json_string(where));
		free(where);
	}
	char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	size_t raw = strlen(text), padded = (raw + 7) / 8 * 8;
	char *h = realloc(text, padded + 1);
	if (!h) {
		free(text);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memset(h + raw, ' ', padded - raw);
	h[padded] = '\0';
	*len = padded;
	return h;
}

static int put(int fd, XXH3_state_t *h, const void *p, size_t n)
{
	XXH3_64bits_update(h, p, n);
	return rl_write_all(fd, p, n);
}

int rl_ckpt_shard_write(const char *path, const struct rl_ckpt_piece *pieces, int n,
                        struct rl_ckpt_file_sum *sum, char *err, size_t errlen)
{
	size_t hlen;
	char *h = header(pieces, n, &hlen, err, errlen);
	XXH3_state_t *hash = XXH3_createState();
	int fd = -1, rc = -1;

	if (!h || !hash) {
		if (h)
			snprintf(err, errlen, "out of memory");
		goto out;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	XXH3_64bits_reset(hash);
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
	if (put(fd, hash, le, sizeof le) || put(fd, hash, h, hlen))
		goto write_failed;
	sum->bytes = sizeof le + hlen;
	for (int i = 0; i < n; i++) {
		size_t bytes = (size_t)pieces[i].flat_len * sizeof(float);

		if (put(fd, hash, pieces[i].data, bytes))
			goto write_failed;
		sum->bytes += bytes;
	}
	if (fsync(fd))
		goto write_failed;
	sum->xxh3 = XXH3_64bits_digest(hash);
	rc = 0;
	goto out;
write_failed:
	snprintf(err, errlen, "%s: %s", path, strerror(errno));
out:
	if (fd >= 0 && close(fd) && rc == 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		rc = -1;
	}
	XXH3_freeState(hash);
	free(h);
	return rc;
}
