/* A YAML document as a tree whose every node remembers FILE:LINE:COL, so that
 * errors found long after parsing (after merging `defaults:`, applying
 * overrides, resolving references) still point at the text the user wrote. */
#ifndef RL_YNODE_H
#define RL_YNODE_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/config/diag.h"

enum rl_ykind { RL_Y_SCALAR, RL_Y_MAP, RL_Y_SEQ };

struct rl_ynode;

struct rl_yentry {
	char *key; /* NULL in a sequence */
	int line, col;
	struct rl_ynode *value;
};

struct rl_ynode {
	enum rl_ykind kind;
	const char *file; /* interned in rl_ysources */
	int line, col;
	char *text;     /* scalar text */
	bool plain;     /* unquoted scalar: may read as null, bool or number */
	bool reported;  /* an error was reported here; later checks stay quiet */
	bool resolving; /* on the `${...}` resolution stack (cycle detection) */
	bool resolved;  /* references already replaced: its text is literal now */
	size_t n, cap;
	struct rl_yentry *items;
	/* A mapping's key index, so that finding a key costs the same in a
	 * mapping of 100000 keys as in one of 10 (loading stays linear in the
	 * file's size): open addressing, slot = item position + 1, 0 empty;
	 * it covers items[0 .. indexed) and is built on first use. */
	size_t *index;
	size_t index_cap, indexed;
};

/* File names outlive the parse: every node points into this table. */
struct rl_ysources {
	char **v;
	size_t n, cap;
};

const char *rl_ysources_intern(struct rl_ysources *s, const char *name);
void rl_ysources_free(struct rl_ysources *s);

/* Parses one YAML document. An empty document is an empty mapping. Returns
 * NULL after adding a diagnostic with libyaml's position. */
struct rl_ynode *rl_yaml_parse(struct rl_ysources *src, const char *file, const char *text,
                               size_t len, struct rl_diags *diags);

/* Parses one YAML value of any kind (an override's right-hand side). Returns
 * NULL for an empty text or after adding a diagnostic. */
struct rl_ynode *rl_yaml_parse_value(struct rl_ysources *src, const char *file, const char *text,
                                     size_t len, struct rl_diags *diags);

struct rl_ynode *rl_ynode_new(enum rl_ykind kind, const char *file, int line, int col);
struct rl_ynode *rl_ynode_copy(const struct rl_ynode *n);
void rl_ynode_free(struct rl_ynode *n);

struct rl_yentry *rl_ymap_find(const struct rl_ynode *map, const char *key);
/* Sets key to value (taking ownership), replacing and freeing an old value. */
struct rl_yentry *rl_ymap_set(struct rl_ynode *map, const char *key, int line, int col,
                              struct rl_ynode *value);
/* Removes key and returns its value (the caller owns it), or NULL. */
struct rl_ynode *rl_ymap_take(struct rl_ynode *map, const char *key);

/* Scalar readings with YAML 1.2 core-schema spellings. */
bool rl_yscalar_is_null(const struct rl_ynode *n);

/* The entry at a dotted path below root ("policy.generation.backend"), or
 * NULL where a part is missing or its parent is not a mapping. */
struct rl_yentry *rl_ytree_find(const struct rl_ynode *root, const char *dotted);

/* Whether a and b say the same thing: mappings with the same keys in the
 * same order and sequences item by item, each value the same; plain
 * scalars equal as numbers (1e-3 and 0.001), as booleans (True and true)
 * or as null (~ and null); otherwise equal texts. */
bool rl_ynode_same_value(const struct rl_ynode *a, const struct rl_ynode *b);

#endif
