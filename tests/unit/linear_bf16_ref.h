/* The reference the bf16 linear tests share (the CPU op's test and the CUDA
 * op's): random bf16 operands, and each output checked against the exact
 * sum, taken in double over the same bf16 values, within a bound from the
 * arithmetic.
 *
 * The bound. bf16 products are exact in fp32, so an op's fp32 sum s of k
 * terms (the products, and the bias or the old dx) is within gamma(k) mag
 * of the exact sum r, mag being the sum of the terms' sizes and
 * gamma(k) = k u / (1 - k u) with u = 2^-24 (Higham, Accuracy and
 * Stability of Numerical Algorithms, 2nd ed., 3.1; an FMA only tightens
 * it). Tensor cores accumulate without rounding to nearest (Fasi et al.,
 * "Numerical behavior of NVIDIA tensor cores", 2021: truncation, no guard
 * bits), which doubles u: the callers' `slack` of 2. Rounding s once to
 * bf16 (unit roundoff 2^-8) adds at most 2^-8 |s|, so
 *	|got - r| <= 2^-8 |r| + (1 + 2^-8) slack gamma(k) mag;
 * an fp32 output keeps the second term alone. A wrong index, transpose,
 * type or rounding point costs of the order of |r| or mag itself.
 * defines: struct lin16_case, lin16_make, lin16_free, lin16_forward_bad,
 * lin16_backward_bad, lin16_bits, lin16_copy */
#ifndef RL_TESTS_LINEAR_BF16_REF_H
#define RL_TESTS_LINEAR_BF16_REF_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/buf.h"
#include "tests/unit/ops_test_util.h"

static inline double lin16_gamma(int k)
{
	double ku = (double)k * 0x1p-24;

	return ku / (1.0 - ku);
}

/* n bf16 values uniform in [lo, hi): the bits, and their fp32 values in
 * *values */
static inline uint16_t *lin16_bits(uint32_t *seed, size_t n, float lo, float hi, float **values)
{
	float *f = frand(seed, n, lo, hi);
	uint16_t *h = (uint16_t *)malloc(n ? n * sizeof *h : 1);

	cr_assert_not_null(h);
	for (size_t i = 0; i < n; i++) {
		h[i] = rl_f32_to_bf16(f[i]);
		f[i] = rl_bf16_to_f32(h[i]);
	}
	*values = f;
	return h;
}

/* a malloc'd copy of n bf16 values */
static inline uint16_t *lin16_copy(const uint16_t *h, size_t n)
{
	uint16_t *c = (uint16_t *)malloc(n ? n * sizeof *c : 1);

	cr_assert_not_null(c);
	memcpy(c, h, n * sizeof *c);
	return c;
}

static inline double lin16_value(struct rl_cbuf b, size_t i)
{
	return b.t == RL_BF16 ? rl_bf16_to_f32(((const uint16_t *)b.p)[i])
	                      : ((const float *)b.p)[i];
}

/* got within the bound of r, for an output of type t */
static inline int lin16_within(enum rl_dtype t, double got, double r, double mag, int k,
                               double slack)
{
	double g = slack * lin16_gamma(k) * mag;

	if (t == RL_BF16)
		return fabs(got - r) <= 0x1p-8 * fabs(r) + (1 + 0x1p-8) * g + 1e-38;
	return fabs(got - r) <= g + 1e-38;
}

/* A linear layer's bf16 operands, as bits and as values. */
struct lin16_case {
	int n, in, out;
	uint16_t *x, *w, *b, *dy;
	float *xf, *wf, *bf, *dyf;
};

static inline void lin16_make(struct lin16_case *c, uint32_t *seed, int n, int in, int out)
{
	c->n = n;
	c->in = in;
	c->out = out;
	c->x = lin16_bits(seed, (size_t)n * in, -1, 1, &c->xf);
	c->w = lin16_bits(seed, (size_t)out * in, -1, 1, &c->wf);
	c->b = lin16_bits(seed, (size_t)out, -1, 1, &c->bf);
	c->dy = lin16_bits(seed, (size_t)n * out, -1, 1, &c->dyf);
}

