/* Python's str methods on UTF-8 text, as chat templates call them: strip
 * with Python's whitespace (str.isspace) or a set of characters, split with
 * and without a separator, replace, and upper/lower (ASCII only: other text
 * is refused rather than cased differently from Python).
 * defines: py_strip, py_split, py_replace, py_change_case */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "runtime/chat/internal.h"

/* Python's whitespace (str.isspace) in UTF-8 */
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

struct val py_strip(struct val s, const struct val *chars, bool left, bool right)
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
int py_split(struct renderer *r, const struct node *n, struct val s, const struct val *sep,
             int64_t maxsplit, struct val *out)
{
	struct list *l = list_new(r, 0);
	size_t cap = 0, i = 0, start = 0, sl;
	const char *p = s.u.s.p;

	if (!l)
		return render_oom(r, n);
	if (sep && sep->u.s.n == 0)
		return render_fail(r, n, "%s", "split() with an empty separator");
	if (sep) {
		const char *hit;
		while ((maxsplit < 0 || (int64_t)l->n < maxsplit) &&
		       (hit = memmem(p + start, s.u.s.n - start, sep->u.s.p, sep->u.s.n))) {
			if (list_push(r, l, &cap, v_str(p + start, (size_t)(hit - p) - start)))
				return render_oom(r, n);
			start = (size_t)(hit - p) + sep->u.s.n;
		}
		if (list_push(r, l, &cap, v_str(p + start, s.u.s.n - start)))
			return render_oom(r, n);
	} else {
		while (i < s.u.s.n) {
			while (i < s.u.s.n && (sl = space_at(p + i, s.u.s.n - i)))
				i += sl;
			if (i >= s.u.s.n)
				break;
			start = i;
			if (maxsplit >= 0 && (int64_t)l->n >= maxsplit) {
				struct val rest =
				    py_strip(v_str(p + i, s.u.s.n - i), NULL, false, true);
				if (list_push(r, l, &cap, rest))
					return render_oom(r, n);
				break;
			}
			while (i < s.u.s.n && !space_at(p + i, s.u.s.n - i))
				i += cp_len(p + i, s.u.s.n - i);
			if (list_push(r, l, &cap, v_str(p + start, i - start)))
				return render_oom(r, n);
		}
	}
	*out = (struct val){.t = V_LIST, .u.l = l};
	return 0;
}

int py_replace(struct renderer *r, const struct node *n, struct val s, struct val from,
               struct val to, int64_t count, struct val *out)
{
	struct sbuf b = {.limit = r->out.limit};
	size_t at = 0;
	const char *hit;
	int rc;

	if (from.u.s.n == 0)
		return render_fail(r, n, "%s", "replace() of an empty string is not supported");
	while (count != 0 && (hit = memmem(s.u.s.p + at, s.u.s.n - at, from.u.s.p, from.u.s.n))) {
		sb_put(&b, s.u.s.p + at, (size_t)(hit - s.u.s.p) - at);
		sb_put(&b, to.u.s.p, to.u.s.n);
		at = (size_t)(hit - s.u.s.p) + from.u.s.n;
		count--;
	}
	sb_put(&b, s.u.s.p + at, s.u.s.n - at);
	if (b.over) {
		free(b.p);
		return render_fail(r, n, "%s", "a string longer than the output limit");
	}
	rc = arena_str(r, n, b.p ? b.p : "", b.n, out);
	free(b.p);
	return rc;
}

int py_change_case(struct renderer *r, const struct node *n, struct val s, bool upper,
                   struct val *out)
{
	char *p = arena_alloc(r->a, s.u.s.n + 1);

	if (!p)
		return render_oom(r, n);
	for (size_t i = 0; i < s.u.s.n; i++) {
		char c = s.u.s.p[i];
		if ((unsigned char)c >= 0x80)
			return render_fail(
			    r, n, "%s", "upper() and lower() of non-ASCII text are not supported");
		p[i] = upper ? (c >= 'a' && c <= 'z' ? (char)(c - 32) : c)
		             : (c >= 'A' && c <= 'Z' ? (char)(c + 32) : c);
	}
	*out = v_str(p, s.u.s.n);
	return 0;
}
