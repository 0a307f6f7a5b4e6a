/* The data order: permutations checked as sets, drop_last and exhaustion
 * counted by hand, the shuffle pinned to permutations computed by an
 * independent Python transcription of xoshiro256** + Fisher-Yates, resume
 * against the uninterrupted sequence, and a coarse uniformity check. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/data/order.h"

static char err[256];

static void init(struct rl_data_order *o, size_t n, size_t batch, bool shuffle, uint64_t seed,
                 int64_t epochs)
{
	cr_assert_eq(rl_data_order_init(o, n, batch, shuffle, seed, epochs, err, sizeof err), 0,
	             "%s", err);
}

/* Every step of the whole run, concatenated; returns the number of steps. */
static size_t run_all(struct rl_data_order *o, size_t *out, size_t max_steps)
{
	size_t steps = 0;

	while (steps < max_steps && rl_data_order_next(o, out + steps * o->batch))
		steps++;
	return steps;
}

Test(order, each_index_once_per_epoch)
{
	struct rl_data_order o;
	size_t idx[25];

	init(&o, 25, 25, true, 123, 3);
	for (int e = 0; e < 3; e++) {
		bool seen[25] = {false};

		cr_assert_eq(rl_data_order_next(&o, idx), 1);
		for (size_t i = 0; i < 25; i++) {
			cr_assert_lt(idx[i], 25);
			cr_assert(!seen[idx[i]], "index %zu twice in epoch %d", idx[i], e);
			seen[idx[i]] = true;
		}
	}
	cr_assert_eq(rl_data_order_next(&o, idx), 0);
	rl_data_order_free(&o);
}

Test(order, drop_last_and_exhaustion)
{
	struct rl_data_order o;
	size_t idx[3];
	int64_t epoch;
	size_t pos;

	/* 10 examples, 3 per step: 3 steps per epoch, the 10th example of each
	 * epoch is dropped; 2 epochs = 6 steps. */
	init(&o, 10, 3, true, 5, 2);
	for (int e = 0; e < 2; e++) {
		bool seen[10] = {false};

		for (int s = 0; s < 3; s++) {
			cr_assert_eq(rl_data_order_next(&o, idx), 1, "epoch %d step %d", e, s);
			for (int i = 0; i < 3; i++) {
				cr_assert(!seen[idx[i]]);
				seen[idx[i]] = true;
			}
			rl_data_order_position(&o, &epoch, &pos);
			cr_expect_eq(epoch, e);
			cr_expect_eq(pos, (size_t)(3 * s + 3));
		}
	}
	cr_assert_eq(rl_data_order_next(&o, idx), 0);
	cr_assert_eq(rl_data_order_next(&o, idx), 0);
	rl_data_order_position(&o, &epoch, &pos);
	cr_expect_eq(epoch, 2);
	cr_expect_eq(pos, 0);
	rl_data_order_free(&o);
}

Test(order, no_shuffle_is_identity)
{
	struct rl_data_order o;
	size_t all[64];
	const size_t want[] = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}; /* n = 7, batch 2, 2 epochs */

	init(&o, 7, 2, false, 99, 2);
	cr_assert_eq(run_all(&o, all, 32), 6);
	for (size_t i = 0; i < 12; i++)
		cr_expect_eq(all[i], want[i], "entry %zu: %zu, want %zu", i, all[i], want[i]);
	rl_data_order_free(&o);
}

/* The expected orders come from this Python transcription of rng.c's
 * seeding and xoshiro256** and of the shuffle described in order.h:
 *
 *   M = 2**64 - 1
 *   def mix64(z):
 *       z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M
 *       z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
 *       return z ^ (z >> 31)
 *   def rng(seed, stream):
 *       x, s = seed ^ mix64(stream), []
 *       for _ in range(4):
 *           x = (x + 0x9e3779b97f4a7c15) & M
 *           s.append(mix64(x))
 *       rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & M
 *       while True:
 *           yield (rotl((s[1] * 5) & M, 7) * 9) & M
 *           t = (s[1] << 17) & M
 *           s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]
 *           s[2] ^= t; s[3] = rotl(s[3], 45)
 *   def perm(n, seed, e):
 *       r, p = rng(seed, (0x646174616f726472 + e) & M), list(range(n))
 *       for i in range(n - 1, 0, -1):
 *           k = i + 1
 *           x = next(r)
 *           while x < (2**64 - k) % k:
 *               x = next(r)
 *           j = x % k
 *           p[i], p[j] = p[j], p[i]
 *       return p
 */
