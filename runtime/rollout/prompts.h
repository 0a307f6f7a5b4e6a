/* A step's prompts, the data's next, into a new rollout.
 * defines: rl_rollout_take_prompts */
#ifndef RL_ROLLOUT_PROMPTS_H
#define RL_ROLLOUT_PROMPTS_H

#include <stddef.h>

#include "runtime/data/source.h"
#include "runtime/grpo/rollout.h"

/* The data's next n_groups prompts into r (allocated here, group_size
 * samples each): 0, 1 when the data ran out, or -1 with err (r freed
 * unless 0). */
int rl_rollout_take_prompts(struct rl_data_source *data, int n_groups, int group_size,
                            struct rl_rollout *r, char *err, size_t errlen);

#endif
