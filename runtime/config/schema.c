/* Every config key. Names follow NeMo-RL wherever the concept is the same, so
 * that its configs read the same here; keys NeMo-RL has and slurm-rl does not
 * implement are listed as UNSUPPORTED so that they fail loudly instead of
 * being ignored. Keys of one section must stay contiguous (the printer nests
 * by walking this table in order; tests/unit/test_schema.c checks it). */
#include "runtime/config/schema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/config/config.h"

#define OFF(f)        offsetof(struct rl_config, f)
#define EOFF(f)       offsetof(struct rl_cfg_env, f)
#define RANGE(lo, hi) .min = (lo), .max = (hi)
#define AT_LEAST(lo)  RANGE(lo, INFINITY)
#define ANY_NUMBER    RANGE(-INFINITY, INFINITY)
/* Sizes that get multiplied together (tokens x batch) stay far from int64
 * overflow: 2^24 of each is beyond any machine this will run on. */
#define SIZE_RANGE(lo) RANGE(lo, 16777216)
#define NOT_YET(p, why)                                                                            \
	{                                                                                          \
		p, RL_T_UNSUPPORTED, 0, NULL, 0, 0, NULL, 0, why, NULL, 0                          \
	}
/* NeMo-RL's blocks that nemo.c reads into slurm-rl's keys; the validator
 * meets them only switched off (ignored) or malformed */
#define NEMO_BLOCK(p, why)                                                                         \
	{                                                                                          \
		p, RL_T_UNSUPPORTED, 0, NULL, 0, 0, NULL, RL_K_NEMO, why, NULL, 0                  \
	}
#define NOT_YET_UNLESS(p, ok, why)                                                                 \
	{                                                                                          \
		p, RL_T_UNSUPPORTED, 0, NULL, 0, 0, NULL, 0, why, ok, 0                            \
	}

