/* What the model tests on MPI ranks share: a pass/fail count per rank
 * (summed on rank 0 at the end), the deterministic random numbers every
 * rank draws alike, and the relative difference they compare with.
 * defines: check, must, lcg, uniform, rel_diff, start_ranks, finish_ranks */
#ifndef RL_TESTS_MPI_CHECK_H
#define RL_TESTS_MPI_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/comm/comm.h"

static int passed, failed, me;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		passed++;
		return;
	}
	failed++;
	fprintf(stderr, "rank %d: FAIL: ", me);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static inline void must(int rc, const char *what, const char *err)
{
	if (rc) {
		fprintf(stderr, "rank %d: %s: %s\n", me, what, err);
		exit(1);
	}
}

static inline uint32_t lcg(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

static inline float uniform(uint32_t *s)
{
	return (float)lcg(s) / (float)(1u << 24) * 2.0f - 1.0f;
}

/* ||a - b|| / ||b||, or ||a - b|| when b is 0 */
static inline double rel_diff(const float *a, const float *b, size_t n)
{
	double d = 0, nb = 0;

	for (size_t i = 0; i < n; i++) {
		d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		nb += (double)b[i] * b[i];
	}
	return nb > 0 ? sqrt(d / nb) : sqrt(d);
}

/* MPI up (expect_world ranks; 0: any number) and me set; exits 1 with a
 * message naming the test where it cannot start. */
static inline void start_ranks(struct rl_comm_world **w, struct rl_comm **world, int expect_world,
                               const char *name)
{
	char err[512];

	if (rl_comm_world_init(w, world, expect_world, 60, err, sizeof err)) {
		fprintf(stderr, "%s: %s\n", name, err);
		exit(1);
	}
	me = rl_comm_rank(*world);
}

/* Every rank's counts summed and reported on rank 0 as "NAME: N ranks: P
 * passed, F failed", MPI finalized; the process's exit status. */
static inline int finish_ranks(struct rl_comm_world *w, struct rl_comm *world, const char *name)
{
	int counts[2] = {passed, failed};

	rl_comm_all_reduce(world, counts, 2, RL_COMM_I32, RL_COMM_SUM, "results");
	if (me == 0)
		printf("%s: %d ranks: %d passed, %d failed\n", name, rl_comm_size(world), counts[0],
		       counts[1]);
	rl_comm_world_finalize(w);
	return counts[1] ? 1 : 0;
}

#endif
