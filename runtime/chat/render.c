/* Rendering: expressions evaluated and statements run over scopes, with
 * Jinja's rules for what is undefined (a missing name, key, attribute or
 * index is undefined; printing it gives "", using it in arithmetic or
 * looking into it is an error) and Python's for the operators. A for loop's
 * body has its own scope, so a {% set %} inside it is not seen after it
 * (that is what namespace() is for); an if's body shares its scope. Every
 * statement and iteration counts against the render's step limit. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/chat/internal.h"

struct scope {
	struct scope *up;
	struct dict vars;
};

enum flow { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

int render_fail(struct renderer *r, const struct node *n, const char *fmt, const char *a)
{
	return jfail(r->e, n->line, n->col, fmt, a);
}

int render_oom(struct renderer *r, const struct node *n)
{
	return jfail(r->e, n->line, n->col,
	             "out of memory (the render's memory limit is %zu bytes)", r->a->limit);
}

int arena_str(struct renderer *r, const struct node *n, const char *p, size_t len, struct val *out)
{
	char *s = arena_alloc(r->a, len + 1);

	if (!s)
		return render_oom(r, n);
	if (len)
		memcpy(s, p, len);
	*out = v_str(s, len);
	return 0;
}

struct list *list_new(struct renderer *r, size_t n)
{
	struct list *l = arena_alloc(r->a, sizeof *l);

	if (!l || (n && !(l->items = arena_alloc(r->a, n * sizeof *l->items))))
		return NULL;
	l->n = n;
	return l;
}

static int undefined_error(struct renderer *r, const struct node *n, struct val v)
{
	return jfail(r->e, n->line, n->col, "'%.*s' is undefined", (int)v.u.s.n,
	             v.u.s.p ? v.u.s.p : "value");
}

static struct val *lookup(struct renderer *r, const char *name)
{
	for (struct scope *s = r->scope; s; s = s->up) {
		struct val *v = dict_get(&s->vars, name, strlen(name));
		if (v)
			return v;
	}
	return NULL;
}

static int set_var(struct renderer *r, const struct node *n, const char *name, struct val v)
{
	return dict_set(r->a, &r->scope->vars, v_str(name, strlen(name)), v) ? render_oom(r, n) : 0;
}

/* Python's slice.indices() for a sequence of length len */
static int slice_indices(struct renderer *r, const struct node *n, struct val *ix, int64_t len,
                         int64_t *start, int64_t *stop, int64_t *step)
{
	int64_t v[3];

	for (int k = 0; k < 3; k++) {
		if (ix[k].t == V_NONE || ix[k].t == V_UNDEF) {
			v[k] = INT64_MIN;
			continue;
		}
		if (ix[k].t != V_INT)
			return render_fail(r, n, "slice indices must be integers, not %s",
			                   v_type_name(ix[k]));
		v[k] = ix[k].u.i;
	}
	*step = v[2] == INT64_MIN ? 1 : v[2];
	if (*step == 0)
		return render_fail(r, n, "%s", "a slice step cannot be zero");
	if (v[0] == INT64_MIN) {
		*start = *step < 0 ? len - 1 : 0;
	} else {
		*start = v[0] < 0 ? v[0] + len : v[0];
		if (*start < 0)
			*start = *step < 0 ? -1 : 0;
		else if (*start >= len)
			*start = *step < 0 ? len - 1 : len;
	}
	if (v[1] == INT64_MIN) {
		*stop = *step < 0 ? -1 : len;
	} else {
		*stop = v[1] < 0 ? v[1] + len : v[1];
		if (*stop < 0)
			*stop = *step < 0 ? -1 : 0;
		else if (*stop >= len)
			*stop = *step < 0 ? len - 1 : len;
	}
	return 0;
}

static int do_slice(struct renderer *r, const struct node *n, struct val of, struct val *ix,
                    struct val *out)
{
	int64_t len, start = 0, stop = 0, step = 1, count = 0;