const struct rl_key rl_schema[] = {
    /* grpo: the algorithm */
    {"grpo.num_prompts_per_step", RL_T_INT, OFF(grpo.num_prompts_per_step), "32", SIZE_RANGE(1),
     .doc = "distinct prompts sampled per step"},
    {"grpo.num_generations_per_prompt", RL_T_INT, OFF(grpo.num_generations_per_prompt), "16",
     SIZE_RANGE(1), .doc = "samples generated per prompt (the GRPO group size)"},
    {"grpo.max_rollout_turns", RL_T_INT, OFF(grpo.max_rollout_turns), "1", RANGE(1, 1000),
     .doc = "the model's turns per episode at most; above 1 the run's environment must be "
            "multi-turn (env.<name>.multi_turn, or a built-in environment): each turn's "
            "message goes to it and its observation is appended before the next turn"},
    {"grpo.max_num_epochs", RL_T_INT, OFF(grpo.max_num_epochs), "1", AT_LEAST(1),
     .doc = "passes over the training data"},
    {"grpo.max_num_steps", RL_T_INT, OFF(grpo.max_num_steps), "1000000", AT_LEAST(1),
     .doc = "stop after this many steps (or when the epochs run out)"},
    {"grpo.normalize_rewards", RL_T_BOOL, OFF(grpo.normalize_rewards), "true",
     .doc = "divide advantages by the group's reward std when it is > 0"},
    {"grpo.use_leave_one_out_baseline", RL_T_BOOL, OFF(grpo.use_leave_one_out_baseline), "true",
     .doc = "baseline of a sample is the mean reward of the other samples of its group"},
    {"grpo.val_period", RL_T_INT, OFF(grpo.val_period), "0", AT_LEAST(0),
     .doc = "validate every N steps; 0 disables validation"},
    {"grpo.val_at_start", RL_T_BOOL, OFF(grpo.val_at_start), "false",
     .doc = "validate once before the first step"},
    {"grpo.max_val_samples", RL_T_INT, OFF(grpo.max_val_samples), "256", AT_LEAST(1),
     .doc = "validation prompts per validation"},
    {"grpo.val_batch_size", RL_T_INT, OFF(grpo.val_batch_size), "256", AT_LEAST(1),
     .doc = "prompts generated together during validation"},
    {"grpo.overlong_filtering", RL_T_BOOL, OFF(grpo.overlong_filtering), "false",
     .doc = "exclude samples cut off by max_new_tokens from the loss"},
    {"grpo.seed", RL_T_INT, OFF(grpo.seed), "42", RANGE(0, 4294967295.0),
     .doc = "seed of data order, sampling and initialisation"},
    {"grpo.advantage_clip_low", RL_T_OPT_FLOAT, OFF(grpo.advantage_clip_low), "null", ANY_NUMBER,
     .doc = "clip advantages below this value; null: no clip"},
    {"grpo.advantage_clip_high", RL_T_OPT_FLOAT, OFF(grpo.advantage_clip_high), "null", ANY_NUMBER,
     .doc = "clip advantages above this value; null: no clip"},
    NOT_YET_UNLESS("grpo.val_start_at", "-1",
                   "a delay before periodic validation is not implemented"),
    NOT_YET_UNLESS("grpo.val_at_end", "false",
                   "a validation after the last step is not implemented; use val_period"),
    NOT_YET_UNLESS("grpo.val_num_generations_per_prompt", "1",
                   "validation generates one response per prompt (no pass@k)"),
    NOT_YET_UNLESS("grpo.stop_at_validation_metric", "null",
                   "early stopping on a validation metric is not implemented"),
    NOT_YET_UNLESS("grpo.stop_at_validation_threshold", "null",
                   "early stopping on a validation metric is not implemented"),
    NOT_YET_UNLESS("grpo.seq_logprob_error_threshold", "null",
                   "filtering sequences by logprob error is not implemented"),
    NOT_YET_UNLESS("grpo.invalid_tool_call_advantage", "null",
                   "tool-call validity is the environment's (NeMo-RL reads this only on "
                   "its NeMo-Gym path): give a malformed call its reward there"),
    NOT_YET_UNLESS("grpo.malformed_thinking_advantage", "null",
                   "advantages for malformed thinking tags are not implemented; score them in "
                   "an env command"),
    {"grpo.use_dynamic_sampling", RL_T_BOOL, OFF(grpo.use_dynamic_sampling), "false",
     .doc = "DAPO's dynamic sampling: drop the prompt groups whose rewards are all equal "
            "(no gradient) and generate more prompts until the step has num_prompts_per_step "
            "groups"},
    {"grpo.dynamic_sampling_max_gen_batches", RL_T_INT, OFF(grpo.dynamic_sampling_max_gen_batches),
     "10", RANGE(1, 1000000),
     .doc = "dynamic sampling: generation rounds a step may take to fill its groups; then "
            "the run stops with an error"},
    {"grpo.batch_multiplier", RL_T_FLOAT, OFF(grpo.batch_multiplier), "1", RANGE(1, 1000),
     .doc = "dynamic sampling: each round generates int(batch_multiplier x "
            "num_prompts_per_step) prompts; must be 1 without use_dynamic_sampling"},
    {"grpo.async_grpo.enabled", RL_T_BOOL, OFF(grpo.async_grpo.enabled), "false",
     .doc = "train on a replay buffer while generation continues"},
    {"grpo.async_grpo.max_trajectory_age_steps", RL_T_INT,
     OFF(grpo.async_grpo.max_trajectory_age_steps), "1", AT_LEAST(1),
     .doc = "steps between the weights that generate a rollout and those it trains; "
            "that many rollouts are generated while a step trains"},
    NOT_YET_UNLESS("grpo.async_grpo.max_generation_failures", "0",
                   "a failed generation stops the run"),
    NOT_YET_UNLESS("grpo.async_grpo.in_flight_weight_updates", "false",
                   "weights are updated between rollouts"),
    NOT_YET_UNLESS("grpo.async_grpo.recompute_kv_cache_after_weight_updates", "false",
                   "weights are updated between rollouts"),
    {"grpo.reward_shaping.enabled", RL_T_BOOL, OFF(grpo.reward_shaping.enabled), "false",
     .doc = "DAPO's overlong reward shaping (applied after reward_scaling): a response longer "
            "than max_response_length - overlong_buffer_length loses "
            "overlong_buffer_penalty x (excess / overlong_buffer_length), at most "
            "overlong_buffer_penalty"},
    {"grpo.reward_shaping.overlong_buffer_length", RL_T_OPT_INT,
     OFF(grpo.reward_shaping.overlong_buffer_length), "null", AT_LEAST(1),
     .doc = "tokens before max_response_length over which the penalty rises to its full "
            "value (DAPO's L_cache); required when enabled"},
    {"grpo.reward_shaping.overlong_buffer_penalty", RL_T_OPT_FLOAT,
     OFF(grpo.reward_shaping.overlong_buffer_penalty), "null", AT_LEAST(0),
     .doc = "the penalty at max_response_length tokens and beyond; required when enabled"},
    {"grpo.reward_shaping.max_response_length", RL_T_OPT_INT,
     OFF(grpo.reward_shaping.max_response_length), "null", AT_LEAST(1),
     .doc = "response tokens that get the full penalty (DAPO's L_max); at most "
            "policy.max_total_sequence_length and policy.generation.max_new_tokens; required "
            "when enabled"},
    {"grpo.reward_shaping.stop_properly_penalty_coef", RL_T_OPT_FLOAT,
     OFF(grpo.reward_shaping.stop_properly_penalty_coef), "null", RANGE(0, 1),
     .doc = "instead of the overlong penalty: the reward of a response cut off by the token "
            "limit is multiplied by this; null: off"},
    {"grpo.reward_scaling.enabled", RL_T_BOOL, OFF(grpo.reward_scaling.enabled), "false",
     .doc = "clamp each reward to [source_min, source_max] and map it linearly onto "
            "[target_min, target_max], before reward_shaping"},
    {"grpo.reward_scaling.source_min", RL_T_FLOAT, OFF(grpo.reward_scaling.source_min), "0",
     ANY_NUMBER, .doc = "reward_scaling: the low end of the rewards' range"},
    {"grpo.reward_scaling.source_max", RL_T_FLOAT, OFF(grpo.reward_scaling.source_max), "1",
     ANY_NUMBER, .doc = "reward_scaling: the high end of the rewards' range"},
    {"grpo.reward_scaling.target_min", RL_T_FLOAT, OFF(grpo.reward_scaling.target_min), "0",
     ANY_NUMBER, .doc = "reward_scaling: what source_min becomes"},
    {"grpo.reward_scaling.target_max", RL_T_FLOAT, OFF(grpo.reward_scaling.target_max), "1",
     ANY_NUMBER, .doc = "reward_scaling: what source_max becomes"},

    /* dpo: direct preference optimisation (rlrun dpo); its run-control keys
     * (max_num_steps, max_num_epochs, val_period, val_at_start, seed) are
     * read into grpo.* */
    {"dpo.reference_policy_kl_penalty", RL_T_FLOAT, OFF(dpo.reference_policy_kl_penalty), "0.05",
     AT_LEAST(0), .flags = RL_K_MIN_OPEN,
     .doc = "DPO's beta: the strength of the implicit KL penalty to the reference policy"},
    {"dpo.preference_average_log_probs", RL_T_BOOL, OFF(dpo.preference_average_log_probs), "false",
     .doc = "the preference loss takes each response's mean token log-ratio instead of its sum"},
    {"dpo.sft_average_log_probs", RL_T_BOOL, OFF(dpo.sft_average_log_probs), "false",
     .doc = "the SFT term takes the chosen response's mean token log-probability instead of "
            "its sum"},
    {"dpo.preference_loss_weight", RL_T_FLOAT, OFF(dpo.preference_loss_weight), "1", AT_LEAST(0),
     .doc = "weight of the preference (DPO) loss"},
    {"dpo.sft_loss_weight", RL_T_FLOAT, OFF(dpo.sft_loss_weight), "0", AT_LEAST(0),
     .doc = "weight of the SFT loss (negative log-likelihood of the chosen response); 0: off"},
    {"dpo.val_batches", RL_T_INT, OFF(dpo.val_batches), "8", ANY_NUMBER,
     .doc = "validation batches per validation; <= 0: the whole validation set"},
    {"dpo.val_global_batch_size", RL_T_INT, OFF(dpo.val_global_batch_size), "8", SIZE_RANGE(1),
     .doc = "preference pairs per validation batch"},
    {"dpo.val_micro_batch_size", RL_T_INT, OFF(dpo.val_micro_batch_size), "1", SIZE_RANGE(1),
     .doc = "pairs per micro-batch of the validation passes"},
    NOT_YET_UNLESS("dpo.val_at_end", "false",
                   "a validation after the last step is not implemented; use val_period"),
    NOT_YET_UNLESS("dpo.preference_loss", "dpo",
                   "only the DPO preference loss is implemented (not ipo or rpo_*)"),
    NOT_YET_UNLESS("dpo.gt_reward_scale", "*", "the RPO losses are not implemented"),

    /* sft: NeMo-RL's SFTConfig; its max_num_steps, max_num_epochs, val_period,
     * val_at_start and seed are read as grpo's (algorithm.c) */
    {"sft.val_batches", RL_T_INT, OFF(sft.val_batches), "8", AT_LEAST(0),
     .doc = "SFT: validation batches per validation, each val_global_batch_size examples in "
            "the file's order; 0: the whole validation set"},
    {"sft.val_global_batch_size", RL_T_INT, OFF(sft.val_global_batch_size), "32", SIZE_RANGE(1),
     .doc = "SFT: examples per validation batch (the last one may be short)"},
    {"sft.val_micro_batch_size", RL_T_INT, OFF(sft.val_micro_batch_size), "1", SIZE_RANGE(1),
     .doc = "SFT: accepted; the validation loss does not depend on it: the forward pass cuts "
            "micro-batches as policy.logprob_batch_size (or sequence packing) says"},
    {"sft.val_at_end", RL_T_BOOL, OFF(sft.val_at_end), "false",
     .doc = "SFT: validate after the last step too (max_num_steps, or the epochs' end)"},
    {"sft.only_unmask_final", RL_T_BOOL, OFF(sft.only_unmask_final), "false",
     .doc = "SFT: the loss on the last message of a conversation only, not on every "
            "assistant message"},
    {"sft.train_on_inputs", RL_T_BOOL, OFF(sft.train_on_inputs), "false",
     .doc = "SFT: the loss on every token (prompt, system and user turns too); false: on the "
            "response (assistant) tokens only, as NeMo-RL"},

    /* loss_fn: NeMo-RL's ClippedPGLossFn */
    {"loss_fn.reference_policy_kl_penalty", RL_T_FLOAT, OFF(loss_fn.reference_policy_kl_penalty),
     "0.01", AT_LEAST(0), .doc = "weight of the KL term to the reference policy"},
    {"loss_fn.reference_policy_kl_type", RL_T_ENUM, OFF(loss_fn.reference_policy_kl_type), "k3",
     .choices = "k1|k2|k3", .doc = "KL estimator"},
    {"loss_fn.kl_input_clamp_value", RL_T_OPT_FLOAT, OFF(loss_fn.kl_input_clamp_value), "null",
     AT_LEAST(0), .flags = RL_K_MIN_OPEN,
     .doc = "clamp the log-ratio fed to the KL estimator; null: no clamp"},
    {"loss_fn.kl_output_clamp_value", RL_T_OPT_FLOAT, OFF(loss_fn.kl_output_clamp_value), "null",
     AT_LEAST(0), .flags = RL_K_MIN_OPEN, .doc = "clamp the per-token KL; null: no clamp"},
    {"loss_fn.ratio_clip_min", RL_T_FLOAT, OFF(loss_fn.ratio_clip_min), "0.2", RANGE(0, 1),
     .doc = "ratio clipped below at 1 - ratio_clip_min"},
    {"loss_fn.ratio_clip_max", RL_T_FLOAT, OFF(loss_fn.ratio_clip_max), "0.2", AT_LEAST(0),
     .doc = "ratio clipped above at 1 + ratio_clip_max"},
    {"loss_fn.ratio_clip_c", RL_T_OPT_FLOAT, OFF(loss_fn.ratio_clip_c), "null", AT_LEAST(1),
     .flags = RL_K_MIN_OPEN, .doc = "dual-clip constant (> 1) for negative advantages; null: off"},
    {"loss_fn.use_on_policy_kl_approximation", RL_T_BOOL,
     OFF(loss_fn.use_on_policy_kl_approximation), "false",
     .doc = "weight the KL term by the importance ratio to the generation policy"},
    {"loss_fn.use_importance_sampling_correction", RL_T_BOOL,
     OFF(loss_fn.use_importance_sampling_correction), "false",
     .doc = "correct for generation/training logprob mismatch"},
    {"loss_fn.truncated_importance_sampling_ratio", RL_T_OPT_FLOAT,
     OFF(loss_fn.truncated_importance_sampling_ratio), "null", AT_LEAST(0), .flags = RL_K_MIN_OPEN,
     .doc = "upper bound of the importance weight; null: no truncation"},
    {"loss_fn.truncated_importance_sampling_type", RL_T_ENUM,
     OFF(loss_fn.truncated_importance_sampling_type), "null", .choices = "tis|icepop|seq-mask-tis",
     .flags = RL_K_NULLABLE, .doc = "how weights past the bound are treated"},
    {"loss_fn.truncated_importance_sampling_ratio_min", RL_T_OPT_FLOAT,
     OFF(loss_fn.truncated_importance_sampling_ratio_min), "null", AT_LEAST(0),
     .doc = "lower bound for icepop / seq-mask-tis"},
    {"loss_fn.token_level_loss", RL_T_BOOL, OFF(loss_fn.token_level_loss), "true",
     .doc = "average over tokens of the step (true) or over sequences (false)"},
    {"loss_fn.sequence_level_importance_ratios", RL_T_BOOL,
     OFF(loss_fn.sequence_level_importance_ratios), "false",
     .doc = "one importance ratio per sequence (GSPO); needs token_level_loss false"},
    {"loss_fn.disable_ppo_ratio", RL_T_BOOL, OFF(loss_fn.disable_ppo_ratio), "false",
     .doc = "REINFORCE/RLOO: no ratio, no clipping"},
    {"loss_fn.force_on_policy_ratio", RL_T_BOOL, OFF(loss_fn.force_on_policy_ratio), "false",
     .doc = "ratio fixed at 1 (one update per rollout)"},
    {"loss_fn.token_sum_normalizer", RL_T_OPT_FLOAT, OFF(loss_fn.token_sum_normalizer), "null",
     AT_LEAST(0), .flags = RL_K_MIN_OPEN,
     .doc = "Dr. GRPO (Liu et al. 2025; verl's loss_agg_mode seq-mean-token-sum-norm): with "
            "token_level_loss false, each sequence's token losses are summed and divided by this "
            "constant (the generation budget, e.g. policy.generation.max_new_tokens) instead of "
            "by its own token count, then averaged over the step's sequences; null: off"},
    NOT_YET_UNLESS("loss_fn.use_kl_in_reward", "false", "the KL penalty lives in the loss"),
    NOT_YET_UNLESS("loss_fn.use_cispo", "false", "the CISPO loss is not implemented"),
    NOT_YET_UNLESS("loss_fn.positive_example_nll_weight", "0",
                   "the NLL term on correct samples (VAPO) is not implemented"),
    /* loss_fn: on-policy distillation's (NeMo-RL's DistillationLossFn) */
    {"loss_fn.kl_type", RL_T_ENUM, OFF(loss_fn.kl_type), "reverse",
     .choices = "forward|reverse|mixed",
     .doc = "distillation: the KL to the teacher; reverse is the per-token reverse KL on the "
            "student's own samples (log pi_student - log pi_teacher of each sampled token, "
            "its gradient a policy gradient with that KL as the negative advantage); forward "
            "and mixed (over the teacher's top-k logits) are not implemented"},
    {"loss_fn.mixed_kl_weight", RL_T_FLOAT, OFF(loss_fn.mixed_kl_weight), "0.5", RANGE(0, 1),
     .doc = "distillation: the forward KL's weight in kl_type mixed (unused by reverse)"},
    {"loss_fn.zero_outside_topk", RL_T_BOOL, OFF(loss_fn.zero_outside_topk), "false",
     .doc = "distillation: NeMo-RL's correction of a top-k KL sum; true is not implemented "
            "(the reverse KL here is estimated on the sampled token)"},

    /* distillation: on-policy distillation (rlrun distill); its run-control keys
     * (max_num_steps, seed, num_prompts_per_step, ...) are read as grpo.*'s */
    NOT_YET_UNLESS("distillation.topk_logits_k", "64",
                   "the teacher's top-k logits are not computed: the reverse KL is "
                   "estimated on the sampled token; leave NeMo-RL's default 64 (unused)"),
    NOT_YET_UNLESS("distillation.val_at_end", "false",
                   "a validation after the last step is not implemented; use val_period"),

    /* teacher: on-policy distillation's frozen teacher */
    {"teacher.model_name", RL_T_STRING, OFF(teacher.model_name), "null", .flags = RL_K_NULLABLE,
     .doc = "distillation: the teacher, as policy.model_name is given (a directory, a hub "
            "name in the local cache, builtin:NAME); any size or family whose tokenizer "
            "maps every token to the student's id; cut with the policy's layout, frozen, in "
            "policy.precision; the block's other keys, as NeMo-RL's <<: *POLICY_BASE "
            "repeats them, must equal the policy's"},
    {"teacher.tokenizer.name", RL_T_STRING, OFF(teacher.tokenizer_name), "null",
     .flags = RL_K_NULLABLE,
     .doc = "distillation: the teacher's tokenizer (checked against the student's); null: "
            "teacher.model_name's"},

    /* checkpointing */
    {"checkpointing.enabled", RL_T_BOOL, OFF(checkpointing.enabled), "true",
     .doc = "write checkpoints every save_period steps and after the last (see checkpoint(5))"},
    {"checkpointing.checkpoint_dir", RL_T_STRING, OFF(checkpointing.checkpoint_dir), "results/grpo",
     .doc = "where step_N/ directories are written"},
    {"checkpointing.metric_name", RL_T_STRING, OFF(checkpointing.metric_name), "val_reward",
     .flags = RL_K_NULLABLE,
     .doc = "metric that ranks checkpoints for keep_top_k: a key of metrics.jsonl; NeMo-RL's "
            "val:NAME and train:NAME read as NAME (val:accuracy as val_reward)"},
    {"checkpointing.higher_is_better", RL_T_BOOL, OFF(checkpointing.higher_is_better), "true",
     .doc = "direction of metric_name"},
    {"checkpointing.keep_top_k", RL_T_OPT_INT, OFF(checkpointing.keep_top_k), "3", AT_LEAST(1),
     .doc = "keep the best k checkpoints plus the newest; null: keep all"},
    {"checkpointing.save_period", RL_T_INT, OFF(checkpointing.save_period), "10", AT_LEAST(1),
     .doc = "save every N steps"},
    {"checkpointing.model_save_format", RL_T_ENUM, OFF(checkpointing.model_save_format),
     "safetensors", .choices = "safetensors", .doc = "tensor file format of shards"},
    {"checkpointing.resume", RL_T_ENUM, OFF(checkpointing.resume), "auto",
     .choices = "auto|auto_or_fresh|never|must",
     .doc = "auto: resume from the newest loadable checkpoint, start at step 1 when there is "
            "none, and stop with an error when checkpoints are there but none loads; "
            "auto_or_fresh: the same, but start at step 1 then too; never: refuse a directory "
            "with checkpoints; must: stop without a loadable checkpoint"},
    {"checkpointing.signal", RL_T_ENUM, OFF(checkpointing.signal), "SIGUSR1",
     .choices = "SIGUSR1|SIGUSR2|SIGHUP|SIGALRM|SIGURG|SIGXCPU",
     .doc = "signal that, like SIGTERM, makes the run save a checkpoint and requeue its "
            "Slurm job at the next step boundary (checkpoint(5))"},
    {"checkpointing.async_save", RL_T_BOOL, OFF(checkpointing.async_save), "true",
     .doc = "write checkpoints in the background after a host copy"},
    {"checkpointing.requeue_on_failure", RL_T_ENUM, OFF(checkpointing.requeue_on_failure), "auto",
     .choices = "auto|true|false",
     .doc = "when the watchdog finds a rank lost or a collective stuck, or a rank fails, once the "
            "run is set up: requeue the Slurm job, which resumes from the newest "
            "checkpoint (as after a preemption); auto: when the job can be requeued (sbatch, "
            "and --requeue or JobRequeue=1); otherwise the job step ends, so that no hung rank "
            "holds the allocation (checkpoint(5), FAILURES)"},
    {"checkpointing.max_failure_restarts", RL_T_INT, OFF(checkpointing.max_failure_restarts), "3",
     AT_LEAST(0),
     .doc = "failures of one Slurm job that requeue it, counted in checkpoint_dir/failures/ "
            "(every failure counts, whatever progress came between; a preemption does not); "
            "the next one ends the job with the history of its failures"},
    {"checkpointing.exclude_failed_nodes", RL_T_BOOL, OFF(checkpointing.exclude_failed_nodes),
     "false",
     .doc = "after a failure's requeue, add the nodes of the ranks that were lost to the job's "
            "excluded nodes (scontrol update ExcNodeList, which Slurm lets a job's owner do "
            "while it is pending), so that it resumes elsewhere"},
    NOT_YET_UNLESS("checkpointing.checkpoint_must_save_by", "null",
                   "slurm-rl saves on the preemption signal and the job's end time instead"),
    NOT_YET_UNLESS("checkpointing.save_optimizer", "true",
                   "checkpoints always hold the optimizer state, so that a run resumes"),
    NOT_YET_UNLESS("checkpointing.save_consolidated", "false",
                   "use `rlrun ckpt export` to write Hugging Face files"),

    /* policy: the model and how it is trained */
    {"policy.model_name", RL_T_STRING, OFF(policy.model_name), NULL, .flags = RL_K_REQUIRED,
     .doc = "local directory with the Hugging Face model files (config.json, safetensors); "
            "a Hugging Face hub name ORG/NAME[@REVISION] that is no directory is found in the "
            "local Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, else "
            "XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub: "
            "models--ORG--NAME/snapshots/COMMIT, COMMIT from refs/REVISION, main by default), "
            "never downloaded (fetch it with huggingface-cli download ORG/NAME); "
            "or builtin:tiny-llama (a tiny model initialised from grpo.seed)"},
    {"policy.tokenizer.name", RL_T_STRING, OFF(policy.tokenizer_name), "null",
     .flags = RL_K_NULLABLE,
     .doc = "directory with tokenizer.json, or a hub name found in the local Hugging Face "
            "cache as policy.model_name is; null: policy.model_name"},
    {"policy.tokenizer.chat_template", RL_T_STRING, OFF(policy.chat_template), "default",
     .flags = RL_K_NULLABLE,
     .doc = "the chat template prompts go through, as in NeMo-RL: default: the model's own "
            "(chat_template.jinja or tokenizer_config.json's chat_template; plain text when it "
            "has none); null: NeMo-RL's passthrough (the messages' contents one after the "
            "other); a path ending in .jinja: that file; else the Jinja template itself"},
    {"policy.tokenizer.chat_template_kwargs", RL_T_JSON_MAP, OFF(policy.chat_template_kwargs),
     "null", .flags = RL_K_NULLABLE,
     .doc = "more variables for the chat template, as in NeMo-RL (enable_thinking: false)"},
    NOT_YET_UNLESS("policy.tokenizer.use_fastokens", "*",
                   "a tokenizer implementation choice of NeMo-RL's"),
    NOT_YET_UNLESS("policy.offload_optimizer_for_logprob", "*",
                   "a memory placement choice of NeMo-RL's"),
    NOT_YET_UNLESS("policy.hf_config_overrides", "{}",
                   "the model is read as its config.json says; edit that file instead"),
    {"policy.backend", RL_T_ENUM, OFF(policy.backend), "auto", .choices = "auto|cpu|cuda",
     .doc = "op backend; auto: cuda where this build has it and a GPU is visible, else cpu"},
    {"policy.train_global_batch_size", RL_T_INT, OFF(policy.train_global_batch_size), "512",
     SIZE_RANGE(1), .doc = "samples per optimizer update"},
    {"policy.train_micro_batch_size", RL_T_INT, OFF(policy.train_micro_batch_size), "4",
     SIZE_RANGE(1), .doc = "samples per forward/backward (gradient accumulation)"},
    {"policy.generation_batch_size", RL_T_INT, OFF(policy.generation_batch_size), "32",
     SIZE_RANGE(1), .doc = "sequences decoded together"},
    {"policy.logprob_batch_size", RL_T_INT, OFF(policy.logprob_batch_size), "4", SIZE_RANGE(1),
     .doc = "samples per logprob forward"},
    {"policy.max_total_sequence_length", RL_T_INT, OFF(policy.max_total_sequence_length), "512",
     SIZE_RANGE(2), .doc = "prompt plus response tokens"},
    {"policy.precision", RL_T_ENUM, OFF(policy.precision), "bfloat16",
     .choices = "bfloat16|float32", .doc = "training weights; bfloat16 keeps fp32 master weights"},
    {"policy.logprob_chunk_size", RL_T_OPT_INT, OFF(policy.logprob_chunk_size), "null", AT_LEAST(1),
     .doc = "vocabulary chunk of the fused logprob; null: backend default"},
    {"policy.max_grad_norm", RL_T_OPT_FLOAT, OFF(policy.max_grad_norm), "1.0", AT_LEAST(0),
     .flags = RL_K_MIN_OPEN, .doc = "clip the global gradient norm; null: no clipping"},
    {"policy.make_sequence_length_divisible_by", RL_T_INT,
     OFF(policy.make_sequence_length_divisible_by), "1", AT_LEAST(1),
     .doc = "pad sequences to a multiple of this"},
    {"policy.parallel", RL_T_AUTO_SECTION, OFF(policy.parallel.autoplan), "false",
     .doc = "`auto` lets the planner choose the sizes below"},
    {"policy.parallel.tensor", RL_T_INT, OFF(policy.parallel.tensor), "1", AT_LEAST(1),
     .doc = "tensor-parallel size"},
    {"policy.parallel.pipeline", RL_T_INT, OFF(policy.parallel.pipeline), "1", AT_LEAST(1),
     .doc = "pipeline-parallel size"},
    {"policy.parallel.context", RL_T_INT, OFF(policy.parallel.context), "1", AT_LEAST(1),
     .doc = "context-parallel size"},
    {"policy.parallel.expert", RL_T_INT, OFF(policy.parallel.expert), "1", AT_LEAST(1),
     .doc = "expert-parallel size"},
    {"policy.parallel.expert_tensor", RL_T_INT, OFF(policy.parallel.expert_tensor), "1",
     AT_LEAST(1), .doc = "tensor-parallel size inside experts"},
    {"policy.parallel.sequence_parallel", RL_T_BOOL, OFF(policy.parallel.sequence_parallel),
     "false", .doc = "split norms and residuals along the sequence across the TP group"},
    {"policy.parallel.num_layers_in_first_pipeline_stage", RL_T_OPT_INT,
     OFF(policy.parallel.num_layers_in_first_pipeline_stage), "null", AT_LEAST(1),
     .doc = "uneven pipeline: layers of the first stage"},
    {"policy.parallel.num_layers_in_last_pipeline_stage", RL_T_OPT_INT,
     OFF(policy.parallel.num_layers_in_last_pipeline_stage), "null", AT_LEAST(1),
     .doc = "uneven pipeline: layers of the last stage"},
    {"policy.parallel.activation_checkpointing", RL_T_BOOL,
     OFF(policy.parallel.activation_checkpointing), "false",
     .doc = "recompute activations in the backward pass"},
    {"policy.parallel.distributed_optimizer", RL_T_BOOL, OFF(policy.parallel.distributed_optimizer),
     "true", .doc = "shard fp32 master weights and Adam state over data parallel (ZeRO-1)"},
    {"policy.parallel.overlap_grad_reduce", RL_T_BOOL, OFF(policy.parallel.overlap_grad_reduce),
     "true",
     .doc = "reduce-scatter each gradient bucket as soon as the last micro-batch's backward "
            "pass has finished it (Megatron's overlap_grad_reduce)"},
    {"policy.parallel.overlap_param_gather", RL_T_BOOL, OFF(policy.parallel.overlap_param_gather),
     "true",
     .doc = "all-gather the updated weights bucket by bucket while the next pass runs, each "
            "waited for where it is first read (Megatron's overlap_param_gather)"},
    {"policy.parallel.bucket_size", RL_T_INT, OFF(policy.parallel.bucket_size), "40000000",
     AT_LEAST(1),
     .doc = "parameters per data-parallel gradient and weight bucket (Megatron's bucket_size)"},
    {"policy.moe.freeze_router", RL_T_BOOL, OFF(policy.moe.freeze_router), "false",
     .doc = "a mixture of experts: the routers are not trained (NeMo-RL's freeze_moe_router)"},
    {"policy.moe.aux_loss_coef", RL_T_OPT_FLOAT, OFF(policy.moe.aux_loss_coef), "null", AT_LEAST(0),
     .doc = "coefficient of the load-balancing loss; null: config.json's router_aux_loss_coef"},
    NEMO_BLOCK("policy.dtensor_cfg",
               "NeMo-RL's DTensor block: when enabled, its sizes are read into policy.parallel "
               "(see NEMO-RL CONFIGS in rl-config(5)); switched off, it is ignored"),
    NEMO_BLOCK("policy.megatron_cfg",
               "NeMo-RL's Megatron block: when enabled, its sizes, optimizer and scheduler are "
               "read into policy.parallel, policy.optimizer and policy.lr_schedule (see NEMO-RL "
               "CONFIGS in rl-config(5)); switched off, it is ignored"),
    NOT_YET_UNLESS("policy.dynamic_batching", NULL, "use policy.sequence_packing"),
    {"policy.sequence_packing.enabled", RL_T_BOOL, OFF(policy.sequence_packing.enabled), "true",
     .doc = "pack sequences into micro-batches of train_mb_tokens"},
    {"policy.sequence_packing.train_mb_tokens", RL_T_OPT_INT,
     OFF(policy.sequence_packing.train_mb_tokens), "null", AT_LEAST(1),
     .doc = "tokens per training micro-batch; null: max_total_sequence_length x "
            "train_micro_batch_size"},
    {"policy.sequence_packing.logprob_mb_tokens", RL_T_OPT_INT,
     OFF(policy.sequence_packing.logprob_mb_tokens), "null", AT_LEAST(1),
     .doc = "tokens per logprob micro-batch; null: max_total_sequence_length x logprob_batch_size"},
    {"policy.sequence_packing.algorithm", RL_T_ENUM, OFF(policy.sequence_packing.algorithm),
     "first_fit_decreasing",
     .choices =
         "first_fit_decreasing|modified_first_fit_decreasing|first_fit_shuffle|concatenative",
     .doc = "NeMo-RL's bin-packing names, all read as first_fit_decreasing: slurm-rl's loss "
            "is normalised over the whole step, so the partition into micro-batches changes "
            "how many run (speed), not the update beyond the order of sums"},
    NOT_YET_UNLESS("policy.sequence_packing.microbatch_order", "*",
                   "the order micro-batches run in changes only the order of sums"),
    {"policy.sequence_packing.sequence_length_round", RL_T_INT,
     OFF(policy.sequence_packing.sequence_length_round), "64", AT_LEAST(1),
     .doc = "round packed lengths up to a multiple of this"},
    {"policy.optimizer.name", RL_T_ENUM, OFF(policy.optimizer.name), "torch.optim.AdamW",
     .choices = "torch.optim.AdamW", .doc = "optimizer (NeMo-RL's name for AdamW)"},
    {"policy.optimizer.kwargs.lr", RL_T_FLOAT, OFF(policy.optimizer.lr), "5e-06", AT_LEAST(0),
     .doc = "peak learning rate"},
    {"policy.optimizer.kwargs.weight_decay", RL_T_FLOAT, OFF(policy.optimizer.weight_decay), "0.01",
     AT_LEAST(0), .doc = "decoupled weight decay"},
    {"policy.optimizer.kwargs.betas", RL_T_FLOAT_LIST, OFF(policy.optimizer.betas), "[0.9, 0.999]",
     RANGE(0, 1), .list_len = 2, .doc = "Adam beta1, beta2, each in [0, 1]"},
    {"policy.optimizer.kwargs.eps", RL_T_FLOAT, OFF(policy.optimizer.eps), "1e-08", AT_LEAST(0),
     .flags = RL_K_MIN_OPEN, .doc = "Adam epsilon"},
    {"policy.optimizer.kwargs.foreach", RL_T_BOOL, OFF(policy.optimizer.foreach), "false",
     .doc = "a PyTorch implementation choice, read for NeMo-RL compatibility; no effect here"},
    {"policy.optimizer.kwargs.fused", RL_T_BOOL, OFF(policy.optimizer.fused), "false",
     .doc = "a PyTorch implementation choice, read for NeMo-RL compatibility; no effect here"},
    {"policy.scheduler", RL_T_SCHEDULERS, OFF(policy.scheduler), "null",
     .doc = "NeMo-RL's torch schedulers: a list of {name: torch.optim.lr_scheduler.LinearLR | "
            "ConstantLR | CosineAnnealingLR, kwargs: {...}} and one {milestones: [...]} "
            "(SequentialLR), or one {name, kwargs}; each rate is torch's closed form at the "
            "optimizer step counted from the scheduler's milestone (NeMo-RL steps once per GRPO "
            "step: the same with one optimizer step per GRPO step); null: policy.lr_schedule"},
    {"policy.lr_schedule.type", RL_T_ENUM, OFF(policy.lr_schedule.type), "constant",
     .choices = "constant|linear_warmup|cosine|linear",
     .doc = "learning-rate schedule: after the warmup, constant and linear_warmup hold the "
            "peak, cosine and linear fall to min_lr by decay_steps (Megatron's "
            "lr_decay_style cosine and linear)"},
    {"policy.lr_schedule.warmup_steps", RL_T_INT, OFF(policy.lr_schedule.warmup_steps), "0",
     AT_LEAST(0), .doc = "optimizer steps of linear warmup (any type): step k < N uses lr*(k+1)/N"},
    {"policy.lr_schedule.decay_steps", RL_T_OPT_INT, OFF(policy.lr_schedule.decay_steps), "null",
     AT_LEAST(1),
     .doc = "cosine, linear: optimizer step at which min_lr is reached; null: the last step"},
    {"policy.lr_schedule.min_lr", RL_T_FLOAT, OFF(policy.lr_schedule.min_lr), "0", AT_LEAST(0),
     .doc = "cosine, linear: floor of the learning rate"},
    {"policy.lr_schedule.warmup_init", RL_T_OPT_FLOAT, OFF(policy.lr_schedule.warmup_init), "null",
     AT_LEAST(0),
     .doc = "Megatron's lr_warmup_init: step k < warmup_steps uses warmup_init + (lr - "
            "warmup_init) * k / warmup_steps; null: lr * (k + 1) / warmup_steps"},
    NEMO_BLOCK("policy.generation.backend",
               "NeMo-RL's engine: vllm or megatron, both read as slurm-rl's own engine "
               "(with a note)"),
    {"policy.generation.max_new_tokens", RL_T_OPT_INT, OFF(policy.generation.max_new_tokens),
     "null", AT_LEAST(1), .doc = "response length limit; null: max_total_sequence_length"},
    {"policy.generation.temperature", RL_T_FLOAT, OFF(policy.generation.temperature), "1.0",
     AT_LEAST(0), .doc = "sampling temperature; 0 is greedy"},
    {"policy.generation.top_p", RL_T_FLOAT, OFF(policy.generation.top_p), "1.0", RANGE(0, 1),
     .flags = RL_K_MIN_OPEN, .doc = "nucleus sampling mass"},
    {"policy.generation.top_k", RL_T_OPT_INT, OFF(policy.generation.top_k), "null", AT_LEAST(1),
     .doc = "sample among the k most likely tokens; null: all"},
    {"policy.generation.stop_token_ids", RL_T_INT_LIST, OFF(policy.generation.stop_token_ids),
     "null", AT_LEAST(0), .doc = "token ids that end a sample (besides EOS)"},
    {"policy.generation.stop_strings", RL_T_STRING_LIST, OFF(policy.generation.stop_strings),
     "null", .doc = "strings that end a sample"},
    {"policy.generation.batch_invariant", RL_T_BOOL, OFF(policy.generation.batch_invariant), "true",
     .doc = "generation and the logprob pass use batch-invariant kernels, so the logprobs "
            "generation reports are the trainer's to the bit (gen_logprob_max_diff 0); false: "
            "the fastest GEMMs"},
    {"policy.generation.gpu_memory_utilization", RL_T_OPT_FLOAT,
     OFF(policy.generation.gpu_memory_utilization), "null", RANGE(0, 1), .flags = RL_K_MIN_OPEN,
     .doc = "on a GPU, the share of its memory the run may hold once the KV cache is made "
            "(vLLM's, NeMo-RL's vllm_cfg.gpu_memory_utilization): the cache gets what is "
            "left, and fewer sequences run at once if it cannot hold generation_batch_size "
            "of the longest length; null: the cache for generation_batch_size of them; "
            "nothing on the CPU"},
    {"policy.generation.kv_cache_blocks", RL_T_OPT_INT, OFF(policy.generation.kv_cache_blocks),
     "null", AT_LEAST(1),
     .doc = "blocks of 16 tokens in the paged KV cache; null: enough for "
            "generation_batch_size sequences of the longest length"},
    NOT_YET_UNLESS("policy.generation.port_range_low", "*", "ports of NeMo-RL's vLLM servers"),
    NOT_YET_UNLESS("policy.generation.port_range_high", "*", "ports of NeMo-RL's vLLM servers"),
    NOT_YET_UNLESS("policy.generation.refit_transport", "*",
                   "how NeMo-RL moves weights to vLLM; slurm-rl refits in place"),
    NOT_YET_UNLESS("policy.generation.refit_cfg", "*",
                   "how NeMo-RL moves weights to vLLM; slurm-rl refits in place"),
    NOT_YET_UNLESS("policy.generation.real_quant_export_cpu_offload", "*",
                   "a memory placement choice of NeMo-RL's"),
    NOT_YET_UNLESS("policy.generation.mcore_generation_config", "*",
                   "tuning of Megatron's inference engine; slurm-rl generates with its own"),
    NEMO_BLOCK("policy.generation.vllm_cfg",
               "NeMo-RL's vLLM block: tensor_parallel_size and gpu_memory_utilization are read "
               "into the keys of those names here, max_model_len and precision are checked, the "
               "rest is noted (see NEMO-RL CONFIGS in rl-config(5))"),
    NOT_YET_UNLESS("policy.generation.vllm_kwargs", "{}", "slurm-rl does not use vLLM"),
    {"policy.generation.colocated.enabled", RL_T_BOOL, OFF(policy.generation.colocated.enabled),
     "true", .doc = "generation shares the training GPUs"},
    {"policy.generation.colocated.resources.gpus_per_node", RL_T_OPT_INT,
     OFF(policy.generation.colocated.gpus_per_node), "null", AT_LEAST(1),
     .doc = "non-colocated: GPUs per node reserved for generation"},
    {"policy.generation.colocated.resources.num_nodes", RL_T_OPT_INT,
     OFF(policy.generation.colocated.num_nodes), "null", AT_LEAST(1),
     .doc = "non-colocated: nodes reserved for generation"},
    {"policy.generation.tensor_parallel_size", RL_T_INT,
     OFF(policy.generation.tensor_parallel_size), "1", AT_LEAST(1),
     .doc = "non-colocated: tensor parallelism of the generation ranks (vLLM's "
            "tensor_parallel_size in NeMo-RL)"},

    /* data */
    {"data.dataset_name", RL_T_ENUM, OFF(data.dataset_name), "jsonl",
     .choices = "jsonl|openai_format|arithmetic|copy|sort|calculator|guess|"
                "BinaryPreferenceDataset|PreferenceDataset",
     .doc = "jsonl: data.train.path; openai_format (SFT): data.train.path with a list of chat "
            "messages per line; arithmetic, copy, sort: built-in synthetic tasks made from "
            "grpo.seed; calculator, guess: built-in multi-turn tasks played with their "
            "built-in environments (data.env_name null; see MULTI-TURN in rl-config(5)); "
            "BinaryPreferenceDataset, PreferenceDataset: DPO's preference pairs "
            "(see PREFERENCE DATA in rl-config(5))"},
    {"data.train.path", RL_T_STRING, OFF(data.train_path), "null", .flags = RL_K_NULLABLE,
     .doc = "JSONL training set (one object per line)"},
    {"data.validation.path", RL_T_STRING, OFF(data.validation_path), "null", .flags = RL_K_NULLABLE,
     .doc = "JSONL validation set"},
    {"data.env_name", RL_T_STRING, OFF(data.env_name), "null", .flags = RL_K_NULLABLE,
     .doc = "reward: math, exact, or an env.<name> with a command; null: the synthetic "
            "task's own checker, math for jsonl"},
    {"data.input_key", RL_T_STRING, OFF(data.input_key), "problem",
     .doc = "JSONL field holding the problem"},
    {"data.output_key", RL_T_STRING, OFF(data.output_key), "expected_answer",
     .doc = "JSONL field holding the reference answer"},
    {"data.prompt_key", RL_T_STRING, OFF(data.prompt_key), "prompt",
     .doc = "BinaryPreferenceDataset: the field holding the prompt"},
    {"data.chosen_key", RL_T_STRING, OFF(data.chosen_key), "chosen",
     .doc = "BinaryPreferenceDataset: the field holding the preferred response"},
    {"data.rejected_key", RL_T_STRING, OFF(data.rejected_key), "rejected",
     .doc = "BinaryPreferenceDataset: the field holding the dispreferred response"},
    {"data.prompt_file", RL_T_STRING, OFF(data.prompt_file), "null", .flags = RL_K_NULLABLE,
     .doc = "prompt template file with {} or {problem}: the user's turn of the chat template"},
    {"data.prompt_template", RL_T_STRING, OFF(data.prompt_template), "null", .flags = RL_K_NULLABLE,
     .doc = "inline prompt template with {problem}"},
    {"data.system_prompt_file", RL_T_STRING, OFF(data.system_prompt_file), "null",
     .flags = RL_K_NULLABLE, .doc = "system prompt file: the system turn of the chat template"},
    {"data.system_prompt", RL_T_STRING, OFF(data.system_prompt), "null", .flags = RL_K_NULLABLE,
     .doc = "inline system prompt"},
    NOT_YET_UNLESS("data.use_multiple_dataloader", "false",
                   "one data set per run; several data loaders are not implemented"),
    NOT_YET_UNLESS("data.num_workers", "*",
                   "NeMo-RL's data-loader processes; slurm-rl reads data in the rank"),
    {"data.shuffle", RL_T_BOOL, OFF(data.shuffle), "true",
     .doc = "shuffle each epoch by grpo.seed"},
    {"data.max_input_seq_length", RL_T_OPT_INT, OFF(data.max_input_seq_length), "null", AT_LEAST(1),
     .doc = "prompt token limit; null: max_total_sequence_length"},
    {"data.chat_key", RL_T_STRING, OFF(data.chat_key), "messages",
     .doc = "openai_format: the field of each line holding its list of {role, content} "
            "messages"},
    {"data.add_bos", RL_T_BOOL, OFF(data.add_bos), "true",
     .doc = "SFT: the BOS token before an example unless it starts with it"},
    {"data.add_eos", RL_T_BOOL, OFF(data.add_eos), "true",
     .doc = "SFT: the EOS token after an example unless it ends with it (before trailing "
            "newlines)"},
    {"data.add_generation_prompt", RL_T_BOOL, OFF(data.add_generation_prompt), "false",
     .doc = "SFT, openai_format: the chat template's generation prompt after user and tool "
            "messages, so that the assistant's header is prompt, not trained on"},

    /* env: named reward environments, env.<name>.* */
    {"env.*.command", RL_T_STRING, EOFF(command), "null", .flags = RL_K_NULLABLE | RL_K_IN_ENV,
     .doc = "external reward program: one JSON sample per line in, one reward per line out"},
    {"env.*.timeout", RL_T_FLOAT, EOFF(timeout), "60", AT_LEAST(0),
     .flags = RL_K_MIN_OPEN | RL_K_IN_ENV,
     .doc = "seconds a step's scoring may take on a rank, and each reward: the program is then "
            "killed and the samples it has not scored score 0 (counted as timed out)"},
    {"env.*.sample_timeout", RL_T_OPT_FLOAT, EOFF(sample_timeout), "null", AT_LEAST(0),
     .flags = RL_K_MIN_OPEN | RL_K_IN_ENV,
     .doc = "seconds one reward may take, when shorter than timeout: the copy that hangs on a "
            "sample is killed and a fresh one scores the rest of its share (with timeout alone "
            "that share is lost with it); null: timeout"},
    {"env.*.num_workers", RL_T_OPT_INT, EOFF(num_workers), "null", AT_LEAST(1),
     .flags = RL_K_IN_ENV,
     .doc = "copies of the reward program run at a time, each scoring a share of the rank's "
            "samples; null: as many as the rank has CPUs (its CPU affinity)"},
    {"env.*.multi_turn", RL_T_BOOL, EOFF(multi_turn), "false", .flags = RL_K_IN_ENV,
     .doc = "the command is an environment (rl-env(7)): it plays whole episodes, answering "
            "each of the model's turns with an observation, a reward and whether the episode "
            "is done, several episodes at once; false: a reward program"},
    {"env.*.turn_timeout", RL_T_OPT_FLOAT, EOFF(turn_timeout), "null", AT_LEAST(0),
     .flags = RL_K_MIN_OPEN | RL_K_IN_ENV,
     .doc = "multi_turn: seconds the environment may take to answer one turn; the episode "
            "then ends with reward 0 (counted as timed out) and the copy that hangs is "
            "replaced; null: timeout"},
    {"env.*.episode_timeout", RL_T_OPT_FLOAT, EOFF(episode_timeout), "null", AT_LEAST(0),
     .flags = RL_K_MIN_OPEN | RL_K_IN_ENV,
     .doc = "multi_turn: seconds one episode may last from its start, the model's turns "
            "included; it then ends with reward 0 (counted as timed out); null: no bound"},
    {"env.*.max_episodes_in_flight", RL_T_INT, EOFF(max_episodes_in_flight), "64",
     AT_LEAST(1), .flags = RL_K_IN_ENV,
     .doc = "multi_turn: episodes one copy of the environment holds at once"},
    {"env.*.observation_role", RL_T_ENUM, EOFF(observation_role), "tool",
     .choices = "tool|user", .flags = RL_K_IN_ENV,
     .doc = "multi_turn: the chat message an observation becomes in the model's chat "
            "template (a tool result or a user turn); without a template the observation's "
            "text is appended as it is"},
    NOT_YET_UNLESS("env.*.math_verify_impl", "*",
                   "NeMo-RL's choice of math checker (hf_math_verify, dapo_math_verify); "
                   "slurm-rl's math reward is its own, built in"),

    /* logger */
    {"logger.log_dir", RL_T_STRING, OFF(logger.log_dir), "logs",
     .doc = "metrics.jsonl and logs go here"},
    {"logger.num_val_samples_to_print", RL_T_INT, OFF(logger.num_val_samples_to_print), "0",
     AT_LEAST(0),
     .doc = "validation samples printed on the terminal, one line each: control "
            "characters are shown escaped as in C (newline, tab, the others in hex)"},
    {"logger.tensorboard_enabled", RL_T_BOOL, OFF(logger.tensorboard_enabled), "false",
     .doc = "also write every metric of metrics.jsonl to TensorBoard event files, under "
            "NeMo-RL's tag names (rlrun(1), TENSORBOARD)"},
    {"logger.tensorboard.log_dir", RL_T_STRING, OFF(logger.tensorboard.log_dir), "null",
     .flags = RL_K_NULLABLE,
     .doc = "where the event files go; null: <logger.log_dir>/tensorboard, as NeMo-RL"},
    {"logger.monitor_gpus", RL_T_BOOL, OFF(logger.monitor_gpus), "false",
     .doc = "log each training rank's GPU memory and utilisation (NVML) with every step; "
            "on the CPU backend a note says there is nothing to monitor"},
    {"logger.gpu_monitoring.collection_interval", RL_T_FLOAT,
     OFF(logger.gpu_monitoring.collection_interval), "10", AT_LEAST(0), .flags = RL_K_MIN_OPEN,
     .doc = "seconds between two readings of a GPU; each step also reads it at its end"},
    {"logger.gpu_monitoring.flush_interval", RL_T_FLOAT, OFF(logger.gpu_monitoring.flush_interval),
     "10", AT_LEAST(0), .flags = RL_K_MIN_OPEN,
     .doc = "accepted for NeMo-RL's configs; the readings are written with each step's "
            "metrics, whatever its value"},
    NOT_YET_UNLESS("logger.wandb_enabled", "false", "use metrics.jsonl and `rlrun plot`"),
    NOT_YET_UNLESS("logger.mlflow_enabled", "false", "use metrics.jsonl and `rlrun plot`"),
    NOT_YET_UNLESS("logger.swanlab_enabled", "false", "use metrics.jsonl and `rlrun plot`"),
    NOT_YET("logger.wandb", "use metrics.jsonl and `rlrun plot`"),
    NOT_YET("logger.mlflow", "use metrics.jsonl and `rlrun plot`"),

    /* cluster: used without Slurm; under Slurm the allocation decides */
    {"cluster.gpus_per_node", RL_T_INT, OFF(cluster.gpus_per_node), "1", AT_LEAST(0),
     .doc = "GPUs per node when not under Slurm (0: CPU backend)"},
    {"cluster.num_nodes", RL_T_INT, OFF(cluster.num_nodes), "1", AT_LEAST(1),
     .doc = "nodes when not under Slurm"},
    NOT_YET_UNLESS("cluster.master_port_range_low", "*", "ports of NeMo-RL's Ray cluster"),
    NOT_YET_UNLESS("cluster.master_port_range_high", "*", "ports of NeMo-RL's Ray cluster"),
    NOT_YET_UNLESS("cluster.segment_size", "*",
                   "placement follows the topology slurm-rl reads from the node"),
    {"cluster.collective_timeout", RL_T_FLOAT, OFF(cluster.collective_timeout), "600", AT_LEAST(0),
     .flags = RL_K_MIN_OPEN,
     .doc = "seconds a collective may wait for the other ranks; then every rank names the "
            "stuck one and exits"},
    NOT_YET_UNLESS("on_policy_distillation", "null", "on-policy distillation is not implemented"),
};

