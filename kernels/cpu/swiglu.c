/* SwiGLU: h = silu(g) * u with silu(g) = g * sigmoid(g). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/swiglu.h"

#define PAR_MIN ((int64_t)1 << 15)

/* exp(x) for x <= 0, within an ulp, flushed to 0 below the smallest normal
 * result (x < -87.34) and NaN for NaN; unlike libm's expf it vectorises
 * (every branch is a select). x = n ln2 + r with |r| <= ln2 / 2 (n rounded
 * by adding 1.5 * 2^23), Cephes' polynomial for exp(r), and 2^n built in
 * the exponent bits. */
static inline float exp_neg(float x)
{
	const float lo = -87.33654f, magic = 12582912.0f;
	/* clamped (NaN included) so that n converts to int and 2^n is normal */
	float xc = x > lo ? x : lo;
	float n = (xc * 1.44269504088896341f + magic) - magic;
	float r = xc - n * 0.693359375f;

	r = r - n * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;

	int32_t bits = ((int32_t)n + 127) << 23;
	float scale;

	memcpy(&scale, &bits, sizeof(scale));
	float y = p * scale;

	return x >= lo ? y : x < lo ? 0.0f : x;
}

/* exp of -|g| never overflows, and for g below zero the sigmoid is
 * e / (1 + e), which keeps its relative accuracy as it shrinks (down to
 * g = -87, where it flushes to zero), where 1 - 1 / (1 + e) would not. */
static inline float sigmoid(float g)
{
	float e = exp_neg(-fabsf(g));
	float r = 1.0f / (1.0f + e), er = e * r;

	return g >= 0.0f ? r : er;
}

int rl_swiglu_forward_cpu(float *h, const float *gate, const float *up, int64_t n, void *stream)
{
	(void)stream;
	if (!h || !gate || !up || n < 0)
		return -1;
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++) {
		float g = gate[i];

		h[i] = g * sigmoid(g) * up[i];
	}
	return 0;
}

/* d silu / dg = s + g s (1 - s) = s (1 + g (1 - s)). */
int rl_swiglu_backward_cpu(float *dgate, float *dup, const float *dh, const float *gate,
                           const float *up, int64_t n, void *stream)
{
	(void)stream;
	if (!dgate || !dup || !dh || !gate || !up || n < 0)
		return -1;
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++) {
		float g = gate[i], s = sigmoid(g), d = dh[i];

		dup[i] += d * g * s;
		dgate[i] += d * up[i] * s * (1.0f + g * (1.0f - s));
	}
	return 0;
}
