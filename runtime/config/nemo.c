/* NeMo-RL's way of choosing sizes and engines, read into slurm-rl's keys.
 *
 * A NeMo-RL config chooses its training backend with an enabled
 * policy.megatron_cfg or policy.dtensor_cfg, and its generation engine with
 * policy.generation.backend and vllm_cfg. This step runs on the tree after
 * references are resolved and before validation: each key of an enabled
 * block is either
 *   mapped  - copied, with the position it was written at, onto the
 *             slurm-rl key that means the same (policy.parallel.*, the
 *             optimizer, the LR schedule), an error naming both places when
 *             that key is also set to something else;
 *   inert   - a precision, fusion, kernel or memory flag that changes nothing
 *             here: listed in one note line;
 *   bound   - accepted only at the value that changes nothing (a feature
 *             off), an error otherwise, since it would change the maths;
 *   unknown - an error.
 * The block is then taken out of the tree; a switched-off block stays for
 * the validator, which ignores it with its own note. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/config/internal.h"
#include "runtime/config/scalar.h"

enum role { MAP, INERT, BOUND, OFF_BLOCK, SPECIAL };

struct rule {
	const char *key; /* dotted, inside the block */
	enum role role;
	const char *arg; /* MAP: our key; BOUND: the one value accepted */
};

