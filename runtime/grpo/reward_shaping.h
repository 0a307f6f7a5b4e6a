/* DAPO's reward processing before advantages, in NeMo-RL's order: reward
 * scaling (scale_rewards), then reward shaping (apply_reward_shaping):
 * the overlong penalty of the DAPO paper (section 3.4) or, instead, the
 * stop-properly factor on truncated responses.
 * defines: rl_reward_scale, rl_overlong_penalty, rl_grpo_shape_rewards */
#ifndef RL_GRPO_REWARD_SHAPING_H
#define RL_GRPO_REWARD_SHAPING_H

#include <stdint.h>

#include "runtime/config/config.h"
#include "runtime/grpo/rollout.h"

/* reward clamped to [source_min, source_max], then mapped linearly onto
 * [target_min, target_max] (source_max > source_min: the config's rule). */
double rl_reward_scale(double reward, const struct rl_cfg_reward_scaling *c);

/* DAPO's soft overlong punishment of a response of len tokens, with
 * L_max = max_len and L_cache = buffer_len (1 <= buffer_len <= max_len):
 *   0                                   len <= L_max - L_cache
 *   ((L_max - L_cache) - len) / L_cache  L_max - L_cache < len <= L_max
 *   -1                                  L_max < len
 * times penalty. (NeMo-RL continues the line below -penalty past L_max;
 * with max_response_length at most the response limit, which the config's
 * rule asks, no response gets there.) */
double rl_overlong_penalty(int64_t len, int64_t max_len, int64_t buffer_len, double penalty);

/* Every sample of r its reward scaled (when c->reward_scaling.enabled) and
 * then shaped (when c->reward_shaping.enabled); unshaped[i], when not NULL,
 * gets sample i's reward after scaling and before shaping: what dynamic
 * sampling judges a group by (NeMo-RL's unshaped_total_reward), so that a
 * group is not kept for its lengths alone. */
void rl_grpo_shape_rewards(struct rl_rollout *r, const struct rl_cfg_grpo *c, double *unshaped);

#endif
