/* GRPO advantages: each sample's reward against the other samples drawn for
 * the same prompt, as NeMo-RL's calculate_baseline_and_std_per_prompt and
 * grpo.py compute them.
 * defines: rl_grpo_advantages, rl_grpo_rollout_advantages */
#ifndef RL_GRPO_ADVANTAGE_H
#define RL_GRPO_ADVANTAGE_H

#include <stdbool.h>

#include "runtime/config/config.h"
#include "runtime/grpo/rollout.h"

/* rewards[g * group_size + i] is sample i of group (prompt) g.
 *
 * leave_one_out (grpo.use_leave_one_out_baseline): the baseline of a sample
 *   is the mean of the OTHER group_size - 1 rewards and its std the sample
 *   std (n - 1 denominator) of those others (RLOO); otherwise the baseline
 *   is the group mean and the std the sample std of the whole group. The
 *   std of a single value is 0.
 * A group with a single sample gets baseline = reward, so advantage 0.
 * advantage = reward - baseline.
 * normalize (grpo.normalize_rewards): advantage /= std where std > 0 (no
 *   epsilon: a group whose rewards are all equal has advantage 0 anyway).
 * clip_low / clip_high (grpo.advantage_clip_low/high; NULL or unset = off):
 *   the advantage is clamped to them last.
 *
 * advantages gets n_groups * group_size entries; baseline and std, when not
 * NULL, get each sample's baseline and std. */
void rl_grpo_advantages(const double *rewards, int n_groups, int group_size, bool leave_one_out,
                        bool normalize, const struct rl_opt_float *clip_low,
                        const struct rl_opt_float *clip_high, double *advantages, double *baseline,
                        double *std);

/* Every sample of r its advantage from its reward, as grpo.* asks
 * (use_leave_one_out_baseline, normalize_rewards, advantage_clip_low and
 * _high). Returns 0, or -1 out of memory. */
int rl_grpo_rollout_advantages(struct rl_rollout *r, const struct rl_cfg_grpo *g);

#endif
