/* The lexer: template text to tokens, with the whitespace rules of the
 * environment transformers renders chat templates in (trim_blocks and
 * lstrip_blocks on, keep_trailing_newline off) and Jinja's own: "{%-"
 * strips the whitespace before a tag, "-%}" the whitespace after it, "+"
 * keeps it. Newlines are normalised to "\n" first, as Jinja does. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/chat/internal.h"

struct lexer {
	struct arena *a;
	const char *s; /* the normalised source */
	size_t n, pos;
	struct tokens *out;
	size_t cap;
	struct jerr *e;
	/* line and column of position `at`, advanced as tokens are made */
	size_t at;
	int line, col;
};

static void where(struct lexer *x, size_t pos, int *line, int *col)
{
	if (pos < x->at)
		x->at = 0, x->line = 1, x->col = 1;
	for (; x->at < pos; x->at++) {
		if (x->s[x->at] == '\n')
			x->line++, x->col = 1;
		else if (((unsigned char)x->s[x->at] & 0xc0) != 0x80)
			x->col++;
	}
	*line = x->line, *col = x->col;
}

static int fail_at(struct lexer *x, size_t pos, const char *what)
{
	int line, col;

	where(x, pos, &line, &col);
	return jfail(x->e, line, col, "%s", what);
}

static struct token *emit(struct lexer *x, enum ttype t, size_t pos, const char *s, size_t n)
{
	struct token *tk;
	char *copy;

	if (x->out->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 256;
		struct token *v = arena_alloc(x->a, cap * sizeof *v);

		if (!v)
			return NULL;
		if (x->out->n)
			memcpy(v, x->out->v, x->out->n * sizeof *v);
		x->out->v = v, x->cap = cap;
	}
	copy = arena_alloc(x->a, n + 1);
	if (!copy)
		return NULL;
	memcpy(copy, s, n);
	tk = &x->out->v[x->out->n++];
	*tk = (struct token){.t = t, .s = copy, .n = n};
	where(x, pos, &tk->line, &tk->col);
	return tk;
}

static bool space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* A string literal at x->pos: Python's unicode-escape decoding of what is
 * between the quotes. */
