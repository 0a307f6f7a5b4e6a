/* One rank's shard file of a checkpoint: a safetensors file whose tensors
 * are pieces of the model's global tensors, each described in the header's
 * __metadata__ by its global shape and where it sits in it (Megatron's
 * sharded-tensor idea), so that any layout can read any other's pieces.
 *
 * A piece is a block of the global tensor (block_offset, block_shape), or a
 * run of floats [flat_start, flat_start + flat_len) of such a block in
 * row-major order: the distributed optimizer owns flat slices that need not
 * start or end on a row.
 * defines: enum rl_ckpt_kind, struct rl_ckpt_piece, RL_CKPT_SHARD_FORMAT,
 * rl_ckpt_kind_name, rl_ckpt_kind_parse, rl_ckpt_block_numel, rl_ckpt_piece_key,
 * rl_ckpt_piece_check, struct rl_ckpt_file_sum, rl_ckpt_shard_write,
 * struct rl_ckpt_shard, rl_ckpt_shard_open, rl_ckpt_shard_close */
#ifndef RL_CKPT_SHARD_H
#define RL_CKPT_SHARD_H

#include <stddef.h>
#include <stdint.h>

/* What a piece holds. */
enum rl_ckpt_kind {
	RL_CKPT_WEIGHT,     /* the policy's weights (fp32) */
	RL_CKPT_EXP_AVG,    /* AdamW's first moment */
	RL_CKPT_EXP_AVG_SQ, /* AdamW's second moment */
	RL_CKPT_N_KINDS
};

#define RL_CKPT_MAX_NAME 96
/* The largest dimension a piece may have: two of them multiply without
 * overflow, whatever a damaged file says. */
#define RL_CKPT_MAX_DIM (INT64_C(1) << 31)

struct rl_ckpt_piece {
	char tensor[RL_CKPT_MAX_NAME]; /* the Hugging Face tensor name */
	enum rl_ckpt_kind kind;
	int ndim; /* 1 or 2 */
	int64_t global_shape[2];
	int64_t block_offset[2];
	int64_t block_shape[2];
	int64_t flat_start, flat_len; /* the whole block: 0, its element count */
	const float *data;            /* flat_len floats */
};

/* The __metadata__ "format" of a shard file. */
#define RL_CKPT_SHARD_FORMAT "slurm-rl-shard-1"

/* "weight", "exp_avg", "exp_avg_sq". */
const char *rl_ckpt_kind_name(enum rl_ckpt_kind k);
/* -1 for a name that is none of them. */
int rl_ckpt_kind_parse(const char *s, enum rl_ckpt_kind *k);
/* Elements of the piece's block (not of its run). */
int64_t rl_ckpt_block_numel(const struct rl_ckpt_piece *p);
/* The piece's key in the file: kind/tensor, with @flat_start appended
 * for a run shorter than its block. */
void rl_ckpt_piece_key(const struct rl_ckpt_piece *p, char *key, size_t len);
/* -1 with the reason (naming the piece) when the block is not inside the
 * global shape or the run not inside the block. */
int rl_ckpt_piece_check(const struct rl_ckpt_piece *p, char *err, size_t errlen);

/* What a commit needs to know about a file it did not write itself. */
struct rl_ckpt_file_sum {
	uint64_t bytes;
	uint64_t xxh3; /* XXH3_64bits of the whole file */
};

/* Writes pieces[0..n) to PATH (created, not replaced: the directory is a
 * fresh tmp_step_N), fsyncs it and reports its size and checksum, computed
 * on the bytes as they are written. */
int rl_ckpt_shard_write(const char *path, const struct rl_ckpt_piece *pieces, int n,
                        struct rl_ckpt_file_sum *sum, char *err, size_t errlen);

/* A shard file mapped for reading: its pieces point into the mapping. */
struct rl_ckpt_shard {
	char *path;
	void *map;
	size_t size;
	struct rl_ckpt_piece *pieces;
	int n_pieces;
};

/* Maps PATH and checks every header entry against the file and its
 * metadata before a byte of data is trusted; errors name the file and the
 * entry. */
int rl_ckpt_shard_open(struct rl_ckpt_shard *s, const char *path, char *err, size_t errlen);
void rl_ckpt_shard_close(struct rl_ckpt_shard *s);

#endif
