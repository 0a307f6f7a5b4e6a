/* `${a.b.c}` references, resolved after merging and overrides so that they
 * see the final values. A scalar that is exactly one reference takes the
 * referenced value whole (keeping its type: an int stays an int, a mapping
 * is copied); a reference inside a longer string is replaced by the text of
 * a scalar. `\${` is a literal `${`. OmegaConf resolvers (`${mul:...}`,
 * `${oc.env:...}`) are refused by name rather than misread. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/config/internal.h"

/* Bounds substitutions so that self-including mappings cannot expand
 * forever. */
enum { MAX_SUBSTITUTIONS = 10000, MAX_REF_DEPTH = 64 };

struct refs {
	struct rl_ynode *root;
	struct rl_diags *diags;
	int substitutions;
};

static void fail(struct refs *r, struct rl_ynode *at, const char *key, const char *fmt,
                 const char *arg)
{
	if (!at->reported)
		rl_diag_add(r->diags, at->file, at->line, at->col, key, fmt, arg);
	at->reported = true;
}

static struct rl_ynode *lookup(struct rl_ynode *root, const char *path)
{
	struct rl_ynode *n = root;
	char *copy = strdup(path);
	if (!copy)
		return NULL;
	char *save = NULL;
	for (char *part = strtok_r(copy, ".", &save); part && n;
	     part = strtok_r(NULL, ".", &save)) {
		if (n->kind == RL_Y_MAP) {
			struct rl_yentry *e = rl_ymap_find(n, part);
			n = e ? e->value : NULL;
		} else if (n->kind == RL_Y_SEQ) {
			char *end;
			unsigned long i = strtoul(part, &end, 10);
			n = (*end || end == part || i >= n->n) ? NULL : n->items[i].value;
		} else {
			n = NULL;
		}
	}
	free(copy);
	return n;
}

static void resolve_node(struct refs *r, struct rl_ynode *n, const char *key, int depth);

/* Resolves one scalar that contains `${`. */
static void resolve_scalar(struct refs *r, struct rl_ynode *n, const char *key, int depth)
{
	if (n->reported || n->resolved || !strstr(n->text, "${"))
		return;
	if (n->resolving) {
		fail(r, n, key, "reference cycle through %s", n->text);
		return;
	}
	if (depth > MAX_REF_DEPTH || ++r->substitutions > MAX_SUBSTITUTIONS) {
		fail(r, n, key, "references nest too deeply (a cycle?) in %s", n->text);
		return;
	}
	n->resolving = true;
	size_t len = strlen(n->text);
	char *out = malloc(len + 1);
	size_t cap = len + 1, used = 0;
	const char *p = n->text;
	while (out && *p) {
		const char *piece = p;
		size_t piece_len = 1;
		char *expansion = NULL;
		if (p[0] == '\\' && p[1] == '$' && p[2] == '{') {
			piece = "${";
			piece_len = 2;
			p += 3;
		} else if (p[0] == '$' && p[1] == '{') {
			const char *close = strchr(p + 2, '}');
			char *expr = close ? strndup(p + 2, (size_t)(close - p - 2)) : NULL;
			if (!close) {
				fail(r, n, key, "unterminated reference in %s", n->text);
			} else if (!expr) {
				break;
			} else if (strstr(expr, "${")) {
				fail(r, n, key, "nested references are not supported: %s", n->text);
			} else if (strchr(expr, ':')) {
				fail(r, n, key,
				     "interpolation resolvers are not supported: ${%s}; write the "
				     "value",
				     expr);
			} else {
				struct rl_ynode *target = lookup(r->root, expr);
				if (!target) {
					fail(r, n, key, "undefined reference ${%s}", expr);
				} else {
					resolve_node(r, target, expr, depth + 1);
					bool whole = p == n->text && close[1] == '\0';
					if (target->reported) {
						/* reported at the target: one cause, one message */
						n->reported = true;
					} else if (whole) {
						free(expr);
						free(out);
						/* the referenced value, whole, at this position */
						struct rl_ynode *copy = rl_ynode_copy(target);
						n->resolving = false;
						if (!copy)
							return;
						free(n->text);
						n->text = copy->text;
						n->plain = copy->plain;
						n->kind = copy->kind;
						n->items = copy->items;
						n->n = copy->n;
						n->cap = copy->cap;
						free(copy);
						n->resolved = true;
						return;
					} else if (target->kind != RL_Y_SCALAR) {
						fail(r, n, key,
						     "${%s} is a mapping or list; only a whole "
						     "value can refer to it",
						     expr);
					} else {
						expansion = target->text;
					}
				}
			}
			free(expr);
			if (n->reported)
				break;
			piece = expansion;
			piece_len = strlen(expansion);
			p = close + 1;
		} else {
			p++;
		}
		if (used + piece_len + 1 > cap) {
			cap = 2 * (used + piece_len + 1);
			char *bigger = realloc(out, cap);
			if (!bigger) {
				free(out);
				out = NULL;
				break;
			}
			out = bigger;
		}
		memcpy(out + used, piece, piece_len);
		used += piece_len;
	}
	n->resolving = false;
	if (!out || n->reported) {
		free(out);
		return;
	}
	out[used] = '\0';
	free(n->text);
	n->text = out;
	n->plain = false; /* text built from references is a string */
	n->resolved = true;
}

static void resolve_node(struct refs *r, struct rl_ynode *n, const char *key, int depth)
{
	if (n->kind == RL_Y_SCALAR) {
		resolve_scalar(r, n, key, depth);
		return;
	}
	if (n->resolving) {
		fail(r, n, key, "reference cycle through %s",
		     "a mapping that contains its own reference");
		return;
	}
	n->resolving = true;
	for (size_t i = 0; i < n->n; i++) {
		char *child = NULL;
		const char *name = n->items[i].key;
		char index[24];
		if (!name) {
			snprintf(index, sizeof(index), "%zu", i);
			name = index;
		}
		if (asprintf(&child, "%s%s%s", key, *key ? "." : "", name) < 0)
			return;
		resolve_node(r, n->items[i].value, child, depth + 1);
		free(child);
	}
	n->resolving = false;
}

void rl_cfg_resolve_refs(struct rl_ynode *root, struct rl_diags *diags)
{
	struct refs r = {.root = root, .diags = diags};
	resolve_node(&r, root, "", 0);
}
