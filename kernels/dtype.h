/* Element types of tensors on disk and in memory. The type travels with the
 * tensor, so one code path serves bf16, fp16 and fp32 files; conversions are
 * exact (to fp32) or round-to-nearest-even (from fp32), as PyTorch does.
 * defines: enum rl_dtype, rl_dtype_size, rl_dtype_name, rl_dtype_torch_name,
 * rl_dtype_from_torch_name, rl_bf16_to_f32, rl_f32_to_bf16, rl_f16_to_f32,
 * rl_f32_to_f16 */
#ifndef RL_KERNELS_DTYPE_H
#define RL_KERNELS_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rl_dtype { RL_F32, RL_BF16, RL_F16 };

static inline size_t rl_dtype_size(enum rl_dtype t)
{
	return t == RL_F32 ? 4 : 2;
}

/* The names safetensors uses ("F32", "BF16", "F16"). */
static inline const char *rl_dtype_name(enum rl_dtype t)
{
	return t == RL_F32 ? "F32" : t == RL_BF16 ? "BF16" : "F16";
}

/* The names torch and config.json use ("bfloat16", "float16", "float32"),
 * which policy.precision takes too. */
static inline const char *rl_dtype_torch_name(enum rl_dtype t)
{
	return t == RL_F32 ? "float32" : t == RL_BF16 ? "bfloat16" : "float16";
}

/* *t for such a name: 0, or -1 when it names none. */
static inline int rl_dtype_from_torch_name(const char *name, enum rl_dtype *t)
{
	static const enum rl_dtype all[] = {RL_F32, RL_BF16, RL_F16};

	for (size_t i = 0; i < sizeof all / sizeof *all; i++)
		if (strcmp(name, rl_dtype_torch_name(all[i])) == 0) {
			*t = all[i];
			return 0;
		}
	return -1;
}

static inline float rl_bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static inline uint16_t rl_f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN stays a quiet NaN */
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float rl_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	uint32_t u;

	if (exp == 0x1f) {
		u = sign | 0x7f800000u | (man << 13);
	} else if (exp != 0) {
		u = sign | ((exp + 112u) << 23) | (man << 13);
	} else if (man == 0) {
		u = sign;
	} else { /* subnormal: normalise the mantissa */
		exp = 113;
		while (!(man & 0x400u)) {
			man <<= 1;
			exp--;
		}
		u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
	}
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

static inline uint16_t rl_f32_to_f16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t abs = u & 0x7fffffffu;

	if (abs > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u);
	if (abs >= 0x477ff000u) /* rounds to or beyond 65520: infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (abs < 0x38800000u) { /* below the smallest normal half */
		if (abs < 0x33000000u)
			return (uint16_t)sign;
		uint32_t e = abs >> 23;
		uint32_t man = (abs & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126u - e; /* 14..24 */
		uint32_t half = man >> shift;
		uint32_t rem = man & ((1u << shift) - 1u);
		uint32_t mid = 1u << (shift - 1u);
		if (rem > mid || (rem == mid && (half & 1u)))
			half++;
		return (uint16_t)(sign | half);
	}
	abs += 0xfffu + ((abs >> 13) & 1u);
	return (uint16_t)(sign | ((abs - 0x38000000u) >> 13));
}

#ifdef __cplusplus
}
#endif

#endif
