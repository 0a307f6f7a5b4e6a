/* What a template can call: Jinja's filters and tests that chat templates
 * use, the string and mapping methods they call (Python's semantics), and
 * transformers' globals (raise_exception, strftime_now, namespace). A name
 * not listed here is an error that says so, never a guess. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/chat/internal.h"

static int fail(struct renderer *r, const struct node *n, const char *fmt, const char *a)
{
	return jfail(r->e, n->line, n->col, fmt, a);
}
static int oom(struct renderer *r, const struct node *n)
{
	return jfail(r->e, n->line, n->col,
	             "out of memory (the render's memory limit is %zu bytes)", r->a->limit);
}

/* ---- Python's whitespace (str.isspace) in UTF-8 ---- */
static size_t space_at(const char *s, size_t n) /* its length in bytes, 0 if none */
{
	static const char *const wide[] = {"\xc2\x85",     "\xc2\xa0",     "\xe1\x9a\x80",
	                                   "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf",
	                                   "\xe2\x81\x9f", "\xe3\x80\x80", NULL};
	unsigned char c = (unsigned char)s[0];

	if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f))
		return 1;
	if (n >= 3 && c == 0xe2 && (unsigned char)s[1] == 0x80 && (unsigned char)s[2] >= 0x80 &&
	    (unsigned char)s[2] <= 0x8a)
		return 3; /* U+2000..U+200A */
	for (int k = 0; wide[k]; k++) {
		size_t l = strlen(wide[k]);
		if (n >= l && !memcmp(s, wide[k], l))
			return l;
	}
	return 0;
}

static size_t cp_len(const char *s, size_t n)
{
	size_t l = 1;

	while (l < n && ((unsigned char)s[l] & 0xc0) == 0x80)
		l++;
	return l;
}

/* the length of the code point at s if it is one of chars' (or whitespace
 * when chars is NULL), else 0 */
static size_t strip_at(const char *s, size_t n, const struct val *chars)
{
	size_t l;

	if (!chars)
		return space_at(s, n);
	l = cp_len(s, n);
	for (size_t i = 0; i < chars->u.s.n; i += cp_len(chars->u.s.p + i, chars->u.s.n - i))
		if (cp_len(chars->u.s.p + i, chars->u.s.n - i) == l &&
		    !memcmp(chars->u.s.p + i, s, l))
			return l;
	return 0;
}

/* the code point that ends at s + n: its start */
static size_t last_cp(const char *s, size_t n)
{
	size_t i = n - 1;

	while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80)
		i--;
	return i;
}

static struct val strip(struct val s, const struct val *chars, bool left, bool right)
{
	const char *p = s.u.s.p;
	size_t n = s.u.s.n, l;

	while (left && n && (l = strip_at(p, n, chars)))
		p += l, n -= l;
	while (right && n) {
		size_t at = last_cp(p, n);
		if (!strip_at(p + at, n - at, chars))
			break;
		n = at;
	}
	return v_str(p, n);
}

static struct list *new_list(struct renderer *r, size_t n)
{
	struct list *l = arena_alloc(r->a, sizeof *l);

	if (!l || (n && !(l->items = arena_alloc(r->a, n * sizeof *l->items))))
		return NULL;
	l->n = n;
	return l;
}

static int list_push(struct renderer *r, struct list *l, size_t *cap, struct val v)
{
	if (l->n == *cap) {
		size_t c = *cap ? *cap * 2 : 8;
		struct val *items = arena_alloc(r->a, c * sizeof *items);

		if (!items)
			return -1;
		if (l->n)
			memcpy(items, l->items, l->n * sizeof *items);
		l->items = items, *cap = c;
	}
	l->items[l->n++] = v;
	return 0;
}

/* str.split(sep) and str.split() */
static int split(struct renderer *r, const struct node *n, struct val s, const struct val *sep,
                 int64_t maxsplit, struct val *out)
{
	struct list *l = new_list(r, 0);
	size_t cap = 0, i = 0, start = 0, sl;
	const char *p = s.u.s.p;

	if (!l)
		return oom(r, n);
	if (sep && sep->u.s.n == 0)
		return fail(r, n, "%s", "split() with an empty separator");
	if (sep) {
		const char *hit;
		while ((maxsplit < 0 || (int64_t)l->n < maxsplit) &&
		       (hit = memmem(p + start, s.u.s.n - start, sep->u.s.p, sep->u.s.n))) {
			if (list_push(r, l, &cap, v_str(p + start, (size_t)(hit - p) - start)))
				return oom(r, n);
			start = (size_t)(hit - p) + sep->u.s.n;
		}
		if (list_push(r, l, &cap, v_str(p + start, s.u.s.n - start)))
			return oom(r, n);
	} else {
		while (i < s.u.s.n) {
			while (i < s.u.s.n && (sl = space_at(p + i, s.u.s.n - i)))
				i += sl;
			if (i >= s.u.s.n)
				break;
			start = i;
			if (maxsplit >= 0 && (int64_t)l->n >= maxsplit) {
				struct val rest =
				    strip(v_str(p + i, s.u.s.n - i), NULL, false, true);
				if (list_push(r, l, &cap, rest))
					return oom(r, n);
				break;
			}
			while (i < s.u.s.n && !space_at(p + i, s.u.s.n - i))
				i += cp_len(p + i, s.u.s.n - i);
			if (list_push(r, l, &cap, v_str(p + start, i - start)))
				return oom(r, n);
		}
	}
	*out = (struct val){.t = V_LIST, .u.l = l};
	return 0;
}

