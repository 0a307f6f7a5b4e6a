/* The benchmarks' clock.
 * defines: bench_now */
#ifndef RL_BENCH_CLOCK_H
#define RL_BENCH_CLOCK_H

#include <time.h>

/* seconds on the monotonic clock */
static inline double bench_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
