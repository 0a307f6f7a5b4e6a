/* Math answers: extraction of the final answer, a LaTeX-aware normaliser and
 * an exact rational comparison. The rules follow the usual GSM8K / MATH
 * graders (boxed answer first, last number otherwise); comparing rationals
 * exactly instead of floats keeps 0.1 + 0.2 style surprises out of rewards. */
#define _GNU_SOURCE
#include "runtime/reward/math_answer.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Deeper nesting than this is copied verbatim, so that hostile text cannot
 * exhaust the stack of the recursive normaliser. */
#define MAX_DEPTH 32

/* Products of two 64-bit values, exact. */
__extension__ typedef __int128 i128;

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* close[i]: the index just past the '}' that closes the '{' at i, 0 when
 * none does (and for every other character). One pass with a stack keeps
 * degenerate text ("\boxed{" repeated) linear. Escaped braces (\{ \}) are
 * set notation, not grouping. NULL when out of memory. */
static size_t *brace_table(const char *s, size_t len)
{
	size_t *close = calloc(len + 1, sizeof(*close)),
	       *stack = malloc((len + 1) * sizeof(*stack));
	size_t top = 0;

	if (!close || !stack) {
		free(close);
		free(stack);
		return NULL;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\\' && i + 1 < len)
			i++;
		else if (s[i] == '{')
			stack[top++] = i;
		else if (s[i] == '}' && top > 0)
			close[stack[--top]] = i + 1;
	}
	free(stack);
	return close;
}

/* ---- extraction ---- */

/* The content of the last closed \boxed{...} or \fbox{...}; *oom is set
 * when the brace table cannot be made. */
static bool last_boxed(const char *r, const char **begin, size_t *len, bool *oom)
{
	static const char *const cmds[] = {"\\boxed", "\\fbox"};
	size_t rlen = strlen(r);
	const char *best = NULL;
	size_t *close = NULL;

	for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
		for (const char *p = r; (p = strstr(p, cmds[c])) != NULL;) {
			const char *q = p + strlen(cmds[c]);

			if (is_alpha(*q)) { /* \boxedsomething is another command */
				p = q;
				continue;
			}
			while (*q == ' ')
				q++;
			if (*q == '{' && !close && !(close = brace_table(r, rlen))) {
				*oom = true;
				return false;
			}
			size_t open = (size_t)(q - r), end = *q == '{' ? close[open] : 0;

			if (end && (!best || p > best)) {
				best = p;
				*begin = q + 1;
				*len = end - open - 2;
			}
			p = q;
		}
	}
	free(close);
	return best != NULL;
}

/* Length of a decimal at s: digits with ",ddd" groups after a lead of at most
 * three digits, then ".digits"; or ".digits". 0 when there is none. */
static size_t scan_decimal(const char *s)
{
	size_t i = 0;

	if (s[0] == '.')
		goto fraction;
	while (is_digit(s[i]))
		i++;
	if (i == 0)
		return 0;
	if (i <= 3)
		while (s[i] == ',' && is_digit(s[i + 1]) && is_digit(s[i + 2]) &&
		       is_digit(s[i + 3]) && !is_digit(s[i + 4]))
			i += 4;
fraction:
	if (s[i] == '.' && is_digit(s[i + 1])) {
		i++;
		while (is_digit(s[i]))
			i++;
	}
	return i;
}

/* Length of one argument of \frac in a response: {decimal}, {-decimal} or
 * a single digit; 0 when it is not numeric. */
static size_t scan_frac_arg(const char *s)
{
	if (is_digit(s[0]))
		return 1;
	if (s[0] != '{')
		return 0;
	size_t i = 1 + (s[1] == '-');
	size_t d = scan_decimal(s + i);

	return d && s[i + d] == '}' ? i + d + 1 : 0;
}

/* Length of \frac{a}{b} (or \dfrac, \tfrac) with numeric arguments at s. */
static size_t scan_frac(const char *s)
{
	static const char *const names[] = {"\\frac", "\\dfrac", "\\tfrac"};

	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		size_t n = strlen(names[k]);

		if (strncmp(s, names[k], n) != 0)
			continue;
		size_t a = scan_frac_arg(s + n);
		size_t b = a ? scan_frac_arg(s + n + a) : 0;

		return b ? n + a + b : 0;
	}
	return 0;
}

