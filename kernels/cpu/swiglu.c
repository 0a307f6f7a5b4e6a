/* SwiGLU: h = silu(g) * u with silu(g) = g * sigmoid(g). */
#include <math.h>
#include <stdint.h>

#include "kernels/cpu/fast_exp.h"
#include "kernels/swiglu.h"

#define PAR_MIN ((int64_t)1 << 15)

/* exp of -|g| never overflows, and for g below zero the sigmoid is
 * e / (1 + e), which keeps its relative accuracy as it shrinks (down to
 * g = -87, where it flushes to zero), where 1 - 1 / (1 + e) would not. */
static inline float sigmoid(float g)
{
	float e = rl_fast_exp_neg_flush(-fabsf(g));
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
