/* Constraints between keys, the ones NeMo-RL asserts at run time; here they
 * are found before a job is queued. Each error points at the key to change. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "runtime/config/internal.h"

struct rules {
	const struct rl_key_pos *pos;
	const char *root_file;
	struct rl_diags *d;
};

static void rule_error(struct rules *r, const char *path, const char *msg)
{
	const struct rl_key *k = rl_schema_find(path);
	const struct rl_key_pos *p = k ? &r->pos[k - rl_schema] : NULL;
	if (p && p->file)
		rl_diag_add(r->d, p->file, p->line, p->col, path, "%s", msg);
	else
		rl_diag_add(r->d, r->root_file, 1, 1, path, "%s", msg);
}

/* SFT trains on its data's answers: nothing is generated or scored. */
static void sft_rules(struct rules *r, const struct rl_config *cfg)
{
	const char *ds = cfg->data.dataset_name;

	if (strcmp(ds, "jsonl") != 0 && strcmp(ds, "openai_format") != 0)
		rule_error(r, "data.dataset_name",
		           "SFT trains on examples with their answers from a file: jsonl "
		           "(data.input_key and data.output_key) or openai_format (chat messages)");
	if (!cfg->policy.generation.colocated.enabled)
		rule_error(r, "policy.generation.colocated.enabled",
		           "SFT generates nothing: generation ranks of their own have nothing to "
		           "do; leave it true");
	if (cfg->grpo.async_grpo.enabled)
		rule_error(r, "grpo.async_grpo.enabled",
		           "SFT has no rollouts to ask for ahead; leave it false");
	/* NeMo-RL's assert: no validation set, no validation period */
	if (cfg->grpo.val_period > 0 && !cfg->data.validation_path)
		rule_error(r, "sft.val_period",
		           "validation needs data.validation.path (or val_period: 0)");
}

/* On-policy distillation needs a teacher, and only it reads the teacher
 * and the distillation loss's keys. */
static void distillation_rules(struct rules *r, const struct rl_config *cfg)
{
	const struct rl_cfg_loss_fn *l = &cfg->loss_fn;

	if (cfg->algorithm != RL_ALGO_DISTILLATION) {
		if (cfg->teacher.model_name || cfg->teacher.tokenizer_name)
			rule_error(r,
			           cfg->teacher.model_name ? "teacher.model_name"
			                                   : "teacher.tokenizer.name",
			           "a teacher is on-policy distillation's: a config with a "
			           "distillation: block, run by rlrun distill");
		/* at their defaults they are harmless (a resolved config
		 * lists every key) */
		const bool changed[] = {l->kl_type && strcmp(l->kl_type, "reverse") != 0,
		                        l->mixed_kl_weight != 0.5, l->zero_outside_topk};
		for (size_t i = 0; i < 3; i++)
			if (changed[i])
				rule_error(
				    r, rl_cfg_distillation_loss_keys[i],
				    "is on-policy distillation's (a config with a distillation: "
				    "block); GRPO's KL term is loss_fn.reference_policy_kl_type");
		return;
	}
	if (!cfg->teacher.model_name)
		rule_error(r, "teacher.model_name",
		           "on-policy distillation needs a teacher: set teacher.model_name");
	/* NeMo-RL's distillation has no asynchronous mode either */
	if (cfg->grpo.async_grpo.enabled)
		rule_error(r, "grpo.async_grpo.enabled",
		           "asynchronous rollouts are GRPO's; on-policy distillation takes the "
		           "rollouts of the weights it trains (colocated or not)");
	if (l->kl_type && strcmp(l->kl_type, "reverse") != 0)
		rule_error(r, "loss_fn.kl_type",
		           "forward and mixed are not implemented: they need the teacher's top-k "
		           "logits, which this release does not compute; use reverse (the "
		           "per-token reverse KL on the student's own samples)");
	if (l->zero_outside_topk)
		rule_error(r, "loss_fn.zero_outside_topk",
		           "true is not implemented: it corrects a KL summed over the teacher's "
		           "top-k logits, and the reverse KL here is estimated on the sampled "
		           "token; set it to false");
}