static bool last_number(const char *r, const char **begin, size_t *len)
{
	bool found = false;

	for (size_t i = 0; r[i];) {
		size_t n = 0;

		if (r[i] == '\\') {
			n = scan_frac(r + i);
		} else if (i == 0 || (!is_digit(r[i - 1]) && r[i - 1] != '.')) {
			n = scan_decimal(r + i);
			if (n && r[i + n] == '/') {
				size_t d = scan_decimal(r + i + n + 1);

				n += d ? d + 1 : 0;
			}
		}
		if (n == 0) {
			i++;
			continue;
		}
		size_t start = i;

		/* A minus directly before the number is its sign unless it follows
		 * an operand ("3-5" is a difference). */
		if (i > 0 && r[i - 1] == '-' &&
		    (i == 1 || !(isalnum((unsigned char)r[i - 2]) || strchr(")}]", r[i - 2]))))
			start--;
		*begin = r + start;
		*len = i + n - start;
		found = true;
		i += n;
	}
	return found;
}

bool rl_math_extract_answer(const char *response, char *out, size_t cap)
{
	const char *begin = NULL;
	size_t len = 0;
	bool oom = false;

	if (!response || cap == 0)
		return false;
	if (!last_boxed(response, &begin, &len, &oom) &&
	    (oom || !last_number(response, &begin, &len)))
		return false;
	if (len >= cap)
		return false;
	memcpy(out, begin, len);
	out[len] = '\0';
	return true;
}

/* ---- normalisation ---- */

/* The normaliser's state: the input with its brace table, and the output. */
struct norm {
	const char *base;
	const size_t *close;
	char *out;
	size_t n, cap;
	bool overflow;
};

static void put(struct norm *nm, const char *s, size_t len)
{
	if (nm->n + len >= nm->cap) {
		nm->overflow = true;
		return;
	}
	memcpy(nm->out + nm->n, s, len);
	nm->n += len;
}

static bool name_is(const char *name, size_t nl, const char *const *list)
{
	for (; *list; list++)
		if (strlen(*list) == nl && strncmp(name, *list, nl) == 0)
			return true;
	return false;
}

static size_t skip_spaces(const char *s, size_t i, size_t len)
{
	while (i < len && isspace((unsigned char)s[i]))
		i++;
	return i;
}

/* One macro argument at s[*i] (s within nm->base, len its window): a braced
 * group (content returned) or a single token (a character or a control
 * word). */
static bool macro_arg(const struct norm *nm, const char *s, size_t *i, size_t len, const char **a,
                      size_t *alen)
{
	size_t k = skip_spaces(s, *i, len);

	if (k >= len || s[k] == '}')
		return false;
	if (s[k] == '{') {
		size_t off = (size_t)(s - nm->base), end = nm->close[off + k];

		if (!end || end - off > len)
			return false;
		end -= off;
		*a = s + k + 1;
		*alen = end - k - 2;
		*i = end;
		return true;
	}
	size_t e = k + 1;

	if (s[k] == '\\')
		while (e < len && is_alpha(s[e]))
			e++;
	*a = s + k;
	*alen = e - k;
	*i = e;
	return true;
}

static void rewrite(struct norm *nm, const char *s, size_t len, int depth);

static void put_group(struct norm *nm, const char *a, size_t alen, int depth)
{
	put(nm, "{", 1);
	rewrite(nm, a, alen, depth + 1);
	put(nm, "}", 1);
}

/* Handles the control word \name at s[i]; returns the index after what it
 * consumed. */
static size_t control_word(struct norm *nm, const char *s, size_t i, size_t len, int depth)
{
	static const char *const dropped[] = {"left", "right", "bigl",         "bigr", "Bigl",
	                                      "Bigr", "circ",  "displaystyle", NULL};
	static const char *const wrappers[] = {"text",   "textbf", "textit",     "textrm",
	                                       "mathrm", "mathbf", "mathit",     "mbox",
	                                       "textup", "mathsf", "textnormal", NULL};
	static const char *const fracs[] = {"frac", "dfrac", "tfrac", NULL};
	const char *name = s + i + 1;
	size_t j = i + 1;

	while (j < len && is_alpha(s[j]))
		j++;
	size_t nl = j - i - 1;
	const char *a, *b;
	size_t alen, blen, k = j;

	if (name_is(name, nl, dropped))
		return j;
	if (name_is(name, nl, wrappers)) {
		if (macro_arg(nm, s, &k, len, &a, &alen))
			rewrite(nm, a, alen, depth + 1);
		return k;
	}
	if (name_is(name, nl, fracs) && macro_arg(nm, s, &k, len, &a, &alen) &&
	    macro_arg(nm, s, &k, len, &b, &blen)) {
		put(nm, "\\frac", 5);
		put_group(nm, a, alen, depth);
		put_group(nm, b, blen, depth);
		return k;
	}
	/* \sqrt2 -> \sqrt{2}; \sqrt[3]{x} is left as written */
	k = skip_spaces(s, j, len);
	if (nl == 4 && strncmp(name, "sqrt", 4) == 0 && k < len && s[k] != '[' &&
	    macro_arg(nm, s, &k, len, &a, &alen)) {
		put(nm, "\\sqrt", 5);
		put_group(nm, a, alen, depth);
		return k;
	}
	put(nm, s + i, j - i);
	return j;
}

