/* Buffers and comparisons for the op tests (test_ops_grad, test_linear,
 * test_logprobs, test_attention, test_rope, test_rmsnorm); random data comes
 * from gradcheck.h's xorshift32, so every test draws the same numbers on
 * every libc.
 * defines: falloc, dalloc, frand, fdup, widen, absmax, close_all, expect_close */
#ifndef RL_TESTS_OPS_TEST_UTIL_H
#define RL_TESTS_OPS_TEST_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tests/unit/gradcheck.h"

/* n zeroed floats; n == 0 still gives a pointer that free() takes */
static inline float *falloc(size_t n)
{
	float *v = calloc(n ? n : 1, sizeof(*v));

	cr_assert_not_null(v);
	return v;
}

static inline double *dalloc(size_t n)
{
	double *v = calloc(n ? n : 1, sizeof(*v));

	cr_assert_not_null(v);
	return v;
}

/* n floats uniform in [lo, hi) */
static inline float *frand(uint32_t *s, size_t n, float lo, float hi)
{
	float *v = falloc(n);

	gc_fill(s, v, n, lo, hi);
	return v;
}

static inline float *fdup(const float *src, size_t n)
{
	float *v = falloc(n);

	memcpy(v, src, n * sizeof(*v));
	return v;
}

/* a double copy of n floats */
static inline double *widen(const float *x, size_t n)
{
	double *d = dalloc(n);

	for (size_t i = 0; i < n; i++)
		d[i] = x[i];
	return d;
}

static inline double absmax(const double *v, size_t n)
{
	double m = 0.0;

	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs(v[i]));
	return m;
}

/* |got - want| <= rtol |want| + atol, counted; the first few are printed */
static inline int close_all(const char *what, const float *got, const double *want, size_t n,
                            double rtol, double atol)
{
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (fabs((double)got[i] - want[i]) <= rtol * fabs(want[i]) + atol)
			continue;
		if (bad++ < 5)
			cr_expect(0, "%s[%zu]: got %.9g, want %.9g", what, i, (double)got[i],
			          want[i]);
	}
	cr_expect(bad == 0, "%s: %d of %zu off", what, bad, n);
	return bad;
}

/* one element: |got - want| <= rtol |want| + atol */
static inline void expect_close(const char *what, size_t i, double got, double want, double rtol,
                                double atol)
{
	cr_expect(fabs(got - want) <= rtol * fabs(want) + atol, "%s[%zu]: got %.9g, want %.9g",
	          what, i, got, want);
}

#endif
