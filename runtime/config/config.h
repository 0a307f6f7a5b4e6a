/* The resolved slurm-rl configuration as typed C structs, and how to get one.
 *
 * A config is FILE, then its `defaults:` chain, then KEY=VALUE overrides, then
 * `${a.b}` references, then validation against the key table in schema.c.
 * Every step reports into one rl_diags list so that a user sees every problem
 * of a config in one run. */
#ifndef RL_CONFIG_H
#define RL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/config/diag.h"

/* A number that YAML may leave as null ("not set"). */
struct rl_opt_int {
	bool set;
	int64_t value;
};
struct rl_opt_float {
	bool set;
	double value;
};
struct rl_int_list {
	size_t n;
	int64_t *v;
};
struct rl_float_list {
	size_t n;
	double *v;
};
struct rl_str_list {
	size_t n;
	char **v;
};

/* One torch LR scheduler of policy.scheduler (NeMo-RL's list form). */
enum rl_torch_sched_kind { RL_TS_LINEAR, RL_TS_CONSTANT, RL_TS_COSINE };
struct rl_cfg_torch_sched {
	enum rl_torch_sched_kind kind;
	double start_factor, end_factor; /* LinearLR */
	double factor;                   /* ConstantLR */
	int64_t total_iters;             /* LinearLR, ConstantLR */
	int64_t t_max;                   /* CosineAnnealingLR */
	double eta_min;                  /* CosineAnnealingLR */
};
/* The list: torch's SequentialLR over v with n - 1 milestones (a single
 * scheduler has none); n == 0 when policy.scheduler is null. */
struct rl_cfg_sched_list {
	size_t n;
	struct rl_cfg_torch_sched *v;
	int64_t *milestones;
};

/* The sft block's own keys (NeMo-RL's SFTConfig); its max_num_steps,
 * max_num_epochs, val_period, val_at_start and seed are read into grpo. */
struct rl_cfg_sft {
	int64_t val_batches;           /* 0: the whole validation set */
	int64_t val_global_batch_size; /* examples per validation batch */
	int64_t val_micro_batch_size;
	bool val_at_end;
	bool only_unmask_final; /* the loss on the last message only */
	bool train_on_inputs;   /* the loss on every token, the prompt's too */
};

/* DAPO's overlong reward shaping (NeMo-RL's apply_reward_shaping) */
struct rl_cfg_reward_shaping {
	bool enabled;
	struct rl_opt_int overlong_buffer_length;
	struct rl_opt_float overlong_buffer_penalty;
	struct rl_opt_int max_response_length;
	struct rl_opt_float stop_properly_penalty_coef;
};

/* Rewards clamped to [source_min, source_max] and mapped linearly onto
 * [target_min, target_max] (NeMo-RL's scale_rewards). */
struct rl_cfg_reward_scaling {
	bool enabled;
	double source_min, source_max, target_min, target_max;
};

struct rl_cfg_grpo {
	int64_t num_prompts_per_step;
	int64_t num_generations_per_prompt;
	int64_t max_rollout_turns;
	int64_t max_num_epochs;
	int64_t max_num_steps;
	bool normalize_rewards;
	bool use_leave_one_out_baseline;
	int64_t val_period;
	bool val_at_start;
	int64_t max_val_samples;
	int64_t val_batch_size;
	bool overlong_filtering;
	int64_t seed;
	struct rl_opt_float advantage_clip_low;
	struct rl_opt_float advantage_clip_high;
	struct {
		bool enabled;
		int64_t max_trajectory_age_steps;
	} async_grpo;
	/* DAPO's dynamic sampling: groups whose rewards are all equal are
	 * dropped, and rounds of batch_multiplier x num_prompts_per_step
	 * prompts generated until the step has num_prompts_per_step groups */
	bool use_dynamic_sampling;
	int64_t dynamic_sampling_max_gen_batches;
	double batch_multiplier;
	struct rl_cfg_reward_shaping reward_shaping;
	struct rl_cfg_reward_scaling reward_scaling;
};

struct rl_cfg_loss_fn {
	double reference_policy_kl_penalty;
	char *reference_policy_kl_type;
	struct rl_opt_float kl_input_clamp_value;
	struct rl_opt_float kl_output_clamp_value;
	double ratio_clip_min;
	double ratio_clip_max;
	struct rl_opt_float ratio_clip_c;
	bool use_on_policy_kl_approximation;
	bool use_importance_sampling_correction;
	struct rl_opt_float truncated_importance_sampling_ratio;
	char *truncated_importance_sampling_type; /* NULL when not set */
	struct rl_opt_float truncated_importance_sampling_ratio_min;
	bool token_level_loss;
	bool sequence_level_importance_ratios;
	bool disable_ppo_ratio;
	bool force_on_policy_ratio;
	/* Dr. GRPO: a response's token losses summed and divided by this
	 * constant instead of by its own length; unset: off */
	struct rl_opt_float token_sum_normalizer;
	/* on-policy distillation's (NeMo-RL's DistillationLossFn) */
	char *kl_type; /* reverse (forward and mixed are refused) */
	double mixed_kl_weight;
	bool zero_outside_topk;
};