static const struct rule megatron_rules[] = {
    {"enabled", SPECIAL, NULL},
    {"tensor_model_parallel_size", MAP, "policy.parallel.tensor"},
    {"pipeline_model_parallel_size", MAP, "policy.parallel.pipeline"},
    {"context_parallel_size", MAP, "policy.parallel.context"},
    {"expert_model_parallel_size", MAP, "policy.parallel.expert"},
    {"expert_tensor_parallel_size", MAP, "policy.parallel.expert_tensor"},
    {"sequence_parallel", MAP, "policy.parallel.sequence_parallel"},
    {"activation_checkpointing", MAP, "policy.parallel.activation_checkpointing"},
    {"num_layers_in_first_pipeline_stage", MAP,
     "policy.parallel.num_layers_in_first_pipeline_stage"},
    {"num_layers_in_last_pipeline_stage", MAP, "policy.parallel.num_layers_in_last_pipeline_stage"},
    {"freeze_moe_router", MAP, "policy.moe.freeze_router"},
    {"moe_router_load_balancing_type", SPECIAL, NULL},
    {"moe_router_bias_update_rate", BOUND, "0"},
    {"mtp_num_layers", BOUND, "0"},
    /* with no MTP layers, their loss and layout mean nothing */
    {"mtp_loss_scaling_factor", INERT, NULL},
    {"mtp_use_repeated_layer", INERT, NULL},
    {"mtp_detach_heads", INERT, NULL},
    {"use_fused_linear_logprobs", BOUND, "false"},
    {"model_overrides", BOUND, "{}"},
    {"peft", OFF_BLOCK, NULL},
    {"fp8_cfg", OFF_BLOCK, NULL},
    {"optimizer.optimizer", BOUND, "adam"},
    {"optimizer.lr", MAP, "policy.optimizer.kwargs.lr"},
    {"optimizer.min_lr", MAP, "policy.lr_schedule.min_lr"},
    {"optimizer.weight_decay", MAP, "policy.optimizer.kwargs.weight_decay"},
    {"optimizer.adam_beta1", SPECIAL, NULL},
    {"optimizer.adam_beta2", SPECIAL, NULL},
    {"optimizer.adam_eps", MAP, "policy.optimizer.kwargs.eps"},
    {"optimizer.clip_grad", MAP, "policy.max_grad_norm"},
    {"optimizer.use_distributed_optimizer", MAP, "policy.parallel.distributed_optimizer"},
    {"optimizer.bf16", INERT, NULL},
    {"optimizer.fp16", BOUND, "false"},
    {"optimizer.params_dtype", INERT, NULL},
    {"optimizer.sgd_momentum", INERT, NULL},
    {"optimizer.use_precision_aware_optimizer", INERT, NULL},
    {"optimizer.optimizer_cpu_offload", INERT, NULL},
    {"optimizer.optimizer_offload_fraction", INERT, NULL},
    {"optimizer.overlap_cpu_optimizer_d2h_h2d", INERT, NULL},
    {"scheduler.lr_decay_style", SPECIAL, NULL},
    {"scheduler.lr_warmup_iters", MAP, "policy.lr_schedule.warmup_steps"},
    {"scheduler.lr_decay_iters", MAP, "policy.lr_schedule.decay_steps"},
    {"scheduler.lr_warmup_init", MAP, "policy.lr_schedule.warmup_init"},
    {"scheduler.weight_decay_incr_style", BOUND, "constant"},
    {"scheduler.start_weight_decay", SPECIAL, NULL},
    {"scheduler.end_weight_decay", SPECIAL, NULL},
    {"distributed_data_parallel_config.overlap_grad_reduce", MAP,
     "policy.parallel.overlap_grad_reduce"},
    {"distributed_data_parallel_config.overlap_param_gather", MAP,
     "policy.parallel.overlap_param_gather"},
    {"distributed_data_parallel_config.bucket_size", MAP, "policy.parallel.bucket_size"},
    {"distributed_data_parallel_config.grad_reduce_in_fp32", INERT, NULL},
    {"distributed_data_parallel_config.use_custom_fsdp", BOUND, "false"},
    {"distributed_data_parallel_config.data_parallel_sharding_strategy", INERT, NULL},
    {"empty_unused_memory_level", INERT, NULL},
    {"converter_type", INERT, NULL},
    {"pipeline_dtype", INERT, NULL},
    {"moe_router_dtype", INERT, NULL},
    {"moe_permute_fusion", INERT, NULL},
    {"moe_token_dispatcher_type", INERT, NULL},
    {"moe_enable_deepep", INERT, NULL},
    {"moe_shared_expert_overlap", INERT, NULL},
    {"moe_per_layer_logging", INERT, NULL},
    {"apply_rope_fusion", INERT, NULL},
    {"bias_activation_fusion", INERT, NULL},
    {"gradient_accumulation_fusion", INERT, NULL},
    {"use_fused_weighted_squared_relu", INERT, NULL},
    {"fused_linear_logprobs_chunk_size", INERT, NULL},
    {"defer_fp32_logits", INERT, NULL},
    {"force_reconvert_from_hf", INERT, NULL},
    {"use_gloo_process_groups", INERT, NULL},
    {"cuda_graph_impl", INERT, NULL},
    {"cuda_graph_modules", INERT, NULL},
    {"cuda_graph_warmup_steps", INERT, NULL},
    {"recompute_granularity", INERT, NULL},
    {"recompute_modules", INERT, NULL},
    {"fine_grained_activation_offloading", INERT, NULL},
    {"offload_modules", INERT, NULL},
    {"checkpoint", INERT, NULL},
    {"env_vars", INERT, NULL},
};

static const struct rule dtensor_rules[] = {
    {"enabled", SPECIAL, NULL},
    {"tensor_parallel_size", MAP, "policy.parallel.tensor"},
    {"context_parallel_size", MAP, "policy.parallel.context"},
    {"sequence_parallel", MAP, "policy.parallel.sequence_parallel"},
    {"activation_checkpointing", MAP, "policy.parallel.activation_checkpointing"},
    {"custom_parallel_plan", BOUND, "null"},
    {"lora_cfg", OFF_BLOCK, NULL},
    {"_v2", INERT, NULL},
    {"cpu_offload", INERT, NULL},
    {"clear_cache_every_n_steps", INERT, NULL},
    {"automodel_kwargs", INERT, NULL},
    {"env_vars", INERT, NULL},
};

/* vllm_cfg: what means something to our engine is mapped or checked; the
 * rest (engine tuning) is listed in the note, so no key is unknown. */