const size_t rl_schema_len = sizeof(rl_schema) / sizeof(rl_schema[0]);

/* Blocks NeMo-RL's configs carry switched off. One table, not a flag per
 * row, so that a block with no row at all (policy.draft, data_plane) is
 * covered the same way as an UNSUPPORTED one. */
static const struct {
	const char *block, *switch_key;
} switches[] = {
    {"policy.dtensor_cfg", "enabled"},
    {"policy.megatron_cfg", "enabled"},
    {"policy.dynamic_batching", "enabled"},
    {"policy.draft", "enabled"},
    {"data_plane", "enabled"},
    {"logger.wandb", "logger.wandb_enabled"},
    {"logger.tensorboard", "logger.tensorboard_enabled"},
    {"logger.mlflow", "logger.mlflow_enabled"},
    {"logger.swanlab", "logger.swanlab_enabled"},
    {"logger.gpu_monitoring", "logger.monitor_gpus"},
};

const char *rl_schema_switch(const char *path)
{
	for (size_t i = 0; i < sizeof(switches) / sizeof(switches[0]); i++)
		if (strcmp(switches[i].block, path) == 0)
			return switches[i].switch_key;
	return NULL;
}

/* Matches the first plen characters of a schema path (with `*` components)
 * against the start of a concrete dotted path; returns the length of path
 * matched, or 0 on mismatch. */