struct rl_cfg_checkpointing {
	bool enabled;
	char *checkpoint_dir;
	char *metric_name; /* NULL: keep the newest only */
	bool higher_is_better;
	struct rl_opt_int keep_top_k;
	int64_t save_period;
	char *model_save_format;
	char *resume;
	char *signal;
	bool async_save;
	/* what a failure (a rank lost, a collective stuck, a rank's error)
	 * does: runtime/job/failure.c */
	char *requeue_on_failure; /* auto, true or false */
	int64_t max_failure_restarts;
	bool exclude_failed_nodes;
};

struct rl_cfg_parallel {
	bool autoplan; /* `policy.parallel: auto` */
	int64_t tensor;
	int64_t pipeline;
	int64_t context;
	int64_t expert;
	int64_t expert_tensor;
	bool sequence_parallel;
	struct rl_opt_int num_layers_in_first_pipeline_stage;
	struct rl_opt_int num_layers_in_last_pipeline_stage;
	bool activation_checkpointing;
	bool distributed_optimizer;
	bool overlap_grad_reduce;
	bool overlap_param_gather;
	int64_t bucket_size;
};

struct rl_cfg_policy {
	char *model_name;
	char *tokenizer_name;       /* resolved to model_name when null */
	char *chat_template;        /* "default", NULL (passthrough), a .jinja path or a template */
	char *chat_template_kwargs; /* a JSON object's text, or NULL */
	char *backend;
	int64_t train_global_batch_size;
	int64_t train_micro_batch_size;
	int64_t generation_batch_size;
	int64_t logprob_batch_size;
	int64_t max_total_sequence_length;
	char *precision;
	struct rl_opt_int logprob_chunk_size;
	struct rl_opt_float max_grad_norm;
	int64_t make_sequence_length_divisible_by;
	struct rl_cfg_parallel parallel;
	/* a mixture of experts: NeMo-RL's megatron_cfg.freeze_moe_router and
	 * the load-balancing loss's coefficient (null: config.json's
	 * router_aux_loss_coef) */
	struct {
		bool freeze_router;
		struct rl_opt_float aux_loss_coef;
	} moe;
	struct {
		bool enabled;
		struct rl_opt_int train_mb_tokens;   /* null resolves from the batch sizes */
		struct rl_opt_int logprob_mb_tokens; /* null resolves from the batch sizes */
		char *algorithm;
		int64_t sequence_length_round;
	} sequence_packing;
	struct {
		char *name;
		double lr;
		double weight_decay;
		struct rl_float_list betas;
		double eps;
		bool foreach;
		bool fused;
	} optimizer;
	struct rl_cfg_sched_list scheduler;
	struct {
		char *type;
		int64_t warmup_steps;
		struct rl_opt_int decay_steps;
		double min_lr;
		struct rl_opt_float warmup_init; /* null: warm up from peak / warmup_steps */
	} lr_schedule;
	struct {
		struct rl_opt_int max_new_tokens; /* null resolves to max_total_sequence_length */
		double temperature;
		double top_p;
		struct rl_opt_int top_k;
		struct rl_int_list stop_token_ids;
		struct rl_str_list stop_strings;
		bool batch_invariant;
		struct rl_opt_int kv_cache_blocks;
		struct rl_opt_float gpu_memory_utilization;
		struct {
			bool enabled;
			struct rl_opt_int gpus_per_node;
			struct rl_opt_int num_nodes;
		} colocated;
		int64_t tensor_parallel_size; /* non-colocated generation's own */
	} generation;
};

struct rl_cfg_data {
	char *dataset_name;
	char *train_path;
	char *validation_path;
	char *env_name; /* NULL: the task's checker, or math for jsonl */
	char *input_key;
	char *output_key;
	/* BinaryPreferenceDataset's fields (DPO) */
	char *prompt_key;
	char *chosen_key;
	char *rejected_key;
	char *prompt_file;
	char *prompt_template;
	char *system_prompt_file;
	char *system_prompt;
	bool shuffle;
	struct rl_opt_int max_input_seq_length; /* null resolves to max_total_sequence_length */
	/* SFT: a chat dataset's messages field (dataset_name openai_format),
	 * and NeMo-RL's sft_processor switches */
	char *chat_key;
	bool add_bos, add_eos, add_generation_prompt;
};