/* SFT, DPO and distillation have losses of their own: a GRPO loss or
 * advantage key written in their config changes nothing. It is said, in
 * one note naming each such key where it was written, rather than refused:
 * a config built on a GRPO one (`defaults:`, or a distillation: block
 * added to it) carries them harmlessly. A resolved config of theirs leaves
 * them out (write_yaml.c). */
static void grpo_only_keys(struct rules *r, const struct rl_config *cfg)
{
	char list[1024];
	size_t used = 0, n = 0, more = 0;

	if (cfg->algorithm == RL_ALGO_GRPO)
		return;
	list[0] = '\0';
	for (size_t k = 0; k < rl_schema_len; k++) {
		const struct rl_key_pos *p = &r->pos[k];

		if (!p->file || rl_schema[k].type == RL_T_UNSUPPORTED ||
		    !rl_cfg_grpo_only_key(rl_schema[k].path))
			continue;
		int w = snprintf(list + used, sizeof list - used, "%s%s (%s:%d:%d)", n ? ", " : "",
		                 rl_schema[k].path, p->file, p->line, p->col);
		if (w < 0 || (size_t)w >= sizeof list - used) {
			list[used] = '\0';
			more++;
			continue;
		}
		used += (size_t)w;
		n++;
	}
	if (n + more == 0)
		return;
	rl_note_add(r->d,
	            "ignored: GRPO's loss and advantage keys, which rlrun %s's loss does not read: "
	            "%s%s",
	            rl_algorithm_verb(cfg->algorithm), list, more ? ", and more" : "");
}

/* The built-in tasks played as episodes by their built-in environments
 * of the same names (data/synthetic.h's calculator and guess; the config
 * room sits below the data room, so the names are listed here). */
static bool builtin_multi_turn_task(const char *dataset_name)
{
	return strcmp(dataset_name, "calculator") == 0 || strcmp(dataset_name, "guess") == 0;
}

/* Whether the run plays episodes: data.env_name names an env.<name> with
 * multi_turn (its command is checked apart), or is null with a built-in
 * multi-turn task, whose environment is built in. */
static bool run_is_multi_turn(const struct rl_config *cfg)
{
	if (!cfg->data.env_name)
		return builtin_multi_turn_task(cfg->data.dataset_name);
	const struct rl_cfg_env *e = rl_config_env(cfg, cfg->data.env_name);
	return e && e->multi_turn;
}

/* Multi-turn episodes (rl-config(5), MULTI-TURN): GRPO's, with an
 * environment that plays them. */
static void multi_turn_rules(struct rules *r, const struct rl_config *cfg)
{
	char path[512];
	bool episodes = run_is_multi_turn(cfg);

	for (size_t i = 0; i < cfg->n_env; i++)
		if (cfg->env[i].multi_turn && !cfg->env[i].command) {
			snprintf(path, sizeof path, "env.%s.multi_turn", cfg->env[i].name);
			rule_error(r, path,
			           "an environment needs a command: the program that plays the "
			           "episodes (rl-env(7)), in env.<name>.command");
		}
	if (cfg->algorithm != RL_ALGO_GRPO) {
		/* NeMo-RL's distillation config carries max_rollout_turns: 1 */
		if (cfg->grpo.max_rollout_turns > 1)
			rule_error(r, "grpo.max_rollout_turns",
			           "multi-turn episodes are GRPO's (rlrun train); SFT, DPO and "
			           "on-policy distillation train on single responses: set 1");
		else if (episodes && (cfg->data.env_name || cfg->algorithm == RL_ALGO_DISTILLATION))
			/* SFT's and DPO's data rules refuse a built-in task already */
			rule_error(r, cfg->data.env_name ? "data.env_name" : "data.dataset_name",
			           "names a multi-turn environment: episodes are GRPO's (rlrun "
			           "train); SFT, DPO and on-policy distillation train on single "
			           "responses");
		return;
	}
	if (cfg->grpo.max_rollout_turns > 1 && !episodes)
		rule_error(r, "grpo.max_rollout_turns",
		           "more than one turn needs a multi-turn environment: data.env_name "
		           "naming an env.<name> with multi_turn: true and a command, or "
		           "data.dataset_name calculator or guess with data.env_name null (their "
		           "built-in environments)");
	if (!episodes)
		return;
	/* the generation session (generate/session.h) holds a sequence's KV
	 * cache across turns on the model's own ranks; the expert-parallel
	 * layout's token exchange is not part of it */
	if (cfg->policy.parallel.expert > 1)
		rule_error(r, "policy.parallel.expert",
		           "expert parallelism is not implemented with multi-turn episodes; set "
		           "1 (experts then shard by tensor parallelism)");
}