static const struct rule vllm_rules[] = {
    {"tensor_parallel_size", MAP, "policy.generation.tensor_parallel_size"},
    {"gpu_memory_utilization", MAP, "policy.generation.gpu_memory_utilization"},
    {"max_model_len", SPECIAL, NULL},
    {"precision", SPECIAL, NULL},
    {"kv_cache_dtype", BOUND, "auto"},
    {"pipeline_parallel_size", BOUND, "1"},
    {"expert_parallel_size", BOUND, "1"},
    {"num_last_layers_in_bf16", BOUND, "0"},
    {"num_first_layers_in_bf16", BOUND, "0"},
    {"quantization", BOUND, "null"},
};

/* grpo.adv_estimator: the GRPO estimator, with its two switches the same
 * as grpo's own (NeMo-RL's defaults refer to them) */
static const struct rule adv_rules[] = {
    {"name", BOUND, "grpo"},
    {"normalize_rewards", MAP, "grpo.normalize_rewards"},
    {"use_leave_one_out_baseline", MAP, "grpo.use_leave_one_out_baseline"},
    {"minus_baseline", INERT, NULL}, /* Reinforce++ only */
};

/* reward_penalties: NeMo-Gym's reward zeroing, accepted switched off */
static const struct rule penalty_rules[] = {
    {"penalize_duplicated_reasoning", BOUND, "false"},
    {"penalize_empty_final_answer", BOUND, "false"},
    {"penalize_unwanted_tokens", BOUND, "false"},
    {"penalize_malformed_think_tag", BOUND, "false"},
    {"token_ids", INERT, NULL},
};

/* NeMo-RL's newer data layout: data.default holds what every data set
 * shares, data.train and data.validation name the sets. A Hugging Face
 * dataset's split and subset mean nothing for a local file: noted. */
#define DATA_SET_RULES(set)                                                                        \
	{"dataset_name", MAP, "data.dataset_name"}, {"data_path", MAP, "data." set ".path"},       \
	    {"input_key", MAP, "data.input_key"}, {"output_key", MAP, "data.output_key"},          \
	    {"prompt_key", MAP, "data.prompt_key"}, {"chosen_key", MAP, "data.chosen_key"},        \
	    {"rejected_key", MAP, "data.rejected_key"}, {"prompt_file", MAP, "data.prompt_file"},  \
	    {"system_prompt_file", MAP, "data.system_prompt_file"},                                \
	    {"env_name", MAP, "data.env_name"}, {"processor", SPECIAL, NULL},                      \
	    {"split_validation_size", BOUND, "0"}, {"split", INERT, NULL},                         \
	    {"subset", INERT, NULL},                                                               \
	{                                                                                          \
		"seed", INERT, NULL                                                                \
	}
static const struct rule data_default_rules[] = {DATA_SET_RULES("train")};
static const struct rule data_train_rules[] = {DATA_SET_RULES("train")};
static const struct rule data_validation_rules[] = {DATA_SET_RULES("validation")};

struct nemo {
	struct rl_ynode *root;
	struct rl_diags *d;
	const char *block; /* the block's dotted path */
	char *mapped, *inert;
	bool vllm;                   /* keys without a rule are inert, not unknown */
	bool partial;                /* keys without a rule are slurm-rl's: left alone */
	enum rl_algorithm algorithm; /* the config's (algorithm.c) */
};

static void list_add(char **list, const char *fmt, const char *a, const char *b)
{
	char *item = NULL, *more = NULL;
	if (asprintf(&item, fmt, a, b) < 0)
		return;
	if (asprintf(&more, "%s%s%s", *list ? *list : "", *list ? ", " : "", item) >= 0) {
		free(*list);
		*list = more;
	}
	free(item);
}

