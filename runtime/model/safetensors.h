/* safetensors files, read through mmap and written in the layout
 * transformers writes, one file or shards with model.safetensors.index.json.
 * Every header is checked before a byte of data is trusted: a truncated file,
 * a bad header, overlapping or out-of-range data, an unknown dtype are errors
 * that name the file and the tensor.
 * defines: struct rl_st_tensor, struct rl_st_archive, rl_st_open,
 * rl_st_open_dir, rl_st_close, rl_st_find, rl_st_read_f32, rl_st_read_f32_part, struct
 * rl_st_source, rl_st_write, rl_st_write_dir */
#ifndef RL_MODEL_SAFETENSORS_H
#define RL_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"

#define RL_ST_MAX_DIMS 8

struct rl_st_tensor {
	const char *name;
	enum rl_dtype dtype;
	int ndim;
	int64_t shape[RL_ST_MAX_DIMS];
	const void *data; /* inside the mapping; not aligned in general */
	size_t nbytes;
	const char *file; /* the file it lives in, for messages */
};

struct rl_st_archive; /* opaque: the mappings and the tensor index */

/* One .safetensors file. */
int rl_st_open(struct rl_st_archive **out, const char *path, char *err, size_t errlen);
/* A model directory: DIR/model.safetensors, else the shards listed by
 * DIR/model.safetensors.index.json (each tensor must be in the shard the
 * index names). */
int rl_st_open_dir(struct rl_st_archive **out, const char *dir, char *err, size_t errlen);
void rl_st_close(struct rl_st_archive *a);

int rl_st_count(const struct rl_st_archive *a);
const struct rl_st_tensor *rl_st_at(const struct rl_st_archive *a, int i);
/* NULL when absent. */
const struct rl_st_tensor *rl_st_find(const struct rl_st_archive *a, const char *name);

/* Converts tensor NAME to fp32 into dst after checking that it exists and
 * has exactly the shape [shape[0], ..., shape[ndim-1]]; the message names the
 * tensor, the expected and the found shape. */
int rl_st_read_f32(const struct rl_st_archive *a, const char *name, float *dst, int ndim,
                   const int64_t *shape, char *err, size_t errlen);
/* The same for a part of it: rows [start, start + len) (split_dim 0) or
 * those columns of every row (split_dim 1, a matrix), packed into dst;
 * split_dim < 0: all of it. Only the part's bytes of the file are read:
 * how a rank loads its shard without the whole model in memory. */
int rl_st_read_f32_part(const struct rl_st_archive *a, const char *name, float *dst, int ndim,
                        const int64_t *shape, int split_dim, int64_t start, int64_t len, char *err,
                        size_t errlen);

/* A tensor to write: fp32 values in memory, stored as dtype. */
struct rl_st_source {
	const char *name;
	enum rl_dtype dtype;
	int ndim;
	int64_t shape[RL_ST_MAX_DIMS];
	const float *data;
};

/* Writes one file (header keys sorted as transformers' writer does,
 * {"format":"pt"} metadata) through PATH.tmp, fsync and rename. */
int rl_st_write(const char *path, const struct rl_st_source *tensors, int n, char *err,
                size_t errlen);
/* Writes DIR/model.safetensors, or shards of at most max_shard_bytes each as
 * model-0000K-of-0000N.safetensors with model.safetensors.index.json when the
 * total is larger (max_shard_bytes 0: always one file). */
int rl_st_write_dir(const char *dir, const struct rl_st_source *tensors, int n,
                    size_t max_shard_bytes, char *err, size_t errlen);

#endif