	if (of.t == V_UNDEF)
		return undefined_error(r, n, of);
	if (of.t != V_LIST && of.t != V_STR)
		return render_fail(r, n, "only lists and strings can be sliced, not %s",
		                   v_type_name(of));
	len = of.t == V_LIST ? (int64_t)of.u.l->n : (int64_t)u8_len(of.u.s.p, of.u.s.n);
	if (slice_indices(r, n, ix, len, &start, &stop, &step))
		return -1;
	for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
		count++;
	if (of.t == V_LIST) {
		struct list *l = list_new(r, (size_t)count);
		size_t k = 0;

		if (!l)
			return render_oom(r, n);
		l->tuple = of.u.l->tuple;
		for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
			l->items[k++] = of.u.l->items[i];
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	{
		char *s = arena_alloc(r->a, of.u.s.n + 1);
		size_t o = 0;

		if (!s)
			return render_oom(r, n);
		for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
			size_t at = u8_offset(of.u.s.p, of.u.s.n, (size_t)i),
			       end = u8_offset(of.u.s.p, of.u.s.n, (size_t)i + 1);
			memcpy(s + o, of.u.s.p + at, end - at);
			o += end - at;
		}
		*out = v_str(s, o);
	}
	return 0;
}

/* of[key] as Jinja's getitem, then getattr: undefined when neither has it */
static int get_item(struct renderer *r, const struct node *n, struct val of, struct val key,
                    bool attr_first, struct val *out)
{
	int which;

	if (of.t == V_UNDEF)
		return undefined_error(r, n, of);
	if (attr_first && key.t == V_STR && (of.t == V_STR || of.t == V_DICT || of.t == V_LIST) &&
	    builtin_method(of, key.u.s.p, &which)) {
		struct val *self = arena_alloc(r->a, sizeof *self);

		if (!self)
			return render_oom(r, n);
		*self = of;
		*out = (struct val){.t = V_METHOD, .u.m = {self, which}};
		return 0;
	}
	*out = v_undef(key.t == V_STR ? key.u.s.p : "item");
	if (of.t == V_DICT || (of.t == V_NS && key.t == V_STR)) {
		struct val *v = dict_find(of.u.d, key);
		if (v)
			*out = *v;
	} else if ((of.t == V_LIST || of.t == V_STR) && (key.t == V_INT || key.t == V_BOOL)) {
		int64_t i = key.t == V_INT ? key.u.i : key.u.b,
		        len = of.t == V_LIST ? (int64_t)of.u.l->n
		                             : (int64_t)u8_len(of.u.s.p, of.u.s.n);
		if (i < 0)
			i += len;
		if (i >= 0 && i < len) {
			if (of.t == V_LIST) {
				*out = of.u.l->items[i];
			} else {
				size_t at = u8_offset(of.u.s.p, of.u.s.n, (size_t)i);
				size_t end = u8_offset(of.u.s.p, of.u.s.n, (size_t)i + 1);
				*out = v_str(of.u.s.p + at, end - at);
			}
		}
	} else if (of.t == V_LOOP && key.t == V_STR) {
		const struct loopstate *l = of.u.loop;
		const char *k = key.u.s.p;

		if (!strcmp(k, "index0"))
			*out = v_int(l->index0);
		else if (!strcmp(k, "index"))
			*out = v_int(l->index0 + 1);
		else if (!strcmp(k, "revindex0"))
			*out = v_int(l->length - l->index0 - 1);
		else if (!strcmp(k, "revindex"))
			*out = v_int(l->length - l->index0);
		else if (!strcmp(k, "first"))
			*out = v_bool(l->index0 == 0);
		else if (!strcmp(k, "last"))
			*out = v_bool(l->index0 == l->length - 1);
		else if (!strcmp(k, "length"))
			*out = v_int(l->length);
		else if (!strcmp(k, "previtem") && l->index0 > 0)
			*out = l->items->items[l->index0 - 1];
		else if (!strcmp(k, "nextitem") && l->index0 + 1 < l->length)
			*out = l->items->items[l->index0 + 1];
		else if (strcmp(k, "previtem") && strcmp(k, "nextitem"))
			return render_fail(r, n, "loop.%s is not supported", k);
	} else if (!attr_first && key.t == V_STR && (of.t == V_STR || of.t == V_DICT) &&
	           builtin_method(of, key.u.s.p, &which)) {
		return get_item(r, n, of, key, true, out);
	} else if (of.t == V_FUNC || of.t == V_METHOD) {
		return render_fail(r, n, "%s", "attributes of functions are not supported");
	}
	return 0;
}

