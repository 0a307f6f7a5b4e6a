/* A Llama with random weights written as a Hugging Face directory, for the
 * benchmarks that need a model of a given size on disk.
 * defines: bench_rng_next, bench_write_random_llama */
#ifndef RL_BENCH_RANDOM_LLAMA_H
#define RL_BENCH_RANDOM_LLAMA_H

#include <stdint.h>

/* xorshift32: the benchmarks' reproducible random numbers */
uint32_t bench_rng_next(uint32_t *s);

/* Writes config_json as DIR/config.json and random weights for it as
 * DIR/model.safetensors (norms 1, matrices ~ N(0, 0.02) approximated by a
 * uniform of the same variance). */
int bench_write_random_llama(const char *dir, const char *config_json);

#endif
