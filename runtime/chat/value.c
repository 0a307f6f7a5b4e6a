/* Values as Jinja sees Python's: truth, equality, order, str(), repr() and
 * json.dumps() written byte for byte as CPython writes them, because a chat
 * template's output is compared with transformers' to the byte. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/chat/internal.h"

int jfail(struct jerr *e, int line, int col, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (e->set)
		return -1; /* the first error is the one that explains */
	e->set = true;
	if (line > 0)
		n = snprintf(e->buf, e->len, "%s:%d:%d: ", e->name, line, col);
	else
		n = snprintf(e->buf, e->len, "%s: ", e->name);
	if (n < 0 || (size_t)n >= e->len)
		return -1;
	va_start(ap, fmt);
	vsnprintf(e->buf + n, e->len - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- the arena ---- */
struct chunk {
	struct chunk *next;
	size_t used, cap;
	max_align_t data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
	struct chunk *c = a->head;
	size_t need = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
	void *p;

	if (n == 0)
		need = sizeof(max_align_t);
	if (need < n || need > a->limit || a->used > a->limit - need)
		return NULL;
	if (!c || c->cap - c->used < need) {
		size_t cap = need > 65536 ? need : 65536;

		c = malloc(sizeof *c + cap);
		if (!c)
			return NULL;
		c->next = a->head, c->used = 0, c->cap = cap;
		a->head = c;
	}
	p = (char *)c->data + c->used;
	c->used += need;
	a->used += need;
	memset(p, 0, n);
	return p;
}

void arena_free(struct arena *a)
{
	struct chunk *c = a->head, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	a->head = NULL;
	a->used = 0;
}

/* ---- values ---- */
struct val v_none(void)
{
	return (struct val){.t = V_NONE};
}
struct val v_bool(bool b)
{
	return (struct val){.t = V_BOOL, .u.b = b};
}
struct val v_int(int64_t i)
{
	return (struct val){.t = V_INT, .u.i = i};
}
struct val v_str(const char *p, size_t n)
{
	return (struct val){.t = V_STR, .u.s = {p, n}};
}
struct val v_undef(const char *name)
{
	return (struct val){.t = V_UNDEF, .u.s = {name, name ? strlen(name) : 0}};
}

bool v_truthy(struct val v)
{
	switch (v.t) {
	case V_UNDEF:
	case V_NONE:
		return false;
	case V_BOOL:
		return v.u.b;
	case V_INT:
		return v.u.i != 0;
	case V_FLOAT:
		return v.u.f != 0;
	case V_STR:
		return v.u.s.n != 0;
	case V_LIST:
		return v.u.l->n != 0;
	case V_DICT:
		return v.u.d->n != 0;
	default:
		return true;
	}
}

const char *v_type_name(struct val v)
{
	static const char *names[] = {
	    "undefined", "none",        "a boolean", "an integer", "a float",  "a string", "a list",
	    "a mapping", "a namespace", "the loop",  "a function", "a method", "a macro"};
	return names[v.t];
}

static bool is_num(struct val v)
{
	return v.t == V_INT || v.t == V_FLOAT || v.t == V_BOOL;
}
static double num(struct val v)
{
	return v.t == V_FLOAT ? v.u.f : v.t == V_INT ? (double)v.u.i : v.u.b;
}

/* Values nest as deep as a template makes them ({% set x = [x] %} in a
 * loop); the walks below stop at this depth rather than at the stack's end:
 * printing says so, comparing calls the values different. */
#define MAX_VALUE_DEPTH 200

static bool equal_at(struct val a, struct val b, int depth);

bool v_equal(struct val a, struct val b)
{
	return equal_at(a, b, 0);
}

static bool equal_at(struct val a, struct val b, int depth)
{
	if (is_num(a) && is_num(b)) {
		if (a.t != V_FLOAT && b.t != V_FLOAT)
			return (a.t == V_INT ? a.u.i : a.u.b) == (b.t == V_INT ? b.u.i : b.u.b);
		return num(a) == num(b);
	}
	if (a.t != b.t)
		return false;
	switch (a.t) {
	case V_UNDEF:
	case V_NONE:
		return true;
	case V_STR:
		return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
	case V_LIST:
		if (a.u.l->n != b.u.l->n)
			return false;
		for (size_t i = 0; i < a.u.l->n; i++)
			if (depth > MAX_VALUE_DEPTH ||
			    !equal_at(a.u.l->items[i], b.u.l->items[i], depth + 1))
				return false;
		return true;
	case V_DICT:
		if (a.u.d->n != b.u.d->n)
			return false;
		for (size_t i = 0; i < a.u.d->n; i++) {
			struct val *o = dict_find(b.u.d, a.u.d->keys[i]);
			if (!o || depth > MAX_VALUE_DEPTH ||
			    !equal_at(a.u.d->vals[i], *o, depth + 1))
				return false;
		}
		return true;
	default:
		return a.u.d == b.u.d; /* the same object */
	}
}

int v_compare(struct val a, struct val b)
{
	if (is_num(a) && is_num(b)) {
		double x = num(a), y = num(b);

		if (a.t == V_INT && b.t == V_INT)
			return a.u.i < b.u.i ? -1 : a.u.i > b.u.i;
		return x < y ? -1 : x > y;
	}
	if (a.t == V_STR && b.t == V_STR) {
		size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
		int c = memcmp(a.u.s.p, b.u.s.p, n); /* UTF-8 byte order is code point order */

		if (c)
			return c < 0 ? -1 : 1;
		return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
	}
	return -2;
}

struct val *dict_get(const struct dict *d, const char *k, size_t n)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->keys[i].t == V_STR && d->keys[i].u.s.n == n &&
		    !memcmp(d->keys[i].u.s.p, k, n))
			return &d->vals[i];
	return NULL;
}