/* Puts value (owned) at our key `to`, or checks it against what is there. */
void rl_cfg_tree_put(struct rl_ynode *root, struct rl_diags *d, const char *from,
                     const struct rl_yentry *src, struct rl_ynode *value, const char *to)
{
	struct rl_yentry *have = rl_ytree_find(root, to);
	if (have) {
		if (!rl_ynode_same_value(have->value, value))
			rl_diag_add(d, value->file, src->line, src->col, from,
			            "conflicts with %s set at %s:%d:%d; set one of them", to,
			            have->value->file, have->line, have->col);
		rl_ynode_free(value);
		return;
	}
	struct rl_ynode *map = root;
	const char *part = to;
	for (const char *dot; map && (dot = strchr(part, '.')); part = dot + 1) {
		char *name = strndup(part, (size_t)(dot - part));
		struct rl_yentry *e = name ? rl_ymap_find(map, name) : NULL;
		if (e && e->value->kind != RL_Y_MAP) {
			/* policy.parallel: auto, or policy.optimizer: null */
			if (!rl_yscalar_is_null(e->value)) {
				rl_diag_add(d, value->file, src->line, src->col, from,
				            "conflicts with %s set at %s:%d:%d", name,
				            e->value->file, e->line, e->col);
				free(name);
				rl_ynode_free(value);
				return;
			}
			e = NULL;
		}
		if (!e && name) {
			struct rl_ynode *m =
			    rl_ynode_new(RL_Y_MAP, value->file, src->line, src->col);
			e = m ? rl_ymap_set(map, name, src->line, src->col, m) : NULL;
		}
		free(name);
		map = e ? e->value : NULL;
	}
	if (map)
		rl_ymap_set(map, part, src->line, src->col, value);
	else
		rl_ynode_free(value);
}

static void put(struct nemo *nm, const char *from, const struct rl_yentry *src,
                struct rl_ynode *value, const char *to)
{
	rl_cfg_tree_put(nm->root, nm->d, from, src, value, to);
}

static struct rl_ynode *scalar(const struct rl_ynode *at, const char *text)
{
	struct rl_ynode *n = rl_ynode_new(RL_Y_SCALAR, at->file, at->line, at->col);
	if (n && !(n->text = strdup(text))) {
		rl_ynode_free(n);
		return NULL;
	}
	if (n)
		n->plain = true;
	return n;
}

static bool matches(const struct rl_ynode *v, const char *want)
{
	if (strcmp(want, "{}") == 0)
		return rl_yscalar_is_null(v) || (v->kind == RL_Y_MAP && v->n == 0);
	if (strcmp(want, "null") == 0)
		return rl_yscalar_is_null(v);
	if (v->kind != RL_Y_SCALAR)
		return false;
	struct rl_ynode w = {.kind = RL_Y_SCALAR, .text = (char *)want, .plain = true};
	return rl_ynode_same_value(v, &w);
}

static bool switched_on(const struct rl_ynode *block)
{
	if (block->kind != RL_Y_MAP)
		return false;
	const struct rl_yentry *e = rl_ymap_find(block, "enabled");
	bool on = false;
	return e && e->value->kind == RL_Y_SCALAR && e->value->plain &&
	       rl_scalar_bool(e->value->text, &on) && on;
}

static const struct rule *find_rule(const struct rule *rules, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(rules[i].key, key) == 0)
			return &rules[i];
	return NULL;
}

/* True when some rule lives below `key` (it names a sub-block). */
static bool rule_section(const struct rule *rules, size_t n, const char *key)
{
	size_t len = strlen(key);
	for (size_t i = 0; i < n; i++)
		if (strncmp(rules[i].key, key, len) == 0 && rules[i].key[len] == '.')
			return true;
	return false;
}

typedef void special_fn(struct nemo *nm, const char *path, const char *key,
                        const struct rl_yentry *e, struct rl_ynode *block);

