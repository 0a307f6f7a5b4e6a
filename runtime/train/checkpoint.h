/* A run's checkpoints (checkpoint(5)): what each rank writes, the
 * background write and its commit (the resume at start is resume.h's).
 * defines: struct rl_ckpt_save, rl_trainer_save, rl_trainer_save_poll,
 * rl_trainer_save_free, rl_trainer_param_block */
#ifndef RL_TRAIN_CHECKPOINT_H
#define RL_TRAIN_CHECKPOINT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/ckpt/reshard.h"
#include "runtime/ckpt/shard.h"
#include "runtime/rollout/wire.h"
#include "runtime/train/metrics.h"
#include "runtime/train/trainer.h"

/* One save: the host copy of this rank's pieces and the thread writing
 * them. The buffers stay allocated from one save to the next. */
struct rl_ckpt_save {
	int64_t step;
	bool in_flight; /* started and not yet committed (or failed) */
	bool thread_started;
	pthread_t thread;
	atomic_int written; /* set by the thread when its files are durable */
	float *host;
	size_t host_cap; /* floats */
	struct rl_ckpt_piece *pieces;
	int n_pieces, pieces_cap;
	char *run_state, *config; /* the first rank's extra files */
	struct rl_wire buffer;    /* and the rollout in flight; len 0: none */
	char dir[4200];           /* tmp_step_N */
	/* what the thread reports */
	int rc;
	char err[1024];
	struct rl_ckpt_file_sum shard_sum, run_state_sum, config_sum, buffer_sum;
	double started, finished; /* rl_now(): the host copy began, the files were durable */
	/* after a commit: its step, and the longest any rank took from the
	 * start of its host copy to durable files (the first rank knows it,
	 * 0 elsewhere): what a save in the grace time would cost */
	int64_t committed;
	double last_seconds;
};

/* The block of the global tensor that parameter i of the model is on this
 * rank. */
void rl_trainer_param_block(const struct rl_trainer *t, int i, struct rl_ckpt_block *b);

/* Starts the checkpoint of the step just finished (m: its metrics): waits
 * for and commits a save still in flight, copies this rank's pieces to host
 * memory, then writes them in the background (checkpointing.async_save) or
 * at once. Collective. */
int rl_trainer_save(struct rl_trainer *t, int64_t step, const struct rl_step_metrics *m, char *err,
                    size_t errlen);
/* Commits a save whose files every rank has written: the manifest, the
 * rename to step_N, latest, and keep_top_k. wait: block until the writes
 * are done; otherwise commit only if they already are. Collective. */
int rl_trainer_save_poll(struct rl_trainer *t, bool wait, char *err, size_t errlen);
/* Joins a thread still writing (its files are left as a tmp_step_N, which
 * the next start removes) and frees the buffers. */
void rl_trainer_save_free(struct rl_trainer *t);

#endif