static int replace(struct renderer *r, const struct node *n, struct val s, struct val from,
                   struct val to, int64_t count, struct val *out)
{
	struct sbuf b = {.limit = r->out.limit};
	size_t at = 0;
	const char *hit;
	int rc;

	if (from.u.s.n == 0)
		return fail(r, n, "%s", "replace() of an empty string is not supported");
	while (count != 0 && (hit = memmem(s.u.s.p + at, s.u.s.n - at, from.u.s.p, from.u.s.n))) {
		sb_put(&b, s.u.s.p + at, (size_t)(hit - s.u.s.p) - at);
		sb_put(&b, to.u.s.p, to.u.s.n);
		at = (size_t)(hit - s.u.s.p) + from.u.s.n;
		count--;
	}
	sb_put(&b, s.u.s.p + at, s.u.s.n - at);
	if (b.over) {
		free(b.p);
		return fail(r, n, "%s", "a string longer than the output limit");
	}
	rc = arena_str(r, n, b.p ? b.p : "", b.n, out);
	free(b.p);
	return rc;
}

static int change_case(struct renderer *r, const struct node *n, struct val s, bool upper,
                       struct val *out)
{
	char *p = arena_alloc(r->a, s.u.s.n + 1);

	if (!p)
		return oom(r, n);
	for (size_t i = 0; i < s.u.s.n; i++) {
		char c = s.u.s.p[i];
		if ((unsigned char)c >= 0x80)
			return fail(r, n, "%s",
			            "upper() and lower() of non-ASCII text are not supported");
		p[i] = upper ? (c >= 'a' && c <= 'z' ? (char)(c - 32) : c)
		             : (c >= 'A' && c <= 'Z' ? (char)(c + 32) : c);
	}
	*out = v_str(p, s.u.s.n);
	return 0;
}

/* ---- arguments ---- */
struct args {
	struct val *v;
	size_t n;
	const char **kw;
};
/* argument `pos` or keyword `name`; NULL when absent */
static const struct val *arg(const struct args *a, size_t pos, const char *name)
{
	for (size_t i = 0; i < a->n; i++) {
		if (a->kw && a->kw[i]) {
			if (name && !strcmp(a->kw[i], name))
				return &a->v[i];
		} else if (i == pos) {
			return &a->v[i];
		}
	}
	return NULL;
}
/* errors for arguments beyond max positional ones or keywords not in
 * `names` (a "|"-separated list) */
static int check_args(struct renderer *r, const struct node *n, const struct args *a, size_t max,
                      const char *names, const char *what)
{
	for (size_t i = 0; i < a->n; i++) {
		if (a->kw && a->kw[i]) {
			const char *k = a->kw[i], *hit = names ? strstr(names, k) : NULL;
			size_t kl = strlen(k);
			if (!hit || (hit != names && hit[-1] != '|') || (hit[kl] && hit[kl] != '|'))
				return jfail(r->e, n->line, n->col,
				             "%s: the argument %s= is not supported", what, k);
		} else if (i >= max) {
			return jfail(r->e, n->line, n->col, "%s takes at most %zu argument%s", what,
			             max, max == 1 ? "" : "s");
		}
	}
	return 0;
}
static int want(struct renderer *r, const struct node *n, const struct val *v, enum vtype t,
                const char *what)
{
	static const char *names[] = {"undefined",  "none",    "a boolean",
	                              "an integer", "a float", "a string"};
	if (v && v->t == V_UNDEF)
		return jfail(r->e, n->line, n->col, "%s: '%.*s' is undefined", what, (int)v->u.s.n,
		             v->u.s.p ? v->u.s.p : "value");
	if (!v || v->t != t)
		return jfail(r->e, n->line, n->col, "%s needs %s%s%s", what,
		             t <= V_STR ? names[t] : "a list", v ? ", not " : "",
		             v ? v_type_name(*v) : "");
	return 0;
}

