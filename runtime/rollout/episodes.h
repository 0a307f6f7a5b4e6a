/* A rank's share of a rollout as multi-turn episodes: each sample is an
 * episode the model plays with the run's environment (env/env_program.h),
 * turn by turn, on one generation session (generate/session.h): the
 * model's turn, its message to the environment, the observation rendered
 * (the chat template's message of env.<name>.observation_role, or the text
 * itself: observation.h) and appended to the sample's cache, the next
 * turn, until the environment says done or a limit (grpo.max_rollout_turns,
 * policy.max_total_sequence_length, policy.generation.max_new_tokens per
 * turn) ends it. The sample holds the whole transcript after its prompt,
 * its loss_mask on the model's tokens only, its reward the environment's
 * (the turns' rewards summed), env_scored set.
 *
 * Episodes proceed independently: the session steps every sequence that
 * can run while the environment answers the others, and an answer is
 * taken without waiting while the session has work. Under tensor or
 * pipeline parallelism every rank of the model's group generates the same
 * share: its first rank alone talks to the environment and, before each
 * engine step, tells the others what happened (which sequences finish,
 * which go on with which observation tokens), so that every rank makes the
 * same session calls.
 * defines: struct rl_episode_settings, struct rl_episodes,
 * rl_episode_settings_init, rl_episode_settings_free, rl_episodes_open, rl_episodes_close,
 * rl_episodes_name, rl_episodes_command,
 * rl_episodes_failures, rl_episodes_take_stats, rl_episode_stats_add,
 * rl_episodes_take_report, rl_episodes_add_report, rl_episodes_report_add,
 * rl_rollout_episodes_share */
#ifndef RL_ROLLOUT_EPISODES_H
#define RL_ROLLOUT_EPISODES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "runtime/chat/chat_template.h"
#include "runtime/comm/comm.h"
#include "runtime/config/config.h"
#include "runtime/env/env_program.h"
#include "runtime/grpo/rollout.h"
#include "runtime/model/model.h"
#include "runtime/rollout/episode_stats.h"
#include "runtime/rollout/generate.h"
#include "runtime/tokenizer/tokenizer.h"

/* The run's environment and how its episodes are played. */
struct rl_episode_settings {
	bool enabled;                  /* the run plays episodes (else: single responses) */
	char *name;                    /* env.<name>, or the built-in's name */
	char *command;                 /* what program.command points at */
	struct rl_env_program program; /* its command and signals point into here */
	sigset_t stop_signals;
	int max_turns;                /* grpo.max_rollout_turns */
	const char *observation_role; /* tool|user (the config's) */
	/* the run's chat template and its variables (NULL: observations
	 * are tokenized as their text); owned */
	struct rl_chat_template *chat;
	json_t *chat_vars;
};

/* The episodes of a run: its settings and the environment's pool, opened
 * at the first share and kept for the run, so that the environment's
 * copies start once per worker, not once per step. */
struct rl_episodes;

/* Fills s from cfg: a run plays episodes when data.env_name names an
 * env.<name> with multi_turn, or when it is null and data.dataset_name is
 * a built-in environment's task (calculator, guess: run as `<this rlrun>
 * env NAME`). stop_signals may be NULL. Returns 0 (s
 * filled, enabled or not), or -1 with err (an environment without a
 * command, expert parallelism, a chat template that cannot load). s keeps
 * a copy of stop_signals: the program's point into s (and move with it
 * into rl_episodes_open). */
int rl_episode_settings_init(struct rl_episode_settings *s, const struct rl_config *cfg,
                             const sigset_t *stop_signals, char *err, size_t errlen);
void rl_episode_settings_free(struct rl_episode_settings *s);

/* The episodes of a run with settings s (taken: freed by close). mp is
 * the ranks that generate the same share (the model's tensor and pipeline
 * ranks; NULL: this rank alone); its first rank talks to the environment.
 * log gets the environment's failures and stderr. */
int rl_episodes_open(struct rl_episodes **out, struct rl_episode_settings *s, struct rl_comm *mp,
                     FILE *log, char *err, size_t errlen);
void rl_episodes_close(struct rl_episodes *e);
/* The environment's name and command, for messages. */
const char *rl_episodes_name(const struct rl_episodes *e);
const char *rl_episodes_command(const struct rl_episodes *e);
/* The environment's failures since the last call, added into *fail (on
 * the group's first rank; the others have none). NULL e: none. */
void rl_episodes_failures(struct rl_episodes *e, struct rl_reward_failures *fail);
/* The share's stats since the last call (every rank of the group alike),
 * into *out, and cleared. NULL e: zeros. */
void rl_episodes_take_stats(struct rl_episodes *e, struct rl_episode_stats *out);
/* a += b (sums, and the maxima kept). */
void rl_episode_stats_add(struct rl_episode_stats *a, const struct rl_episode_stats *b);

/* The replica's (the group's first rank's): stats and failures since the
 * last call, taken. */
void rl_episodes_take_report(struct rl_episodes *e, struct rl_episodes_report *rep);
/* Training rank 0's: a replica's report, into what the next
 * rl_episodes_take_stats and rl_episodes_failures give. */
void rl_episodes_add_report(struct rl_episodes *e, const struct rl_episodes_report *rep);
/* *a += *b: two replicas' reports as one (the first failure kept). */
void rl_episodes_report_add(struct rl_episodes_report *a, const struct rl_episodes_report *b);

/* The samples of this rank's share of r (its part of dp, NULL: all of
 * them) played as episodes with m from r's prompts (and their problems,
 * answers and metadata for the environment), sample i drawing from stream
 * i of seed as rl_rollout_generate_share's do. A prompt cut to the input
 * limit keeps its samples out of the loss and counts in
 * *prompts_truncated. Returns 0, or -1 with err (the environment cannot
 * start at all, generation fails); an episode the environment failed on
 * is a sample of reward 0, counted in the failures. */
int rl_rollout_episodes_share(struct rl_episodes *e, struct rl_model *m,
                              const struct rl_tokenizer *tok, const struct rl_gen_settings *g,
                              struct rl_comm *dp, struct rl_rollout *r, uint64_t seed,
                              int64_t *prompts_truncated, char *err, size_t errlen);

#endif
