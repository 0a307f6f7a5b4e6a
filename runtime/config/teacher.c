/* On-policy distillation's `teacher:` block, as NeMo-RL writes it: a whole
 * policy config, usually the policy's own merged in (`<<: *POLICY_BASE`)
 * with the teacher's model_name and its parallel sizes over it. Here the
 * teacher is held with the policy's layout, precision and batches, so the
 * block keeps what is the teacher's own (model_name, tokenizer.name) and
 * every other key must say what the policy says: one equal to the
 * policy's is taken out of the tree, one that differs (or that the policy
 * does not set) is an error naming both, since honouring it would need a
 * teacher run another way. This runs after references are resolved and
 * before nemo.c reads the policy's backend blocks, so the two blocks are
 * compared as written (and after YAML's merge keys are expanded, as
 * merge_keys.c does before references, so that the teacher's
 * `${..model_name}` is its own). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/config/internal.h"

/* the teacher's own keys, read by the schema (teacher.*) */
static const char *const own[] = {"model_name", "tokenizer.name", NULL};

static bool is_own(const char *path)
{
	for (const char *const *k = own; *k; k++)
		if (strcmp(path, *k) == 0)
			return true;
	return false;
}

/* map is teacher.<prefix>: what is not the teacher's own is compared
 * with the policy's and taken out (an error where it differs), and so
 * are the mappings it empties */
static void prune(struct rl_ynode *map, const char *prefix, const struct rl_ynode *policy,
                  struct rl_diags *d)
{
	for (size_t i = map->n; i-- > 0;) {
		struct rl_yentry *e = &map->items[i];
		char *path = NULL;

		if (asprintf(&path, "%s%s%s", prefix, *prefix ? "." : "", e->key) < 0)
			return;
		if (is_own(path)) {
			free(path);
			continue;
		}
		const struct rl_yentry *pe = policy ? rl_ytree_find(policy, path) : NULL;
		const struct rl_ynode *mine = pe ? pe->value : NULL;
		if (e->value->kind == RL_Y_MAP && e->value->n > 0 &&
		    (!mine || mine->kind == RL_Y_MAP)) {
			prune(e->value, path, policy, d);
		} else if (!mine || !rl_ynode_same_value(e->value, mine)) {
			const struct rl_ynode *v = e->value;
			char *key = NULL;

			if (asprintf(&key, "teacher.%s", path) >= 0)
				rl_diag_add(
				    d, v->file, e->line, e->col, key,
				    "%s policy.%s%s: the teacher is held with the policy's "
				    "layout, precision and batches in this release, so this "
				    "block may only repeat the policy's keys (model_name and "
				    "tokenizer.name are the teacher's own); remove it or make "
				    "it the policy's",
				    mine ? "differs from" : "is given, but not", path,
				    mine ? "" : " (the policy sets no such key)");
			free(key);
		}
		free(path);
		if (e->value->kind != RL_Y_MAP || e->value->n == 0)
			rl_ynode_free(rl_ymap_take(map, e->key));
	}
}

void rl_cfg_teacher_translate(struct rl_ynode *root, struct rl_diags *diags)
{
	struct rl_yentry *e = root && root->kind == RL_Y_MAP ? rl_ymap_find(root, "teacher") : NULL;

	if (!e || e->value->kind != RL_Y_MAP)
		return;
	const struct rl_yentry *p = rl_ymap_find(root, "policy");
	prune(e->value, "", p ? p->value : NULL, diags);
}