/* ---- tests ---- */
static const char *const test_names[] = {
    "defined", "undefined",   "none",     "string",   "number", "integer", "float",
    "boolean", "mapping",     "iterable", "sequence", "true",   "false",   "equalto",
    "eq",      "==",          "ne",       "!=",       "lt",     "<",       "le",
    "<=",      "gt",          ">",        "ge",       ">=",     "in",      "odd",
    "even",    "divisibleby", "callable", "lower",    "upper",  NULL};

static int test_by_name(struct renderer *r, const struct node *n, const char *name, struct val v,
                        const struct val *other, bool *out)
{
	int k = -1, c;

	for (int i = 0; test_names[i]; i++)
		if (!strcmp(test_names[i], name))
			k = i;
	if (k < 0)
		return fail(r, n, "the test '%s' is not supported", name);
	if (k >= 13 && k <= 26 && !other)
		return fail(r, n, "the test '%s' needs an argument", name);
	switch (k) {
	case 0:
		*out = v.t != V_UNDEF;
		return 0;
	case 1:
		*out = v.t == V_UNDEF;
		return 0;
	case 2:
		*out = v.t == V_NONE;
		return 0;
	case 3:
		*out = v.t == V_STR;
		return 0;
	case 4:
		*out = v.t == V_INT || v.t == V_FLOAT || v.t == V_BOOL;
		return 0;
	case 5:
		*out = v.t == V_INT;
		return 0;
	case 6:
		*out = v.t == V_FLOAT;
		return 0;
	case 7:
		*out = v.t == V_BOOL;
		return 0;
	case 8:
		*out = v.t == V_DICT;
		return 0;
	case 9:
		*out = v.t == V_STR || v.t == V_LIST || v.t == V_DICT || v.t == V_UNDEF;
		return 0;
	case 10:
		*out = v.t == V_STR || v.t == V_LIST || v.t == V_DICT || v.t == V_UNDEF;
		return 0;
	case 11:
		*out = v.t == V_BOOL && v.u.b;
		return 0;
	case 12:
		*out = v.t == V_BOOL && !v.u.b;
		return 0;
	case 13:
	case 14:
	case 15:
		*out = v_equal(v, *other);
		return 0;
	case 16:
	case 17:
		*out = !v_equal(v, *other);
		return 0;
	case 26: {
		if (other->t == V_LIST) {
			*out = false;
			for (size_t i = 0; i < other->u.l->n; i++)
				*out = *out || v_equal(v, other->u.l->items[i]);
			return 0;
		}
		if (other->t == V_STR && v.t == V_STR) {
			*out = !v.u.s.n || memmem(other->u.s.p, other->u.s.n, v.u.s.p, v.u.s.n);
			return 0;
		}
		if (other->t == V_DICT) {
			*out = v.t == V_STR && dict_get(other->u.d, v.u.s.p, v.u.s.n);
			return 0;
		}
		return fail(r, n, "%s", "the test 'in' needs a string, list or mapping");
	}
	case 27:
	case 28:
	case 29:
		if (v.t != V_INT || (k == 29 && (!other || other->t != V_INT || other->u.i == 0)))
			return fail(r, n, "the test '%s' needs integers", name);
		*out = k == 27   ? v.u.i % 2 != 0
		       : k == 28 ? v.u.i % 2 == 0
		                 : v.u.i % other->u.i == 0;
		return 0;
	case 30:
		*out = v.t == V_FUNC || v.t == V_METHOD;
		return 0;
	case 31:
	case 32:
		*out = v.t == V_STR;
		for (size_t i = 0; *out && i < v.u.s.n; i++) {
			char ch = v.u.s.p[i];
			if ((unsigned char)ch >= 0x80)
				return fail(r, n, "%s",
				            "the tests lower and upper on non-ASCII text are not "
				            "supported");
			if (k == 31 ? (ch >= 'A' && ch <= 'Z') : (ch >= 'a' && ch <= 'z'))
				*out = false;
		}
		return 0;
	default:
		c = v_compare(v, *other);
		if (c == -2)
			return jfail(r->e, n->line, n->col, "%s and %s cannot be ordered",
			             v_type_name(v), v_type_name(*other));
		*out = k <= 19 ? c < 0 : k <= 21 ? c <= 0 : k <= 23 ? c > 0 : c >= 0;
		return 0;
	}
}