struct val *dict_find(const struct dict *d, struct val k)
{
	if (k.t == V_STR)
		return dict_get(d, k.u.s.p, k.u.s.n);
	for (size_t i = 0; i < d->n; i++)
		if (d->keys[i].t != V_STR && v_equal(d->keys[i], k))
			return &d->vals[i];
	return NULL;
}

int dict_set(struct arena *a, struct dict *d, struct val k, struct val v)
{
	struct val *old = dict_find(d, k);

	if (old) {
		*old = v;
		return 0;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 8;
		struct val *nk = arena_alloc(a, cap * sizeof *nk),
		           *nv = arena_alloc(a, cap * sizeof *nv);

		if (!nk || !nv)
			return -1;
		if (d->n) {
			memcpy(nk, d->keys, d->n * sizeof *nk);
			memcpy(nv, d->vals, d->n * sizeof *nv);
		}
		d->keys = nk, d->vals = nv, d->cap = cap;
	}
	d->keys[d->n] = k;
	d->vals[d->n++] = v;
	return 0;
}

/* ---- text ---- */
bool sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->over)
		return false;
	if (n > b->limit - b->n) {
		b->over = true;
		return false;
	}
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;

		while (cap < b->n + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->over = true;
			return false;
		}
		b->p = p, b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
	return true;
}

bool sb_puts(struct sbuf *b, const char *s)
{
	return sb_put(b, s, strlen(s));
}

size_t u8_len(const char *s, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xc0) != 0x80;
	return c;
}

size_t u8_offset(const char *s, size_t n, size_t i)
{
	size_t at = 0;

	for (size_t c = 0; at < n; at++) {
		if (((unsigned char)s[at] & 0xc0) != 0x80) {
			if (c == i)
				return at;
			c++;
		}
	}
	return n;
}

/* repr() of a float: the shortest digits that read back the same, in
 * fixed notation for exponents -4..15 and with at least ".0", else as
 * 1e+16 / 1.5e-05. */
