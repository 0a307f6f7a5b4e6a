/* A checkpoint's manifest.json: every file of step_N/ with its size and
 * xxHash (XXH3_64bits). It is written last, after every rank's files are
 * durable, so a directory whose manifest is missing or disagrees with a
 * file is incomplete and is never loaded.
 * defines: RL_CKPT_FORMAT, struct rl_ckpt_file, struct rl_ckpt_manifest,
 * rl_ckpt_manifest_write, rl_ckpt_manifest_read, rl_ckpt_manifest_free,
 * rl_ckpt_file_verify, rl_ckpt_write_file */
#ifndef RL_CKPT_MANIFEST_H
#define RL_CKPT_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/ckpt/shard.h"

#define RL_CKPT_FORMAT   "slurm-rl-checkpoint-1"
#define RL_CKPT_MANIFEST "manifest.json"

struct rl_ckpt_file {
	char name[64]; /* inside the step directory */
	struct rl_ckpt_file_sum sum;
};

struct rl_ckpt_manifest {
	int64_t step;
	int world_size; /* ranks of the run that wrote it */
	struct rl_ckpt_file *files;
	int n_files;
};

/* DIR/manifest.json through a temporary file, fsync'd, and DIR fsync'd. */
int rl_ckpt_manifest_write(const char *dir, const struct rl_ckpt_manifest *m, char *err,
                           size_t errlen);
/* Reads and checks DIR/manifest.json; errors name the file and the key. */
int rl_ckpt_manifest_read(const char *dir, struct rl_ckpt_manifest *m, char *err, size_t errlen);
void rl_ckpt_manifest_free(struct rl_ckpt_manifest *m);

/* Reads DIR/f->name whole: its size and checksum against the manifest's. */
int rl_ckpt_file_verify(const char *dir, const struct rl_ckpt_file *f, char *err, size_t errlen);

/* DIR/NAME with n bytes, created (not replaced), fsync'd, its sum taken. */
int rl_ckpt_write_file(const char *dir, const char *name, const void *data, size_t n,
                       struct rl_ckpt_file_sum *sum, char *err, size_t errlen);

#endif
