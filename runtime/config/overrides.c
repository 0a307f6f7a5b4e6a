#define _GNU_SOURCE
/* Command-line overrides: `key.path=value`, the value read as YAML (so lists
 * and null work: `policy.generation.stop_strings=["</s>"]`). Hydra's `+key`
 * and `++key` spellings are accepted, since NeMo-RL users type them. Errors
 * point at "<command line>:N:COL", N counting the overrides from 1. */
#include <stdlib.h>
#include <string.h>

#include "runtime/config/internal.h"

static const char CMDLINE[] = "<command line>";

static void place(struct rl_ynode *n, int line, int col_offset)
{
	n->line = line;
	n->col += col_offset;
	for (size_t i = 0; i < n->n; i++) {
		n->items[i].line = line;
		n->items[i].col += col_offset;
		place(n->items[i].value, line, col_offset);
	}
}

static void apply_one(struct rl_ysources *src, struct rl_ynode *root, const char *arg, int index,
                      struct rl_diags *diags)
{
	const char *file = rl_ysources_intern(src, CMDLINE);
	const char *key = arg;
	while (*key == '+')
		key++;
	const char *eq = strchr(key, '=');
	size_t key_len = eq ? (size_t)(eq - key) : 0;
	if (!eq || key_len == 0 || key[0] == '.' || key[key_len - 1] == '.' ||
	    memmem(key, key_len, "..", 2)) {
		rl_diag_add(diags, file, index, 1, NULL,
		            "'%s': expected KEY=VALUE with a dotted key", arg);
		return;
	}
	int value_col = (int)(eq + 1 - arg) + 1;
	const char *text = eq + 1;
	struct rl_ynode *value;
	if (*text == '\0') {
		/* `key=` means the empty string, as in Hydra */
		value = rl_ynode_new(RL_Y_SCALAR, file, index, value_col);
		if (value && !(value->text = strdup(""))) {
			rl_ynode_free(value);
			value = NULL;
		}
	} else {
		size_t before = diags->n;
		value = rl_yaml_parse_value(src, file, text, strlen(text), diags);
		for (size_t i = before; i < diags->n; i++) {
			diags->v[i].line = index;
			diags->v[i].col += value_col - 1;
		}
		if (!value)
			return;
		place(value, index, value_col - 1);
	}
	if (!value)
		return;

	char *path = strndup(key, key_len);
	if (!path) {
		rl_ynode_free(value);
		return;
	}
	struct rl_ynode *map = root;
	char *save = NULL;
	char *part = strtok_r(path, ".", &save);
	for (char *next; map && (next = strtok_r(NULL, ".", &save)); part = next) {
		struct rl_yentry *e = rl_ymap_find(map, part);
		if (!e || e->value->kind != RL_Y_MAP) {
			/* the override wins over a scalar in the way (parallel: auto) */
			struct rl_ynode *m = rl_ynode_new(RL_Y_MAP, file, index, 1);
			e = m ? rl_ymap_set(map, part, index, 1, m) : NULL;
		}
		map = e ? e->value : NULL;
	}
	if (map && part)
		rl_ymap_set(map, part, index, 1, value);
	else
		rl_ynode_free(value);
	free(path);
}

void rl_cfg_apply_overrides(struct rl_ysources *src, struct rl_ynode *root, char *const *overrides,
                            size_t n, struct rl_diags *diags)
{
	for (size_t i = 0; i < n; i++)
		apply_one(src, root, overrides[i], (int)i + 1, diags);
}
