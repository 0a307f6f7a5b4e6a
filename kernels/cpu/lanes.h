/* The eight-lane sums of the batch-invariant CPU ops: lane l adds the
 * products of k = l mod 8 in increasing k, the lanes are added as
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) and the n % 8 tail
 * after them in order. One fixed order per length, whatever the caller's
 * blocking; GCC vector types under -std=c11 are not contracted into FMAs,
 * so every step rounds on its own on every x86-64. Private to kernels/cpu/.
 * defines: rl_v8, rl_load8, rl_lanes_finish, rl_dot8 */
#ifndef RL_KERNELS_CPU_LANES_H
#define RL_KERNELS_CPU_LANES_H

#include <string.h>

/* Without AVX the eight lanes travel as two SSE registers, which GCC warns
 * would differ from an AVX build's calling convention; these functions are
 * static and inline, so no call between the two ever happens. */
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float rl_v8 __attribute__((vector_size(32)));

static inline rl_v8 rl_load8(const float *p)
{
	rl_v8 v;

	memcpy(&v, p, sizeof v);
	return v;
}

/* The lanes of a, then x[k] w[k] for k in [k0, k1). */
static inline float rl_lanes_finish(rl_v8 a, const float *x, const float *w, int k0, int k1)
{
	float s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));

	for (int k = k0; k < k1; k++)
		s += x[k] * w[k];
	return s;
}

static inline float rl_dot8(const float *x, const float *w, int n)
{
	rl_v8 a = {0};
	const int nv = n - n % 8;

	for (int k = 0; k < nv; k += 8)
		a += rl_load8(x + k) * rl_load8(w + k);
	return rl_lanes_finish(a, x, w, nv, n);
}

#endif
