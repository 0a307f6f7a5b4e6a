/* Which reward a run uses (data.env_name and env.<name>.*) and scoring
 * samples with it. A reward that fails scores its sample 0 and is counted;
 * a reward program that cannot run at all is refused at setup.
 * defines: enum rl_reward_kind, struct rl_reward, rl_rewarder_setup, rl_rewards_score */
#ifndef RL_REWARD_REWARDER_H
#define RL_REWARD_REWARDER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/config/config.h"
#include "runtime/data/synthetic.h"
#include "runtime/reward/reward_command.h"

enum rl_reward_kind { RL_REWARD_TASK, RL_REWARD_MATH, RL_REWARD_EXACT, RL_REWARD_COMMAND };

struct rl_reward {
	enum rl_reward_kind kind;
	enum rl_task_kind task;
	const struct rl_cfg_env *env; /* RL_REWARD_COMMAND */
	const char *name;
	/* the run's environment plays episodes (env.<name>.multi_turn, or a
	 * built-in multi-turn task's environment, named as its task, with
	 * env NULL): the samples' rewards come with their episodes
	 * (rl_sample.env_scored) and nothing here scores them */
	bool multi_turn;
	/* the signals the job is stopped with: a copy of the program they
	 * kill scores its sample again (reward_command.h) */
	sigset_t stop_signals;
};

/* data.env_name null: the synthetic task's checker (calculator's and
 * guess's: their built-in environments, multi_turn), or math for jsonl. A
 * name with an env.<name>.command runs that program (env.math.command
 * replaces the built-in math reward), which must be there and executable
 * (program_check.h: refused here, before the model loads, with the key,
 * the command and why); math and exact are built in. An env with
 * multi_turn is a program of rl-env(7) (checked the same way), multi_turn.
 * stop_signals: the signals that stop the job (NULL: none). */
int rl_rewarder_setup(struct rl_reward *r, const struct rl_config *cfg,
                      const sigset_t *stop_signals, char *err, size_t errlen);

/* Sets rewards[0..n) of items[0..n) (every response text, "" for an empty
 * one); *failures counts items scored 0 because the reward could not be
 * computed (no expected answer for a built-in reward, no answer found,
 * program crash or timeout), each also reported on stderr. program (may
 * be NULL) is set to a reward program's failures, which for
 * RL_REWARD_COMMAND are all of them (zeros for a built-in reward). -1 only
 * for out of memory. */
int rl_rewards_score(const struct rl_reward *r, const struct rl_reward_item *items, size_t n,
                     double *rewards, int64_t *failures, struct rl_reward_failures *program,
                     char *err, size_t errlen);

#endif