static void walk(struct nemo *nm, const struct rule *rules, size_t n_rules, special_fn *special,
                 struct rl_ynode *block, struct rl_ynode *map, const char *prefix)
{
	for (size_t i = 0; i < map->n; i++) {
		struct rl_yentry *e = &map->items[i];
		char *key = NULL, *path = NULL;
		if (asprintf(&key, "%s%s%s", prefix, *prefix ? "." : "", e->key) < 0)
			return;
		if (asprintf(&path, "%s.%s", nm->block, key) < 0) {
			free(key);
			return;
		}
		const struct rule *r = find_rule(rules, n_rules, key);
		struct rl_ynode *v = e->value;
		if (!r && rule_section(rules, n_rules, key) && v->kind == RL_Y_MAP) {
			walk(nm, rules, n_rules, special, block, v, key);
		} else if (!r && nm->partial) {
			/* a key of slurm-rl's own, for the validator */
		} else if (!r && nm->vllm) {
			list_add(&nm->inert, "%s%s", key, "");
		} else if (!r) {
			rl_diag_add(
			    nm->d, v->file, e->line, e->col, path,
			    "not read by slurm-rl: remove it, or ask for it if it matters to "
			    "your run");
		} else if (r->role == MAP) {
			struct rl_ynode *copy = rl_ynode_copy(v);
			if (copy) {
				list_add(&nm->mapped, "%s -> %s", key, r->arg);
				put(nm, path, e, copy, r->arg);
			}
		} else if (r->role == INERT) {
			list_add(&nm->inert, "%s%s", key, "");
		} else if (r->role == BOUND) {
			if (!matches(v, r->arg))
				rl_diag_add(
				    nm->d, v->file, e->line, e->col, path,
				    "not supported yet: only %s, which changes nothing here, is "
				    "accepted",
				    r->arg);
		} else if (r->role == OFF_BLOCK) {
			if (switched_on(v))
				rl_diag_add(
				    nm->d, v->file, e->line, e->col, path,
				    "not supported yet: the block must stay enabled: false");
		} else {
			special(nm, path, key, e, block);
		}
		free(key);
		free(path);
	}
}

static const struct rl_ynode *inside(struct rl_ynode *block, const char *key)
{
	const struct rl_yentry *e = rl_ytree_find(block, key);
	return e ? e->value : NULL;
}

static void megatron_special(struct nemo *nm, const char *path, const char *key,
                             const struct rl_yentry *e, struct rl_ynode *block)
{
	const struct rl_ynode *v = e->value;
	if (strcmp(key, "enabled") == 0)
		return;
	if (strcmp(key, "moe_router_load_balancing_type") == 0) {
		/* "none": no load-balancing loss, our coefficient 0 */
		if (!matches(v, "none")) {
			rl_diag_add(
			    nm->d, v->file, e->line, e->col, path,
			    "not supported yet: only none (set policy.moe.aux_loss_coef for "
			    "slurm-rl's load-balancing loss)");
			return;
		}
		struct rl_ynode *zero = scalar(v, "0");
		if (zero) {
			list_add(&nm->mapped, "%s none -> %s 0", key, "policy.moe.aux_loss_coef");
			put(nm, path, e, zero, "policy.moe.aux_loss_coef");
		}
	} else if (strcmp(key, "optimizer.adam_beta1") == 0) {
		/* both betas make one list; written once, at beta1 */
		const struct rl_ynode *b2 = inside(block, "optimizer.adam_beta2");
		struct rl_ynode *betas = rl_ynode_new(RL_Y_SEQ, v->file, v->line, v->col);
		struct rl_ynode *c1 = rl_ynode_copy(v);
		struct rl_ynode *c2 = b2 ? rl_ynode_copy(b2) : scalar(v, "0.999");
		if (!betas || !c1 || !c2) {
			rl_ynode_free(betas);
			rl_ynode_free(c1);
			rl_ynode_free(c2);
			return;
		}
		betas->items = calloc(2, sizeof(*betas->items));
		if (!betas->items) {
			rl_ynode_free(betas);
			rl_ynode_free(c1);
			rl_ynode_free(c2);
			return;
		}
		betas->items[0].value = c1;
		betas->items[1].value = c2;
		betas->n = betas->cap = 2;
		list_add(&nm->mapped, "%s -> %s", "optimizer.adam_beta1/2",
		         "policy.optimizer.kwargs.betas");
		put(nm, path, e, betas, "policy.optimizer.kwargs.betas");
	} else if (strcmp(key, "optimizer.adam_beta2") == 0) {
		if (!inside(block, "optimizer.adam_beta1"))
			rl_diag_add(nm->d, v->file, e->line, e->col, path,
			            "needs optimizer.adam_beta1 beside it");
	} else if (strcmp(key, "scheduler.lr_decay_style") == 0) {
		static const char *const styles[][2] = {
		    {"constant", "constant"}, {"cosine", "cosine"}, {"linear", "linear"}};
		for (size_t i = 0; i < 3; i++)
			if (matches(v, styles[i][0])) {
				struct rl_ynode *t = scalar(v, styles[i][1]);
				if (t) {
					list_add(&nm->mapped, "%s -> %s", key,
					         "policy.lr_schedule.type");
					put(nm, path, e, t, "policy.lr_schedule.type");
				}
				return;
			}
		rl_diag_add(nm->d, v->file, e->line, e->col, path,
		            "not supported yet: constant, cosine or linear");
	} else if (strcmp(key, "scheduler.start_weight_decay") == 0 ||
	           strcmp(key, "scheduler.end_weight_decay") == 0) {
		/* a weight decay that changes over the run is not implemented */
		const struct rl_ynode *wd = inside(block, "optimizer.weight_decay");
		if (!wd || !rl_ynode_same_value(v, wd))
			rl_diag_add(
			    nm->d, v->file, e->line, e->col, path,
			    "not supported yet: must equal optimizer.weight_decay (a weight "
			    "decay that changes over the run)");
	}
}

