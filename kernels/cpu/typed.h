/* Elements of a typed buffer in the CPU ops: read widened to fp32 (exact),
 * written rounded to nearest even (rl_f32_to_bf16). An op writes its body
 * once, as an always-inline function taking `const bool bf16`, and calls it
 * with a constant true and false: the compiler makes two loops, the fp32 one
 * the plain loads and stores it was before types, the bf16 one converting
 * at the same points. Private to kernels/cpu/.
 * defines: RL_TYPED_BODY, rl_ld, rl_st, rl_st_add */
#ifndef RL_KERNELS_CPU_TYPED_H
#define RL_KERNELS_CPU_TYPED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h"

#define RL_TYPED_BODY static inline __attribute__((always_inline))

static inline __attribute__((always_inline)) float rl_ld(const void *p, bool bf16, size_t i)
{
	return bf16 ? rl_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline __attribute__((always_inline)) void rl_st(void *p, bool bf16, size_t i, float v)
{
	if (bf16)
		((uint16_t *)p)[i] = rl_f32_to_bf16(v);
	else
		((float *)p)[i] = v;
}

/* p[i] += v, rounded once (an accumulating gradient). */
static inline __attribute__((always_inline)) void rl_st_add(void *p, bool bf16, size_t i, float v)
{
	rl_st(p, bf16, i, rl_ld(p, bf16, i) + v);
}

#endif
