/* What a share's episodes came to, as plain numbers: their stats and,
 * from a generation replica, its report (with the environment's
 * failures). Apart from episodes.h so that the rollouts in flight and the
 * replay buffer (source.h, replay_buffer.h) hold a report without the
 * environment's and the chat template's headers.
 * defines: struct rl_episode_stats, struct rl_episodes_report */
#ifndef RL_ROLLOUT_EPISODE_STATS_H
#define RL_ROLLOUT_EPISODE_STATS_H

#include <stdint.h>

/* How a share's episodes ended, summed over steps until taken (NeMo-RL's
 * rollout metrics are made from them). */
struct rl_episode_stats {
	int64_t episodes, turns, max_turns;
	int64_t natural;           /* the environment said done */
	int64_t truncated;         /* the token limit ended it */
	int64_t max_turns_reached; /* grpo.max_rollout_turns ended it */
	int64_t failed;            /* the environment failed on it (reward 0) */
	int64_t gen_tokens, max_gen_tokens, env_tokens, total_tokens;
};

/* Non-colocated generation: what a generation replica tells training
 * rank 0 of the episodes of its share, with their samples: their stats
 * and the environment's failures. */
struct rl_episodes_report {
	struct rl_episode_stats stats;
	int64_t crashed, timed_out, bad_output;
	char first[320]; /* the first failure as logged, or "" */
};

#endif