static int lex_string(struct lexer *x)
{
	size_t start = x->pos, i = start + 1, o = 0;
	char q = x->s[start], *buf;

	for (; i < x->n && x->s[i] != q; i++)
		if (x->s[i] == '\\')
			i++;
	if (i >= x->n)
		return fail_at(x, start, "a string that is never closed");
	buf = arena_alloc(x->a, i - start + 1);
	if (!buf)
		return fail_at(x, start, "out of memory");
	for (size_t j = start + 1; j < i; j++) {
		char c = x->s[j];
		unsigned long cp;
		int nd;

		if (c != '\\') {
			buf[o++] = c;
			continue;
		}
		c = x->s[++j];
		switch (c) {
		case 'n':
			buf[o++] = '\n';
			break;
		case 't':
			buf[o++] = '\t';
			break;
		case 'r':
			buf[o++] = '\r';
			break;
		case 'a':
			buf[o++] = '\a';
			break;
		case 'b':
			buf[o++] = '\b';
			break;
		case 'f':
			buf[o++] = '\f';
			break;
		case 'v':
			buf[o++] = '\v';
			break;
		case '\\':
		case '\'':
		case '"':
			buf[o++] = c;
			break;
		case '\n':
			break;
		case 'x':
		case 'u':
		case 'U':
			nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
			cp = 0;
			for (int k = 0; k < nd; k++) {
				char h = j + 1 < i ? x->s[++j] : 0;
				if (!isxdigit((unsigned char)h))
					return fail_at(
					    x, j,
					    "a \\x, \\u or \\U escape without its hex digits");
				cp = cp * 16 + (unsigned long)(isdigit((unsigned char)h)
				                                   ? h - '0'
				                                   : (tolower(h) - 'a' + 10));
			}
			if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
				return fail_at(x, j,
				               "an escape that is not a Unicode scalar value");
			if (cp < 0x80) {
				buf[o++] = (char)cp;
			} else if (cp < 0x800) {
				buf[o++] = (char)(0xc0 | cp >> 6),
				buf[o++] = (char)(0x80 | (cp & 0x3f));
			} else if (cp < 0x10000) {
				buf[o++] = (char)(0xe0 | cp >> 12);
				buf[o++] = (char)(0x80 | ((cp >> 6) & 0x3f)),
				buf[o++] = (char)(0x80 | (cp & 0x3f));
			} else {
				buf[o++] = (char)(0xf0 | cp >> 18),
				buf[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
				buf[o++] = (char)(0x80 | ((cp >> 6) & 0x3f)),
				buf[o++] = (char)(0x80 | (cp & 0x3f));
			}
			break;
		case 'N':
			return fail_at(x, j - 1, "\\N{...} escapes are not supported");
		default:
			if (c >= '0' && c <= '7') {
				cp = 0;
				for (int k = 0; k < 3 && x->s[j] >= '0' && x->s[j] <= '7' && j < i;
				     k++, j++)
					cp = cp * 8 + (unsigned long)(x->s[j] - '0');
				j--;
				if (cp >= 0x80)
					return fail_at(
					    x, j, "octal escapes above \\177 are not supported");
				buf[o++] = (char)cp;
			} else { /* unknown escapes stay as written, as in Python */
				buf[o++] = '\\';
				buf[o++] = c;
			}
		}
	}
	if (!emit(x, T_STRING, start, buf, o))
		return fail_at(x, start, "out of memory");
	x->pos = i + 1;
	return 0;
}

static int lex_number(struct lexer *x)
{
	size_t start = x->pos, i = start;
	bool is_float = false;
	struct token *tk;
	char *end;

	while (i < x->n && isdigit((unsigned char)x->s[i]))
		i++;
	if (i + 1 < x->n && x->s[i] == '.' && isdigit((unsigned char)x->s[i + 1])) {
		is_float = true;
		for (i++; i < x->n && isdigit((unsigned char)x->s[i]); i++)
			;
	}
	if (i < x->n && (x->s[i] == 'e' || x->s[i] == 'E')) {
		size_t j = i + 1;
		if (j < x->n && (x->s[j] == '+' || x->s[j] == '-'))
			j++;
		if (j < x->n && isdigit((unsigned char)x->s[j])) {
			is_float = true;
			for (i = j; i < x->n && isdigit((unsigned char)x->s[i]); i++)
				;
		}
	}
	if (i < x->n && (x->s[i] == '_' || isalpha((unsigned char)x->s[i])))
		return fail_at(x, start,
		               "numbers with '_', a base prefix or a suffix are not supported");
	tk = emit(x, is_float ? T_FLOAT : T_INT, start, x->s + start, i - start);
	if (!tk)
		return fail_at(x, start, "out of memory");
	errno = 0;
	if (is_float)
		tk->f = strtod(tk->s, &end);
	else
		tk->i = strtoll(tk->s, &end, 10);
	if (errno)
		return fail_at(x, start, "a number out of range");
	x->pos = i;
	return 0;
}

/* Whether the end of the tag opened by `kind` ('%' or '{') is at x->pos;
 * consumes it with its whitespace rule. */
static bool tag_end(struct lexer *x, char kind, bool *line_starting)
{
	const char *s = x->s + x->pos, *close = kind == '%' ? "%}" : "}}";
	size_t rest = x->n - x->pos, i;

	if (rest >= 3 && s[0] == '-' && !strncmp(s + 1, close, 2)) {
		for (i = x->pos + 3; i < x->n && space(x->s[i]); i++)
			;
	} else if (kind == '%' && rest >= 3 && s[0] == '+' && !strncmp(s + 1, close, 2)) {
		i = x->pos + 3;
	} else if (rest >= 2 && !strncmp(s, close, 2)) {
		i = x->pos + 2;
		if (kind == '%' && i < x->n && x->s[i] == '\n') /* trim_blocks */
			i++;
	} else {
		return false;
	}
	*line_starting = x->s[i - 1] == '\n';
	x->pos = i;
	return true;
}

static const char *const ops2[] = {"//", "**", "==", "!=", ">=", "<=", NULL};
static const char ops1[] = "+-/*%~[](){}><=.:|,";

/* The tokens inside a {% %} or {{ }} tag, up to its end. */
static int lex_tag(struct lexer *x, char kind, size_t open, bool *line_starting)
{
	int depth = 0;

	for (;;) {
		char c;

		while (x->pos < x->n && space(x->s[x->pos]))
			x->pos++;
		if (x->pos >= x->n)
			return fail_at(x, open,
			               kind == '%' ? "a {% tag that is never closed"
			                           : "a {{ tag that is never closed");
		size_t end_at = x->pos;

		if (depth == 0 && tag_end(x, kind, line_starting))
			return emit(x, kind == '%' ? T_BLOCK_END : T_VAR_END, end_at, "", 0)
			           ? 0
			           : fail_at(x, open, "out of memory");
		c = x->s[x->pos];
		if (c == '\'' || c == '"') {
			if (lex_string(x))
				return -1;
		} else if (isdigit((unsigned char)c)) {
			if (lex_number(x))
				return -1;
		} else if (isalpha((unsigned char)c) || c == '_') {
			size_t i = x->pos;
			while (i < x->n && (isalnum((unsigned char)x->s[i]) || x->s[i] == '_'))
				i++;
			if (!emit(x, T_NAME, x->pos, x->s + x->pos, i - x->pos))
				return fail_at(x, x->pos, "out of memory");
			x->pos = i;
		} else {
			size_t len = 0;
			for (int k = 0; ops2[k]; k++)
				if (x->pos + 1 < x->n && !strncmp(x->s + x->pos, ops2[k], 2))
					len = 2;
			if (!len && strchr(ops1, c) && c)
				len = 1;
			if (!len)
				return fail_at(x, x->pos,
				               "a character that is not part of Jinja's syntax");
			if (len == 1 && (c == '(' || c == '[' || c == '{'))
				depth++;
			if (len == 1 && (c == ')' || c == ']' || c == '}')) {
				if (depth == 0)
					return fail_at(x, x->pos,
					               "a closing bracket with no opening one");
				depth--;
			}
			if (!emit(x, T_OP, x->pos, x->s + x->pos, len))
				return fail_at(x, x->pos, "out of memory");
			x->pos += len;
		}
	}
}

/* Whether `{%` at pos opens a raw block, which this subset lacks. */
static bool is_raw(const struct lexer *x, size_t pos)
{
	size_t i = pos + 2;

	if (i < x->n && (x->s[i] == '-' || x->s[i] == '+'))
		i++;
	while (i < x->n && space(x->s[i]))
		i++;
	return x->n - i >= 3 && !strncmp(x->s + i, "raw", 3) &&
	       (i + 3 >= x->n || !(isalnum((unsigned char)x->s[i + 3]) || x->s[i + 3] == '_'));
}

int jinja_lex(struct arena *a, const char *src, size_t len, struct tokens *out, struct jerr *e)
{
	struct lexer x = {.a = a, .out = out, .e = e, .line = 1, .col = 1};
	bool line_starting = true;
	char *s = arena_alloc(a, len + 1);
	size_t n = 0;

	memset(out, 0, sizeof *out);
	if (!s)
		return jfail(e, 0, 0, "out of memory");
	for (size_t i = 0; i < len; i++) { /* \r\n and \r become \n */
		if (src[i] == '\r') {
			s[n++] = '\n';
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
		} else {
			s[n++] = src[i];
		}
	}
	if (n && s[n - 1] == '\n') /* keep_trailing_newline=False */
		n--;
	s[n] = '\0';
	x.s = s, x.n = n;

	while (x.pos < x.n) {
		const char *next = NULL;
		size_t tag, tlen, tstart = x.pos;
		char kind, sign;

		for (const char *p = x.s + x.pos; (p = memchr(p, '{', (size_t)(x.s + x.n - p)));
		     p++) {
			if (p + 1 < x.s + x.n && (p[1] == '{' || p[1] == '%' || p[1] == '#')) {
				next = p;
				break;
			}
		}
		if (!next) {
			if (!emit(&x, T_DATA, x.pos, x.s + x.pos, x.n - x.pos))
				return jfail(e, 0, 0, "out of memory");
			break;
		}
		tag = (size_t)(next - x.s);
		kind = next[1];
		sign = tag + 2 < x.n ? x.s[tag + 2] : 0;
		if (sign != '-' && sign != '+')
			sign = 0;
		if (kind == '{' && sign == '+')
			sign = 0; /* "{{+" is "{{" then a unary plus */
		if (kind == '%' && is_raw(&x, tag))
			return fail_at(&x, tag, "{% raw %} is not supported");
		/* the text before the tag, its whitespace control applied */
		tlen = tag - tstart;
		if (sign == '-') {
			while (tlen && space(x.s[tstart + tlen - 1]))
				tlen--;
		} else if (sign != '+' && kind != '{') { /* lstrip_blocks */
			size_t l = tlen;
			while (l && x.s[tstart + l - 1] != '\n')
				l--;
			if (l > 0 || line_starting) {
				size_t k = l;
				while (k < tlen && space(x.s[tstart + k]))
					k++;
				if (k == tlen)
					tlen = l;
			}
		}
		if (tlen && !emit(&x, T_DATA, tstart, x.s + tstart, tlen))
			return jfail(e, 0, 0, "out of memory");
		x.pos = tag + 2 + (sign ? 1 : 0);
		if (kind == '#') {
			const char *end = memmem(x.s + x.pos, x.n - x.pos, "#}", 2);
			size_t i;

			if (!end)
				return fail_at(&x, tag, "a {# comment that is never closed");
			i = (size_t)(end - x.s) + 2;
			if (end > x.s + x.pos && end[-1] == '-') {
				while (i < x.n && space(x.s[i]))
					i++;
			} else if (!(end > x.s + x.pos && end[-1] == '+') && i < x.n &&
			           x.s[i] == '\n') {
				i++;
			}
			line_starting = x.s[i - 1] == '\n';
			x.pos = i;
			continue;
		}
		if (!emit(&x, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, tag, "", 0))
			return jfail(e, 0, 0, "out of memory");
		if (lex_tag(&x, kind, tag, &line_starting))
			return -1;
	}
	if (!emit(&x, T_EOF, x.n, "", 0))
		return jfail(e, 0, 0, "out of memory");
	return 0;
}