/* For blocks whose only SPECIAL key is `enabled`, the switch already read. */
static void nothing_special(struct nemo *nm, const char *path, const char *key,
                            const struct rl_yentry *e, struct rl_ynode *block)
{
	(void)nm, (void)path, (void)key, (void)e, (void)block;
}

static void vllm_special(struct nemo *nm, const char *path, const char *key,
                         const struct rl_yentry *e, struct rl_ynode *block)
{
	(void)block;
	const struct rl_ynode *v = e->value;
	const char *ours =
	    strcmp(key, "precision") == 0 ? "policy.precision" : "policy.max_total_sequence_length";
	const struct rl_yentry *have = rl_ytree_find(nm->root, ours);
	if (strcmp(key, "precision") == 0) {
		/* generation runs in the training precision */
		const char *p =
		    have && have->value->kind == RL_Y_SCALAR ? have->value->text : "bfloat16";
		if (v->kind != RL_Y_SCALAR || strcmp(v->text, p) != 0)
			rl_diag_add(nm->d, v->file, e->line, e->col, path,
			            "not supported yet: generation runs in policy.precision (%s)",
			            p);
		else
			list_add(&nm->mapped, "%s = %s", key, ours);
		return;
	}
	/* max_model_len: our engine bounds prompt plus response by
	 * policy.max_total_sequence_length; a larger bound changes nothing */
	int64_t len = 0, total = 512;
	if (have && have->value->kind == RL_Y_SCALAR)
		rl_scalar_int(have->value->text, &total);
	if (v->kind != RL_Y_SCALAR || !rl_scalar_int(v->text, &len) || len < total)
		rl_diag_add(nm->d, v->file, e->line, e->col, path,
		            "not supported yet: below policy.max_total_sequence_length (%lld); set "
		            "that instead",
		            (long long)total);
	else
		list_add(&nm->mapped, "%s >= %s", key, ours);
}

static void data_special(struct nemo *nm, const char *path, const char *key,
                         const struct rl_yentry *e, struct rl_ynode *block)
{
	(void)block, (void)key;
	/* the math processors: the prompt file and the chat template, as
	 * slurm-rl applies them */
	const struct rl_ynode *v = e->value;
	if (matches(v, "math_hf_data_processor") || matches(v, "math_data_processor"))
		list_add(&nm->mapped, "processor %s = %s", v->text, "data.prompt_file");
	/* NeMo-RL's SFT processor: what rlrun sft makes of an example
	 * (data/sft_example.c), in an SFT config only */
	else if (matches(v, "sft_processor") && nm->algorithm == RL_ALGO_SFT)
		list_add(&nm->mapped, "processor %s = %s", v->text, "rlrun sft's examples");
	else if (matches(v, "sft_processor"))
		rl_diag_add(
		    nm->d, v->file, e->line, e->col, path,
		    "sft_processor makes SFT's examples: it needs an sft: block (rlrun sft)");
	else
		rl_diag_add(nm->d, v->file, e->line, e->col, path,
		            "not supported yet: math_hf_data_processor (data.prompt_file and the "
		            "chat template)");
}

