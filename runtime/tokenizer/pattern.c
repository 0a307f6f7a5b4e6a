/* `tokenizers` compiles a Split pattern with Oniguruma (Ruby syntax); we run
 * it through PCRE2 with PCRE2_UTF | PCRE2_UCP. Three differences matter for
 * the Llama 3 and Qwen2 patterns, and this file rewrites the pattern so that
 * both engines split the same way (checked over every code point against
 * tokenizers 0.23):
 *  - \s: Oniguruma's is the Unicode White_Space property; PCRE2's also
 *    matches U+180E MONGOLIAN VOWEL SEPARATOR (a format character since
 *    Unicode 6.3). \s and \S become explicit White_Space classes.
 *  - \p{L}, \p{N}: Oniguruma in tokenizers 0.23 has Unicode 16 tables,
 *    PCRE2 10.42 Unicode 14. The letters and digits added in 15.0-16.0
 *    (CJK extensions H and I, Kawi, Garay, Kirat Rai, ...) are added as
 *    ranges; with a newer PCRE2 they are merely redundant.
 *  - "." excludes only \n in Oniguruma, whatever newline convention PCRE2
 *    was built with.
 * Constructs whose meaning differs and that no known tokenizer uses (\h is a
 * hex digit in Oniguruma, \w, \d, \b, anchors, nested classes ...) are
 * refused rather than guessed. Other \p{..} properties are passed on as they
 * are: code points new since Unicode 14 may be classified differently. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tokenizer/internal.h"

#define WHITE_SPACE                                                                                \
	"\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"       \
	"\\x{202F}\\x{205F}\\x{3000}"

/* Code points that tokenizers 0.23 puts in \p{L} / \p{N} and Unicode 14
 * leaves unassigned: found by matching each code point with `tokenizers`'
 * Split(Regex("\p{L}")) and comparing with PCRE2 10.42. */
static const uint32_t new_letters[][2] = {
    {0x1C89, 0x1C8A},   {0xA7CB, 0xA7CD},   {0xA7DA, 0xA7DC},   {0x105C0, 0x105F3},
    {0x10D4A, 0x10D65}, {0x10D6F, 0x10D85}, {0x10EC2, 0x10EC4}, {0x1123F, 0x11240},
    {0x11380, 0x11389}, {0x1138B, 0x1138B}, {0x1138E, 0x1138E}, {0x11390, 0x113B5},
    {0x113B7, 0x113B7}, {0x113D1, 0x113D1}, {0x113D3, 0x113D3}, {0x11BC0, 0x11BE0},
    {0x11F02, 0x11F02}, {0x11F04, 0x11F10}, {0x11F12, 0x11F33}, {0x1342F, 0x1342F},
    {0x13441, 0x13446}, {0x13460, 0x143FA}, {0x16100, 0x1611D}, {0x16D40, 0x16D6C},
    {0x18CFF, 0x18CFF}, {0x1B132, 0x1B132}, {0x1B155, 0x1B155}, {0x1DF25, 0x1DF2A},
    {0x1E030, 0x1E06D}, {0x1E4D0, 0x1E4EB}, {0x1E5D0, 0x1E5ED}, {0x1E5F0, 0x1E5F0},
    {0x2B739, 0x2B739}, {0x2EBF0, 0x2EE5D}, {0x31350, 0x323AF},
};
static const uint32_t new_numbers[][2] = {
    {0x10D40, 0x10D49}, {0x116D0, 0x116E3}, {0x11BF0, 0x11BF9}, {0x11F50, 0x11F59},
    {0x16130, 0x16139}, {0x16D70, 0x16D79}, {0x1CCF0, 0x1CCF9}, {0x1D2C0, 0x1D2D3},
    {0x1E4F0, 0x1E4F9}, {0x1E5F1, 0x1E5FA},
};

struct out {
	char *v;
	size_t n, cap;
	bool oom;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->oom)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (o->n + (size_t)n + 1 > o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 256;
		char *v;

		while (cap < o->n + (size_t)n + 1)
			cap *= 2;
		v = realloc(o->v, cap);
		if (!v) {
			o->oom = true;
			return;
		}
		o->v = v;
		o->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(o->v + o->n, o->cap - o->n, fmt, ap);
	va_end(ap);
	o->n += (size_t)n;
}

static void put_ranges(struct out *o, const uint32_t (*r)[2], size_t n)
{
	for (size_t i = 0; i < n; i++)
		put(o, "\\x{%X}-\\x{%X}", r[i][0], r[i][1]);
}

/* \p{..} / \P{..} / \pX at p (pointing at the 'p' or 'P'); returns the
 * bytes consumed after the backslash, 0 on a malformed property. */
