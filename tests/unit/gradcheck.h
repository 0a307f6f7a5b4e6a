/* Finite-difference gradient checks for fp32 ops, for Criterion tests.
 *
 * The op's backward is checked through a scalar loss L = sum(out * R) for a
 * fixed random R: the backward run with dout = R gives dL/dx, and
 * gc_check() compares each (sampled) element of it with the central
 * difference (L(x + h) - L(x - h)) / (2h), where L is recomputed by a
 * callback that runs the op's forward on the current inputs. The loss is
 * summed in double (gc_dot), the step is taken on the fp32 input and the
 * quotient uses the step that fp32 could represent, so the only fp32 noise
 * left is the forward's own rounding.
 *
 *	struct my_ctx c = {...};        // inputs, output buffer, R
 *	double loss(void *p) { struct my_ctx *c = p; op_forward(c->out, c->x, ...);
 *	                       return gc_dot(c->out, c->r, c->n_out); }
 *	gc_fill(&seed, grad, n, -1, 1);  // backward ops add: prefill, then
 *	memcpy(before, grad, ...);       // compare the difference
 *	op_backward(grad, c.r, ...);
 *	gc_sub(grad, before, n);
 *	gc_check("x", c.x, n, grad, loss, &c, NULL);   // NULL: gc_default_opts()
 *
 * Tolerance: |fd - g| <= rtol |g| + atol max_i |g_i| (atol is relative to
 * the largest analytic entry, so the check is scale-free and a component
 * near zero is held to the scale of the whole gradient). With h = 1e-2 the
 * truncation error is ~h^2 f''' and the fp32 noise ~1e-7 |L| / h, so the
 * defaults suit inputs and outputs of order one; a wrong factor, sign or
 * index misses by far more. An analytic gradient that is all zero fails:
 * it almost always means a backward that wrote nothing. */
#ifndef RL_TESTS_GRADCHECK_H
#define RL_TESTS_GRADCHECK_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <criterion/criterion.h>

struct gc_opts {
	double h;          /* step, relative: h * max(1, |x_i|) */
	double rtol;       /* relative to |analytic_i| */
	double atol;       /* relative to max_i |analytic_i| */
	size_t max_points; /* a larger input is checked at this many evenly spaced indices */
};

/* h = 1e-2, rtol = 1e-2, atol = 2e-3, 200 points */
static inline struct gc_opts gc_default_opts(void)
{
	return (struct gc_opts){.h = 1e-2, .rtol = 1e-2, .atol = 2e-3, .max_points = 200};
}

/* Runs the forward on the current inputs and returns L (in double). */
typedef double (*gc_loss_fn)(void *ctx);

/* xorshift32: the same numbers on every libc, unlike rand(). */
static inline uint32_t gc_rng(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

static inline float gc_uniform(uint32_t *s, float lo, float hi)
{
	return lo + (hi - lo) * (float)(gc_rng(s) >> 8) * (1.0f / 16777216.0f);
}

static inline void gc_fill(uint32_t *s, float *v, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		v[i] = gc_uniform(s, lo, hi);
}

/* sum(out * r) in double */
static inline double gc_dot(const float *out, const float *r, size_t n)
{
	double s = 0.0;

	for (size_t i = 0; i < n; i++)
		s += (double)out[i] * (double)r[i];
	return s;
}

/* g -= before: what an accumulating backward added. */
static inline void gc_sub(float *g, const float *before, size_t n)
{
	for (size_t i = 0; i < n; i++)
		g[i] -= before[i];
}

/* Compares grad (dL/dx, n entries) with central differences of loss(ctx)
 * taken by perturbing x in place; x is restored bit for bit and loss(ctx)
 * is run once more, so the forward's outputs (and any state it saves for the
 * backward) are those of the unperturbed inputs again. Failures are
 * reported through cr_expect (the first ten individually); returns their
 * count. o == NULL means gc_default_opts(). */
static inline int gc_check(const char *what, float *x, size_t n, const float *grad, gc_loss_fn loss,
                           void *ctx, const struct gc_opts *o)
{
	struct gc_opts def = gc_default_opts();

	if (!o)
		o = &def;

	size_t points = n < o->max_points ? n : o->max_points;
	double gmax = 0.0, worst = 0.0;
	int fails = 0;

	for (size_t i = 0; i < n; i++)
		gmax = fmax(gmax, fabs((double)grad[i]));
	for (size_t k = 0; k < points; k++) {
		/* evenly spaced, first and last included */
		size_t i = points > 1 ? k * (n - 1) / (points - 1) : 0;
		float x0 = x[i];
		double step = o->h * fmax(1.0, fabs((double)x0));
		float xp = (float)((double)x0 + step), xm = (float)((double)x0 - step);

		x[i] = xp;
		double lp = loss(ctx);
		x[i] = xm;
		double lm = loss(ctx);
		x[i] = x0;

		double fd = (lp - lm) / ((double)xp - (double)xm);
		double err = fabs(fd - (double)grad[i]);
		double tol = o->rtol * fabs((double)grad[i]) + o->atol * gmax;

		if (tol > 0)
			worst = fmax(worst, err / tol);
		if (err > tol || isnan(err)) {
			if (fails < 10)
				cr_expect(0, "%s[%zu]: analytic %.9g, finite difference %.9g", what,
				          i, (double)grad[i], fd);
			fails++;
		}
	}
	loss(ctx);
	cr_expect(fails == 0, "%s: %d of %zu points off (max |g| %.3g)", what, fails, points, gmax);
	cr_expect(gmax > 0.0 || n == 0, "%s: the analytic gradient is all zero", what);
	cr_log_info("%s: %zu points, worst error %.3f of tolerance", what, points, worst);
	return fails;
}

#endif
