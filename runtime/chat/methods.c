/* What a template calls besides filters: the methods of strings and
 * mappings (Python's semantics) and transformers' globals
 * (raise_exception, strftime_now, namespace) with Jinja's range.
 * defines: builtin_method, builtin_global, call_value */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/chat/internal.h"

static const char *const str_methods[] = {"startswith", "endswith", "split", "strip",
                                          "lstrip",     "rstrip",   "upper", "lower",
                                          "replace",    "find",     NULL};
static const char *const dict_methods[] = {"items", "keys", "values", "get", NULL};
static const char *const globals[] = {"raise_exception", "strftime_now", "namespace",
                                      "range",           "dict",         NULL};

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
		if (arg_want(r, n, &cands[i], V_STR, ends ? "endswith" : "startswith"))
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
	const struct val *x = arg_get(a, 0, NULL), *y = arg_get(a, 1, NULL);
	bool t;

	switch (m) {
	case 0:
	case 1:
		if (args_check(r, n, a, 1, NULL, name) || !x || prefix_test(r, n, s, x, m == 1, &t))
			return x ? -1 : render_fail(r, n, "%s needs a string", name);
		*out = v_bool(t);
		return 0;
	case 2: {
		const struct val *sep = arg_get(a, 0, "sep"), *maxs = arg_get(a, 1, "maxsplit");
		if (args_check(r, n, a, 2, "sep|maxsplit", name) ||
		    (sep && sep->t != V_NONE && arg_want(r, n, sep, V_STR, name)) ||
		    (maxs && arg_want(r, n, maxs, V_INT, name)))
			return -1;
		return py_split(r, n, s, sep && sep->t == V_STR ? sep : NULL, maxs ? maxs->u.i : -1,
		                out);
	}
	case 3:
	case 4:
	case 5:
		if (args_check(r, n, a, 1, NULL, name) ||
		    (x && x->t != V_NONE && arg_want(r, n, x, V_STR, name)))
			return -1;
		*out = py_strip(s, x && x->t == V_STR ? x : NULL, m != 5, m != 4);
		return 0;
	case 6:
	case 7:
		return args_check(r, n, a, 0, NULL, name) ? -1
		                                          : py_change_case(r, n, s, m == 6, out);
	case 8: {
		const struct val *c = arg_get(a, 2, NULL);
		if (args_check(r, n, a, 3, NULL, name) || arg_want(r, n, x, V_STR, name) ||
		    arg_want(r, n, y, V_STR, name) || (c && arg_want(r, n, c, V_INT, name)))
			return -1;
		return py_replace(r, n, s, *x, *y, c ? c->u.i : -1, out);
	}
	case 9: {
		const char *hit;
		if (args_check(r, n, a, 1, NULL, name) || arg_want(r, n, x, V_STR, name))
			return -1;
		hit = x->u.s.n ? memmem(s.u.s.p, s.u.s.n, x->u.s.p, x->u.s.n) : s.u.s.p;
		*out = v_int(hit ? (int64_t)u8_len(s.u.s.p, (size_t)(hit - s.u.s.p)) : -1);
		return 0;
	}
	}
	return render_fail(r, n, "the method '%s' is not supported", name);
}

