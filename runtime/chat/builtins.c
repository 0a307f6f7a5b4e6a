/* Jinja's filters and tests that chat templates use, and the arguments of
 * whatever a template calls. A name not listed here is an error that says
 * so, never a guess. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/chat/internal.h"

/* ---- arguments ---- */
/* argument `pos` or keyword `name`; NULL when absent */
const struct val *arg_get(const struct args *a, size_t pos, const char *name)
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
int args_check(struct renderer *r, const struct node *n, const struct args *a, size_t max,
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
int arg_want(struct renderer *r, const struct node *n, const struct val *v, enum vtype t,
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
		return render_fail(r, n, "the test '%s' is not supported", name);
	if (k >= 13 && k <= 26 && !other)
		return render_fail(r, n, "the test '%s' needs an argument", name);
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
			*out = dict_find(other->u.d, v) != NULL;
			return 0;
		}
		return render_fail(r, n, "%s", "the test 'in' needs a string, list or mapping");
	}
	case 27:
	case 28:
	case 29:
		if (v.t != V_INT || (k == 29 && (!other || other->t != V_INT || other->u.i == 0)))
			return render_fail(r, n, "the test '%s' needs integers", name);
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
				return render_fail(
				    r, n, "%s",
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
		return render_fail(r, n, "the test '%s' takes at most one argument", n->s);
	return test_by_name(r, n, n->s, self, nargs ? &args[0] : NULL, out);
}