static size_t match_prefix(const char *pattern, size_t plen, const char *path)
{
	const char *p = pattern, *end = pattern + plen, *s = path;
	while (p < end) {
		if (*p == '*') {
			size_t n = strcspn(s, ".");
			if (n == 0)
				return 0;
			s += n;
			p++;
			continue;
		}
		if (*p != *s)
			return 0;
		p++;
		s++;
	}
	return (size_t)(s - path);
}

const struct rl_key *rl_schema_find(const char *path)
{
	for (size_t i = 0; i < rl_schema_len; i++) {
		const struct rl_key *k = &rl_schema[i];
		size_t n = match_prefix(k->path, strlen(k->path), path);
		if (!n)
			continue;
		if (path[n] == '\0')
			return k;
		/* everything under an unsupported section is unsupported */
		if (path[n] == '.' && k->type == RL_T_UNSUPPORTED)
			return k;
	}
	return NULL;
}

bool rl_schema_is_section(const char *path)
{
	size_t len = strlen(path);
	for (size_t i = 0; i < rl_schema_len; i++) {
		const char *kp = rl_schema[i].path;
		for (const char *dot = strchr(kp, '.'); dot; dot = strchr(dot + 1, '.'))
			if (match_prefix(kp, (size_t)(dot - kp), path) == len)
				return true;
	}
	return false;
}