static inline void lin16_free(struct lin16_case *c)
{
	free(c->x);
	free(c->w);
	free(c->b);
	free(c->dy);
	free(c->xf);
	free(c->wf);
	free(c->bf);
	free(c->dyf);
}

/* The outputs of y = x W^T (+ b) in y (host memory, y.t's type) outside
 * the bound, each of the first five reported under name. */
static inline int lin16_forward_bad(const char *name, const struct lin16_case *c, struct rl_cbuf y,
                                    int with_bias, double slack)
{
	int bad = 0;

	for (int t = 0; t < c->n; t++)
		for (int o = 0; o < c->out; o++) {
			double r = with_bias ? c->bf[o] : 0.0, mag = fabs(r);

			for (int k = 0; k < c->in; k++) {
				double p = (double)c->xf[(size_t)t * c->in + k] *
				           c->wf[(size_t)o * c->in + k];
				r += p;
				mag += fabs(p);
			}
			double got = lin16_value(y, (size_t)t * c->out + o);

			if (!lin16_within(y.t, got, r, mag, c->in + with_bias, slack) && bad++ < 5)
				cr_expect(0, "%s y[%d][%d]: got %.9g, want %.9g (mag %g)", name, t,
				          o, got, r, mag);
		}
	return bad;
}

/* The gradients of the backward from dx0 (bf16 values), dw0 and db0 (fp32)
 * to dx (bf16 bits), dw and db (fp32), all host memory, outside the bound.
 * db0 and db may be NULL. */
static inline int lin16_backward_bad(const struct lin16_case *c, const float *dx0,
                                     const uint16_t *dx, const float *dw0, const float *dw,
                                     const float *db0, const float *db, double slack)
{
	int bad = 0;

	for (int t = 0; t < c->n; t++)
		for (int k = 0; k < c->in; k++) {
			double r = dx0[(size_t)t * c->in + k], mag = fabs(r);

			for (int o = 0; o < c->out; o++) {
				double p = (double)c->dyf[(size_t)t * c->out + o] *
				           c->wf[(size_t)o * c->in + k];
				r += p;
				mag += fabs(p);
			}
			double got = rl_bf16_to_f32(dx[(size_t)t * c->in + k]);

			if (!lin16_within(RL_BF16, got, r, mag, c->out + 1, slack) && bad++ < 5)
				cr_expect(0, "dx[%d][%d]: got %.9g, want %.9g", t, k, got, r);
		}
	for (int o = 0; o < c->out; o++) {
		if (db) {
			double rb = db0[o], mb = fabs(rb);

			for (int t = 0; t < c->n; t++) {
				rb += c->dyf[(size_t)t * c->out + o];
				mb += fabs(c->dyf[(size_t)t * c->out + o]);
			}
			if (!lin16_within(RL_F32, db[o], rb, mb, c->n + 1, 1.0) && bad++ < 5)
				cr_expect(0, "dbias[%d]: got %.9g, want %.9g", o, (double)db[o],
				          rb);
		}
		for (int k = 0; k < c->in; k++) {
			double r = dw0[(size_t)o * c->in + k], mag = fabs(r);

			for (int t = 0; t < c->n; t++) {
				double p = (double)c->dyf[(size_t)t * c->out + o] *
				           c->xf[(size_t)t * c->in + k];
				r += p;
				mag += fabs(p);
			}
			double got = dw[(size_t)o * c->in + k];

			if (!lin16_within(RL_F32, got, r, mag, c->n + 1, slack) && bad++ < 5)
				cr_expect(0, "dw[%d][%d]: got %.9g, want %.9g", o, k, got, r);
		}
	}
	return bad;
}

#endif