static int arith(struct renderer *r, const struct node *n, int op, struct val a, struct val b,
                 struct val *out)
{
	bool ints = (a.t == V_INT || a.t == V_BOOL) && (b.t == V_INT || b.t == V_BOOL);
	int64_t x = a.t == V_INT ? a.u.i : a.t == V_BOOL ? a.u.b : 0;
	int64_t y = b.t == V_INT ? b.u.i : b.t == V_BOOL ? b.u.b : 0, z = 0;
	double f, g;
	char opname[3] = {(char)op, 0, 0};

	if (a.t == V_UNDEF)
		return undefined_error(r, n, a);
	if (b.t == V_UNDEF)
		return undefined_error(r, n, b);
	if (op == '+' && a.t == V_STR && b.t == V_STR) {
		char *s = arena_alloc(r->a, a.u.s.n + b.u.s.n + 1);
		if (!s)
			return render_oom(r, n);
		memcpy(s, a.u.s.p, a.u.s.n);
		memcpy(s + a.u.s.n, b.u.s.p, b.u.s.n);
		*out = v_str(s, a.u.s.n + b.u.s.n);
		return 0;
	}
	if (op == '+' && a.t == V_LIST && b.t == V_LIST) {
		struct list *l = list_new(r, a.u.l->n + b.u.l->n);
		if (!l)
			return render_oom(r, n);
		if (a.u.l->n)
			memcpy(l->items, a.u.l->items, a.u.l->n * sizeof *l->items);
		if (b.u.l->n)
			memcpy(l->items + a.u.l->n, b.u.l->items, b.u.l->n * sizeof *l->items);
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	if (!(a.t == V_INT || a.t == V_BOOL || a.t == V_FLOAT) ||
	    !(b.t == V_INT || b.t == V_BOOL || b.t == V_FLOAT)) {
		opname[0] = op == 'f' ? '/' : op == 'p' ? '*' : (char)op;
		opname[1] = op == 'f' ? '/' : op == 'p' ? '*' : 0;
		return jfail(r->e, n->line, n->col, "'%s' is not supported between %s and %s",
		             opname, v_type_name(a), v_type_name(b));
	}
	f = a.t == V_FLOAT ? a.u.f : (double)x, g = b.t == V_FLOAT ? b.u.f : (double)y;
	if ((op == '/' || op == 'f' || op == '%') && g == 0)
		return render_fail(r, n, "%s", "division by zero");
	if (op == 'p' && f == 0 && g < 0) /* Python: ZeroDivisionError */
		return render_fail(r, n, "%s", "zero to a negative power");
	if (ints && op != '/' && op != 'p') {
		bool bad = false;
		switch (op) {
		case '+':
			bad = __builtin_add_overflow(x, y, &z);
			break;
		case '-':
			bad = __builtin_sub_overflow(x, y, &z);
			break;
		case '*':
			bad = __builtin_mul_overflow(x, y, &z);
			break;
		case 'f':
		case '%':
			if (x == INT64_MIN && y == -1) {
				bad = true;
				break;
			}
			z = x / y;
			if ((x % y != 0) && ((x < 0) != (y < 0)))
				z--; /* Python floors */
			if (op == '%')
				z = x - z * y;
			break;
		}
		if (bad)
			return render_fail(
			    r, n, "%s",
			    "an integer overflow (numbers past 64 bits are not supported)");
		*out = v_int(z);
		return 0;
	}
	if (ints && op == 'p') {
		if (y < 0) {
			*out = (struct val){.t = V_FLOAT, .u.f = pow(f, g)};
			return 0;
		}
		z = 1;
		for (int64_t k = 0; k < y; k++)
			if (__builtin_mul_overflow(z, x, &z))
				return render_fail(
				    r, n, "%s",
				    "an integer overflow (numbers past 64 bits are not supported)");
		*out = v_int(z);
		return 0;
	}
	switch (op) {
	case '+':
		f = f + g;
		break;
	case '-':
		f = f - g;
		break;
	case '*':
		f = f * g;
		break;
	case '/':
		f = f / g;
		break;
	case 'f':
		f = floor(f / g);
		break;
	case '%':
		f = fmod(f, g), f = (f != 0 && (f < 0) != (g < 0)) ? f + g : f;
		break;
	case 'p':
		f = pow(f, g);
		/* Python: OverflowError, or a complex number */
		if ((isinf(f) && isfinite(a.t == V_FLOAT ? a.u.f : 0)) || isnan(f))
			return render_fail(r, n, "%s", "a power out of the floats' range");
		break;
	}
	*out = (struct val){.t = V_FLOAT, .u.f = f};
	return 0;
}

static int contains(struct renderer *r, const struct node *n, struct val x, struct val in,
                    bool *out)
{
	*out = false;
	switch (in.t) {
	case V_UNDEF:
		return 0;
	case V_STR:
		if (x.t != V_STR)
			return render_fail(r, n, "'in <string>' needs a string on its left, not %s",
			                   v_type_name(x));
		*out = x.u.s.n == 0 || memmem(in.u.s.p, in.u.s.n, x.u.s.p, x.u.s.n);
		return 0;
	case V_LIST:
		for (size_t i = 0; i < in.u.l->n && !*out; i++)
			*out = v_equal(x, in.u.l->items[i]);
		return 0;
	case V_DICT:
		*out = dict_find(in.u.d, x) != NULL;
		return 0;
	default:
		return render_fail(r, n,
		                   "'in' needs a string, list or mapping on its right, not %s",
		                   v_type_name(in));
	}
}

static int eval_args(struct renderer *r, const struct node *n, struct val **args)
{
	*args = NULL;
	if (!n->nkids)
		return 0;
	if (!(*args = arena_alloc(r->a, n->nkids * sizeof **args)))
		return render_oom(r, n);
	for (size_t i = 0; i < n->nkids; i++)
		if (eval(r, n->kids[i], &(*args)[i]))
			return -1;
	return 0;
}

static int eval_inner(struct renderer *r, const struct node *n, struct val *out)
{
	struct val a, b, *args, ix[3];
	bool t;

	switch (n->k) {
	case N_LIT:
		*out = n->lit;
		return 0;
	case N_NAME: {
		struct val *v = lookup(r, n->s);
		int which;

		if (v)
			*out = *v;
		else if (builtin_global(n->s, &which))
			*out = (struct val){.t = V_FUNC, .u.m = {NULL, which}};
		else
			*out = v_undef(n->s);
		return 0;
	}
	case N_LIST:
	case N_TUPLE: {
		struct list *l = list_new(r, n->nkids);

		if (!l)
			return render_oom(r, n);
		l->tuple = n->k == N_TUPLE;
		for (size_t i = 0; i < n->nkids; i++)
			if (eval(r, n->kids[i], &l->items[i]))
				return -1;
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	case N_DICT: {
		struct dict *d = arena_alloc(r->a, sizeof *d);

		if (!d)
			return render_oom(r, n);
		for (size_t i = 0; i + 1 < n->nkids; i += 2) {
			if (eval(r, n->kids[i], &a) || eval(r, n->kids[i + 1], &b))
				return -1;
			if (a.t != V_STR && a.t != V_INT && a.t != V_BOOL && a.t != V_NONE &&
			    a.t != V_FLOAT)
				return render_fail(r, n->kids[i],
				                   "%s as a mapping key is not supported",
				                   v_type_name(a));
			if (dict_set(r->a, d, a, b))
				return render_oom(r, n);
		}
		*out = (struct val){.t = V_DICT, .u.d = d};
		return 0;
	}
	case N_ATTR:
		if (eval(r, n->a, &a))
			return -1;
		return get_item(r, n, a, v_str(n->s, strlen(n->s)), true, out);
	case N_ITEM:
		if (eval(r, n->a, &a) || eval(r, n->b, &b) || get_item(r, n, a, b, false, out))
			return -1;
		if (out->t == V_UNDEF && b.t == V_INT) { /* named for a later message */
			char name[96];
			struct val s;

			snprintf(name, sizeof name, "%s[%lld]", n->a->k == N_NAME ? n->a->s : "",
			         (long long)b.u.i);
			if (arena_str(r, n, name, strlen(name), &s))
				return -1;
			*out = v_undef(s.u.s.p);
		}
		return 0;
	case N_SLICE:
		if (eval(r, n->a, &a))
			return -1;
		for (int k = 0; k < 3; k++) {
			const struct node *x = k == 0 ? n->b : k == 1 ? n->c : n->d;
			ix[k] = v_none();
			if (x && eval(r, x, &ix[k]))
				return -1;
		}
		return do_slice(r, n, a, ix, out);
	case N_CALL:
		if (eval(r, n->a, &a) || eval_args(r, n, &args))
			return -1;
		if (a.t == V_UNDEF && n->a->k == N_ATTR) { /* say whose method is missing */
			struct val of;

			if (eval(r, n->a->a, &of))
				return -1;
			if (of.t != V_UNDEF)
				return jfail(r->e, n->line, n->col,
				             "%s has no method '%s' in this engine",
				             v_type_name(of), n->a->s);
		}
		return call_value(r, n, a, args, n->nkids, n->kw, out);
	case N_FILTER:
		if (eval(r, n->a, &a) || eval_args(r, n, &args))
			return -1;
		return call_filter(r, n, a, args, n->nkids, n->kw, out);
	case N_TEST:
		if (eval(r, n->a, &a) || eval_args(r, n, &args) ||
		    call_test(r, n, a, args, n->nkids, &t))
			return -1;
		*out = v_bool(t != (n->op == 1));
		return 0;
	case N_NEG:
		if (eval(r, n->a, &a))
			return -1;
		if (n->op == '+' && (a.t == V_INT || a.t == V_FLOAT || a.t == V_BOOL)) {
			*out = a.t == V_BOOL ? v_int(a.u.b) : a;
			return 0;
		}
		if (a.t == V_FLOAT) { /* -(0.0) is -0.0, not 0 - 0.0 */
			*out = (struct val){.t = V_FLOAT, .u.f = -a.u.f};
			return 0;
		}
		return arith(r, n, '-', v_int(0), a, out);
	case N_NOT:
		if (eval(r, n->a, &a))
			return -1;
		*out = v_bool(!v_truthy(a));
		return 0;
	case N_AND:
	case N_OR: /* Python's: the deciding operand itself */
		if (eval(r, n->a, &a))
			return -1;
		if (v_truthy(a) == (n->k == N_OR)) {
			*out = a;
			return 0;
		}
		return eval(r, n->b, out);
	case N_BIN:
		if (eval(r, n->a, &a) || eval(r, n->b, &b))
			return -1;
		if (n->op == '~') {
			struct sbuf s = {.limit = r->out.limit};
			const char *why = NULL;
			int rc;

			if (!v_to_str(&s, a, &why) || !v_to_str(&s, b, &why)) {
				free(s.p);
				return why ? render_fail(r, n, "cannot print this value: %s", why)
				           : render_fail(r, n, "%s",
				                         "a string longer than the output limit");
			}
			rc = arena_str(r, n, s.p ? s.p : "", s.n, out);
			free(s.p);
			return rc;
		}
		return arith(r, n, n->op, a, b, out);
	case N_CMP:
		if (eval(r, n->a, &a) || eval(r, n->b, &b))
			return -1;
		if (n->op == 'i' || n->op == 'n') {
			if (contains(r, n, a, b, &t))
				return -1;
			*out = v_bool(t == (n->op == 'i'));
			return 0;
		}
		if (n->op <= 2) {
			*out = v_bool(v_equal(a, b) == (n->op == 1));
			return 0;
		}
		{
			int c = v_compare(a, b);
			if (c == -2)
				return jfail(r->e, n->line, n->col, "%s and %s cannot be ordered",
				             v_type_name(a), v_type_name(b));
			*out = v_bool(n->op == 3   ? c < 0
			              : n->op == 4 ? c <= 0
			              : n->op == 5 ? c > 0
			                           : c >= 0);
		}
		return 0;
	case N_COND:
		if (eval(r, n->b, &b))
			return -1;
		if (v_truthy(b))
			return eval(r, n->a, out);
		if (!n->c) {
			*out = v_undef("the else branch");
			return 0;
		}
		return eval(r, n->c, out);
	default:
		return render_fail(r, n, "%s",
		                   "internal error: a statement where an expression was expected");
	}
}

int eval(struct renderer *r, const struct node *n, struct val *out)
{
	int rc;

	if (++r->depth > r->max_depth)
		return jfail(r->e, n->line, n->col, "nested deeper than the limit of %d",
		             r->max_depth);
	if (++r->steps > r->max_steps)
		return jfail(r->e, n->line, n->col,
		             "the render took more than %llu steps (a template that never ends?)",
		             (unsigned long long)r->max_steps);
	rc = eval_inner(r, n, out);
	r->depth--;
	return rc;
}

static int exec(struct renderer *r, const struct node *n, enum flow *flow);

static int exec_body(struct renderer *r, const struct node *b, enum flow *flow)
{
	for (size_t i = 0; i < b->nkids && *flow == FLOW_NEXT; i++)
		if (exec(r, b->kids[i], flow))
			return -1;
	return 0;
}

/* the items a for loop walks: a list as is, a string's characters, a
 * mapping's keys, nothing for undefined */
static int iterable(struct renderer *r, const struct node *n, struct val v, struct list **out)
{
	struct list *l;

	switch (v.t) {
	case V_LIST:
		*out = v.u.l;
		return 0;
	case V_UNDEF:
		return !(*out = list_new(r, 0)) ? render_oom(r, n) : 0;
	case V_DICT:
		if (!(l = list_new(r, v.u.d->n)))
			return render_oom(r, n);
		if (v.u.d->n)
			memcpy(l->items, v.u.d->keys, v.u.d->n * sizeof *l->items);
		*out = l;
		return 0;
	case V_STR: {
		size_t count = u8_len(v.u.s.p, v.u.s.n), at = 0;

		if (!(l = list_new(r, count)))
			return render_oom(r, n);
		for (size_t i = 0; i < count; i++) {
			size_t end = u8_offset(v.u.s.p, v.u.s.n, i + 1);
			l->items[i] = v_str(v.u.s.p + at, end - at);
			at = end;
		}
		*out = l;
		return 0;
	}
	default:
		return render_fail(r, n, "%s cannot be looped over", v_type_name(v));
	}
}

/* the text a body writes, as a string value, instead of into the output */
static int capture(struct renderer *r, const struct node *n, const struct node *body,
                   struct val *out)
{
	struct sbuf saved = r->out;
	enum flow flow = FLOW_NEXT;
	int rc;

	r->out = (struct sbuf){.limit = saved.limit - saved.n};
	rc = exec_body(r, body, &flow);
	if (!rc)
		rc = arena_str(r, n, r->out.p ? r->out.p : "", r->out.n, out);
	free(r->out.p);
	r->out = saved;
	return rc;
}

int call_macro(struct renderer *r, const struct node *n, struct val f, struct val *args,
               size_t nargs, const char **kw, struct val *out)
{
	const struct node *m = f.u.fn;
	struct scope *s = arena_alloc(r->a, sizeof *s), *saved = r->scope;
	bool *bound = arena_alloc(r->a, m->nkw + 1);
	size_t next = 0;
	int rc = -1;

	if (!s || !bound)
		return render_oom(r, n);
	if (++r->depth > r->max_depth)
		return jfail(r->e, n->line, n->col, "macros nested deeper than the limit of %d",
		             r->max_depth);
	s->up = r->top;
	r->scope = s;
	for (size_t i = 0; i < nargs; i++) {
		size_t k = next;

		if (kw && kw[i]) {
			for (k = 0; k < m->nkw && strcmp(m->kw[k], kw[i]); k++)
				;
			if (k == m->nkw) {
				jfail(r->e, n->line, n->col, "the macro %s has no parameter %s",
				      m->s, kw[i]);
				goto out;
			}
		} else if (next++ >= m->nkw) {
			jfail(r->e, n->line, n->col, "the macro %s takes %zu argument%s", m->s,
			      m->nkw, m->nkw == 1 ? "" : "s");
			goto out;
		}
		if (bound[k]) {
			jfail(r->e, n->line, n->col, "the macro %s got %s twice", m->s, m->kw[k]);
			goto out;
		}
		bound[k] = true;
		if (set_var(r, n, m->kw[k], args[i]))
			goto out;
	}
	for (size_t k = 0; k < m->nkw; k++) {
		struct val v = v_undef(m->kw[k]);

		if (bound[k])
			continue;
		if ((m->kids[k] && eval(r, m->kids[k], &v)) || set_var(r, n, m->kw[k], v))
			goto out;
	}
	rc = capture(r, n, m->b, out);
out:
	r->scope = saved;
	r->depth--;
	return rc;
}

static int assign(struct renderer *r, const struct node *n, struct val v)
{
	if (n->nkw == 1)
		return set_var(r, n, n->kw[0], v);
	if (v.t != V_LIST)
		return jfail(r->e, n->line, n->col, "cannot unpack %s into %zu names",
		             v_type_name(v), n->nkw);
	if (v.u.l->n != n->nkw)
		return jfail(r->e, n->line, n->col, "cannot unpack %zu values into %zu names",
		             v.u.l->n, n->nkw);
	for (size_t i = 0; i < n->nkw; i++)
		if (set_var(r, n, n->kw[i], v.u.l->items[i]))
			return -1;
	return 0;
}

static int exec_for(struct renderer *r, const struct node *n)
{
	struct val it;
	struct list *items;
	struct loopstate st;
	struct scope *outer = r->scope;

	if (eval(r, n->a, &it) || iterable(r, n, it, &items))
		return -1;
	if (n->d) { /* for ... if: the loop sees the items that pass, counted so */
		struct list *kept = list_new(r, items->n);
		struct val ok;

		if (!kept)
			return render_oom(r, n);
		kept->n = 0;
		for (size_t i = 0; i < items->n; i++) {
			struct scope *s = arena_alloc(r->a, sizeof *s);

			if (!s)
				return render_oom(r, n);
			s->up = outer;
			r->scope = s;
			if (assign(r, n, items->items[i]) || eval(r, n->d, &ok)) {
				r->scope = outer;
				return -1;
			}
			r->scope = outer;
			if (v_truthy(ok))
				kept->items[kept->n++] = items->items[i];
		}
		items = kept;
	}
	st = (struct loopstate){.length = (int64_t)items->n, .items = items};
	for (size_t i = 0; i < items->n; i++) {
		struct scope *s = arena_alloc(r->a, sizeof *s);
		struct loopstate *ls = arena_alloc(r->a, sizeof *ls);
		enum flow flow = FLOW_NEXT;

		if (!s || !ls)
			return render_oom(r, n);
		if (++r->steps > r->max_steps)
			return jfail(
			    r->e, n->line, n->col,
			    "the render took more than %llu steps (a template that never ends?)",
			    (unsigned long long)r->max_steps);
		st.index0 = (int64_t)i;
		*ls = st;
		s->up = outer;
		r->scope = s;
		if (set_var(r, n, "loop", (struct val){.t = V_LOOP, .u.loop = ls}) ||
		    assign(r, n, items->items[i]) || exec_body(r, n->b, &flow)) {
			r->scope = outer;
			return -1;
		}
		r->scope = outer;
		if (flow == FLOW_BREAK)
			break;
	}
	if (items->n == 0 && n->c) {
		enum flow flow = FLOW_NEXT;
		return exec_body(r, n->c, &flow);
	}
	return 0;
}

static int exec(struct renderer *r, const struct node *n, enum flow *flow)
{
	struct val v;
	const char *why = NULL;

	if (++r->steps > r->max_steps)
		return jfail(r->e, n->line, n->col,
		             "the render took more than %llu steps (a template that never ends?)",
		             (unsigned long long)r->max_steps);
	switch (n->k) {
	case S_TEXT:
		if (!sb_put(&r->out, n->lit.u.s.p, n->lit.u.s.n))
			return jfail(r->e, n->line, n->col,
			             "the output is longer than the limit of %zu bytes",
			             r->out.limit);
		return 0;
	case S_OUT:
		if (eval(r, n->a, &v))
			return -1;
		if (!v_to_str(&r->out, v, &why))
			return why ? render_fail(r, n->a, "cannot print this value: %s", why)
			           : jfail(r->e, n->line, n->col,
			                   "the output is longer than the limit of %zu bytes",
			                   r->out.limit);
		return 0;
	case S_IF:
		for (size_t i = 0; i + 1 < n->nkids; i += 2) {
			if (n->kids[i]) {
				if (eval(r, n->kids[i], &v))
					return -1;
				if (!v_truthy(v))
					continue;
			}
			return exec_body(r, n->kids[i + 1], flow);
		}
		return 0;
	case S_FOR:
		return exec_for(r, n);
	case S_MACRO:
		return set_var(r, n, n->s, (struct val){.t = V_MACRO, .u.fn = n});
	case S_SET:
		if (n->b ? capture(r, n, n->b, &v) : eval(r, n->a, &v))
			return -1;
		if (n->s) { /* ns.attr = v */
			struct val *ns = lookup(r, n->s);

			if (!ns || ns->t != V_NS)
				return jfail(r->e, n->line, n->col,
				             "'%s' is not a namespace(): only a namespace's "
				             "attributes can be set",
				             n->s);
			return dict_set(r->a, ns->u.d, v_str(n->kw[0], strlen(n->kw[0])), v)
			           ? render_oom(r, n)
			           : 0;
		}
		return assign(r, n, v);
	case S_BODY:
		return exec_body(r, n, flow);
	case S_BREAK:
	case S_CONTINUE:
		*flow = n->k == S_BREAK ? FLOW_BREAK : FLOW_CONTINUE;
		return 0;
	default:
		return render_fail(r, n, "%s",
		                   "internal error: an expression where a statement was expected");
	}
}

int jinja_exec(struct renderer *r, const struct node *root, struct dict *vars)
{
	struct scope top = {.vars = *vars}, *local = arena_alloc(r->a, sizeof *local);
	enum flow flow = FLOW_NEXT;

	if (!local)
		return jfail(r->e, 0, 0, "out of memory");
	local->up = &top; /* the template's own sets go here, over the caller's variables */
	r->scope = r->top = local;
	return exec_body(r, root, &flow);
}