/* Rewrites s[0, len) into the output: whitespace, $ and math delimiters,
 * spacing commands, units and wrappers removed; fractions and roots in one
 * form. */
static void rewrite(struct norm *nm, const char *s, size_t len, int depth)
{
	if (depth > MAX_DEPTH) {
		put(nm, s, len);
		return;
	}
	for (size_t i = 0; i < len && !nm->overflow;) {
		char c = s[i];

		if (isspace((unsigned char)c) || c == '$' || c == '%') {
			i++;
		} else if (c == '\\' && i + 1 < len && is_alpha(s[i + 1])) {
			i = control_word(nm, s, i, len, depth);
		} else if (c == '\\') {
			/* control symbols: spacing (\! \, \; \: \ ), \% \$, and the
			 * \( \) \[ \] delimiters go; \{ \} stay */
			if (i + 1 < len && !strchr("!,;: %$()[]\t\n", s[i + 1]))
				put(nm, s + i, 2);
			i += 2;
		} else if (c == '^' && len - i >= 6 && strncmp(s + i, "^\\circ", 6) == 0) {
			i += 6;
		} else if (c == '^' && len - i >= 8 && strncmp(s + i, "^{\\circ}", 8) == 0) {
			i += 8;
		} else if (c == '{' && len - i >= 3 && strncmp(s + i, "{,}", 3) == 0) {
			put(nm, ",", 1); /* 1{,}234 */
			i += 3;
		} else if (len - i >= 2 && strncmp(s + i, "\xc2\xb0", 2) == 0) {
			i += 2; /* U+00B0 degree sign */
		} else if (len - i >= 3 && strncmp(s + i, "\xe2\x88\x92", 3) == 0) {
			put(nm, "-", 1); /* U+2212 minus sign */
			i += 3;
		} else {
			put(nm, s + i, 1);
			i++;
		}
	}
}

/* Length of an "x=" style prefix of s[0, n): a variable name (letters,
 * digits, _, or a control word such as \theta) followed by the only '=' of
 * the text; 0 when there is none. */
static size_t variable_prefix(const char *s, size_t n)
{
	size_t i = s[0] == '\\';

	if (i >= n || !is_alpha(s[i]))
		return 0;
	while (i < n && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '_'))
		i++;
	if (i + 1 >= n || s[i] != '=' || memchr(s + i + 1, '=', n - i - 1))
		return 0;
	return i + 1;
}

bool rl_math_normalize(const char *answer, char *out, size_t cap)
{
	size_t len = answer ? strlen(answer) : 0;
	struct norm nm = {answer, NULL, out, 0, cap, false};
	size_t *close = NULL;

	if (!answer || cap == 0 || !(nm.close = brace_table(answer, len)))
		return false;
	rewrite(&nm, answer, len, 0);
	free((void *)nm.close);
	if (nm.overflow)
		return false;
	/* Outer braces, trailing dots and a variable prefix, in any nesting:
	 * [b, e) shrinks; none of these removals changes how braces pair. */
	size_t b = 0, e = nm.n, p;

	if (!(close = brace_table(out, e)))
		return false;
	for (;;) {
		if (e > b && out[e - 1] == '.') {
			e--;
		} else if (e - b >= 2 && out[b] == '{' && close[b] == e) {
			b++;
			e--;
		} else if (e > b && (p = variable_prefix(out + b, e - b)) > 0) {
			b += p;
		} else {
			break;
		}
	}
	free(close);
	memmove(out, out + b, e - b);
	out[e - b] = '\0';
	return true;
}

/* ---- exact rationals ---- */

