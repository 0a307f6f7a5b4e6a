/* Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
 * as easy as 1, 2, 3", SC 2011; the constants of its Random123 release): a
 * counter-based generator, so a number is a pure function of (key,
 * counter) and needs no state to carry. Generation keys it by the run's seed
 * and counts by (sample, position): a sample's token at a position draws
 * the same number whatever batch, slot, thread count or resume it comes
 * in, on the CPU and on the GPU alike. Header-only, for C and CUDA.
 * defines: struct rl_philox_block, rl_philox4x32, rl_philox_uniform */
#ifndef RL_KERNELS_PHILOX_H
#define RL_KERNELS_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define RL_PHILOX_FN static __host__ __device__ __forceinline__
#else
#define RL_PHILOX_FN static inline
#endif

struct rl_philox_block {
	uint32_t v[4];
};

RL_PHILOX_FN uint32_t rl_philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi)
{
	uint64_t p = (uint64_t)a * (uint64_t)b;

	*hi = (uint32_t)(p >> 32);
	return (uint32_t)p;
}

/* The ten rounds over counter c with key k. */
RL_PHILOX_FN struct rl_philox_block rl_philox4x32(struct rl_philox_block c, uint32_t k0,
                                                  uint32_t k1)
{
	for (int round = 0; round < 10; round++) {
		uint32_t hi0, hi1;
		uint32_t lo0 = rl_philox_mulhilo(0xD2511F53u, c.v[0], &hi0);
		uint32_t lo1 = rl_philox_mulhilo(0xCD9E8D57u, c.v[2], &hi1);
		struct rl_philox_block n;

		n.v[0] = hi1 ^ c.v[1] ^ k0;
		n.v[1] = lo1;
		n.v[2] = hi0 ^ c.v[3] ^ k1;
		n.v[3] = lo0;
		c = n;
		k0 += 0x9E3779B9u;
		k1 += 0xBB67AE85u;
	}
	return c;
}

/* A double in [0, 1) for (seed, stream, position): the counter is
 * (position, stream) as four 32-bit words, the key the seed; the top 53
 * bits of the first two output words times 2^-53. */
RL_PHILOX_FN double rl_philox_uniform(uint64_t seed, uint64_t stream, uint64_t position)
{
	struct rl_philox_block c = {{(uint32_t)position, (uint32_t)(position >> 32),
	                             (uint32_t)stream, (uint32_t)(stream >> 32)}};
	struct rl_philox_block r = rl_philox4x32(c, (uint32_t)seed, (uint32_t)(seed >> 32));
	uint64_t bits = ((uint64_t)r.v[0] << 32 | r.v[1]) >> 11;

	return (double)bits * (1.0 / 9007199254740992.0);
}

#undef RL_PHILOX_FN

#endif
