/* `${...}` interpolation, resolved after merging and overrides so that it
 * sees the final values. The language is the part of OmegaConf's that
 * NeMo-RL's configs use:
 *   ${a.b.c}       an absolute reference;
 *   ${.x}, ${..x}  relative ones: `.` is the mapping that holds the key, each
 *                  further dot one level up;
 *   ${mul:A,B} ${div:A,B} ${add:A,B} ${max:A,B} ${min:A,B}
 *                  NeMo-RL's arithmetic resolvers (nemo_rl/utils/config.py),
 *                  with Python's types: int op int stays an int, except div,
 *                  which is true division and always a float;
 *   ${oc.env:NAME} and ${oc.env:NAME,DEFAULT}
 *                  an environment variable, as a string.
 * Arguments may themselves be interpolations: ${mul:${a}, ${mul:2, ${b}}}.
 * A scalar that is exactly one reference takes the referenced value whole
 * (keeping its type: an int stays an int, a mapping is copied); a resolver
 * gives a number (or a string for oc.env); an interpolation inside a longer
 * string is replaced by its text. `\${` is a literal `${`. */
#define _GNU_SOURCE
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/config/internal.h"
#include "runtime/config/scalar.h"

/* Bounds substitutions so that self-including mappings cannot expand
 * forever. */
enum { MAX_SUBSTITUTIONS = 10000, MAX_REF_DEPTH = 64 };

struct refs {
	struct rl_ynode *root;
	struct rl_diags *diags;
	int substitutions;
};

/* The value of one `${...}`: a node of the tree (a reference) or a text (a
 * resolver's result). */
struct ival {
	const struct rl_ynode *node;
	char *text;
	bool plain;
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

/* The absolute path of a reference written at `key`: leading dots climb
 * from the mapping that holds key. NULL when it climbs above the root. */
static char *absolute(const char *key, const char *ref)
{
	if (ref[0] != '.')
		return strdup(ref);
	size_t dots = strspn(ref, ".");
	size_t len = strlen(key);
	for (size_t i = 0; i < dots; i++) {
		const char *dot = memrchr(key, '.', len);
		if (!dot && len == 0)
			return NULL;
		len = dot ? (size_t)(dot - key) : 0;
	}
	char *out = NULL;
	if (asprintf(&out, "%.*s%s%s", (int)len, key, len ? "." : "", ref + dots) < 0)
		return NULL;
	return out;
}

/* The end of the `${...}` that starts at p (at its `$`): the matching `}`,
 * or NULL. */
static const char *closing(const char *p)
{
	int depth = 0;
	for (const char *c = p; *c; c++) {
		if (c[0] == '$' && c[1] == '{') {
			depth++;
			c++;
		} else if (*c == '}' && --depth == 0) {
			return c;
		}
	}
	return NULL;
}

/* Python's repr of a float: the shortest text that reads back the same,
 * with a ".0" when it would otherwise read as an int. */
static char *float_text(double x)
{
	char buf[64];
	if (isinf(x))
		return strdup(x > 0 ? "inf" : "-inf");
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, x);
		if (strtod(buf, NULL) == x)
			break;
	}
	if (!strpbrk(buf, ".eE"))
		strcat(buf, ".0");
	return strdup(buf);
}

static void resolve_node(struct refs *r, struct rl_ynode *n, const char *key, int depth);
static bool eval(struct refs *r, struct rl_ynode *n, const char *key, const char *expr, size_t len,
                 int depth, struct ival *out);

/* A resolver argument: text that may hold interpolations, read as a
 * scalar (whitespace around it dropped, quotes removed). */
static char *arg_text(struct refs *r, struct rl_ynode *n, const char *key, const char *a,
                      size_t len, int depth, bool *plain)
{
	while (len && isspace((unsigned char)*a)) {
		a++;
		len--;
	}
	while (len && isspace((unsigned char)a[len - 1]))
		len--;
	*plain = true;
	if (len >= 2 && (a[0] == '\'' || a[0] == '"') && a[len - 1] == a[0]) {
		*plain = false;
		return strndup(a + 1, len - 2);
	}
	char *out = NULL;
	size_t out_len = 0;
	FILE *f = open_memstream(&out, &out_len);
	if (!f)
		return NULL;
	bool whole = len > 1 && a[0] == '$' && a[1] == '{' && closing(a) == a + len - 1;
	for (size_t i = 0; i < len;) {
		if (a[i] == '$' && i + 1 < len && a[i + 1] == '{') {
			const char *end = closing(a + i);
			if (!end || end >= a + len) {
				fail(r, n, key, "unterminated interpolation in %s", n->text);
				break;
			}
			struct ival v = {0};
			if (!eval(r, n, key, a + i + 2, (size_t)(end - a - i - 2), depth + 1, &v))
				break;
			if (v.node && v.node->kind != RL_Y_SCALAR) {
				fail(r, n, key, "a resolver argument is a mapping or list in %s",
				     n->text);
				break;
			}
			fputs(v.node ? v.node->text : v.text, f);
			if (whole)
				*plain = v.node ? v.node->plain : v.plain;
			free(v.text);
			i = (size_t)(end - a) + 1;
		} else {
			fputc(a[i++], f);
		}
	}
	fclose(f);
	if (n->reported) {
		free(out);
		return NULL;
	}
	return out;
}