/* One entry of the `env:` map: a named reward environment. */
struct rl_cfg_env {
	char *name;
	char *command;
	double timeout;                     /* a step's scoring on a rank, and each sample */
	struct rl_opt_float sample_timeout; /* each sample, when shorter; null: timeout */
	struct rl_opt_int num_workers;      /* null: the rank's CPUs */
	/* an environment (rl-env(7)): the program plays whole episodes, turn
	 * by turn, instead of scoring single responses */
	bool multi_turn;
	struct rl_opt_float turn_timeout;    /* one answer; null: timeout */
	struct rl_opt_float episode_timeout; /* one episode from its start; null: none */
	int64_t max_episodes_in_flight;      /* episodes one copy holds at once */
	char *observation_role;              /* tool|user: the observation's chat message */
};

struct rl_cfg_logger {
	char *log_dir;
	int64_t num_val_samples_to_print;
	bool tensorboard_enabled;
	struct {
		char *log_dir; /* NULL: <log_dir>/tensorboard */
	} tensorboard;
	bool monitor_gpus;
	struct {
		double collection_interval, flush_interval; /* seconds */
	} gpu_monitoring;
};

struct rl_cfg_cluster {
	int64_t gpus_per_node;
	int64_t num_nodes;
	double collective_timeout; /* seconds */
};

/* What a run does, decided by the config's top-level block as NeMo-RL's
 * example configs are written: `sft:`, `dpo:` or `distillation:`, else GRPO
 * (DAPO, GSPO and Dr. GRPO are GRPO configs). Each has its rlrun verb. */
enum rl_algorithm { RL_ALGO_GRPO, RL_ALGO_SFT, RL_ALGO_DPO, RL_ALGO_DISTILLATION };

/* The verb that runs a (train, sft, dpo, distill), and the config block that
 * names it (grpo, sft, dpo, distillation). */
const char *rl_algorithm_verb(enum rl_algorithm a);
const char *rl_algorithm_block(enum rl_algorithm a);

/* On-policy distillation's teacher (NeMo-RL's `teacher:` block): a frozen
 * model held with the policy's layout and precision; what else the block
 * repeats of the policy must be the policy's (teacher.c). */
struct rl_cfg_teacher {
	char *model_name;     /* NULL: no teacher */
	char *tokenizer_name; /* NULL: model_name's */
};

/* DPO's `dpo:` block, beyond the run-control keys read into grpo.* */
struct rl_cfg_dpo {
	double reference_policy_kl_penalty; /* beta */
	bool preference_average_log_probs;
	bool sft_average_log_probs;
	double preference_loss_weight;
	double sft_loss_weight;
	int64_t val_batches; /* <= 0: the whole validation set */
	int64_t val_global_batch_size;
	int64_t val_micro_batch_size;
};

struct rl_config {
	enum rl_algorithm algorithm;
	/* The run's control whatever the algorithm: the sft, dpo and
	 * distillation blocks' max_num_steps, seed, val_period... are read
	 * into it (algorithm.c) */
	struct rl_cfg_grpo grpo;
	struct rl_cfg_sft sft;
	struct rl_cfg_dpo dpo;
	struct rl_cfg_loss_fn loss_fn;
	struct rl_cfg_teacher teacher;
	struct rl_cfg_checkpointing checkpointing;
	struct rl_cfg_policy policy;
	struct rl_cfg_data data;
	struct rl_cfg_env *env;
	size_t n_env;
	struct rl_cfg_logger logger;
	struct rl_cfg_cluster cluster;
	char *source; /* the file the config came from */
};

/* Loads PATH (or, with text != NULL, the TEXT named PATH whose `defaults:`
 * resolve against base_dir), applies the overrides ("key.path=value"), resolves
 * references and validates. Returns 0 and fills *cfg, or -1 with every problem
 * in *diags (and *cfg zeroed). */
int rl_config_load(const char *path, char *const *overrides, size_t n_overrides,
                   struct rl_config *cfg, struct rl_diags *diags);
int rl_config_load_text(const char *name, const char *text, size_t len, const char *base_dir,
                        char *const *overrides, size_t n_overrides, struct rl_config *cfg,
                        struct rl_diags *diags);
void rl_config_free(struct rl_config *cfg);

/* The resolved config as YAML, every key with its effective value. */
int rl_config_write_yaml(const struct rl_config *cfg, FILE *out);

/* Finds an env entry by name, or NULL. */
const struct rl_cfg_env *rl_config_env(const struct rl_config *cfg, const char *name);

#endif
