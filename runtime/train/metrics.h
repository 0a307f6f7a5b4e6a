/* What a GRPO step reports: one JSON object per step appended to
 * logger.log_dir/metrics.jsonl (read back by `rlrun plot`), the same
 * numbers as TensorBoard scalars under NeMo-RL's tag names when
 * logger.tensorboard_enabled, and two progress lines on the terminal.
 * defines: struct rl_step_timers, struct rl_gpu_stat, struct rl_step_metrics,
 * struct rl_metrics_log, rl_metrics_open, rl_metrics_open_resumed,
 * rl_metrics_open_tensorboard, rl_metrics_tag, rl_metrics_write,
 * rl_metrics_json, rl_metrics_close, rl_metrics_progress, struct rl_run_summary,
 * rl_run_summary_add, rl_run_summary_print */
#ifndef RL_TRAIN_METRICS_H
#define RL_TRAIN_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "kernels/memory_use.h"
#include "runtime/logger/tensorboard.h"

/* The most metrics an algorithm adds to a step's line. */
#define RL_MAX_EXTRA_METRICS 24

/* NeMo-RL's step-time table, in seconds. */
struct rl_step_timers {
	double total_step_time, generation, reward_calculation, policy_and_reference_logprobs,
	    policy_training, refit, checkpointing, validation;
	double data_processing; /* SFT: the step's examples rendered and tokenized */
	/* asynchronous GRPO (NeMo-RL's names): the trainer's wait for a
	 * rollout asked for during an earlier step, and its wait at the start
	 * of a step with none in flight (refit is written again as
	 * weight_sync); generation is then the generation ranks' own time for
	 * the rollout trained on */
	double exposed_generation, buffer_starvation;
	bool async;
};

/* One GPU of a training rank (logger.monitor_gpus), named as NeMo-RL's
 * GPU monitor names them: node.<node>.gpu.<index>.* */
struct rl_gpu_stat {
	int node;       /* the rank's node in the job (RL_NODE_RANK) */
	unsigned index; /* NVML's (nvidia-smi's) index of the GPU on the node */
	double mem_gb, mem_total_gb, util;
};

struct rl_step_metrics {
	int64_t step, total_steps;
	double reward_mean, reward_std;
	double loss, actor_loss, kl;  /* means over the step's optimizer updates */
	double token_mult_prob_error; /* mean exp(|l_gen - l_old|) over response tokens */
	double gen_logprob_max_diff;  /* max |l_gen - l_old|: how far from exact */
	double probs_ratio, clip_fraction, importance_weight;
	double grad_norm, lr; /* the last update's norm before clipping, and rate */
	/* on-policy distillation: the mean over the step's response tokens
	 * of log pi_student - log pi_teacher, the student that sampled them */
	bool distill;
	double reverse_kl;
	/* a mixture of experts (moe): the load-balancing term of the
	 * objective, coefficient included, mean over the step's updates */
	bool moe;
	double moe_aux_loss;
	/* response_tokens_mean: the model's own tokens (an episode's
	 * observations are not) */
	double response_tokens_mean, truncated_fraction;
	/* multi-turn episodes: NeMo-RL's rollout metrics (rollouts.py), and
	 * the episodes the environment failed on (scored 0) */
	bool multi_turn;
	double avg_turns_per_sample, natural_termination_rate, max_turns_reached_rate;
	double mean_total_tokens_per_sample, mean_env_tokens_per_sample;
	int64_t max_turns_per_sample, max_gen_tokens_per_sample, env_failures;
	int64_t tokens; /* prompt + response tokens of every sample */
	double tokens_per_sec;
	int64_t reward_failures, prompts_truncated;
	/* asynchronous GRPO: how many steps older the weights that generated
	 * the rollout are than those it trains */
	int64_t trajectory_age;
	/* DAPO's dynamic sampling (grpo.use_dynamic_sampling): the rounds the
	 * step took, the samples of kept groups it had no room for, the groups
	 * dropped for equal rewards, and the mean reward of the groups trained
	 * on (reward_mean and reward_std are then every generated sample's;
	 * ds_reward_* carry them from the rollout to the step's end) */
	bool dynamic_sampling;
	int64_t ds_num_gen_batches, ds_discarded_valid_samples, ds_dropped_groups;
	double filtered_reward, ds_reward_mean, ds_reward_std;
	bool has_val;
	double val_reward;
	/* SFT: no rollout, no reward: the line holds the loss, the tokens it
	 * counted (NeMo-RL's global_valid_toks) and the validation loss */
	bool supervised;
	int64_t valid_tokens;
	double val_loss; /* with has_val */
	/* DPO: no rollout, no reward either: the line holds the loss and the
	 * extras below (accuracy, margins; val_* after a validation) */
	bool preference;
	/* DPO's numbers (preference_loss, accuracy, ...), written in its
	 * line (preference) under their own names; a name val_X is a
	 * validation number (TensorBoard: validation/X) */
	struct {
		const char *name;
		double v;
	} extra[RL_MAX_EXTRA_METRICS];
	int n_extra;
	struct rl_step_timers t;
	/* the first step a process runs: this rank's parameters (its shard)
	 * and the most bytes of backend memory each kind has held at once
	 * so far (kernels/memory_use.h: weights, grads, optimizer,
	 * reference, activations, kv_cache), as num_params and
	 * mem_KIND_bytes */
	bool has_memory;
	int64_t num_params;
	int64_t mem_bytes[RL_MEM_KINDS];
	/* logger.monitor_gpus: every training rank's GPU (one entry per GPU,
	 * ranks that share one included once); owned by the caller */
	const struct rl_gpu_stat *gpus;
	int n_gpus;
};

