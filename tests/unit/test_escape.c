/* Validation samples on one terminal line: the escapes, against strings
 * written out by hand. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/logger/escape.h"

static char *escaped(const char *s)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&buf, &n);

	rl_fputs_escaped(s, m);
	fclose(m);
	return buf;
}

Test(escape, controls_shown_as_in_c)
{
	const struct {
		const char *in, *out;
	} cases[] = {
	    {"2+2=4", "2+2=4"},
	    {"line one\nline two", "line one\\nline two"},
	    {"a\tb\r\n", "a\\tb\\r\\n"},
	    {"\x1b[2Jcleared", "\\x1b[2Jcleared"},
	    {"bell\x07 del\x7f", "bell\\x07 del\\x7f"},
	    {"\\frac{1}{2}", "\\frac{1}{2}"},                         /* LaTeX stays readable */
	    {"caf\xc3\xa9 \xe2\x8f\x8e", "caf\xc3\xa9 \xe2\x8f\x8e"}, /* UTF-8 as it is */
	    {"", ""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char *got = escaped(cases[i].in);
		cr_assert_str_eq(got, cases[i].out, "case %zu", i);
		free(got);
	}
}