static void finish_note(struct nemo *nm, const char *what)
{
	if (nm->mapped || nm->inert)
		rl_note_add(nm->d, "%s%s: %s%s%s%s%s", nm->block, what, nm->mapped ? "mapped " : "",
		            nm->mapped ? nm->mapped : "", nm->mapped && nm->inert ? "; " : "",
		            nm->inert ? "no effect here: " : "", nm->inert ? nm->inert : "");
	free(nm->mapped);
	free(nm->inert);
	nm->mapped = nm->inert = NULL;
}

static void translate(struct nemo *nm, const char *block_path, const struct rule *rules, size_t n,
                      special_fn *special)
{
	struct rl_yentry *e = rl_ytree_find(nm->root, block_path);
	nm->block = block_path;
	walk(nm, rules, n, special, e->value, e->value, "");
	finish_note(nm, "");
}

/* NeMo-RL reads policy.optimizer and policy.scheduler only with DTensor:
 * under Megatron its own optimizer and scheduler blocks decide. */
static void drop_for_megatron(struct nemo *nm, struct rl_ynode *policy)
{
	char *dropped = NULL;
	static const char *const keys[] = {"optimizer", "scheduler"};
	for (size_t i = 0; i < 2; i++) {
		struct rl_ynode *v = rl_ymap_take(policy, keys[i]);
		if (v && !rl_yscalar_is_null(v))
			list_add(&dropped, "policy.%s%s", keys[i], "");
		rl_ynode_free(v);
	}
	if (dropped)
		rl_note_add(nm->d,
		            "not used with an enabled policy.megatron_cfg, as in NeMo-RL: %s",
		            dropped);
	free(dropped);
}

static void backends(struct nemo *nm)
{
	struct rl_yentry *pe = rl_ytree_find(nm->root, "policy");
	if (!pe || pe->value->kind != RL_Y_MAP)
		return;
	struct rl_ynode *policy = pe->value;
	struct rl_yentry *meg = rl_ymap_find(policy, "megatron_cfg");
	struct rl_yentry *dt = rl_ymap_find(policy, "dtensor_cfg");
	bool meg_on = meg && switched_on(meg->value), dt_on = dt && switched_on(dt->value);
	if (meg_on && dt_on) {
		rl_diag_add(nm->d, meg->value->file, meg->line, meg->col, "policy.megatron_cfg",
		            "enabled together with policy.dtensor_cfg (%s:%d:%d); enable one",
		            dt->value->file, dt->line, dt->col);
		return;
	}
	if (meg_on) {
		drop_for_megatron(nm, policy);
		translate(nm, "policy.megatron_cfg", megatron_rules,
		          sizeof(megatron_rules) / sizeof(megatron_rules[0]), megatron_special);
		rl_ynode_free(rl_ymap_take(policy, "megatron_cfg"));
	}
	if (dt_on) {
		translate(nm, "policy.dtensor_cfg", dtensor_rules,
		          sizeof(dtensor_rules) / sizeof(dtensor_rules[0]), nothing_special);
		rl_ynode_free(rl_ymap_take(policy, "dtensor_cfg"));
	}
}

/* A block read by rules and taken out of the tree, or (partial) only its
 * keys that have a rule. */
static void translate_block(struct nemo *nm, const char *path, const struct rule *rules, size_t n,
                            special_fn *special, bool partial)
{
	struct rl_yentry *e = rl_ytree_find(nm->root, path);
	if (!e || e->value->kind != RL_Y_MAP)
		return;
	nm->partial = partial;
	translate(nm, path, rules, n, special);
	nm->partial = false;
	e = rl_ytree_find(nm->root, path);
	if (!e)
		return;
	if (partial) {
		for (size_t i = 0; i < n; i++)
			rl_ynode_free(rl_ymap_take(e->value, rules[i].key));
		return;
	}
	/* the block itself, from the mapping that holds it */
	const char *dot = strrchr(path, '.');
	char *up = dot ? strndup(path, (size_t)(dot - path)) : NULL;
	struct rl_yentry *ue = up ? rl_ytree_find(nm->root, up) : NULL;
	struct rl_ynode *holder = dot ? (ue ? ue->value : NULL) : nm->root;
	if (holder)
		rl_ynode_free(rl_ymap_take(holder, dot ? dot + 1 : path));
	free(up);
}

