/* A seeded pseudo-random generator that gives the same numbers on every
 * platform and libc: xoshiro256** 1.0 (Blackman and Vigna, prng.di.unimi.it),
 * its state filled by splitmix64. Each sequence of a batch draws from its own
 * stream, so what sequence i samples depends only on (seed, i), never on the
 * batch size or on what the other sequences did.
 * defines: struct rl_rng, rl_rng_seed, rl_rng_next, rl_rng_uniform,
 * rl_rng_splitmix64 */
#ifndef RL_BASE_RNG_H
#define RL_BASE_RNG_H

#include <stdint.h>

/* Plain data: copy it to save a position, compare it to check one. */
struct rl_rng {
	uint64_t s[4];
};

/* The splitmix64 state starts at seed ^ mix(stream), where mix is
 * splitmix64's output function (a bijection with mix(0) = 0), and its next
 * four outputs become the xoshiro state. Stream 0 is therefore exactly the
 * seeding recommended on prng.di.unimi.it, and distinct streams of one seed
 * start splitmix64 at distinct points, whose output runs overlap with
 * probability about 2^-61 per pair. */
void rl_rng_seed(struct rl_rng *rng, uint64_t seed, uint64_t stream);

/* The next 64 random bits. */
uint64_t rl_rng_next(struct rl_rng *rng);

/* A double in [0, 1): the top 53 bits of rl_rng_next() times 2^-53, so every
 * value is a multiple of 2^-53 and 1.0 never comes out. */
double rl_rng_uniform(struct rl_rng *rng);

/* One step of splitmix64 (Steele, Lea and Flood; splitmix64.c on
 * prng.di.unimi.it): advances *state and returns the mixed value. Exposed for
 * the known-answer tests and for deriving seeds. */
uint64_t rl_rng_splitmix64(uint64_t *state);

#endif
