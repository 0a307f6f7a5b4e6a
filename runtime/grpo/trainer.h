/* Everything one GRPO run holds between steps, shared by the files of the
 * trainer (setup, the step, the policy passes); not a public API.
 * defines: struct rl_trainer, rl_mb_token_budget, rl_trainer_setup, rl_trainer_free,
 * rl_trainer_open_metrics, rl_trainer_rank, rl_trainer_world_size, rl_trainer_is_main,
 * rl_trainer_step, rl_trainer_next_prompts, rl_step_seed, rl_rollout_generate, rl_policy_logprobs,
 * rl_policy_gradients, rl_policy_train */
#ifndef RL_GRPO_TRAINER_H
#define RL_GRPO_TRAINER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/comm/dist.h"
#include "runtime/comm/outbox.h"
#include "runtime/config/config.h"
#include "runtime/data/source.h"
#include "runtime/grpo/async_rollouts.h"
#include "runtime/grpo/checkpoint.h"
#include "runtime/grpo/loss.h"
#include "runtime/grpo/metrics.h"
#include "runtime/grpo/rewards.h"
#include "runtime/grpo/rollout.h"
#include "runtime/grpo/rollout_wire.h"
#include "runtime/grpo/schedule.h"
#include "runtime/model/model.h"
#include "runtime/model/optimizer.h"
#include "runtime/parallel/zero.h"
#include "runtime/tokenizer/tokenizer.h"

struct rl_trainer {
	const struct rl_config *cfg;
	FILE *progress; /* the one-line-per-step report; NULL: none */
	/* The run's ranks; NULL in one process. With them, dp splits the
	 * samples and zero is the optimizer (opt is unused). */
	struct rl_dist *dist;
	struct rl_comm *dp;
	struct rl_comm *pp; /* NULL: one stage */
	/* non-colocated: the generation ranks make the rollouts
	 * (remote.h); on a generation rank, dist->generation */
	bool remote_generation;
	/* asynchronous GRPO: the rollouts asked for ahead (async_rollouts.h) */
	struct rl_ahead ahead;
	/* non-colocated: the step whose weights the last refit sent (the
	 * generation ranks hold them once they get to it), and, on training
	 * rank 0 and the generation ranks, what went over the bridge
	 * without waiting */
	int64_t refit_step;
	struct rl_outbox bridge_out;
	struct rl_zero zero;
	/* under expert parallelism, the experts' region (group NULL without) */
	struct rl_zero zero_experts;
	const char *grad_dump; /* see rlrun(1), RL_GRAD_DUMP */
	bool grad_dumped;

	struct rl_model *model;
	float *ref_weights; /* the frozen reference policy, swapped in to run it */
	struct rl_tokenizer *tok;
	struct rl_optimizer opt;
	struct rl_lr_schedule lr;
	struct rl_loss loss;
	struct rl_data_source data;
	struct rl_reward reward;
	struct rl_metrics_log log;
	/* one per micro-batch a pipeline stage holds at once (1F1B) */
	struct rl_acts **acts;
	int n_acts;
	struct rl_packed packed;
	float *row_lp;   /* per packed row: the model's logprobs */
	float *row_grad; /* per packed row: d loss / d logprob */
	int max_mb_tokens;

	/* policy.moe.freeze_router: the routers' weights, put back after
	 * each update (host memory; NULL until the first) */
	float *frozen;
	int64_t samples_per_step, updates_per_step;
	int64_t optimizer_steps; /* taken so far */
	float logit_scale;       /* 1 / temperature, as the sampler scales */
	int logprob_chunk;
	int32_t *stop_ids; /* EOS ids then policy.generation.stop_token_ids */
	size_t n_stop_ids, n_eos_ids;

	/* checkpoints (checkpoint.h); NULL when checkpointing.enabled is
	 * false */
	struct rl_ckpt_save *ckpt;
	uint64_t reference_xxh3; /* of the whole model as loaded: the reference policy */
	int64_t resumed_step;    /* the checkpoint's step the run resumed from; 0: fresh */
};

/* dist: the run's ranks, or NULL for one process; only the first rank
 * writes the metrics and the progress lines. */
int rl_trainer_setup(struct rl_trainer *t, const struct rl_config *cfg, struct rl_dist *dist,
                     FILE *progress, char *err, size_t errlen);
/* After a resume (or none): the first rank's metrics.jsonl, continued
 * after the resumed step, or started afresh with an earlier run's kept. */
int rl_trainer_open_metrics(struct rl_trainer *t, char *err, size_t errlen);
/* This process's rank among the run's, and their number (0 and 1 in one
 * process). */
int rl_trainer_rank(const struct rl_trainer *t);
int rl_trainer_world_size(const struct rl_trainer *t);
/* The rank that writes the metrics and speaks on the terminal: rank 0. */
bool rl_trainer_is_main(const struct rl_trainer *t);
void rl_trainer_free(struct rl_trainer *t);

/* One step: rollout, rewards, advantages, logprobs, updates; fills *m. */
int rl_trainer_step(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                    size_t errlen);

/* A step's prompts from the data into r (allocated here): 0, 1 when the
 * data ran out, or -1 with err. */
int rl_trainer_next_prompts(struct rl_trainer *t, struct rl_rollout *r, char *err, size_t errlen);
/* The sampling seed of a step: the run's seed and the step, mixed, so that
 * a step's samples depend on nothing else (a resumed run redraws them).
 * Validation uses negative steps. */
uint64_t rl_step_seed(uint64_t seed, int64_t step);
/* Tokenizes r's prompts and samples group_size responses to each: with
 * several data-parallel ranks, only this rank's share of them. */
int rl_rollout_generate(struct rl_trainer *t, struct rl_rollout *r, uint64_t seed,
                        int64_t *prompts_truncated, char *err, size_t errlen);
/* After rl_rollout_generate: scores this rank's share, then shares the
 * samples, so that every rank holds all of them, scored.
 * *reward_failures is added the whole rollout's failures. */
int rl_rollout_score(struct rl_trainer *t, struct rl_rollout *r, int64_t *reward_failures,
                     char *err, size_t errlen);

/* The most tokens one micro-batch holds: the packing budget, or the
 * micro-batch size times max_total_sequence_length without packing. */
int64_t rl_mb_token_budget(const struct rl_cfg_policy *p, bool training);

/* The policy passes over the samples of r (policy_pass.c). */
int rl_policy_logprobs(struct rl_trainer *t, struct rl_rollout *r, bool reference, char *err,
                       size_t errlen);
/* The gradients of the loss over the global batch which[0..n) (zeroed
 * first), micro-batch by micro-batch; no update. */
int rl_policy_gradients(struct rl_trainer *t, struct rl_rollout *r, const int *which, int n,
                        struct rl_loss_stats *stats, char *err, size_t errlen);
int rl_policy_train(struct rl_trainer *t, struct rl_rollout *r, struct rl_step_metrics *m,
                    char *err, size_t errlen);

#endif
