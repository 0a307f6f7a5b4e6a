/* The algorithm a config runs, from its top-level block, and that block's
 * run-control keys read where the trainer's loop reads them (grpo.*), so
 * that one loop, one checkpoint and one resume serve every algorithm. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "runtime/config/internal.h"

static const char *const blocks[] = {
    [RL_ALGO_GRPO] = "grpo",
    [RL_ALGO_SFT] = "sft",
    [RL_ALGO_DPO] = "dpo",
    [RL_ALGO_DISTILLATION] = "distillation",
};

static const char *const verbs[] = {
    [RL_ALGO_GRPO] = "train",
    [RL_ALGO_SFT] = "sft",
    [RL_ALGO_DPO] = "dpo",
    [RL_ALGO_DISTILLATION] = "distill",
};

const char *rl_algorithm_verb(enum rl_algorithm a)
{
	return verbs[a];
}

const char *rl_algorithm_block(enum rl_algorithm a)
{
	return blocks[a];
}

/* The keys each block shares with grpo's, as NeMo-RL's sft.yaml, dpo.yaml
 * and distillation_math.yaml write them. */
static const char *const run_keys[] = {"max_num_steps", "max_num_epochs", "val_period",
                                       "val_at_start",  "seed",           NULL};
static const char *const distillation_keys[] = {
    "num_prompts_per_step", "num_generations_per_prompt",
    "max_rollout_turns",    "val_batch_size",
    "max_val_samples",      NULL};

static void move_keys(struct rl_ynode *root, struct rl_ynode *block, const char *name,
                      const char *const *keys, struct rl_diags *diags)
{
	for (const char *const *k = keys; *k; k++) {
		struct rl_yentry *e = rl_ymap_find(block, *k);
		if (!e)
			continue;
		struct rl_yentry at = {.line = e->line, .col = e->col};
		struct rl_ynode *value = rl_ymap_take(block, *k);
		char from[64], to[64];

		snprintf(from, sizeof from, "%s.%s", name, *k);
		snprintf(to, sizeof to, "grpo.%s", *k);
		rl_cfg_tree_put(root, diags, from, &at, value, to);
	}
}

void rl_cfg_algorithm_translate(struct rl_ynode *root, enum rl_algorithm *algorithm,
                                struct rl_diags *diags)
{
	const struct rl_yentry *first = NULL;

	*algorithm = RL_ALGO_GRPO;
	if (!root || root->kind != RL_Y_MAP)
		return;
	for (int a = RL_ALGO_SFT; a <= RL_ALGO_DISTILLATION; a++) {
		struct rl_yentry *e = rl_ymap_find(root, blocks[a]);
		if (!e)
			continue;
		if (first) {
			rl_diag_add(diags, e->value->file, e->line, e->col, blocks[a],
			            "a config runs one algorithm: %s is set at %s:%d:%d too; keep "
			            "one of them",
			            first->key, first->value->file, first->line, first->col);
			return;
		}
		first = e;
		*algorithm = (enum rl_algorithm)a;
	}
	if (!first)
		return;
	struct rl_ynode *block = first->value;
	const char *name = blocks[*algorithm];
	if (block->kind != RL_Y_MAP) {
		/* `sft: null` and the like: no keys to move; the schema
		 * says what the block may hold */
		return;
	}
	move_keys(root, block, name, run_keys, diags);
	if (*algorithm == RL_ALGO_DISTILLATION)
		move_keys(root, block, name, distillation_keys, diags);
	if (block->n == 0)
		rl_ynode_free(rl_ymap_take(root, name));
}

const char *const rl_cfg_distillation_loss_keys[3] = {"loss_fn.kl_type", "loss_fn.mixed_kl_weight",
                                                      "loss_fn.zero_outside_topk"};

bool rl_cfg_grpo_only_key(const char *path)
{
	static const char *const grpo_prefixes[] = {"grpo.normalize_rewards",
	                                            "grpo.use_leave_one_out_baseline",
	                                            "grpo.overlong_filtering",
	                                            "grpo.advantage_clip_",
	                                            "grpo.use_dynamic_sampling",
	                                            "grpo.dynamic_sampling_max_gen_batches",
	                                            "grpo.batch_multiplier",
	                                            "grpo.reward_shaping.",
	                                            "grpo.reward_scaling.",
	                                            "loss_fn.",
	                                            NULL};

	for (size_t i = 0; i < 3; i++)
		if (strcmp(path, rl_cfg_distillation_loss_keys[i]) == 0)
			return false;
	for (const char *const *p = grpo_prefixes; *p; p++)
		if (strncmp(path, *p, strlen(*p)) == 0)
			return true;
	return false;
}
