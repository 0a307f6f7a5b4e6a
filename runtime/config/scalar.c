#include "runtime/config/scalar.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool one_of(const char *s, const char *const *words)
{
	for (; *words; words++)
		if (strcmp(s, *words) == 0)
			return true;
	return false;
}

bool rl_scalar_null_text(const char *text)
{
	static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
	return one_of(text, nulls);
}

bool rl_scalar_bool(const char *text, bool *out)
{
	static const char *const t[] = {"true", "True", "TRUE", NULL};
	static const char *const f[] = {"false", "False", "FALSE", NULL};
	if (one_of(text, t))
		*out = true;
	else if (one_of(text, f))
		*out = false;
	else
		return false;
	return true;
}

bool rl_scalar_int(const char *text, int64_t *out)
{
	const char *digits = text + (*text == '-' || *text == '+');
	if (*digits < '0' || *digits > '9')
		return false;
	errno = 0;
	char *end;
	long long v = strtoll(text, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

bool rl_scalar_float(const char *text, double *out)
{
	static const char *const pinf[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL};
	static const char *const ninf[] = {"-.inf", "-.Inf", "-.INF", NULL};
	if (one_of(text, pinf)) {
		*out = INFINITY;
		return true;
	}
	if (one_of(text, ninf)) {
		*out = -INFINITY;
		return true;
	}
	/* strtod also reads hex, "inf" and "nan": only decimal notation is a
	 * YAML number, and it must start like one. */
	const char *p = text + (*text == '-' || *text == '+');
	if (!((*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9')))
		return false;
	if (strpbrk(text, "xXnNiI"))
		return false;
	errno = 0;
	char *end;
	double v = strtod(text, &end);
	if (*end || (errno == ERANGE && isinf(v)) || isnan(v))
		return false;
	*out = v;
	return true;
}

bool rl_scalar_needs_quotes(const char *text)
{
	bool b;
	double f;
	return rl_scalar_null_text(text) || rl_scalar_bool(text, &b) || rl_scalar_float(text, &f) ||
	       strstr(text, "${") != NULL;
}