Test(order, known_permutations)
{
	const size_t want42[3][10] = {{1, 2, 5, 7, 0, 4, 6, 8, 9, 3},
	                              {4, 6, 8, 5, 7, 2, 9, 0, 1, 3},
	                              {8, 0, 4, 6, 5, 7, 3, 1, 2, 9}};
	const size_t want7[10] = {6, 7, 3, 1, 2, 5, 9, 8, 0, 4};
	struct rl_data_order o;
	size_t idx[10];

	init(&o, 10, 10, true, 42, 3);
	for (int e = 0; e < 3; e++) {
		cr_assert_eq(rl_data_order_next(&o, idx), 1);
		for (int i = 0; i < 10; i++)
			cr_expect_eq(idx[i], want42[e][i], "epoch %d entry %d: %zu, want %zu", e, i,
			             idx[i], want42[e][i]);
	}
	rl_data_order_free(&o);
	init(&o, 10, 10, true, 7, 1);
	cr_assert_eq(rl_data_order_next(&o, idx), 1);
	for (int i = 0; i < 10; i++)
		cr_expect_eq(idx[i], want7[i]);
	rl_data_order_free(&o);
}

Test(order, seeds)
{
	struct rl_data_order a, b, c;
	size_t ia[40], ib[40], ic[40];

	/* 40! orders: equal permutations from different seeds would be a bug. */
	init(&a, 40, 40, true, 1, 1);
	init(&b, 40, 40, true, 1, 1);
	init(&c, 40, 40, true, 2, 1);
	cr_assert_eq(rl_data_order_next(&a, ia), 1);
	cr_assert_eq(rl_data_order_next(&b, ib), 1);
	cr_assert_eq(rl_data_order_next(&c, ic), 1);
	cr_expect_eq(memcmp(ia, ib, sizeof ia), 0, "same seed, different order");
	cr_expect_neq(memcmp(ia, ic, sizeof ia), 0, "seeds 1 and 2 gave the same order");
	rl_data_order_free(&a);
	rl_data_order_free(&b);
	rl_data_order_free(&c);
}

Test(order, epochs_differ)
{
	struct rl_data_order o;
	size_t e0[40], e1[40];

	init(&o, 40, 40, true, 1, 2);
	cr_assert_eq(rl_data_order_next(&o, e0), 1);
	cr_assert_eq(rl_data_order_next(&o, e1), 1);
	cr_expect_neq(memcmp(e0, e1, sizeof e0), 0, "epochs 0 and 1 in the same order");
	rl_data_order_free(&o);
}

/* Restoring after every step of the run (mid-epoch and at each epoch
 * boundary) gives the rest of the uninterrupted run. */
static void check_resume(size_t n, size_t batch, bool shuffle, int64_t epochs)
{
	struct rl_data_order o, r;
	size_t full[512], rest[512];
	size_t steps, got;
	int64_t epoch;
	size_t pos;

	init(&o, n, batch, shuffle, 77, epochs);
	steps = run_all(&o, full, 512 / batch);
	cr_assert_eq(steps, (n / batch) * (size_t)epochs);
	rl_data_order_free(&o);

	for (size_t k = 0; k <= steps; k++) {
		init(&o, n, batch, shuffle, 77, epochs);
		for (size_t s = 0; s < k; s++)
			cr_assert_eq(rl_data_order_next(&o, rest), 1);
		rl_data_order_position(&o, &epoch, &pos);
		rl_data_order_free(&o);

		init(&r, n, batch, shuffle, 77, epochs);
		cr_assert_eq(rl_data_order_restore(&r, epoch, pos, err, sizeof err), 0, "%s", err);
		got = run_all(&r, rest, 512 / batch);
		cr_assert_eq(got, steps - k, "after %zu steps: %zu steps left, want %zu", k, got,
		             steps - k);
		cr_assert_eq(memcmp(rest, full + k * batch, got * batch * sizeof *rest), 0,
		             "resume after %zu steps (epoch %lld, pos %zu) differs", k,
		             (long long)epoch, pos);
		rl_data_order_free(&r);
	}
}

Test(order, resume)
{
	check_resume(10, 3, true, 3);  /* tail dropped: boundaries at pos 9 */
	check_resume(12, 4, true, 3);  /* exact epochs: boundaries at pos 12 */
	check_resume(9, 9, true, 2);   /* one step per epoch */
	check_resume(10, 3, false, 2); /* identity */
}