static bool number(const char *t, bool plain, double *x, bool *is_int, int64_t *i)
{
	if (!plain)
		return false;
	*is_int = rl_scalar_int(t, i);
	if (*is_int) {
		*x = (double)*i;
		return true;
	}
	return rl_scalar_float(t, x);
}

/* ${name:args} with the arguments' texts in a[0..n). */
static bool apply(struct refs *r, struct rl_ynode *n, const char *key, const char *name, char **a,
                  bool *plain, size_t na, struct ival *out)
{
	if (strcmp(name, "oc.env") == 0) {
		if (na < 1 || na > 2) {
			fail(r, n, key, "${oc.env:NAME} or ${oc.env:NAME,DEFAULT} expected in %s",
			     n->text);
			return false;
		}
		const char *v = getenv(a[0]);
		if (!v && na == 1) {
			fail(r, n, key, "environment variable %s is not set", a[0]);
			return false;
		}
		out->text = strdup(v ? v : a[1]);
		out->plain = false;
		return out->text != NULL;
	}
	static const char *const ops[] = {"add", "mul", "div", "max", "min"};
	int op = -1;
	for (int i = 0; i < 5; i++)
		if (strcmp(name, ops[i]) == 0)
			op = i;
	if (op < 0) {
		fail(
		    r, n, key,
		    "unknown resolver %s: known are add, mul, div, max, min (NeMo-RL's) and oc.env",
		    name);
		return false;
	}
	if (na != 2) {
		fail(r, n, key, "%s takes two arguments", name);
		return false;
	}
	double x[2];
	int64_t iv[2];
	bool is_int[2];
	for (int i = 0; i < 2; i++)
		if (!number(a[i], plain[i], &x[i], &is_int[i], &iv[i])) {
			fail(r, n, key, "not a number: %s", a[i]);
			return false;
		}
	bool ints = is_int[0] && is_int[1] && op != 2;
	if (ints) {
		int64_t v;
		bool overflow = false;
		switch (op) {
		case 0:
			overflow = __builtin_add_overflow(iv[0], iv[1], &v);
			break;
		case 1:
			overflow = __builtin_mul_overflow(iv[0], iv[1], &v);
			break;
		case 3:
			v = iv[0] > iv[1] ? iv[0] : iv[1];
			break;
		default:
			v = iv[0] < iv[1] ? iv[0] : iv[1];
			break;
		}
		if (overflow) {
			fail(r, n, key, "integer overflow in %s", n->text);
			return false;
		}
		if (asprintf(&out->text, "%lld", (long long)v) < 0)
			out->text = NULL;
	} else {
		if (op == 2 && x[1] == 0) {
			fail(r, n, key, "division by zero in %s", n->text);
			return false;
		}
		double v = op == 0   ? x[0] + x[1]
		           : op == 1 ? x[0] * x[1]
		           : op == 2 ? x[0] / x[1]
		           : op == 3 ? fmax(x[0], x[1])
		                     : fmin(x[0], x[1]);
		/* Python's max/min return the argument itself: an int stays an int */
		if ((op == 3 || op == 4) && is_int[v == x[0] ? 0 : 1]) {
			if (asprintf(&out->text, "%lld", (long long)iv[v == x[0] ? 0 : 1]) < 0)
				out->text = NULL;
		} else {
			out->text = float_text(v);
		}
	}
	out->plain = true;
	return out->text != NULL;
}

