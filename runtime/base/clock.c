#define _GNU_SOURCE
#include <time.h>

#include "runtime/base/clock.h"

double rl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