int call_test(struct renderer *r, const struct node *n, struct val self, struct val *args,
              size_t nargs, bool *out)
{
	if (nargs > 1)
		return fail(r, n, "the test '%s' takes at most one argument", n->s);
	return test_by_name(r, n, n->s, self, nargs ? &args[0] : NULL, out);
}

/* ---- filters ---- */
static int to_string(struct renderer *r, const struct node *n, struct val v, struct val *out)
{
	struct sbuf b = {.limit = r->out.limit};
	const char *why = NULL;
	int rc;

	if (v.t == V_STR) {
		*out = v;
		return 0;
	}
	if (!v_to_str(&b, v, &why)) {
		free(b.p);
		return why ? fail(r, n, "cannot make a string of this value: %s", why)
		           : fail(r, n, "%s", "a string longer than the output limit");
	}
	rc = arena_str(r, n, b.p ? b.p : "", b.n, out);
	free(b.p);
	return rc;
}

/* select/reject(test, arg) and selectattr/rejectattr(attr, test, arg) */
static int select_items(struct renderer *r, const struct node *n, struct val seq,
                        const struct args *a, bool keep, bool by_attr, struct val *out)
{
	struct list *items = NULL, *l;
	size_t first = by_attr ? 1 : 0;
	const struct val *attr = by_attr ? arg(a, 0, NULL) : NULL, *test = arg(a, first, NULL),
	                 *other = arg(a, first + 1, NULL);

	if (a->kw)
		for (size_t i = 0; i < a->n; i++)
			if (a->kw[i])
				return fail(r, n, "%s: keyword arguments are not supported", n->s);
	if (a->n > first + 2)
		return fail(r, n, "%s: more than one test argument is not supported", n->s);
	if (by_attr && want(r, n, attr, V_STR, n->s))
		return -1;
	if (test && want(r, n, test, V_STR, n->s))
		return -1;
	if (seq.t == V_UNDEF || seq.t == V_LIST)
		items = seq.t == V_LIST ? seq.u.l : NULL;
	else
		return fail(r, n, "%s needs a list", n->s);
	if (!(l = new_list(r, items ? items->n : 0)))
		return oom(r, n);
	l->n = 0;
	for (size_t i = 0; items && i < items->n; i++) {
		struct val v = items->items[i];
		bool t;

		if (by_attr) {
			if (v.t != V_DICT)
				return fail(r, n, "%s: an item is not a mapping", n->s);
			struct val *x = dict_get(v.u.d, attr->u.s.p, attr->u.s.n);
			v = x ? *x : v_undef(attr->u.s.p);
		}
		if (test) {
			if (test_by_name(r, n, test->u.s.p, v, other, &t))
				return -1;
		} else {
			t = v_truthy(v);
		}
		if (t == keep)
			l->items[l->n++] = items->items[i];
	}
	*out = (struct val){.t = V_LIST, .u.l = l};
	return 0;
}

static const char *const filter_names[] = {
    "trim",   "length", "count",      "tojson",     "string",  "items", "join",
    "reject", "select", "rejectattr", "selectattr", "default", "d",     "upper",
    "lower",  "first",  "last",       "list",       "replace", "int",   "float",
    "abs",    "safe",   "map",        "reverse",    NULL};

