/* Steps of config loading shared between the files of runtime/config. */
#ifndef RL_CONFIG_INTERNAL_H
#define RL_CONFIG_INTERNAL_H

#include "runtime/config/config.h"
#include "runtime/config/schema.h"
#include "runtime/config/ynode.h"

/* Where each schema key was set (file NULL when it kept its default). */
struct rl_key_pos {
	const char *file;
	int line, col;
};

/* merge_keys.c: expands YAML's merge keys (`<<: *ANCHOR`) in place. */
void rl_cfg_expand_merges(struct rl_ynode *root);

/* teacher.c: the teacher block keeps the teacher's own keys; the ones it
 * repeats of the policy must be the policy's (taken out), else an error. */
void rl_cfg_teacher_translate(struct rl_ynode *root, struct rl_diags *diags);

/* refs.c: replaces every `${a.b.c}` in the tree. */
void rl_cfg_resolve_refs(struct rl_ynode *root, struct rl_diags *diags);

/* algorithm.c: decides the run's algorithm from the top-level `sft:`, `dpo:`
 * or `distillation:` block and moves that block's run-control keys
 * (max_num_steps, seed, val_period, ...) to grpo.*, where the trainer reads
 * them whatever the algorithm; an error names both places where one is set
 * twice. */
void rl_cfg_algorithm_translate(struct rl_ynode *root, enum rl_algorithm *algorithm,
                                struct rl_diags *diags);

/* Whether PATH is a key of GRPO's loss or advantages alone (loss_fn.*
 * but distillation's kl_type, mixed_kl_weight and zero_outside_topk;
 * grpo.normalize_rewards, DAPO's keys, ...): SFT, DPO and distillation
 * refuse it written and leave it out of their resolved config. */
bool rl_cfg_grpo_only_key(const char *path);

/* loss_fn's keys of on-policy distillation alone: kl_type,
 * mixed_kl_weight, zero_outside_topk (in that order). */
extern const char *const rl_cfg_distillation_loss_keys[3];

/* Sets the tree's dotted key TO (making its maps) to VALUE (owned), which
 * came from FROM at SRC; where TO is already set to another value, an error
 * names both places. nemo.c's, shared with algorithm.c. */
void rl_cfg_tree_put(struct rl_ynode *root, struct rl_diags *d, const char *from,
                     const struct rl_yentry *src, struct rl_ynode *value, const char *to);

/* nemo.c: reads an enabled policy.megatron_cfg or policy.dtensor_cfg,
 * policy.generation.backend and vllm_cfg into slurm-rl's keys, with notes. */
void rl_cfg_nemo_translate(struct rl_ynode *root, enum rl_algorithm algorithm,
                           struct rl_diags *diags);

/* paths.c: resolves the relative input paths of the tree against the
 * directory of the file each was written in (the working directory for an
 * override). */
void rl_cfg_resolve_paths(struct rl_ynode *root);

/* overrides.c: applies "key.path=value" arguments to the tree. */
void rl_cfg_apply_overrides(struct rl_ysources *src, struct rl_ynode *root, char *const *overrides,
                            size_t n, struct rl_diags *diags);

/* validate.c: checks the tree against the schema and fills cfg (which the
 * caller zeroed); pos has rl_schema_len entries. */
void rl_cfg_from_tree(const struct rl_ynode *root, struct rl_config *cfg, struct rl_key_pos *pos,
                      struct rl_diags *diags);
/* Stores one value for key k at base (cfg, or an env element). */
bool rl_cfg_store(const struct rl_key *k, const struct rl_ynode *v, void *base, const char *path,
                  struct rl_diags *diags);

/* torch_sched.c: reads policy.scheduler into *out (freed and replaced);
 * false after reporting. */
bool rl_cfg_read_schedulers(const struct rl_ynode *v, const char *path,
                            struct rl_cfg_sched_list *out, struct rl_diags *d);
void rl_cfg_sched_list_free(struct rl_cfg_sched_list *l);
/* The torch class name of a kind. */
const char *rl_torch_sched_name(enum rl_torch_sched_kind kind);

/* rules.c: constraints between keys, checked after every key is valid. */
void rl_cfg_check_rules(const struct rl_config *cfg, const struct rl_key_pos *pos,
                        const char *root_file, struct rl_diags *diags);

#endif