/* Evaluates the inside of one `${...}` (expr, len bytes). */
static bool eval(struct refs *r, struct rl_ynode *n, const char *key, const char *expr, size_t len,
                 int depth, struct ival *out)
{
	if (depth > MAX_REF_DEPTH || ++r->substitutions > MAX_SUBSTITUTIONS) {
		fail(r, n, key, "references nest too deeply (a cycle?) in %s", n->text);
		return false;
	}
	size_t name_len =
	    strspn(expr, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.");
	if (name_len < len && expr[name_len] == ':' && name_len > 0) {
		char *name = strndup(expr, name_len);
		char *a[8];
		bool plain[8];
		size_t na = 0;
		bool ok = name != NULL;
		const char *p = expr + name_len + 1, *end = expr + len;
		while (ok && p <= end) {
			/* the next top-level comma */
			const char *c = p;
			int nest = 0;
			char quote = 0;
			for (; c < end; c++) {
				if (quote) {
					quote = *c == quote ? 0 : quote;
				} else if (*c == '\'' || *c == '"') {
					quote = *c;
				} else if (c[0] == '$' && c + 1 < end && c[1] == '{') {
					nest++;
					c++;
				} else if (*c == '}') {
					nest--;
				} else if (*c == ',' && nest == 0) {
					break;
				}
			}
			if (na == 8) {
				fail(r, n, key, "too many resolver arguments in %s", n->text);
				ok = false;
				break;
			}
			a[na] = arg_text(r, n, key, p, (size_t)(c - p), depth, &plain[na]);
			if (!a[na]) {
				ok = false;
				break;
			}
			na++;
			p = c + 1;
		}
		ok = ok && apply(r, n, key, name, a, plain, na, out);
		for (size_t i = 0; i < na; i++)
			free(a[i]);
		free(name);
		return ok;
	}
	char *ref = strndup(expr, len);
	if (!ref)
		return false;
	if (strstr(ref, "${")) {
		fail(r, n, key, "a reference inside a reference name is not supported: %s",
		     n->text);
		free(ref);
		return false;
	}
	char *path = absolute(key, ref);
	struct rl_ynode *target = path && *path ? lookup(r->root, path) : NULL;
	if (!target) {
		char *shown = NULL;
		if (asprintf(&shown, "${%s}", ref) >= 0)
			fail(r, n, key, "undefined reference %s", shown);
		free(shown);
		free(ref);
		free(path);
		return false;
	}
	free(ref);
	resolve_node(r, target, path, depth + 1);
	free(path);
	if (target->reported) {
		/* reported at the target: one cause, one message */
		n->reported = true;
		return false;
	}
	out->node = target;
	return true;
}

/* Resolves one scalar that contains `${`. */
static void resolve_scalar(struct refs *r, struct rl_ynode *n, const char *key, int depth)
{
	if (n->reported || n->resolved || !strstr(n->text, "${"))
		return;
	if (n->resolving) {
		fail(r, n, key, "reference cycle through %s", n->text);
		return;
	}
	n->resolving = true;
	char *out = NULL;
	size_t out_len = 0;
	FILE *f = open_memstream(&out, &out_len);
	const char *p = n->text;
	while (f && *p) {
		if (p[0] == '\\' && p[1] == '$' && p[2] == '{') {
			fputs("${", f);
			p += 3;
			continue;
		}
		if (!(p[0] == '$' && p[1] == '{')) {
			fputc(*p++, f);
			continue;
		}
		const char *close = closing(p);
		if (!close) {
			fail(r, n, key, "unterminated reference in %s", n->text);
			break;
		}
		struct ival v = {0};
		if (!eval(r, n, key, p + 2, (size_t)(close - p - 2), depth, &v))
			break;
		if (p == n->text && close[1] == '\0') {
			/* the value, whole, at this position */
			fclose(f);
			free(out);
			n->resolving = false;
			if (v.node) {
				struct rl_ynode *copy = rl_ynode_copy(v.node);
				if (!copy)
					return;
				free(n->text);
				n->text = copy->text;
				n->plain = copy->plain;
				n->kind = copy->kind;
				n->items = copy->items; /* a scalar had no key index */
				n->n = copy->n;
				n->cap = copy->cap;
				free(copy);
			} else {
				free(n->text);
				n->text = v.text;
				n->plain = v.plain;
			}
			n->resolved = true;
			return;
		}
		if (v.node && v.node->kind != RL_Y_SCALAR) {
			char *ref = strndup(p + 2, (size_t)(close - p - 2));
			fail(r, n, key,
			     "${%s} is a mapping or list; only a whole value can refer to it",
			     ref ? ref : "");
			free(ref);
			break;
		}
		fputs(v.node ? v.node->text : v.text, f);
		free(v.text);
		p = close + 1;
	}
	if (f)
		fclose(f);
	n->resolving = false;
	if (!f || n->reported) {
		free(out);
		return;
	}
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
