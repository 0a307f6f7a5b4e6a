/* Data parallelism over a step's samples: each rank of the data-parallel
 * group generates and runs the logprobs of its own contiguous share (the
 * ranks of its model replica score parts of it), and these calls put the
 * shares back together so that every rank holds the whole rollout again
 * (what the advantages, the metrics and the next phase's split need).
 * Without a group (one process) they do nothing.
 * defines: rl_share_range, rl_share_split, rl_share_samples, rl_share_rewards,
 * rl_share_logprobs, rl_share_stage_logprobs, rl_share_sum */
#ifndef RL_ROLLOUT_SHARE_H
#define RL_ROLLOUT_SHARE_H

#include <stddef.h>

#include "runtime/comm/comm.h"
#include "runtime/grpo/rollout.h"

/* The share [*lo, *hi) of n items of the rank of group (NULL: all of them):
 * balanced, in rank order. */
void rl_share_range(const struct rl_comm *group, int n, int *lo, int *hi);

/* After each rank generated and scored its share of r: every sample's
 * tokens, generation logprobs, flags, reward, and an episode's loss mask,
 * turns and env_scored on every rank. max_len
 * bounds a sample's length (policy.max_total_sequence_length). */
int rl_share_samples(struct rl_comm *group, struct rl_rollout *r, int max_len, char *err,
                     size_t errlen);

/* The part [*lo, *hi) of the items [first, last) that part index of
 * parts takes: balanced, in order. */
void rl_share_split(int first, int last, int index, int parts, int *lo, int *hi);

/* After each rank of group scored the samples [lo, hi) of r, every sample
 * by one rank: every reward on every rank. */
int rl_share_rewards(struct rl_comm *group, struct rl_rollout *r, int lo, int hi, char *err,
                     size_t errlen);

/* After each rank filled the field (offsetof(struct rl_sample, prev_lp) or
 * ref_lp) of its share: that field on every rank. */
int rl_share_logprobs(struct rl_comm *group, struct rl_rollout *r, size_t field_offset, int max_len,
                      char *err, size_t errlen);

/* Pipeline parallelism: after the last stage filled the field of samples
 * [lo, hi), that field on every stage of pp (NULL: one stage). */
int rl_share_stage_logprobs(struct rl_comm *pp, struct rl_rollout *r, size_t field_offset, int lo,
                            int hi, char *err, size_t errlen);

/* v[0..n) summed over the group, in place. */
void rl_share_sum(struct rl_comm *group, double *v, int n, const char *what);

#endif