static bool put_float(struct sbuf *b, double f, bool json)
{
	char digits[40], out[400];
	int exp = 0, nd = 0, p;
	size_t o = 0;

	if (isnan(f))
		return sb_puts(b, json ? "NaN" : "nan");
	if (isinf(f))
		return sb_puts(b,
		               f < 0 ? (json ? "-Infinity" : "-inf") : (json ? "Infinity" : "inf"));
	for (p = 1; p <= 17; p++) {
		snprintf(digits, sizeof digits, "%.*e", p - 1, f);
		if (strtod(digits, NULL) == f)
			break;
	}
	{
		char *e = strchr(digits, 'e'), mant[40];
		size_t m = 0;

		exp = atoi(e + 1);
		for (char *c = digits; c < e; c++)
			if (*c >= '0' && *c <= '9')
				mant[m++] = *c;
		while (m > 1 && mant[m - 1] == '0')
			m--;
		mant[m] = '\0';
		nd = (int)m;
		if (f < 0 || (f == 0 && signbit(f)))
			out[o++] = '-';
		if (exp >= -4 && exp < 16) {
			if (exp < 0) {
				o += (size_t)sprintf(out + o, "0.");
				for (int i = 0; i < -exp - 1; i++)
					out[o++] = '0';
				o += (size_t)sprintf(out + o, "%s", mant);
			} else {
				for (int i = 0; i <= exp; i++)
					out[o++] = i < nd ? mant[i] : '0';
				out[o++] = '.';
				if (nd > exp + 1)
					o += (size_t)sprintf(out + o, "%s", mant + exp + 1);
				else
					out[o++] = '0';
			}
		} else {
			out[o++] = mant[0];
			if (nd > 1)
				o += (size_t)sprintf(out + o, ".%s", mant + 1);
			o += (size_t)sprintf(out + o, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
		}
	}
	return sb_put(b, out, o);
}

static bool put_int(struct sbuf *b, int64_t i)
{
	char t[32];

	snprintf(t, sizeof t, "%" PRId64, i);
	return sb_puts(b, t);
}

static bool repr_str(struct sbuf *b, const char *s, size_t n)
{
	bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
	char q = sq && !dq ? '"' : '\'', t[8];

	if (!sb_put(b, &q, 1))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = c == '\\'   ? "\\\\"
		                  : c == '\n' ? "\\n"
		                  : c == '\r' ? "\\r"
		                  : c == '\t' ? "\\t"
		                              : NULL;

		if (c == (unsigned char)q)
			esc = q == '\'' ? "\\'" : "\\\"";
		if (!esc && (c < 0x20 || c == 0x7f)) {
			snprintf(t, sizeof t, "\\x%02x", c);
			esc = t;
		}
		if (esc ? !sb_puts(b, esc) : !sb_put(b, (const char *)&c, 1))
			return false;
	}
	return sb_put(b, &q, 1);
}

static bool repr_at(struct sbuf *b, struct val v, const char **why, int depth);

bool v_repr(struct sbuf *b, struct val v, const char **why)
{
	return repr_at(b, v, why, 0);
}

static bool repr_at(struct sbuf *b, struct val v, const char **why, int depth)
{
	if (depth > MAX_VALUE_DEPTH) {
		*why = "a value nested too deeply";
		return false;
	}
	switch (v.t) {
	case V_STR:
		return repr_str(b, v.u.s.p, v.u.s.n);
	case V_LIST:
		if (!sb_puts(b, v.u.l->tuple ? "(" : "["))
			return false;
		for (size_t i = 0; i < v.u.l->n; i++)
			if ((i && !sb_puts(b, ", ")) ||
			    !repr_at(b, v.u.l->items[i], why, depth + 1))
				return false;
		if (v.u.l->tuple && v.u.l->n == 1 && !sb_puts(b, ","))
			return false;
		return sb_puts(b, v.u.l->tuple ? ")" : "]");
	case V_DICT:
		if (!sb_puts(b, "{"))
			return false;
		for (size_t i = 0; i < v.u.d->n; i++)
			if ((i && !sb_puts(b, ", ")) ||
			    !repr_at(b, v.u.d->keys[i], why, depth + 1) || !sb_puts(b, ": ") ||
			    !repr_at(b, v.u.d->vals[i], why, depth + 1))
				return false;
		return sb_puts(b, "}");
	default:
		return v_to_str(b, v, why);
	}
}