struct rl_metrics_log {
	FILE *f;
	char *path;
	struct rl_tb_writer tb; /* tb.f NULL: no TensorBoard files */
};

/* Creates log_dir (and its parents) and starts DIR/metrics.jsonl; an
 * existing one from an earlier run is kept, renamed to metrics.N.jsonl
 * with the first free N, and *kept_as says where (NULL when there was none;
 * the caller frees it). */
int rl_metrics_open(struct rl_metrics_log *log, const char *log_dir, char **kept_as, char *err,
                    size_t errlen);
/* Appends the step's line and flushes it, so a killed run keeps every
 * finished step. Timers are the only values that differ between two runs
 * of one config. */
int rl_metrics_write(struct rl_metrics_log *log, const struct rl_step_metrics *m, char *err,
                     size_t errlen);
void rl_metrics_close(struct rl_metrics_log *log);
/* A run resumed after step `through`: DIR/metrics.jsonl keeps its lines up
 * to that step (a stopped run may have logged steps past its checkpoint,
 * which are about to be redone), replaced atomically, and is appended to.
 * Without the file, a new one starts. */
int rl_metrics_open_resumed(struct rl_metrics_log *log, const char *log_dir, int64_t through,
                            char *err, size_t errlen);
/* Starts a new TensorBoard event file in DIR (logger.tensorboard.log_dir)
 * beside metrics.jsonl, which rl_metrics_write then writes too. A run
 * resumed after step `through` marks the file so that TensorBoard drops
 * the steps after it that an earlier file holds (they are redone). */
int rl_metrics_open_tensorboard(struct rl_metrics_log *log, const char *dir, int64_t through,
                                char *err, size_t errlen);
/* The TensorBoard tag of a metrics.jsonl key, NeMo-RL's where it has the
 * same quantity (reward_mean: train/reward; rlrun(1), TENSORBOARD), into
 * buf. */
const char *rl_metrics_tag(const char *key, char *buf, size_t len);
/* The step's metrics line as a JSON object (NULL when out of memory). */
json_t *rl_metrics_json(const struct rl_step_metrics *m);

/* Two lines: "step 3/40  reward 0.125 ±0.331  loss ...  grad norm ...  lr
 * ...  response 212 tok, 5% cut  reward failures 0" and the times: "  gen
 * 0.41s ... | 1.2 s/step, 900 tok/s, ETA 0:42". */
void rl_metrics_progress(FILE *out, const struct rl_step_metrics *m, double eta_s);
/* A validation's line, "step 10/40  validation reward 0.625 (1.20s)", in
 * the algorithm's terms (SFT: its loss; DPO: its loss and accuracy). */
void rl_metrics_progress_validation(FILE *out, const struct rl_step_metrics *m);

/* The run's steps as a whole, for its last lines. */
struct rl_run_summary {
	bool supervised; /* SFT: the training and validation loss, lower is better */
	bool preference; /* DPO: the reward accuracy, its validation's too */
	int64_t steps, first_step, last_step, tokens, best_step, best_val_step, final_val_step;
	double seconds, first_reward, final_reward, best_reward, best_val, final_val;
};

/* Counts a finished step in (s zeroed before the first). */
void rl_run_summary_add(struct rl_run_summary *s, const struct rl_step_metrics *m);
/* "rlrun train: 40 steps in 0:48 (1.20 s/step, 900 tok/s)", the rewards
 * (first, final, best), and where the run left its metrics, plots,
 * TensorBoard files (tb_dir NULL: none) and checkpoints (NULL: none). */
void rl_run_summary_print(FILE *out, const struct rl_run_summary *s, const char *log_dir,
                          const char *tb_dir, const char *ckpt_dir);

#endif