/* ---- filters ---- */
int val_to_string(struct renderer *r, const struct node *n, struct val v, struct val *out)
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
		return why ? render_fail(r, n, "cannot make a string of this value: %s", why)
		           : render_fail(r, n, "%s", "a string longer than the output limit");
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
	const struct val *attr = by_attr ? arg_get(a, 0, NULL) : NULL,
	                 *test = arg_get(a, first, NULL), *other = arg_get(a, first + 1, NULL);

	if (a->kw)
		for (size_t i = 0; i < a->n; i++)
			if (a->kw[i])
				return render_fail(r, n, "%s: keyword arguments are not supported",
				                   n->s);
	if (a->n > first + 2)
		return render_fail(r, n, "%s: more than one test argument is not supported", n->s);
	if (by_attr && arg_want(r, n, attr, V_STR, n->s))
		return -1;
	if (test && arg_want(r, n, test, V_STR, n->s))
		return -1;
	if (!v_truthy(seq) || seq.t == V_LIST) /* Jinja selects nothing from a falsy value */
		items = seq.t == V_LIST ? seq.u.l : NULL;
	else
		return render_fail(r, n, "%s needs a list", n->s);
	if (!(l = list_new(r, items ? items->n : 0)))
		return render_oom(r, n);
	l->n = 0;
	for (size_t i = 0; items && i < items->n; i++) {
		struct val v = items->items[i];
		bool t;

		if (by_attr) {
			if (v.t != V_DICT)
				return render_fail(r, n, "%s: an item is not a mapping", n->s);
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

/* the sort key of dictsort: strings lowered unless case_sensitive */
static int sort_key(struct renderer *r, const struct node *n, struct val v, bool case_sensitive,
                    struct val *out)
{
	if (v.t == V_STR && !case_sensitive)
		return py_change_case(r, n, v, false, out);
	*out = v;
	return 0;
}

/* dictsort(case_sensitive=false, by='key', reverse=false): the (key, value)
 * pairs in order, a stable insertion sort (mappings in templates are small) */
static int dictsort(struct renderer *r, const struct node *n, struct val self, const struct args *a,
                    struct val *out)
{
	const struct val *cs = arg_get(a, 0, "case_sensitive"), *by = arg_get(a, 1, "by"),
	                 *rev = arg_get(a, 2, "reverse");
	bool case_sensitive = cs && v_truthy(*cs), reverse = rev && v_truthy(*rev),
	     by_value = false;
	struct val pairs, *keys;
	struct node items = *n;

	if (args_check(r, n, a, 3, "case_sensitive|by|reverse", "dictsort"))
		return -1;
	if (by) {
		if (by->t != V_STR || (strcmp(by->u.s.p, "key") && strcmp(by->u.s.p, "value")))
			return render_fail(r, n, "%s", "dictsort: by must be 'key' or 'value'");
		by_value = by->u.s.p[0] == 'v';
	}
	if (self.t != V_DICT)
		return render_fail(r, n, "dictsort needs a mapping, not %s", v_type_name(self));
	items.s = "items";
	if (call_filter(r, &items, self, NULL, 0, NULL, &pairs))
		return -1;
	if (!(keys = arena_alloc(r->a, (pairs.u.l->n + 1) * sizeof *keys)))
		return render_oom(r, n);
	for (size_t i = 0; i < pairs.u.l->n; i++)
		if (sort_key(r, n, pairs.u.l->items[i].u.l->items[by_value], case_sensitive,
		             &keys[i]))
			return -1;
	for (size_t i = 1; i < pairs.u.l->n; i++) {
		struct val p = pairs.u.l->items[i], k = keys[i];
		size_t j = i;

		for (; j > 0; j--) {
			int c = v_compare(keys[j - 1], k);

			if (c == -2)
				return jfail(r->e, n->line, n->col,
				             "dictsort: %s and %s cannot be ordered",
				             v_type_name(keys[j - 1]), v_type_name(k));
			if (reverse ? c >= 0 : c <= 0)
				break;
			pairs.u.l->items[j] = pairs.u.l->items[j - 1], keys[j] = keys[j - 1];
		}
		pairs.u.l->items[j] = p, keys[j] = k;
	}
	*out = pairs;
	return 0;
}

static const char *const filter_names[] = {
    "trim",   "length", "count",      "tojson",     "string",   "items", "join",
    "reject", "select", "rejectattr", "selectattr", "default",  "d",     "upper",
    "lower",  "first",  "last",       "list",       "replace",  "int",   "float",
    "abs",    "safe",   "map",        "reverse",    "dictsort", NULL};

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
		return render_fail(r, n, "the filter '%s' is not supported", name);
	/* filters other than these need a defined value, as Jinja's do */
	if (self.t == V_UNDEF && k != 1 && k != 2 && k != 5 && k != 7 && k != 8 && k != 9 &&
	    k != 10 && k != 11 && k != 12 && k != 4 && k != 17 && k != 23)
		return jfail(r->e, n->line, n->col, "'%.*s' is undefined", (int)self.u.s.n,
		             self.u.s.p ? self.u.s.p : "value");
	switch (k) {
	case 0: { /* trim(chars=None) */
		const struct val *chars = arg_get(&a, 0, "chars");
		if (args_check(r, n, &a, 1, "chars", "trim") ||
		    arg_want(r, n, &self, V_STR, "trim") ||
		    (chars && chars->t != V_NONE && arg_want(r, n, chars, V_STR, "trim's chars")))
			return -1;
		*out = py_strip(self, chars && chars->t == V_STR ? chars : NULL, true, true);
		return 0;
	}
	case 1:
	case 2:
		if (args_check(r, n, &a, 0, NULL, name))
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
			return render_fail(r, n, "%s has no length", v_type_name(self));
		return 0;
	case 3: { /* tojson: transformers' json.dumps(x, ensure_ascii=False, indent=None) */
		const struct val *indent = arg_get(&a, 1, "indent"),
		                 *ascii = arg_get(&a, 0, "ensure_ascii"),
		                 *sep = arg_get(&a, 2, "separators"),
		                 *sort = arg_get(&a, 3, "sort_keys");
		struct sbuf b = {.limit = r->out.limit};
		const char *why = NULL;
		int rc;

		if (args_check(r, n, &a, 4, "ensure_ascii|indent|separators|sort_keys", "tojson"))
			return -1;
		if ((ascii && v_truthy(*ascii)) || (sep && sep->t != V_NONE) ||
		    (sort && v_truthy(*sort)))
			return render_fail(
			    r, n, "%s",
			    "tojson: only the argument indent is supported (ensure_ascii, "
			    "separators and sort_keys must stay at their defaults)");
		if (indent && indent->t != V_NONE &&
		    (indent->t != V_INT || indent->u.i < 0 || indent->u.i > 64))
			return render_fail(r, n, "%s",
			                   "tojson: indent must be an integer from 0 to 64");
		if (!v_to_json(&b, self, indent && indent->t == V_INT ? (int)indent->u.i : -1, 0,
		               &why)) {
			free(b.p);
			return why ? render_fail(r, n, "tojson: %s", why)
			           : render_fail(
			                 r, n, "%s",
			                 "tojson: the text is longer than the output limit");
		}
		rc = arena_str(r, n, b.p ? b.p : "", b.n, out);
		free(b.p);
		return rc;
	}
	case 4:
		return args_check(r, n, &a, 0, NULL, name) ? -1 : val_to_string(r, n, self, out);
	case 5: { /* items: (key, value) pairs */
		struct list *l;
		if (args_check(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t == V_UNDEF) {
			*out = (struct val){.t = V_LIST, .u.l = list_new(r, 0)};
			return out->u.l ? 0 : render_oom(r, n);
		}
		if (self.t != V_DICT)
			return render_fail(r, n, "items needs a mapping, not %s",
			                   v_type_name(self));
		if (!(l = list_new(r, self.u.d->n)))
			return render_oom(r, n);
		for (size_t i = 0; i < self.u.d->n; i++) {
			struct list *pair = list_new(r, 2);
			if (!pair)
				return render_oom(r, n);
			pair->tuple = true;
			pair->items[0] = self.u.d->keys[i], pair->items[1] = self.u.d->vals[i];
			l->items[i] = (struct val){.t = V_LIST, .u.l = pair};
		}
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	case 6: { /* join(d='') */
		const struct val *sep = arg_get(&a, 0, "d");
		struct sbuf b = {.limit = r->out.limit};
		const char *why = NULL;
		int rc;

		if (args_check(r, n, &a, 1, "d", "join") ||
		    (sep && arg_want(r, n, sep, V_STR, "join")))
			return -1;
		if (self.t != V_LIST)
			return render_fail(r, n, "join needs a list, not %s", v_type_name(self));
		for (size_t i = 0; i < self.u.l->n; i++) {
			if (i && sep)
				sb_put(&b, sep->u.s.p, sep->u.s.n);
			if (!v_to_str(&b, self.u.l->items[i], &why) && why) {
				free(b.p);
				return render_fail(r, n, "join: %s", why);
			}
		}
		if (b.over) {
			free(b.p);
			return render_fail(r, n, "%s",
			                   "join: the text is longer than the output limit");
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
		const struct val *dv = arg_get(&a, 0, "default_value"),
		                 *boolean = arg_get(&a, 1, "boolean");
		if (args_check(r, n, &a, 2, "default_value|boolean", name))
			return -1;
		if (self.t == V_UNDEF || (boolean && v_truthy(*boolean) && !v_truthy(self)))
			*out = dv ? *dv : v_str("", 0);
		else
			*out = self;
		return 0;
	}
	case 13:
	case 14:
		if (args_check(r, n, &a, 0, NULL, name) || arg_want(r, n, &self, V_STR, name))
			return -1;
		return py_change_case(r, n, self, k == 13, out);
	case 15:
	case 16:
		if (args_check(r, n, &a, 0, NULL, name))
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
		return render_fail(r, n, "%s needs a list or a string", name);
	case 17: { /* list */
		struct list *l;
		if (args_check(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t != V_LIST)
			return render_fail(r, n, "list of %s is not supported", v_type_name(self));
		if (!(l = list_new(r, self.u.l->n)))
			return render_oom(r, n);
		if (l->n)
			memcpy(l->items, self.u.l->items, l->n * sizeof *l->items);
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	case 18: { /* replace(old, new, count=None) */
		const struct val *from = arg_get(&a, 0, "old"), *to = arg_get(&a, 1, "new"),
		                 *count = arg_get(&a, 2, "count");
		if (args_check(r, n, &a, 3, "old|new|count", "replace") ||
		    arg_want(r, n, &self, V_STR, "replace") ||
		    arg_want(r, n, from, V_STR, "replace") ||
		    arg_want(r, n, to, V_STR, "replace") ||
		    (count && count->t != V_NONE &&
		     arg_want(r, n, count, V_INT, "replace's count")))
			return -1;
		return py_replace(r, n, self, *from, *to,
		                  count && count->t == V_INT ? count->u.i : -1, out);
	}
	case 19:
	case 20:
		if (args_check(r, n, &a, 0, NULL, name))
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
		return render_fail(r, n, "%s of anything but a number is not supported", name);
	case 21:
		if (args_check(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t == V_INT && self.u.i != INT64_MIN)
			*out = v_int(self.u.i < 0 ? -self.u.i : self.u.i);
		else if (self.t == V_FLOAT)
			*out =
			    (struct val){.t = V_FLOAT, .u.f = self.u.f < 0 ? -self.u.f : self.u.f};
		else
			return render_fail(r, n, "abs needs a number, not %s", v_type_name(self));
		return 0;
	case 22:
		return args_check(r, n, &a, 0, NULL, name) ? -1 : val_to_string(r, n, self, out);
	case 23: { /* map(attribute=NAME) or map(FILTER) */
		const struct val *attr = arg_get(&a, 99, "attribute"), *f = arg_get(&a, 0, NULL);
		struct list *l;

		if (args_check(r, n, &a, 1, "attribute", "map") || (!attr == !f))
			return render_fail(r, n, "%s",
			                   "map: give either one filter name or attribute=");
		if (self.t == V_UNDEF) {
			*out = (struct val){.t = V_LIST, .u.l = list_new(r, 0)};
			return out->u.l ? 0 : render_oom(r, n);
		}
		if (self.t != V_LIST || (attr && arg_want(r, n, attr, V_STR, "map")) ||
		    (f && arg_want(r, n, f, V_STR, "map")))
			return self.t != V_LIST ? render_fail(r, n, "%s", "map needs a list") : -1;
		if (!(l = list_new(r, self.u.l->n)))
			return render_oom(r, n);
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
		if (args_check(r, n, &a, 0, NULL, name))
			return -1;
		if (self.t == V_STR)
			return render_fail(r, n, "%s",
			                   "reverse of a string is not supported; use [::-1]");
		if (self.t != V_LIST || !(l = list_new(r, self.u.l->n)))
			return self.t != V_LIST ? render_fail(r, n, "%s", "reverse needs a list")
			                        : render_oom(r, n);
		for (size_t i = 0; i < l->n; i++)
			l->items[i] = self.u.l->items[l->n - 1 - i];
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	case 25:
		return dictsort(r, n, self, &a, out);
	}
	return render_fail(r, n, "the filter '%s' is not supported", name);
}