static size_t property(struct out *o, const char *p, bool in_class, char *why, size_t whylen)
{
	bool neg = *p == 'P';
	const char *name = p + 1, *end;
	size_t used;

	if (*name == '{') {
		end = strchr(++name, '}');
		if (!end)
			return 0;
		used = (size_t)(end + 1 - p);
	} else {
		if (!*name)
			return 0;
		end = name + 1;
		used = 2;
	}
	if (*name == '^') {
		neg = !neg;
		name++;
	}
	size_t len = (size_t)(end - name);
	bool letter = len == 1 && *name == 'L', number = len == 1 && *name == 'N';
	if (!letter && !number) {
		put(o, "\\%.*s", (int)used, p);
		return used;
	}
	if (in_class && neg) {
		snprintf(why, whylen, "a negated \\p{%c} inside [...] is not supported", *name);
		return 0;
	}
	if (!in_class)
		put(o, neg ? "[^" : "[");
	put(o, "\\p{%c}", *name);
	if (letter)
		put_ranges(o, new_letters, sizeof(new_letters) / sizeof(new_letters[0]));
	else
		put_ranges(o, new_numbers, sizeof(new_numbers) / sizeof(new_numbers[0]));
	if (!in_class)
		put(o, "]");
	return used;
}

/* One escape at p (just after the backslash); returns bytes consumed, 0 to refuse. */
static size_t escape(struct out *o, const char *p, bool in_class, char *why, size_t whylen)
{
	char c = *p;

	if (!c) {
		snprintf(why, whylen, "the pattern ends with a backslash");
		return 0;
	}
	if (c == 's') {
		put(o, in_class ? WHITE_SPACE : "[" WHITE_SPACE "]");
		return 1;
	}
	if (c == 'S') {
		if (in_class) {
			snprintf(why, whylen, "\\S inside [...] is not supported");
			return 0;
		}
		put(o, "[^" WHITE_SPACE "]");
		return 1;
	}
	if (c == 'p' || c == 'P') {
		size_t used = property(o, p, in_class, why, whylen);

		if (!used && !why[0])
			snprintf(why, whylen, "malformed \\%c property", c);
		return used;
	}
	if (c == 'v') { /* a vertical tab to Oniguruma, a class to PCRE2 */
		put(o, "\\x0B");
		return 1;
	}
	if (c == 'u') {
		unsigned v;
		int n = 0;

		if (sscanf(p + 1, "%4x%n", &v, &n) != 1 || n != 4) {
			snprintf(why, whylen, "malformed \\u escape");
			return 0;
		}
		put(o, "\\x{%X}", v);
		return 5;
	}
	if (strchr("tnrfaex", c) || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	                              (c >= '0' && c <= '9') || (unsigned char)c >= 0x80)) {
		put(o, "\\%c", c); /* a literal, or the start of \x.. (its digits copy as text) */
		return 1;
	}
	snprintf(why, whylen,
	         "\\%c is not supported (its meaning differs between Oniguruma and PCRE2)", c);
	return 0;
}

char *rl_tok_translate_pattern(const char *p, char *why, size_t whylen)
{
	struct out o = {0};
	bool in_class = false;

	why[0] = 0;
	put(&o, "%s", "");
	for (size_t i = 0; p[i] && !why[0];) {
		char c = p[i];

		if (c == '\\') {
			size_t used = escape(&o, p + i + 1, in_class, why, whylen);

			i += 1 + used;
			continue;
		}
		if (in_class) {
			if (c == ']') {
				in_class = false;
			} else if (c == '[' && p[i + 1] == ':') {
				const char *end = strstr(p + i, ":]");

				if (!end)
					break;
				put(&o, "%.*s", (int)(end + 2 - (p + i)), p + i);
				i = (size_t)(end + 2 - p);
				continue;
			} else if (c == '[' || (c == '&' && p[i + 1] == '&')) {
				snprintf(why, whylen,
				         "nested classes and && in [...] are not supported");
				break;
			}
			put(&o, "%c", c);
			i++;
			continue;
		}
		if (c == '[') {
			in_class = true;
			put(&o, "[");
			i++;
			if (p[i] == '^')
				put(&o, "%c", p[i++]);
			if (p[i] == ']')
				put(&o, "%c", p[i++]); /* a leading ] is a literal */
			continue;
		}
		if (c == '^' || c == '$') {
			snprintf(why, whylen,
			         "anchors (^ and $ match at every line in Oniguruma) are "
			         "not supported");
			break;
		}
		if (c == '.')
			put(&o, "[^\\n]");
		else
			put(&o, "%c", c);
		i++;
	}
	if (!why[0] && in_class)
		snprintf(why, whylen, "unterminated [...]");
	if (!why[0] && o.oom)
		snprintf(why, whylen, "out of memory");
	if (why[0]) {
		free(o.v);
		return NULL;
	}
	return o.v;
}
