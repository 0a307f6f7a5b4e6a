/* Environments as programs: the multi-turn extension of the reward
 * program (reward/reward_command.h), so that users write them in any
 * language. A pool runs copies of the program, each started once and
 * holding several episodes at once; the caller (rollout/episodes.c) begins
 * episodes, hands each model turn's message in, and takes the answers as
 * they come, in any order: an episode waiting for its environment never
 * holds the others. The protocol itself (JSON lines, restart from the
 * transcript) is rl-env(7).
 *
 * A misbehaving program costs the episodes it failed on, as a reward
 * program costs its samples: each ends with an answer whose outcome says
 * how (crashed, timed out, bad output), scored 0 by the caller, counted in
 * the pool's failures; whether that stops the run is the caller's decision.
 * defines: struct rl_env_program, struct rl_env_start, enum rl_env_outcome,
 * struct rl_env_answer, struct rl_env_pool, rl_env_pool_open, rl_env_begin,
 * rl_env_act, rl_env_end, rl_env_wait, rl_env_pool_failures, rl_env_pool_close */
#ifndef RL_ENV_ENV_PROGRAM_H
#define RL_ENV_ENV_PROGRAM_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "runtime/reward/reward_command.h"

struct rl_env_program {
	const char *command; /* run by /bin/sh -c */
	int num_workers;     /* copies at most; < 1: rl_reward_workers(0) */
	int max_in_flight;   /* episodes one copy holds at once (>= 1) */
	/* one answer's bound, from the message it answers (or from the
	 * caller running again after being held still, as the reward
	 * program's); <= 0: none */
	double turn_timeout_s;
	/* one episode's, from rl_env_begin; <= 0: none */
	double episode_timeout_s;
	/* the signals the job is stopped with (rlrun's), or NULL: a copy
	 * they kill did not fail; its episodes go on in a fresh copy,
	 * restarted from their transcripts */
	const sigset_t *stop_signals;
};

/* What an episode begins with: the dataset's row as the reward program
 * gets it, and the row's metadata (NeMo-RL's extra_env_info). */
struct rl_env_start {
	const char *prompt;   /* the full prompt text given to the model */
	const char *problem;  /* may be NULL */
	const char *expected; /* may be NULL */
	const char *metadata; /* a JSON text, or NULL */
};

enum rl_env_outcome {
	RL_ENV_ANSWERED,   /* observation, reward and done as the program said */
	RL_ENV_CRASHED,    /* its copy died (signal or exit) before answering */
	RL_ENV_TIMED_OUT,  /* no answer within turn_timeout_s, or episode_timeout_s was up */
	RL_ENV_BAD_OUTPUT, /* the program's line for it was not a valid answer */
};

/* The answer to one rl_env_act, or an episode's end by failure. */
struct rl_env_answer {
	int episode;
	enum rl_env_outcome outcome;
	char *observation; /* malloc'd, the caller's to free; "" when none */
	size_t observation_len;
	double reward; /* this turn's (0 unless answered) */
	bool done;     /* the episode is over (always, for a failure) */
};

struct rl_env_pool;

/* A pool for episodes 0..n_episodes-1 of p; no copy starts before its
 * first episode. log (may be NULL) gets the failure lines and each copy's
 * stderr, as the reward program's. Returns 0, or -1 with err. */
int rl_env_pool_open(const struct rl_env_program *p, int n_episodes, FILE *log,
                     struct rl_env_pool **out, char *err, size_t errlen);
/* Episode e begins on a copy with room for it (a copy is started when
 * none has room and fewer than num_workers run). Nothing answers a
 * begin. e must not be in flight. Returns 0, or -1 with err when no copy
 * can be started at all (fork or pipe failure), or when s->metadata is
 * not JSON. When num_workers copies run and all are full, e waits for
 * room: it is placed when a turn of its is owed an answer and an episode
 * has ended (or a copy was lost) since. The program knows e by an id of
 * the pool's, not by e. */
int rl_env_begin(struct rl_env_pool *pool, int e, const struct rl_env_start *s, char *err,
                 size_t errlen);
/* The model's message of e's next turn; exactly one answer comes for it
 * through rl_env_wait (or the episode's failure: past episode_timeout_s
 * it is timed out at once). Returns 0, or -1 with err (e not in flight,
 * or waiting for an answer already, or answered done). */
int rl_env_act(struct rl_env_pool *pool, int e, const char *message, size_t len, char *err,
               size_t errlen);
/* e is over for the caller (done, or a limit of the run reached): the
 * program is told (unless it said done, or its copy is gone), nothing
 * answers, and e may begin again. Call it after every failure too. */
void rl_env_end(struct rl_env_pool *pool, int e);
/* Up to cap answers into out (*n of them), waiting at most wait_s for
 * the first (0: only those already there; < 0: until one comes, or
 * while none is owed, not at all). Returns 0, or -1 with err when a
 * failed copy cannot be replaced at all. */
int rl_env_wait(struct rl_env_pool *pool, double wait_s, struct rl_env_answer *out, int cap,
                int *n, char *err, size_t errlen);
/* The failures since the last call, added into *fail and cleared. */
void rl_env_pool_failures(struct rl_env_pool *pool, struct rl_reward_failures *fail);
/* Every copy told to end, then stopped and reaped; no child or
 * descriptor outlives it. NULL is fine. */
void rl_env_pool_close(struct rl_env_pool *pool);

#endif
