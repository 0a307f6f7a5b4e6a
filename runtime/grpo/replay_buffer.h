/* The replay buffer of asynchronous GRPO as a checkpoint file: the
 * rollout a run had in flight when it saved, generated for the step after
 * the checkpoint's by weights the checkpoint no longer holds. Saving it is
 * what makes an asynchronous resume exact: generated again, it would come
 * from newer weights. rollout_buffer.bin holds a head, the step's prompts
 * and one rollout_wire.h packet of every sample, in the host's byte order
 * (as the shard files, little-endian).
 * defines: RL_CKPT_ROLLOUT_BUFFER, rl_replay_buffer_pack, rl_replay_buffer_load,
 * rl_replay_buffer_parse */
#ifndef RL_GRPO_REPLAY_BUFFER_H
#define RL_GRPO_REPLAY_BUFFER_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/grpo/rollout.h"
#include "runtime/grpo/rollout_wire.h"

#define RL_CKPT_ROLLOUT_BUFFER "rollout_buffer.bin"

/* The file's bytes into w (appended): r, every sample generated, for step
 * `step`, with info. Returns 0, or -1 out of memory. */
int rl_replay_buffer_pack(struct rl_wire *w, const struct rl_rollout *r, int64_t step,
                          const struct rl_wire_info *info);
/* DIR/rollout_buffer.bin's bytes (malloc'd; *len of them), or NULL with
 * err naming the file. */
unsigned char *rl_replay_buffer_load(const char *dir, size_t *len, char *err, size_t errlen);
/* Those bytes (DIR's, named in messages) into r (allocated here: prompts
 * and samples, no problems or answers, which the data gives) and *info.
 * They must be the rollout of `step`; max_len bounds a sample. Returns 0,
 * or -1 with err naming the file and what in it is wrong. */
int rl_replay_buffer_parse(const unsigned char *buf, size_t len, const char *dir, int64_t step,
                           int max_len, struct rl_rollout *r, struct rl_wire_info *info, char *err,
                           size_t errlen);

#endif
