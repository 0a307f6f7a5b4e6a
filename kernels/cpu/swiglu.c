/* SwiGLU: h = silu(g) * u with silu(g) = g * sigmoid(g); bf16 buffers read
 * widened and written rounded once (typed.h). */
#include <math.h>
#include <stdint.h>

#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/typed.h"
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

RL_TYPED_BODY void forward(void *h, const void *gate, const void *up, int64_t n, const bool bf16)
{
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++) {
		float g = rl_ld(gate, bf16, i);

		rl_st(h, bf16, i, g * sigmoid(g) * rl_ld(up, bf16, i));
	}
}

int rl_swiglu_forward_cpu(struct rl_buf h, struct rl_cbuf gate, struct rl_cbuf up, int64_t n,
                          void *stream)
{
	(void)stream;
	if (!h.p || !gate.p || !up.p || n < 0 || !rl_swiglu_types_ok(h.t, gate.t, up.t, h.t, h.t))
		return -1;
	if (h.t == RL_BF16)
		forward(h.p, gate.p, up.p, n, true);
	else
		forward(h.p, gate.p, up.p, n, false);
	return 0;
}

/* d silu / dg = s + g s (1 - s) = s (1 + g (1 - s)). */
RL_TYPED_BODY void backward(void *dgate, void *dup, const void *dh, const void *gate,
                            const void *up, int64_t n, const bool bf16)
{
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++) {
		float g = rl_ld(gate, bf16, i), s = sigmoid(g), d = rl_ld(dh, bf16, i);

		rl_st_add(dup, bf16, i, d * g * s);
		rl_st_add(dgate, bf16, i, d * rl_ld(up, bf16, i) * s * (1.0f + g * (1.0f - s)));
	}
}

int rl_swiglu_backward_cpu(struct rl_buf dgate, struct rl_buf dup, struct rl_cbuf dh,
                           struct rl_cbuf gate, struct rl_cbuf up, int64_t n, void *stream)
{
	(void)stream;
	if (!dgate.p || !dup.p || !dh.p || !gate.p || !up.p || n < 0 ||
	    !rl_swiglu_types_ok(dgate.t, dup.t, dh.t, gate.t, up.t))
		return -1;
	if (dgate.t == RL_BF16)
		backward(dgate.p, dup.p, dh.p, gate.p, up.p, n, true);
	else
		backward(dgate.p, dup.p, dh.p, gate.p, up.p, n, false);
	return 0;
}