Test(order, boundary_positions_are_equivalent)
{
	struct rl_data_order a, b;
	size_t ia[3], ib[3];

	/* (0, 9) is the end of epoch 0 with 10 examples and 3 per step: the
	 * same place as (1, 0). */
	init(&a, 10, 3, true, 8, 3);
	init(&b, 10, 3, true, 8, 3);
	cr_assert_eq(rl_data_order_restore(&a, 0, 9, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_data_order_restore(&b, 1, 0, err, sizeof err), 0, "%s", err);
	for (int s = 0; s < 6; s++) {
		cr_assert_eq(rl_data_order_next(&a, ia), 1);
		cr_assert_eq(rl_data_order_next(&b, ib), 1);
		cr_assert_eq(memcmp(ia, ib, sizeof ia), 0, "step %d", s);
	}
	cr_assert_eq(rl_data_order_next(&a, ia), 0);
	/* and restoring to the end is exhausted */
	cr_assert_eq(rl_data_order_restore(&b, 3, 0, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_data_order_next(&b, ib), 0);
	rl_data_order_free(&a);
	rl_data_order_free(&b);
}

Test(order, restore_with_another_batch_size)
{
	struct rl_data_order o;
	size_t idx[2];
	const size_t want[] = {4, 5, 6, 7, 8, 9}; /* identity, resumed at pos 4, 2 per step */

	init(&o, 10, 2, false, 0, 1);
	cr_assert_eq(rl_data_order_restore(&o, 0, 4, err, sizeof err), 0, "%s", err);
	for (int s = 0; s < 3; s++) {
		cr_assert_eq(rl_data_order_next(&o, idx), 1);
		cr_expect_eq(idx[0], want[2 * s]);
		cr_expect_eq(idx[1], want[2 * s + 1]);
	}
	cr_assert_eq(rl_data_order_next(&o, idx), 0);
	rl_data_order_free(&o);
}

Test(order, restore_errors)
{
	struct rl_data_order o;
	int64_t epoch;
	size_t pos, idx[3];

	init(&o, 10, 3, true, 1, 2);
	cr_assert_eq(rl_data_order_next(&o, idx), 1);
	cr_assert_eq(rl_data_order_restore(&o, 3, 0, err, sizeof err), -1);
	cr_expect(strstr(err, "epoch 3") != NULL, "%s", err);
	cr_assert_eq(rl_data_order_restore(&o, -1, 0, err, sizeof err), -1);
	cr_assert_eq(rl_data_order_restore(&o, 0, 11, err, sizeof err), -1);
	cr_expect(strstr(err, "position 11") != NULL, "%s", err);
	cr_expect(strstr(err, "10 examples") != NULL, "%s", err);
	rl_data_order_position(&o, &epoch, &pos);
	cr_expect_eq(epoch, 0);
	cr_expect_eq(pos, 3);
	rl_data_order_free(&o);
}

Test(order, init_errors)
{
	struct rl_data_order o;

	cr_assert_eq(rl_data_order_init(&o, 3, 4, true, 1, 1, err, sizeof err), -1);
	cr_expect_str_eq(err, "the dataset has 3 examples, fewer than one step's 4 prompts");
	cr_expect_null(o.perm);
	cr_assert_eq(rl_data_order_init(&o, 3, 0, true, 1, 1, err, sizeof err), -1);
	cr_assert_eq(rl_data_order_init(&o, 0, 1, true, 1, 1, err, sizeof err), -1);
	cr_assert_eq(rl_data_order_init(&o, 3, 1, true, 1, 0, err, sizeof err), -1);
	cr_expect(strstr(err, "max_epochs") != NULL, "%s", err);
}

/* 20000 shuffles of 4 elements: each of the 24 orders is expected 833.3
 * times with a standard deviation of 28.3; 700..970 is about 4.7 sigma,
 * wide enough never to fail by chance and narrow enough to catch a biased
 * draw (e.g. j = next() % (i + 1) over a small range, or an off-by-one
 * that never leaves an element in place). */
Test(order, uniform)
{
	struct rl_data_order o;
	int count[256] = {0};
	size_t idx[4];
	int distinct = 0;

	init(&o, 4, 4, true, 2024, 20000);
	for (int e = 0; e < 20000; e++) {
		cr_assert_eq(rl_data_order_next(&o, idx), 1);
		count[idx[0] * 64 + idx[1] * 16 + idx[2] * 4 + idx[3]]++;
	}
	cr_assert_eq(rl_data_order_next(&o, idx), 0);
	for (int k = 0; k < 256; k++) {
		if (!count[k])
			continue;
		distinct++;
		cr_expect(count[k] >= 700 && count[k] <= 970, "order %d%d%d%d came %d times",
		          k / 64, k / 16 % 4, k / 4 % 4, k % 4, count[k]);
	}
	cr_expect_eq(distinct, 24);
	rl_data_order_free(&o);
}