/* NeMo-RL's validation sampling keys: slurm-rl validates with the training
 * sampling, so they must say the same. */
static void validation_sampling(struct nemo *nm, struct rl_ynode *gen)
{
	static const char *const keys[][3] = {{"val_temperature", "temperature", "1.0"},
	                                      {"val_top_p", "top_p", "1.0"},
	                                      {"val_top_k", "top_k", "null"}};
	for (size_t i = 0; i < 3; i++) {
		struct rl_yentry *ve = rl_ymap_find(gen, keys[i][0]);
		if (!ve)
			continue;
		const struct rl_yentry *te = rl_ymap_find(gen, keys[i][1]);
		struct rl_ynode *def = te ? NULL : scalar(ve->value, keys[i][2]);
		const struct rl_ynode *train = te ? te->value : def;
		bool both_null =
		    train && rl_yscalar_is_null(ve->value) && rl_yscalar_is_null(train);
		if (train && !both_null && !rl_ynode_same_value(ve->value, train)) {
			char *path = NULL;
			if (asprintf(&path, "policy.generation.%s", keys[i][0]) >= 0)
				rl_diag_add(
				    nm->d, ve->value->file, ve->line, ve->col, path,
				    "not supported yet: validation samples as training does; "
				    "set it equal to policy.generation.%s",
				    keys[i][1]);
			free(path);
		}
		rl_ynode_free(def);
		rl_ynode_free(rl_ymap_take(gen, keys[i][0]));
	}
}

static void generation(struct nemo *nm)
{
	struct rl_yentry *ge = rl_ytree_find(nm->root, "policy.generation");
	if (!ge || ge->value->kind != RL_Y_MAP)
		return;
	struct rl_ynode *gen = ge->value;
	validation_sampling(nm, gen);
	struct rl_yentry *be = rl_ymap_find(gen, "backend");
	if (be) {
		const struct rl_ynode *v = be->value;
		if (matches(v, "vllm") || matches(v, "megatron"))
			rl_note_add(
			    nm->d,
			    "policy.generation.backend: %s: generation runs on slurm-rl's own "
			    "engine",
			    v->text);
		else if (!rl_yscalar_is_null(v))
			rl_diag_add(
			    nm->d, v->file, be->line, be->col, "policy.generation.backend",
			    "not supported yet: vllm or megatron (both run on slurm-rl's own "
			    "engine)");
		rl_ynode_free(rl_ymap_take(gen, "backend"));
	}
	struct rl_yentry *ve = rl_ymap_find(gen, "vllm_cfg");
	if (ve && ve->value->kind == RL_Y_MAP) {
		nm->vllm = true;
		translate(nm, "policy.generation.vllm_cfg", vllm_rules,
		          sizeof(vllm_rules) / sizeof(vllm_rules[0]), vllm_special);
		nm->vllm = false;
		rl_ynode_free(rl_ymap_take(gen, "vllm_cfg"));
	}
}

void rl_cfg_nemo_translate(struct rl_ynode *root, enum rl_algorithm algorithm,
                           struct rl_diags *diags)
{
	struct nemo nm = {.root = root, .d = diags, .algorithm = algorithm};
	backends(&nm);
	generation(&nm);
	translate_block(&nm, "grpo.adv_estimator", adv_rules,
	                sizeof(adv_rules) / sizeof(adv_rules[0]), nothing_special, false);
	translate_block(&nm, "reward_penalties", penalty_rules,
	                sizeof(penalty_rules) / sizeof(penalty_rules[0]), nothing_special, false);
	translate_block(&nm, "data.default", data_default_rules,
	                sizeof(data_default_rules) / sizeof(data_default_rules[0]), data_special,
	                false);
	translate_block(&nm, "data.train", data_train_rules,
	                sizeof(data_train_rules) / sizeof(data_train_rules[0]), data_special, true);
	translate_block(&nm, "data.validation", data_validation_rules,
	                sizeof(data_validation_rules) / sizeof(data_validation_rules[0]),
	                data_special, true);
}