static int call_dict_method(struct renderer *r, const struct node *n, struct val d, int m,
                            const struct args *a, struct val *out)
{
	const char *name = dict_methods[m];
	struct list *l;

	if (m == 3) { /* get(key, default=None) */
		const struct val *k = arg_get(a, 0, NULL), *dv = arg_get(a, 1, NULL);
		struct val *v;
		if (args_check(r, n, a, 2, NULL, name) || !k)
			return k ? -1 : render_fail(r, n, "%s", "get needs a key");
		v = dict_find(d.u.d, *k);
		*out = v ? *v : dv ? *dv : v_none();
		return 0;
	}
	if (args_check(r, n, a, 0, NULL, name))
		return -1;
	if (m == 0) {
		struct node f = *n;
		f.s = "items";
		return call_filter(r, &f, d, NULL, 0, NULL, out);
	}
	if (!(l = list_new(r, d.u.d->n)))
		return render_oom(r, n);
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
	if (f.t == V_MACRO)
		return call_macro(r, n, f, argv, nargs, kw, out);
	if (f.t == V_UNDEF)
		return jfail(r->e, n->line, n->col, "'%.*s' is undefined (it cannot be called)",
		             (int)f.u.s.n, f.u.s.p ? f.u.s.p : "value");
	if (f.t != V_FUNC)
		return render_fail(r, n, "%s cannot be called", v_type_name(f));
	switch (f.u.m.i) {
	case 0: { /* raise_exception(message) */
		struct val msg;
		if (args_check(r, n, &a, 1, NULL, "raise_exception") || !nargs ||
		    val_to_string(r, n, argv[0], &msg))
			return -1;
		return jfail(r->e, n->line, n->col, "the template raised an error: %.*s",
		             (int)msg.u.s.n, msg.u.s.p);
	}
	case 1: { /* strftime_now(format) at the render's time */
		char buf[512];
		struct tm tm;
		time_t now = (time_t)r->now;
		size_t len;

		if (args_check(r, n, &a, 1, NULL, "strftime_now") ||
		    arg_want(r, n, arg_get(&a, 0, NULL), V_STR, "strftime_now"))
			return -1;
		if (memchr(argv[0].u.s.p, '\0', argv[0].u.s.n) || !localtime_r(&now, &tm))
			return render_fail(
			    r, n, "%s", "strftime_now: a format with a NUL byte, or no local time");
		len = strftime(buf, sizeof buf, argv[0].u.s.p, &tm);
		if (!len && argv[0].u.s.n)
			return render_fail(r, n, "%s",
			                   "strftime_now: the formatted date is too long");
		return arena_str(r, n, buf, len, out);
	}
	case 2: { /* namespace(k=v, ...) */
		struct dict *d = arena_alloc(r->a, sizeof *d);

		if (!d)
			return render_oom(r, n);
		for (size_t i = 0; i < nargs; i++) {
			if (!kw || !kw[i])
				return render_fail(
				    r, n, "%s",
				    "namespace() with positional arguments is not supported");
			if (dict_set(r->a, d, v_str(kw[i], strlen(kw[i])), argv[i]))
				return render_oom(r, n);
		}
		*out = (struct val){.t = V_NS, .u.d = d};
		return 0;
	}
	case 4: { /* dict(mapping, k=v, ...): transformers' TemplateDict */
		struct dict *d = arena_alloc(r->a, sizeof *d);

		if (!d)
			return render_oom(r, n);
		for (size_t i = 0; i < nargs; i++) {
			if (kw && kw[i]) {
				if (dict_set(r->a, d, v_str(kw[i], strlen(kw[i])), argv[i]))
					return render_oom(r, n);
			} else if (i == 0 && argv[i].t == V_DICT) {
				for (size_t k = 0; k < argv[i].u.d->n; k++)
					if (dict_set(r->a, d, argv[i].u.d->keys[k],
					             argv[i].u.d->vals[k]))
						return render_oom(r, n);
			} else {
				return render_fail(r, n, "%s",
				                   "dict() takes a mapping and keywords");
			}
		}
		*out = (struct val){.t = V_DICT, .u.d = d};
		return 0;
	}
	case 3: { /* range([start,] stop[, step]) */
		int64_t start = 0, stop, step = 1, count = 0;
		struct list *l;

		if (args_check(r, n, &a, 3, NULL, "range") || nargs < 1)
			return nargs ? -1 : render_fail(r, n, "%s", "range needs an argument");
		for (size_t i = 0; i < nargs; i++)
			if (arg_want(r, n, &argv[i], V_INT, "range"))
				return -1;
		stop = argv[nargs == 1 ? 0 : 1].u.i;
		if (nargs > 1)
			start = argv[0].u.i;
		if (nargs > 2)
			step = argv[2].u.i;
		if (step == 0)
			return render_fail(r, n, "%s", "range's step cannot be zero");
		for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
			if (++count > 100000)
				return render_fail(r, n, "%s",
				                   "a range of more than 100000 numbers");
		if (!(l = list_new(r, (size_t)count)))
			return render_oom(r, n);
		for (int64_t i = 0; i < count; i++)
			l->items[i] = v_int(start + i * step);
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	}
	return render_fail(r, n, "%s", "internal error: an unknown function");
}
