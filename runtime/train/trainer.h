/* Everything one run holds between steps, owned by the trainer room and
 * shared by its files (setup, the loop, the step, the policy passes, the
 * checkpoint); nothing below this room includes it. The fields fall in
 * four parts: the run (config, ranks, progress), the policy being trained
 * (model, optimizer, the micro-batches' buffers), the GRPO algorithm
 * (loss, data, reward, the rollout source), and the checkpoints.
 * defines: struct rl_trainer_algo, rl_trainer_algo_grpo, rl_trainer_algo_sft,
 * rl_trainer_algo_dpo, rl_trainer_algo_distill, struct rl_trainer, rl_trainer_rank,
 * rl_trainer_world_size, rl_trainer_is_main */
#ifndef RL_TRAIN_TRAINER_H
#define RL_TRAIN_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/comm/dist.h"
#include "runtime/config/config.h"
#include "runtime/data/source.h"
#include "runtime/grpo/loss.h"
#include "runtime/grpo/rollout.h"
#include "runtime/grpo/schedule.h"
#include "runtime/model/model.h"
#include "runtime/model/optimizer.h"
#include "runtime/parallel/zero.h"
#include "runtime/reward/rewarder.h"
#include "runtime/rollout/generate.h"
#include "runtime/rollout/source.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/train/gpu_stats.h"
#include "runtime/train/metrics.h"

struct rl_ckpt_save;
struct rl_trainer;

/* What makes a run the algorithm it is: its step, its validation and the
 * loss its gradient pass takes, micro-batch by micro-batch. The loop,
 * the policy passes, the optimizer, checkpoints, resume and the stop are
 * every algorithm's. One table per algorithm: GRPO's in step.c (DAPO,
 * GSPO and Dr. GRPO are its options), SFT's in sft.c, DPO's in dpo.c,
 * on-policy distillation's in distill.c. */
struct rl_trainer_algo {
	const char *name;
	/* after the policy, its buffers and the optimizer exist; NULL: none */
	int (*setup)(struct rl_trainer *t, char *err, size_t errlen);
	void (*free)(struct rl_trainer *t); /* NULL: nothing held */
	/* as rl_trainer_step (step.h): 0, 1 when the data ran out, -1 with
	 * err, or RL_TRAIN_AGREED_FAILURE. Collective. */
	int (*step)(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
	            size_t errlen);
	/* as rl_trainer_validate (validate.h). Collective. */
	int (*validate)(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
	                size_t errlen);
	/* consecutive samples that the loss reads together and that the
	 * gradient pass keeps in one micro-batch of one data-parallel rank
	 * (DPO: 2, a pair); 0 or 1: each sample alone (GRPO) */
	int unit;
	/* as rl_loss_compute (grpo/loss.h), on the last pipeline stage */
	double (*loss)(const struct rl_trainer *t, const struct rl_loss_batch *b,
	               const struct rl_loss_norm *norm, float *dcurr, struct rl_loss_stats *acc);
};

extern const struct rl_trainer_algo rl_trainer_algo_grpo, rl_trainer_algo_sft, rl_trainer_algo_dpo,
    rl_trainer_algo_distill;

struct rl_trainer {
	/* the run */
	const struct rl_config *cfg;
	const struct rl_trainer_algo *algo; /* from cfg->algorithm */
	void *algo_state;                   /* what the algorithm holds; its free releases it */
	FILE *progress;                     /* the one-line-per-step report; NULL: none */
	/* The run's ranks; NULL in one process. With them, dp splits the
	 * samples and zero is the optimizer (opt is unused). */
	struct rl_dist *dist;
	struct rl_comm *dp;
	struct rl_comm *pp; /* NULL: one stage */

	/* the policy: the model cut for this rank, the frozen reference
	 * (swapped in to run it), and what training it takes */
	struct rl_model *model;
	void *ref_weights; /* the reference policy, in the model's precision */
	struct rl_tokenizer *tok;
	struct rl_optimizer opt;
	struct rl_zero zero;
	/* under expert parallelism, the experts' region (group NULL without) */
	struct rl_zero zero_experts;
	struct rl_lr_schedule lr;
	int64_t optimizer_steps; /* taken so far */
	/* one per micro-batch a pipeline stage holds at once (1F1B) */
	struct rl_acts **acts;
	int n_acts;
	struct rl_packed packed;
	float *row_lp;   /* per packed row: the model's logprobs */
	float *row_grad; /* per packed row: d loss / d logprob */
	int max_mb_tokens;
	float logit_scale; /* 1 / temperature, as the sampler scales */
	int logprob_chunk;
	/* policy.moe.freeze_router: the routers' weights, put back after
	 * each update (host memory; NULL until the first) */
	float *frozen;
	const char *grad_dump; /* see rlrun(1), RL_GRAD_DUMP */
	bool grad_dumped;

	/* GRPO: its loss, its prompts and rewards, and where its rollouts
	 * come from (training ranks) */
	struct rl_loss loss;
	struct rl_data_source data;
	struct rl_reward reward;
	struct rl_gen_settings gen; /* how this rank samples, both roles */
	/* non-colocated: this training rank has generation ranks beside it */
	bool remote_generation;
	struct rl_rollout_source rollouts;
	/* multi-turn: the run's episodes and their environment
	 * (rollout/episodes.h), which the rollouts play; NULL: single
	 * responses */
	struct rl_episodes *episodes;
	int64_t samples_per_step, updates_per_step;
	struct rl_metrics_log log;
	struct rl_gpu_watch gpu; /* logger.monitor_gpus */

	/* checkpoints (checkpoint.h); NULL when checkpointing.enabled is
	 * false */
	struct rl_ckpt_save *ckpt;
	uint64_t reference_xxh3; /* of the whole model as loaded: the reference policy */
	uint64_t teacher_xxh3;   /* on-policy distillation's teacher as loaded; 0: none */
	int64_t resumed_step;    /* the checkpoint's step the run resumed from; 0: fresh */
};

/* This process's rank among the run's (its role's), and their number (0
 * and 1 in one process). */
static inline int rl_trainer_rank(const struct rl_trainer *t)
{
	return t->dist ? t->dist->rank : 0;
}

static inline int rl_trainer_world_size(const struct rl_trainer *t)
{
	return t->dist ? t->dist->size : 1;
}

/* The rank that writes the metrics and speaks on the terminal: training
 * rank 0. */
static inline bool rl_trainer_is_main(const struct rl_trainer *t)
{
	return rl_trainer_rank(t) == 0 && !(t->dist && t->dist->generation);
}

#endif