/* DAPO's keys (NeMo-RL asserts the first ones when a run starts, and
 * raises in apply_reward_shaping on a missing length). */
static void check_dapo(struct rules *r, const struct rl_config *cfg)
{
	const struct rl_cfg_grpo *g = &cfg->grpo;
	const struct rl_cfg_policy *p = &cfg->policy;
	char msg[256];

	if (g->batch_multiplier != 1 && !g->use_dynamic_sampling)
		rule_error(r, "grpo.batch_multiplier",
		           "can only be other than 1 with grpo.use_dynamic_sampling: true");
	/* a round's prompts are a size like num_prompts_per_step's */
	if (g->use_dynamic_sampling &&
	    (double)g->num_prompts_per_step * g->batch_multiplier > 16777216.0)
		rule_error(r, "grpo.batch_multiplier",
		           "times grpo.num_prompts_per_step is more than 16777216 prompts a round");
	/* a rollout asked for ahead cannot know, before its rewards, whether
	 * the step needs another round */
	if (g->use_dynamic_sampling && g->async_grpo.enabled)
		rule_error(
		    r, "grpo.use_dynamic_sampling",
		    "dynamic sampling is not implemented with grpo.async_grpo.enabled: true");
	if (g->use_dynamic_sampling && g->num_generations_per_prompt < 2)
		rule_error(r, "grpo.use_dynamic_sampling",
		           "needs grpo.num_generations_per_prompt of at least 2: a group of one "
		           "response has no spread and would always be dropped");

	const struct rl_cfg_reward_shaping *s = &g->reward_shaping;
	if (s->enabled && !s->stop_properly_penalty_coef.set) {
		static const char *const need[] = {"grpo.reward_shaping.overlong_buffer_length",
		                                   "grpo.reward_shaping.overlong_buffer_penalty",
		                                   "grpo.reward_shaping.max_response_length"};
		const bool have[] = {s->overlong_buffer_length.set, s->overlong_buffer_penalty.set,
		                     s->max_response_length.set};
		for (int i = 0; i < 3; i++)
			if (!have[i])
				rule_error(r, need[i],
				           "required by grpo.reward_shaping.enabled: true (DAPO's "
				           "overlong penalty), or set stop_properly_penalty_coef");
	}
	if (s->enabled && s->overlong_buffer_length.set && s->max_response_length.set &&
	    s->overlong_buffer_length.value > s->max_response_length.value)
		rule_error(r, "grpo.reward_shaping.overlong_buffer_length",
		           "longer than grpo.reward_shaping.max_response_length: the penalty would "
		           "start before the response's first token");
	if (s->enabled && s->max_response_length.set) {
		/* a response never gets longer than this: a longer L_max leaves
		 * part of the buffer, and the full penalty, out of reach */
		const char *cap = "policy.max_total_sequence_length";
		int64_t most = p->max_total_sequence_length;
		if (p->generation.max_new_tokens.set && p->generation.max_new_tokens.value < most) {
			cap = "policy.generation.max_new_tokens";
			most = p->generation.max_new_tokens.value;
		}
		if (s->max_response_length.value > most) {
			snprintf(msg, sizeof msg,
			         "%lld is more than %s (%lld): no response can be that long",
			         (long long)s->max_response_length.value, cap, (long long)most);
			rule_error(r, "grpo.reward_shaping.max_response_length", msg);
		}
	}
	if (g->reward_scaling.enabled &&
	    !(g->reward_scaling.source_max > g->reward_scaling.source_min))
		rule_error(r, "grpo.reward_scaling.source_max",
		           "must be greater than grpo.reward_scaling.source_min");
}