int call_filter(struct renderer *r, const struct node *n, struct val self, struct val *argv,
                size_t nargs, const char **kw, struct val *out)
{
	struct args a = {argv, nargs, kw};
	const char *name = n->s;
	int k = -1;

	for (int i = 0; filter_names[i]; i++)
		if (!strcmp(filter_names[i], name))
			k = i;
	if (k < 0)
		return fail(r, n, "the filter '%s' is not supported", name);
	/* filters other than these need a defined value, as Jinja's do */
	if (self.t == V_UNDEF && k != 1 && k != 2 && k != 5 && k != 7 && k != 8 && k != 9 &&
	    k != 10 && k != 11 && k != 12 && k != 4 && k != 17 && k != 23)
		return jfail(r->e, n->line, n->col, "'%.*s' is undefined", (int)self.u.s.n,
		             self.u.s.p ? self.u.s.p : "value");
	switch (k) {
	case 0: { /* trim(chars=None) */
		const struct val *chars = arg(&a, 0, "chars");
		if (check_args(r, n, &a, 1, "chars", "trim") || want(r, n, &self, V_STR, "trim") ||
		    (chars && chars->t != V_NONE && want(r, n, chars, V_STR, "trim's chars")))
			return -1;
		*out = strip(self, chars && chars->t == V_STR ? chars : NULL, true, true);
		return 0;
	}
	case 1:
	case 2:
		if (check_args(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t == V_STR)
			*out = v_int((int64_t)u8_len(self.u.s.p, self.u.s.n));
		else if (self.t == V_LIST)
			*out = v_int((int64_t)self.u.l->n);
		else if (self.t == V_DICT || self.t == V_NS)
			*out = v_int((int64_t)self.u.d->n);
		else if (self.t == V_UNDEF)
			*out = v_int(0);
		else
			return fail(r, n, "%s has no length", v_type_name(self));
		return 0;
	case 3: { /* tojson: transformers' json.dumps(x, ensure_ascii=False, indent=None) */
		const struct val *indent = arg(&a, 1, "indent"),
		                 *ascii = arg(&a, 0, "ensure_ascii"),
		                 *sep = arg(&a, 2, "separators"), *sort = arg(&a, 3, "sort_keys");
		struct sbuf b = {.limit = r->out.limit};
		const char *why = NULL;
		int rc;

		if (check_args(r, n, &a, 4, "ensure_ascii|indent|separators|sort_keys", "tojson"))
			return -1;
		if ((ascii && v_truthy(*ascii)) || (sep && sep->t != V_NONE) ||
		    (sort && v_truthy(*sort)))
			return fail(r, n, "%s",
			            "tojson: only the argument indent is supported (ensure_ascii, "
			            "separators and sort_keys must stay at their defaults)");
		if (indent && indent->t != V_NONE &&
		    (indent->t != V_INT || indent->u.i < 0 || indent->u.i > 64))
			return fail(r, n, "%s", "tojson: indent must be an integer from 0 to 64");
		if (!v_to_json(&b, self, indent && indent->t == V_INT ? (int)indent->u.i : -1, 0,
		               &why)) {
			free(b.p);
			return why ? fail(r, n, "tojson: %s", why)
			           : fail(r, n, "%s",
			                  "tojson: the text is longer than the output limit");
		}
		rc = arena_str(r, n, b.p ? b.p : "", b.n, out);
		free(b.p);
		return rc;
	}
	case 4:
		return check_args(r, n, &a, 0, NULL, name) ? -1 : to_string(r, n, self, out);
	case 5: { /* items: (key, value) pairs */
		struct list *l;
		if (check_args(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t == V_UNDEF) {
			*out = (struct val){.t = V_LIST, .u.l = new_list(r, 0)};
			return out->u.l ? 0 : oom(r, n);
		}
		if (self.t != V_DICT)
			return fail(r, n, "items needs a mapping, not %s", v_type_name(self));
		if (!(l = new_list(r, self.u.d->n)))
			return oom(r, n);
		for (size_t i = 0; i < self.u.d->n; i++) {
			struct list *pair = new_list(r, 2);
			if (!pair)
				return oom(r, n);
			pair->tuple = true;
			pair->items[0] = self.u.d->keys[i], pair->items[1] = self.u.d->vals[i];
			l->items[i] = (struct val){.t = V_LIST, .u.l = pair};
		}
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	case 6: { /* join(d='') */
		const struct val *sep = arg(&a, 0, "d");
		struct sbuf b = {.limit = r->out.limit};
		const char *why = NULL;
		int rc;

		if (check_args(r, n, &a, 1, "d", "join") || (sep && want(r, n, sep, V_STR, "join")))
			return -1;
		if (self.t != V_LIST)
			return fail(r, n, "join needs a list, not %s", v_type_name(self));
		for (size_t i = 0; i < self.u.l->n; i++) {
			if (i && sep)
				sb_put(&b, sep->u.s.p, sep->u.s.n);
			if (!v_to_str(&b, self.u.l->items[i], &why) && why) {
				free(b.p);
				return fail(r, n, "join: %s", why);
			}
		}
		if (b.over) {
			free(b.p);
			return fail(r, n, "%s", "join: the text is longer than the output limit");
		}
		rc = arena_str(r, n, b.p ? b.p : "", b.n, out);
		free(b.p);
		return rc;
	}
	case 7:
	case 8:
	case 9:
	case 10:
		return select_items(r, n, self, &a, k == 8 || k == 10, k >= 9, out);
	case 11:
	case 12: { /* default(value='', boolean=False) */
		const struct val *dv = arg(&a, 0, "default_value"),
		                 *boolean = arg(&a, 1, "boolean");
		if (check_args(r, n, &a, 2, "default_value|boolean", name))
			return -1;
		if (self.t == V_UNDEF || (boolean && v_truthy(*boolean) && !v_truthy(self)))
			*out = dv ? *dv : v_str("", 0);
		else
			*out = self;
		return 0;
	}
	case 13:
	case 14:
		if (check_args(r, n, &a, 0, NULL, name) || want(r, n, &self, V_STR, name))
			return -1;
		return change_case(r, n, self, k == 13, out);
	case 15:
	case 16:
		if (check_args(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t == V_LIST) {
			*out = self.u.l->n ? self.u.l->items[k == 15 ? 0 : self.u.l->n - 1]
			                   : v_undef(name);
			return 0;
		}
		if (self.t == V_STR) {
			size_t len = u8_len(self.u.s.p, self.u.s.n), i = k == 15 ? 0 : len - 1;
			if (!len) {
				*out = v_undef(name);
				return 0;
			}
			size_t at = u8_offset(self.u.s.p, self.u.s.n, i),
			       end = u8_offset(self.u.s.p, self.u.s.n, i + 1);
			*out = v_str(self.u.s.p + at, end - at);
			return 0;
		}
		return fail(r, n, "%s needs a list or a string", name);
	case 17: { /* list */
		struct list *l;
		if (check_args(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t != V_LIST)
			return fail(r, n, "list of %s is not supported", v_type_name(self));
		if (!(l = new_list(r, self.u.l->n)))
			return oom(r, n);
		if (l->n)
			memcpy(l->items, self.u.l->items, l->n * sizeof *l->items);
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	case 18: { /* replace(old, new, count=None) */
		const struct val *from = arg(&a, 0, "old"), *to = arg(&a, 1, "new"),
		                 *count = arg(&a, 2, "count");
		if (check_args(r, n, &a, 3, "old|new|count", "replace") ||
		    want(r, n, &self, V_STR, "replace") || want(r, n, from, V_STR, "replace") ||
		    want(r, n, to, V_STR, "replace") ||
		    (count && count->t != V_NONE && want(r, n, count, V_INT, "replace's count")))
			return -1;
		return replace(r, n, self, *from, *to, count && count->t == V_INT ? count->u.i : -1,
		               out);
	}
	case 19:
	case 20:
		if (check_args(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t == V_INT || self.t == V_BOOL || self.t == V_FLOAT) {
			if (k == 19)
				*out = v_int(self.t == V_FLOAT ? (int64_t)self.u.f
				             : self.t == V_INT ? self.u.i
				                               : self.u.b);
			else
				*out = (struct val){.t = V_FLOAT,
				                    .u.f = self.t == V_FLOAT ? self.u.f
				                           : self.t == V_INT ? (double)self.u.i
				                                             : self.u.b};
			return 0;
		}
		return fail(r, n, "%s of anything but a number is not supported", name);
	case 21:
		if (check_args(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t == V_INT && self.u.i != INT64_MIN)
			*out = v_int(self.u.i < 0 ? -self.u.i : self.u.i);
		else if (self.t == V_FLOAT)
			*out =
			    (struct val){.t = V_FLOAT, .u.f = self.u.f < 0 ? -self.u.f : self.u.f};
		else
			return fail(r, n, "abs needs a number, not %s", v_type_name(self));
		return 0;
	case 22:
		return check_args(r, n, &a, 0, NULL, name) ? -1 : to_string(r, n, self, out);
	case 23: { /* map(attribute=NAME) or map(FILTER) */
		const struct val *attr = arg(&a, 99, "attribute"), *f = arg(&a, 0, NULL);
		struct list *l;

		if (check_args(r, n, &a, 1, "attribute", "map") || (!attr == !f))
			return fail(r, n, "%s", "map: give either one filter name or attribute=");
		if (self.t == V_UNDEF) {
			*out = (struct val){.t = V_LIST, .u.l = new_list(r, 0)};
			return out->u.l ? 0 : oom(r, n);
		}
		if (self.t != V_LIST || (attr && want(r, n, attr, V_STR, "map")) ||
		    (f && want(r, n, f, V_STR, "map")))
			return self.t != V_LIST ? fail(r, n, "%s", "map needs a list") : -1;
		if (!(l = new_list(r, self.u.l->n)))
			return oom(r, n);
		for (size_t i = 0; i < self.u.l->n; i++) {
			struct val v = self.u.l->items[i];
			if (attr) {
				struct val *x = v.t == V_DICT
				                    ? dict_get(v.u.d, attr->u.s.p, attr->u.s.n)
				                    : NULL;
				l->items[i] = x ? *x : v_undef(attr->u.s.p);
			} else {
				struct node m = *n;
				m.s = f->u.s.p;
				if (call_filter(r, &m, v, NULL, 0, NULL, &l->items[i]))
					return -1;
			}
		}
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	case 24: { /* reverse */
		struct list *l;
		if (check_args(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t == V_STR)
			return fail(r, n, "%s", "reverse of a string is not supported; use [::-1]");
		if (self.t != V_LIST || !(l = new_list(r, self.u.l->n)))
			return self.t != V_LIST ? fail(r, n, "%s", "reverse needs a list")
			                        : oom(r, n);
		for (size_t i = 0; i < l->n; i++)
			l->items[i] = self.u.l->items[l->n - 1 - i];
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	}
	return fail(r, n, "the filter '%s' is not supported", name);
}

/* ---- methods and globals ---- */
static const char *const str_methods[] = {"startswith", "endswith", "split", "strip",
                                          "lstrip",     "rstrip",   "upper", "lower",
                                          "replace",    "find",     NULL};
static const char *const dict_methods[] = {"items", "keys", "values", "get", NULL};
static const char *const globals[] = {"raise_exception", "strftime_now", "namespace", "range",
                                      NULL};

bool builtin_method(struct val self, const char *name, int *which)
{
	const char *const *names = self.t == V_STR    ? str_methods
	                           : self.t == V_DICT ? dict_methods
	                                              : NULL;

	for (int i = 0; names && names[i]; i++)
		if (!strcmp(names[i], name)) {
			*which = i;
			return true;
		}
	return false;
}

bool builtin_global(const char *name, int *which)
{
	for (int i = 0; globals[i]; i++)
		if (!strcmp(globals[i], name)) {
			*which = i;
			return true;
		}
	return false;
}

static int prefix_test(struct renderer *r, const struct node *n, struct val s, const struct val *x,
                       bool ends, bool *out)
{
	const struct val *cands = x;
	size_t nc = 1;

	if (x && x->t == V_LIST)
		cands = x->u.l->items, nc = x->u.l->n;
	*out = false;
	for (size_t i = 0; i < nc; i++) {
		if (want(r, n, &cands[i], V_STR, ends ? "endswith" : "startswith"))
			return -1;
		size_t l = cands[i].u.s.n;
		if (l <= s.u.s.n && !memcmp(s.u.s.p + (ends ? s.u.s.n - l : 0), cands[i].u.s.p, l))
			*out = true;
	}
	return 0;
}

static int call_str_method(struct renderer *r, const struct node *n, struct val s, int m,
                           const struct args *a, struct val *out)
{
	const char *name = str_methods[m];
	const struct val *x = arg(a, 0, NULL), *y = arg(a, 1, NULL);
	bool t;

	switch (m) {
	case 0:
	case 1:
		if (check_args(r, n, a, 1, NULL, name) || !x || prefix_test(r, n, s, x, m == 1, &t))
			return x ? -1 : fail(r, n, "%s needs a string", name);
		*out = v_bool(t);
		return 0;
	case 2: {
		const struct val *sep = arg(a, 0, "sep"), *maxs = arg(a, 1, "maxsplit");
		if (check_args(r, n, a, 2, "sep|maxsplit", name) ||
		    (sep && sep->t != V_NONE && want(r, n, sep, V_STR, name)) ||
		    (maxs && want(r, n, maxs, V_INT, name)))
			return -1;
		return split(r, n, s, sep && sep->t == V_STR ? sep : NULL, maxs ? maxs->u.i : -1,
		             out);
	}
	case 3:
	case 4:
	case 5:
		if (check_args(r, n, a, 1, NULL, name) ||
		    (x && x->t != V_NONE && want(r, n, x, V_STR, name)))
			return -1;
		*out = strip(s, x && x->t == V_STR ? x : NULL, m != 5, m != 4);
		return 0;
	case 6:
	case 7:
		return check_args(r, n, a, 0, NULL, name) ? -1 : change_case(r, n, s, m == 6, out);
	case 8: {
		const struct val *c = arg(a, 2, NULL);
		if (check_args(r, n, a, 3, NULL, name) || want(r, n, x, V_STR, name) ||
		    want(r, n, y, V_STR, name) || (c && want(r, n, c, V_INT, name)))
			return -1;
		return replace(r, n, s, *x, *y, c ? c->u.i : -1, out);
	}
	case 9: {
		const char *hit;
		if (check_args(r, n, a, 1, NULL, name) || want(r, n, x, V_STR, name))
			return -1;
		hit = x->u.s.n ? memmem(s.u.s.p, s.u.s.n, x->u.s.p, x->u.s.n) : s.u.s.p;
		*out = v_int(hit ? (int64_t)u8_len(s.u.s.p, (size_t)(hit - s.u.s.p)) : -1);
		return 0;
	}
	}
	return fail(r, n, "the method '%s' is not supported", name);
}

static int call_dict_method(struct renderer *r, const struct node *n, struct val d, int m,
                            const struct args *a, struct val *out)
{
	const char *name = dict_methods[m];
	struct list *l;

	if (m == 3) { /* get(key, default=None) */
		const struct val *k = arg(a, 0, NULL), *dv = arg(a, 1, NULL);
		struct val *v;
		if (check_args(r, n, a, 2, NULL, name) || !k)
			return k ? -1 : fail(r, n, "%s", "get needs a key");
		v = k->t == V_STR ? dict_get(d.u.d, k->u.s.p, k->u.s.n) : NULL;
		*out = v ? *v : dv ? *dv : v_none();
		return 0;
	}
	if (check_args(r, n, a, 0, NULL, name))
		return -1;
	if (m == 0) {
		struct node f = *n;
		f.s = "items";
		return call_filter(r, &f, d, NULL, 0, NULL, out);
	}
	if (!(l = new_list(r, d.u.d->n)))
		return oom(r, n);
	for (size_t i = 0; i < l->n; i++)
		l->items[i] = m == 1 ? d.u.d->keys[i] : d.u.d->vals[i];
	*out = (struct val){.t = V_LIST, .u.l = l};
	return 0;
}

int call_value(struct renderer *r, const struct node *n, struct val f, struct val *argv,
               size_t nargs, const char **kw, struct val *out)
{
	struct args a = {argv, nargs, kw};

	if (f.t == V_METHOD) {
		if (f.u.m.self->t == V_STR)
			return call_str_method(r, n, *f.u.m.self, f.u.m.i, &a, out);
		return call_dict_method(r, n, *f.u.m.self, f.u.m.i, &a, out);
	}
	if (f.t == V_UNDEF)
		return jfail(r->e, n->line, n->col, "'%.*s' is undefined (it cannot be called)",
		             (int)f.u.s.n, f.u.s.p ? f.u.s.p : "value");
	if (f.t != V_FUNC)
		return fail(r, n, "%s cannot be called", v_type_name(f));
	switch (f.u.m.i) {
	case 0: { /* raise_exception(message) */
		struct val msg;
		if (check_args(r, n, &a, 1, NULL, "raise_exception") || !nargs ||
		    to_string(r, n, argv[0], &msg))
			return -1;
		return jfail(r->e, n->line, n->col, "the template raised an error: %.*s",
		             (int)msg.u.s.n, msg.u.s.p);
	}
	case 1: { /* strftime_now(format) at the render's time */
		char buf[512];
		struct tm tm;
		time_t now = (time_t)r->now;
		size_t len;

		if (check_args(r, n, &a, 1, NULL, "strftime_now") ||
		    want(r, n, arg(&a, 0, NULL), V_STR, "strftime_now"))
			return -1;
		if (memchr(argv[0].u.s.p, '\0', argv[0].u.s.n) || !localtime_r(&now, &tm))
			return fail(r, n, "%s",
			            "strftime_now: a format with a NUL byte, or no local time");
		len = strftime(buf, sizeof buf, argv[0].u.s.p, &tm);
		if (!len && argv[0].u.s.n)
			return fail(r, n, "%s", "strftime_now: the formatted date is too long");
		return arena_str(r, n, buf, len, out);
	}
	case 2: { /* namespace(k=v, ...) */
		struct dict *d = arena_alloc(r->a, sizeof *d);

		if (!d)
			return oom(r, n);
		for (size_t i = 0; i < nargs; i++) {
			if (!kw || !kw[i])
				return fail(
				    r, n, "%s",
				    "namespace() with positional arguments is not supported");
			if (dict_set(r->a, d, v_str(kw[i], strlen(kw[i])), argv[i]))
				return oom(r, n);
		}
		*out = (struct val){.t = V_NS, .u.d = d};
		return 0;
	}
	case 3: { /* range([start,] stop[, step]) */
		int64_t start = 0, stop, step = 1, count = 0;
		struct list *l;

		if (check_args(r, n, &a, 3, NULL, "range") || nargs < 1)
			return nargs ? -1 : fail(r, n, "%s", "range needs an argument");
		for (size_t i = 0; i < nargs; i++)
			if (want(r, n, &argv[i], V_INT, "range"))
				return -1;
		stop = argv[nargs == 1 ? 0 : 1].u.i;
		if (nargs > 1)
			start = argv[0].u.i;
		if (nargs > 2)
			step = argv[2].u.i;
		if (step == 0)
			return fail(r, n, "%s", "range's step cannot be zero");
		for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
			if (++count > 100000)
				return fail(r, n, "%s", "a range of more than 100000 numbers");
		if (!(l = new_list(r, (size_t)count)))
			return oom(r, n);
		for (int64_t i = 0; i < count; i++)
			l->items[i] = v_int(start + i * step);
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	}
	return fail(r, n, "%s", "internal error: an unknown function");
}