static i128 gcd128(i128 a, i128 b)
{
	if (a < 0)
		a = -a;
	if (b < 0)
		b = -b;
	while (b) {
		i128 t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* Reduces num/den into 64-bit results; false on overflow or den == 0. */
static bool reduce(i128 num, i128 den, long long *n, long long *d)
{
	if (den == 0)
		return false;
	if (den < 0) {
		num = -num;
		den = -den;
	}
	i128 g = gcd128(num, den);

	if (g > 1) {
		num /= g;
		den /= g;
	}
	if (num > (i128)LLONG_MAX || num < -(i128)LLONG_MAX || den > (i128)LLONG_MAX)
		return false;
	*n = (long long)num;
	*d = (long long)den;
	return true;
}

/* A decimal with optional thousands separators at s (length in *used). */
static bool parse_decimal(const char *s, size_t *used, long long *num, long long *den)
{
	size_t n = scan_decimal(s);
	i128 v = 0, scale = 1;
	size_t last_nonzero = 0;
	bool frac = false;

	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) /* trailing fractional zeros change nothing */
		if (s[i] == '.')
			frac = true;
		else if (!frac || s[i] != '0')
			last_nonzero = i + 1;
	frac = false;
	for (size_t i = 0; i < (last_nonzero ? last_nonzero : n); i++) {
		if (s[i] == ',')
			continue;
		if (s[i] == '.') {
			frac = true;
			continue;
		}
		v = v * 10 + (s[i] - '0');
		if (frac)
			scale *= 10;
		if (v > (i128)LLONG_MAX || scale > (i128)LLONG_MAX)
			return false;
	}
	*used = n;
	return reduce(v, scale, num, den);
}

/* Divides n1/d1 by n2/d2, sign applied, into *num / *den. */
static bool divide(bool neg, long long n1, long long d1, long long n2, long long d2, long long *num,
                   long long *den)
{
	i128 n = (i128)n1 * d2, d = (i128)d1 * n2;

	return n2 != 0 && reduce(neg ? -n : n, d, num, den);
}

/* [+-] decimal [/ decimal] at s; length in *used. */
static bool parse_simple(const char *s, size_t *used, long long *num, long long *den)
{
	size_t i = (s[0] == '-' || s[0] == '+'), a, b;
	long long n1, d1, n2 = 1, d2 = 1;

	if (!parse_decimal(s + i, &a, &n1, &d1))
		return false;
	i += a;
	if (s[i] == '/') {
		if (!parse_decimal(s + i + 1, &b, &n2, &d2))
			return false;
		i += 1 + b;
	}
	*used = i;
	return divide(s[0] == '-', n1, d1, n2, d2, num, den);
}

/* {simple} at s; length in *used. Nested fractions are compared as text. */
static bool parse_group(const char *s, size_t *used, long long *num, long long *den)
{
	size_t n;

	if (s[0] != '{' || !parse_simple(s + 1, &n, num, den) || s[1 + n] != '}')
		return false;
	*used = n + 2;
	return true;
}

/* simple | [+-] \frac{simple}{simple} */
static bool parse_signed(const char *s, size_t *used, long long *num, long long *den)
{
	size_t i = (s[0] == '-' || s[0] == '+'), a, b;
	long long n1, d1, n2, d2;

	if (strncmp(s + i, "\\frac", 5) != 0)
		return parse_simple(s, used, num, den);
	if (!parse_group(s + i + 5, &a, &n1, &d1) || !parse_group(s + i + 5 + a, &b, &n2, &d2))
		return false;
	*used = i + 5 + a + b;
	return divide(s[0] == '-', n1, d1, n2, d2, num, den);
}

bool rl_math_parse_rational(const char *norm, long long *num, long long *den)
{
	size_t used;

	return norm && parse_signed(norm, &used, num, den) && norm[used] == '\0';
}

/* ---- comparison and rewards ---- */

int rl_math_answers_equal(const char *given, const char *expected)
{
	if (!given || !expected)
		return -1;
	size_t cg = 2 * strlen(given) + 16, ce = 2 * strlen(expected) + 16;
	char *g = malloc(cg), *e = malloc(ce);
	int ret = -1;
	long long gn, gd, en, ed;

	if (!g || !e || !rl_math_normalize(given, g, cg) || !rl_math_normalize(expected, e, ce) ||
	    !g[0] || !e[0])
		goto out;
	if (rl_math_parse_rational(g, &gn, &gd) && rl_math_parse_rational(e, &en, &ed))
		ret = gn == en && gd == ed;
	else
		ret = strcmp(g, e) == 0;
out:
	free(g);
	free(e);
	return ret;
}

double rl_reward_math(const char *response, const char *expected, bool *failed)
{
	bool fail = true;
	double reward = 0.0;

	if (response && expected) {
		size_t cap = strlen(response) + 1;
		char *ans = malloc(cap);

		if (ans && rl_math_extract_answer(response, ans, cap)) {
			int eq = rl_math_answers_equal(ans, expected);

			fail = eq < 0;
			reward = eq == 1 ? 1.0 : 0.0;
		}
		free(ans);
	}
	if (failed)
		*failed = fail;
	return reward;
}

static void trim(const char **s, size_t *len)
{
	*len = strlen(*s);
	while (*len && isspace((unsigned char)**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len && isspace((unsigned char)(*s)[*len - 1]))
		(*len)--;
}

double rl_reward_exact(const char *response, const char *expected)
{
	size_t rl, el;

	if (!response || !expected)
		return 0.0;
	trim(&response, &rl);
	trim(&expected, &el);
	return rl == el && memcmp(response, expected, rl) == 0 ? 1.0 : 0.0;
}
