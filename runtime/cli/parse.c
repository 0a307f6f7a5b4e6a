/* Strict number parsing for the command line: the whole argument must be
 * the number, within range, or the option is named in the error. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/cli/parse.h"

int rl_parse_long(const char *opt, const char *text, long lo, long hi, long *out, char *err,
                  size_t errlen)
{
	char *end;

	errno = 0;
	long v = strtol(text, &end, 10);
	if (end == text || *end || errno || v < lo || v > hi) {
		snprintf(err, errlen, "%s: '%s' is not an integer in [%ld, %ld]", opt, text, lo,
		         hi);
		return -1;
	}
	*out = v;
	return 0;
}

int rl_parse_float(const char *opt, const char *text, double lo, double hi, float *out, char *err,
                   size_t errlen)
{
	char *end;

	errno = 0;
	double v = strtod(text, &end);
	if (end == text || *end || errno || !isfinite(v) || v < lo || v > hi) {
		snprintf(err, errlen, "%s: '%s' is not a number in [%g, %g]", opt, text, lo, hi);
		return -1;
	}
	*out = (float)v;
	return 0;
}

int rl_parse_ids(const char *opt, const char *text, int32_t **ids, size_t *n, char *err,
                 size_t errlen)
{
	size_t cap = 16, count = 0;
	int32_t *v = malloc(cap * sizeof *v);
	const char *p = text;

	if (!v) {
		snprintf(err, errlen, "%s: out of memory", opt);
		return -1;
	}
	while (*p) {
		char *end;

		while (*p == ' ')
			p++;
		errno = 0;
		long x = strtol(p, &end, 10);
		if (end == p || errno || x < 0 || x > INT32_MAX) {
			goto bad_list;
		}
		if (count == cap) {
			int32_t *w = realloc(v, 2 * cap * sizeof *w);
			if (!w) {
				free(v);
				snprintf(err, errlen, "%s: out of memory", opt);
				return -1;
			}
			v = w;
			cap *= 2;
		}
		v[count++] = (int32_t)x;
		p = end;
		while (*p == ' ')
			p++;
		if (*p == ',' && p[1])
			p++;
		else if (*p)
			goto bad_list;
	}
	if (!count) {
		snprintf(err, errlen, "%s: the list of token ids is empty", opt);
		free(v);
		return -1;
	}
	*ids = v;
	*n = count;
	return 0;
bad_list:
	snprintf(err, errlen,
	         "%s: '%s' is not a comma-separated list of token ids (at character %zu)", opt,
	         text, (size_t)(p - text) + 1);
	free(v);
	return -1;
}
