/* Which reward a run uses (data.env_name and env.<name>.*) and scoring a
 * step's samples with it. No reward failure stops a run: the sample scores
 * 0 and is counted.
 * defines: enum rl_reward_kind, struct rl_rewarder, rl_rewarder_setup,
 * rl_rewards_score */
#ifndef RL_GRPO_REWARDS_H
#define RL_GRPO_REWARDS_H

#include <stdint.h>

#include "runtime/config/config.h"
#include "runtime/data/synthetic.h"
#include "runtime/grpo/rollout.h"

enum rl_reward_kind { RL_REWARD_TASK, RL_REWARD_MATH, RL_REWARD_EXACT, RL_REWARD_COMMAND };

struct rl_reward {
	enum rl_reward_kind kind;
	enum rl_task_kind task;
	const struct rl_cfg_env *env; /* RL_REWARD_COMMAND */
	const char *name;
};

/* data.env_name null: the synthetic task's checker, or math for jsonl. A
 * name with an env.<name>.command runs that program (env.math.command
 * replaces the built-in math reward); math and exact are built in. */
int rl_rewarder_setup(struct rl_reward *r, const struct rl_config *cfg, char *err, size_t errlen);

/* Sets every sample's reward; *failures counts samples scored 0 because
 * the reward could not be computed (no answer found, program crash or
 * timeout), each also reported on stderr. -1 only for out of memory. */
int rl_rewards_score(const struct rl_reward *r, struct rl_rollout *ro, int64_t *failures, char *err,
                     size_t errlen);

#endif
