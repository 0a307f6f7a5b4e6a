/* Reading a checkpoint into a layout other than the one that wrote it: a
 * rank asks for the block of a global tensor it holds and gets it
 * assembled from whichever pieces overlap it, in whatever files.
 * defines: struct rl_ckpt_index, rl_ckpt_index_build, rl_ckpt_index_free,
 * struct rl_ckpt_shard_set, rl_ckpt_shard_set_open, rl_ckpt_shard_set_close,
 * struct rl_ckpt_block, rl_ckpt_fill */
#ifndef RL_CKPT_RESHARD_H
#define RL_CKPT_RESHARD_H

#include "runtime/ckpt/manifest.h"
#include "runtime/ckpt/shard.h"

/* Every piece of some shard files, sorted by kind and tensor; points into
 * the shards, which must stay open. */
struct rl_ckpt_index {
	const struct rl_ckpt_piece **pieces;
	int n;
};

int rl_ckpt_index_build(struct rl_ckpt_index *ix, const struct rl_ckpt_shard *shards, int n_shards,
                        char *err, size_t errlen);
void rl_ckpt_index_free(struct rl_ckpt_index *ix);

/* Every shard file a manifest lists (the names ending .safetensors),
 * mapped, and their index. */
struct rl_ckpt_shard_set {
	struct rl_ckpt_shard *shards;
	int n;
	struct rl_ckpt_index ix;
};

/* Opens the shards of DIR's manifest man; the set is freed by
 * rl_ckpt_shard_set_close whether this succeeds or not. */
int rl_ckpt_shard_set_open(struct rl_ckpt_shard_set *set, const char *dir,
                           const struct rl_ckpt_manifest *man, char *err, size_t errlen);
void rl_ckpt_shard_set_close(struct rl_ckpt_shard_set *set);

/* A block of a global tensor that a rank holds. */
struct rl_ckpt_block {
	const char *tensor;
	int ndim;
	int64_t global_shape[2];
	int64_t offset[2];
	int64_t shape[2];
};

/* Fills dst (the block's elements, row-major) from the index's pieces of
 * that kind. Errors, naming the tensor, when the checkpoint's global shape
 * differs from the block's, or when its pieces do not cover every element
 * of the block exactly once. */
int rl_ckpt_fill(const struct rl_ckpt_index *ix, enum rl_ckpt_kind kind,
                 const struct rl_ckpt_block *want, float *dst, char *err, size_t errlen);

#endif
