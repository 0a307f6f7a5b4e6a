/* xoshiro256** 1.0 and splitmix64, transcribed from the public-domain
 * reference sources on prng.di.unimi.it (xoshiro256starstar.c, splitmix64.c).
 * Only fixed-width unsigned arithmetic, so the numbers are the same wherever
 * uint64_t is. */
#include "runtime/base/rng.h"

static const uint64_t splitmix_gamma = 0x9e3779b97f4a7c15ULL;

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* splitmix64's output function alone: a bijection of 64-bit words. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t rl_rng_splitmix64(uint64_t *state)
{
	*state += splitmix_gamma;
	return mix64(*state);
}

void rl_rng_seed(struct rl_rng *rng, uint64_t seed, uint64_t stream)
{
	/* Four consecutive splitmix64 outputs come from four distinct states,
	 * and the output function is a bijection, so at most one of them is
	 * zero: the all-zero state xoshiro cannot leave is never produced. */
	uint64_t x = seed ^ mix64(stream);

	for (int i = 0; i < 4; i++)
		rng->s[i] = rl_rng_splitmix64(&x);
}

uint64_t rl_rng_next(struct rl_rng *rng)
{
	uint64_t *s = rng->s;
	const uint64_t result = rotl(s[1] * 5, 7) * 9;
	const uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double rl_rng_uniform(struct rl_rng *rng)
{
	return (double)(rl_rng_next(rng) >> 11) * 0x1.0p-53;
}