bool v_to_str(struct sbuf *b, struct val v, const char **why)
{
	switch (v.t) {
	case V_UNDEF:
		return true; /* Jinja prints an undefined value as nothing */
	case V_NONE:
		return sb_puts(b, "None");
	case V_BOOL:
		return sb_puts(b, v.u.b ? "True" : "False");
	case V_INT:
		return put_int(b, v.u.i);
	case V_FLOAT:
		return put_float(b, v.u.f, false);
	case V_STR:
		return sb_put(b, v.u.s.p, v.u.s.n);
	case V_LIST:
	case V_DICT:
		return v_repr(b, v, why);
	default:
		*why = "its text is Python's object address, which this engine does not imitate";
		return false;
	}
}

static bool json_str(struct sbuf *b, const char *s, size_t n)
{
	char t[8];

	if (!sb_puts(b, "\""))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = c == '"'    ? "\\\""
		                  : c == '\\' ? "\\\\"
		                  : c == '\n' ? "\\n"
		                  : c == '\r' ? "\\r"
		                  : c == '\t' ? "\\t"
		                  : c == '\b' ? "\\b"
		                  : c == '\f' ? "\\f"
		                              : NULL;

		if (!esc && c < 0x20) {
			snprintf(t, sizeof t, "\\u%04x", c);
			esc = t;
		}
		if (esc ? !sb_puts(b, esc) : !sb_put(b, (const char *)&c, 1))
			return false;
	}
	return sb_puts(b, "\"");
}

static bool v_to_json_inner(struct sbuf *b, struct val v, int indent, int depth, const char **why);

/* a mapping's key as json.dumps writes it: other keys than strings in
 * quotes as their JSON text (1 -> "1", True -> "true", None -> "null") */
static bool json_key(struct sbuf *b, struct val k, const char **why)
{
	if (k.t == V_STR)
		return json_str(b, k.u.s.p, k.u.s.n) && sb_puts(b, ": ");
	return sb_puts(b, "\"") && v_to_json_inner(b, k, -1, 0, why) && sb_puts(b, "\": ");
}

static bool newline_indent(struct sbuf *b, int indent, int level)
{
	if (!sb_puts(b, "\n"))
		return false;
	for (int i = 0; i < indent * level; i++)
		if (!sb_puts(b, " "))
			return false;
	return true;
}

bool v_to_json(struct sbuf *b, struct val v, int indent, int depth, const char **why)
{
	return v_to_json_inner(b, v, indent, depth, why);
}

static bool v_to_json_inner(struct sbuf *b, struct val v, int indent, int depth, const char **why)
{
	size_t n;

	if (depth > MAX_VALUE_DEPTH) {
		*why = "a value nested too deeply";
		return false;
	}
	switch (v.t) {
	case V_NONE:
		return sb_puts(b, "null");
	case V_BOOL:
		return sb_puts(b, v.u.b ? "true" : "false");
	case V_INT:
		return put_int(b, v.u.i);
	case V_FLOAT:
		return put_float(b, v.u.f, true);
	case V_STR:
		return json_str(b, v.u.s.p, v.u.s.n);
	case V_LIST:
	case V_DICT:
		n = v.t == V_LIST ? v.u.l->n : v.u.d->n;
		if (!sb_puts(b, v.t == V_LIST ? "[" : "{"))
			return false;
		for (size_t i = 0; i < n; i++) {
			if (i && !sb_puts(b, indent >= 0 ? "," : ", "))
				return false;
			if (indent >= 0 && !newline_indent(b, indent, depth + 1))
				return false;
			if (v.t == V_DICT && !json_key(b, v.u.d->keys[i], why))
				return false;
			if (!v_to_json(b, v.t == V_LIST ? v.u.l->items[i] : v.u.d->vals[i], indent,
			               depth + 1, why))
				return false;
		}
		if (n && indent >= 0 && !newline_indent(b, indent, depth))
			return false;
		return sb_puts(b, v.t == V_LIST ? "]" : "}");
	default:
		*why = v.t == V_UNDEF
		           ? "an undefined value is not JSON serializable"
		           : "only none, booleans, numbers, strings, lists and mappings are "
		             "JSON serializable";
		return false;
	}
}