static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 200 || lb > 200)
		return (size_t)-1;
	size_t row[201];
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			if (up + 1 < best)
				best = up + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

bool rl_schema_suggest(const char *path, char *out, size_t cap)
{
	/* A misspelt leaf is the common case: compare against keys and sections
	 * cut to the same depth, and accept a distance up to a third of the
	 * length so that unrelated names are not offered. */
	size_t best = (size_t)-1;
	int depth = 0;
	for (const char *c = path; *c; c++)
		depth += *c == '.';
	for (size_t i = 0; i < rl_schema_len; i++) {
		const char *kp = rl_schema[i].path;
		char cut[256];
		size_t n = strlen(kp);
		if (strchr(kp, '*') || n >= sizeof(cut))
			continue;
		memcpy(cut, kp, n + 1);
		int d = 0;
		for (char *c = cut; *c; c++)
			if (*c == '.' && d++ == depth) {
				*c = '\0';
				break;
			}
		size_t dist = edit_distance(path, cut);
		if (dist < best && strlen(cut) < cap) {
			best = dist;
			memcpy(out, cut, strlen(cut) + 1);
		}
	}
	return best <= strlen(path) / 3 + 1;
}

const char *rl_key_type_name(const struct rl_key *k)
{
	switch (k->type) {
	case RL_T_BOOL:
		return "bool";
	case RL_T_INT:
		return "int";
	case RL_T_OPT_INT:
		return "int or null";
	case RL_T_FLOAT:
		return "float";
	case RL_T_OPT_FLOAT:
		return "float or null";
	case RL_T_STRING:
		return k->flags & RL_K_NULLABLE ? "string or null" : "string";
	case RL_T_ENUM:
		return k->flags & RL_K_NULLABLE ? "enum or null" : "enum";
	case RL_T_INT_LIST:
		return "list of int";
	case RL_T_FLOAT_LIST:
		return "list of float";
	case RL_T_STRING_LIST:
		return "list of string";
	case RL_T_JSON_MAP:
		return "mapping or null";
	case RL_T_AUTO_SECTION:
		return "auto or section";
	case RL_T_SCHEDULERS:
		return "list of torch schedulers";
	case RL_T_UNSUPPORTED:
		return "not supported";
	}
	return "?";
}

bool rl_key_range_text(const struct rl_key *k, char *out, size_t cap)
{
	bool numeric = k->type == RL_T_INT || k->type == RL_T_OPT_INT || k->type == RL_T_FLOAT ||
	               k->type == RL_T_OPT_FLOAT || k->type == RL_T_INT_LIST ||
	               k->type == RL_T_FLOAT_LIST;
	if (!numeric || (isinf(k->min) && isinf(k->max))) {
		*out = '\0';
		return false;
	}
	char lo[32] = "-inf", hi[32] = "inf";
	if (!isinf(k->min))
		snprintf(lo, sizeof(lo), "%.15g", k->min);
	if (!isinf(k->max))
		snprintf(hi, sizeof(hi), "%.15g", k->max);
	snprintf(out, cap, "%s%s, %s%s", k->flags & RL_K_MIN_OPEN ? "(" : "[", lo, hi,
	         isinf(k->max) ? ")" : "]");
	return true;
}