void rl_cfg_check_rules(const struct rl_config *cfg, const struct rl_key_pos *pos,
                        const char *root_file, struct rl_diags *diags)
{
	struct rules r = {.pos = pos, .root_file = root_file, .d = diags};
	const struct rl_cfg_loss_fn *l = &cfg->loss_fn;
	const struct rl_cfg_policy *p = &cfg->policy;

	if (l->sequence_level_importance_ratios && l->token_level_loss)
		rule_error(&r, "loss_fn.sequence_level_importance_ratios",
		           "sequence-level ratios need loss_fn.token_level_loss: false");
	if (l->token_sum_normalizer.set && l->token_level_loss)
		rule_error(&r, "loss_fn.token_sum_normalizer",
		           "replaces the per-sequence mean; needs loss_fn.token_level_loss: false");
	if (l->token_sum_normalizer.set && l->sequence_level_importance_ratios)
		rule_error(&r, "loss_fn.token_sum_normalizer",
		           "does not go with loss_fn.sequence_level_importance_ratios (GSPO's "
		           "objective is one length-normalised term per sequence)");
	if (l->truncated_importance_sampling_ratio.set && !l->use_importance_sampling_correction)
		rule_error(&r, "loss_fn.truncated_importance_sampling_ratio",
		           "needs loss_fn.use_importance_sampling_correction: true");
	if (l->truncated_importance_sampling_ratio.set && !l->truncated_importance_sampling_type)
		rule_error(&r, "loss_fn.truncated_importance_sampling_ratio",
		           "needs loss_fn.truncated_importance_sampling_type (tis, icepop or "
		           "seq-mask-tis)");
	if (l->truncated_importance_sampling_type && !l->truncated_importance_sampling_ratio.set)
		rule_error(&r, "loss_fn.truncated_importance_sampling_type",
		           "has no effect without loss_fn.truncated_importance_sampling_ratio");
	if (l->truncated_importance_sampling_type &&
	    strcmp(l->truncated_importance_sampling_type, "seq-mask-tis") == 0 &&
	    l->sequence_level_importance_ratios)
		rule_error(&r, "loss_fn.truncated_importance_sampling_type",
		           "seq-mask-tis is incompatible with sequence_level_importance_ratios");
	if (cfg->grpo.async_grpo.enabled && !l->use_importance_sampling_correction)
		rule_error(
		    &r, "grpo.async_grpo.enabled",
		    "asynchronous GRPO needs loss_fn.use_importance_sampling_correction: true");
	if (p->train_global_batch_size % p->train_micro_batch_size != 0)
		rule_error(&r, "policy.train_micro_batch_size",
		           "must divide policy.train_global_batch_size");
	if (p->sequence_packing.train_mb_tokens.set &&
	    p->sequence_packing.train_mb_tokens.value < p->max_total_sequence_length)
		rule_error(&r, "policy.sequence_packing.train_mb_tokens",
		           "must hold one sequence of policy.max_total_sequence_length tokens");
	if (p->sequence_packing.logprob_mb_tokens.set &&
	    p->sequence_packing.logprob_mb_tokens.value < p->max_total_sequence_length)
		rule_error(&r, "policy.sequence_packing.logprob_mb_tokens",
		           "must hold one sequence of policy.max_total_sequence_length tokens");
	/* one LR schedule: NeMo-RL's torch list or slurm-rl's own keys, which
	 * then keep their defaults (the printed config shows them) */
	const bool lr_set[] = {strcmp(p->lr_schedule.type, "constant") != 0,
	                       p->lr_schedule.warmup_steps != 0, p->lr_schedule.decay_steps.set,
	                       p->lr_schedule.min_lr != 0, p->lr_schedule.warmup_init.set};
	static const char *const lr_keys[] = {
	    "policy.lr_schedule.type", "policy.lr_schedule.warmup_steps",
	    "policy.lr_schedule.decay_steps", "policy.lr_schedule.min_lr",
	    "policy.lr_schedule.warmup_init"};
	for (size_t i = 0; p->scheduler.n && i < sizeof(lr_keys) / sizeof(lr_keys[0]); i++)
		if (lr_set[i])
			rule_error(&r, lr_keys[i],
			           "set together with policy.scheduler; give one LR schedule");
	if (cfg->data.env_name && strcmp(cfg->data.env_name, "math") != 0 &&
	    strcmp(cfg->data.env_name, "exact") != 0) {
		const struct rl_cfg_env *e = rl_config_env(cfg, cfg->data.env_name);
		if (!e || !e->command)
			rule_error(&r, "data.env_name",
			           "names no reward: use math, exact, or an env.<name> that has a "
			           "command");
	}
	if ((strcmp(cfg->data.dataset_name, "jsonl") == 0 ||
	     strcmp(cfg->data.dataset_name, "openai_format") == 0) &&
	    !cfg->data.train_path)
		rule_error(&r, "data.train.path",
		           "required when data.dataset_name is jsonl or openai_format");
	if (strcmp(cfg->data.dataset_name, "openai_format") == 0 && cfg->algorithm != RL_ALGO_SFT)
		rule_error(&r, "data.dataset_name",
		           "openai_format (chat conversations) is SFT's data (an sft: block, rlrun "
		           "sft); GRPO takes problems: jsonl or a built-in task");
	if (cfg->algorithm == RL_ALGO_SFT)
		sft_rules(&r, cfg);
	bool preference = strcmp(cfg->data.dataset_name, "BinaryPreferenceDataset") == 0 ||
	                  strcmp(cfg->data.dataset_name, "PreferenceDataset") == 0;
	if (cfg->algorithm == RL_ALGO_DPO && !preference)
		rule_error(&r, "data.dataset_name",
		           "DPO trains on preference pairs: BinaryPreferenceDataset or "
		           "PreferenceDataset (with data.train.path)");
	if (cfg->algorithm != RL_ALGO_DPO && preference)
		rule_error(
		    &r, "data.dataset_name",
		    "preference pairs are DPO's data: a config with a dpo: block (rlrun dpo)");
	if (preference && !cfg->data.train_path)
		rule_error(&r, "data.train.path", "required for preference data");
	if (cfg->data.prompt_file && cfg->data.prompt_template)
		rule_error(&r, "data.prompt_template",
		           "give data.prompt_file or data.prompt_template, not both");
	if (cfg->data.system_prompt_file && cfg->data.system_prompt)
		rule_error(&r, "data.system_prompt",
		           "give data.system_prompt_file or data.system_prompt, not both");
	if (!p->generation.colocated.enabled && !p->generation.colocated.gpus_per_node.set &&
	    !p->generation.colocated.num_nodes.set)
		rule_error(&r, "policy.generation.colocated.enabled",
		           "non-colocated generation needs colocated.resources.gpus_per_node or "
		           "num_nodes");
	if (p->generation.colocated.enabled && p->generation.tensor_parallel_size > 1)
		rule_error(&r, "policy.generation.tensor_parallel_size",
		           "applies to non-colocated generation; colocated generation runs on the "
		           "training ranks' own tensor parallelism");
	check_dapo(&r, cfg);
	/* NeMo-RL's assert: rollouts made while training runs need ranks of
	 * their own */
	if (cfg->grpo.async_grpo.enabled && p->generation.colocated.enabled)
		rule_error(&r, "grpo.async_grpo.enabled",
		           "asynchronous GRPO needs policy.generation.colocated.enabled: false");
	distillation_rules(&r, cfg);
	multi_turn_rules(&r, cfg);
	grpo_only_keys(&r, cfg);
}
