/* Elements of a typed buffer in the CPU ops: read widened to fp32 (exact),
 * written rounded to nearest even (rl_f32_to_bf16). An op writes its body
 * once, as an always-inline function taking `const bool bf16`, and calls it
 * with a constant true and false: the compiler makes two loops, the fp32 one
 * the plain loads and stores it was before types, the bf16 one converting
 * at the same points. Private to kernels/cpu/.
 * defines: RL_TYPED_BODY, rl_ld, rl_st, rl_st_add, rl_widened */
#ifndef RL_KERNELS_CPU_TYPED_H
#define RL_KERNELS_CPU_TYPED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/buf.h"
#include "kernels/dtype.h"
#include "kernels/vector.h"

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

/* The fp32 values of the n elements of b, for an op that hands them to
 * sgemm: b itself when it is fp32, else a copy widened exactly into
 * *scratch, which the caller frees (NULL for fp32). NULL when out of
 * memory. */
static inline const float *rl_widened(struct rl_cbuf b, size_t n, float **scratch)
{
	*scratch = NULL;
	if (b.t == RL_F32)
		return b.p;
	*scratch = malloc(n ? n * sizeof(float) : 1);
	if (*scratch)
		rl_from_bf16_cpu(*scratch, b.p, (int64_t)n, NULL);
	return *scratch;
}

#endif
