/* The generation RNG against published and independently computed numbers,
 * and the token sampler against brute-force double-precision references:
 * greedy, top-k/top-p sets, draw frequencies (chi-square), log-probabilities,
 * reproducibility and bad input. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/base/rng.h"
#include "runtime/generate/sampler.h"
#include "tests/unit/gradcheck.h"

/* ---- test data: gradcheck.h's xorshift32, independent of the generator
 * under test ---- */

static float xs_uniform(uint32_t *s)
{
	return gc_uniform(s, 0.0f, 1.0f);
}

/* Roughly normal (Irwin-Hall of 4), times scale: logits shaped like a
 * language model's, with a few clear leaders and a long tail. */
static float *random_logits(uint32_t *s, int vocab, float scale)
{
	float *l = malloc((size_t)vocab * sizeof(*l));

	cr_assert_not_null(l);
	for (int i = 0; i < vocab; i++) {
		float x = xs_uniform(s) + xs_uniform(s) + xs_uniform(s) + xs_uniform(s) - 2.0f;

		l[i] = scale * x * 1.7320508f;
	}
	return l;
}

static float *alloc_work(int vocab)
{
	float *w = malloc(rl_sample_work_bytes(vocab));

	cr_assert_not_null(w);
	return w;
}

/* ---- RNG known answers ---- */

Test(rng, splitmix64_published)
{
	/* splitmix64.c from prng.di.unimi.it, seed 1234567: the values on
	 * Rosetta Code's "Pseudo-random numbers/Splitmix64" page. The first
	 * output from state 0 is the widely quoted 0xe220a8397b1dcdaf. */
	const uint64_t want[5] = {6457827717110365317ULL, 3203168211198807973ULL,
	                          9817491932198370423ULL, 4593380528125082431ULL,
	                          16408922859458223821ULL};
	uint64_t x = 1234567, zero = 0;

	for (int i = 0; i < 5; i++)
		cr_expect_eq(rl_rng_splitmix64(&x), want[i], "output %d", i);
	cr_expect_eq(rl_rng_splitmix64(&zero), 0xe220a8397b1dcdafULL);
}

Test(rng, xoshiro256starstar_published)
{
	/* From state {1, 2, 3, 4}: the reference outputs of
	 * xoshiro256starstar.c as published in the rand_xoshiro crate's test
	 * ("produced with the reference implementation"). */
	const uint64_t want[10] = {11520ULL,
	                           0ULL,
	                           1509978240ULL,
	                           1215971899390074240ULL,
	                           1216172134540287360ULL,
	                           607988272756665600ULL,
	                           16172922978634559625ULL,
	                           8476171486693032832ULL,
	                           10595114339597558777ULL,
	                           2904607092377533576ULL};
	struct rl_rng r = {{1, 2, 3, 4}};

	for (int i = 0; i < 10; i++)
		cr_expect_eq(rl_rng_next(&r), want[i], "output %d", i);
}

Test(rng, seeded_streams)
{
	/* Computed when this test was written by a separate Python
	 * transcription of splitmix64 and xoshiro256** that reproduces both
	 * published vectors above, seeding as rng.h documents: splitmix64
	 * from seed ^ mix(stream). Stream 0 is the plain recommended seeding
	 * (another project's xoshiro256** seeded with 42 shows the same
	 * 0x6104d9866d113a7e, 0xae17533239e499a1, 0xecb8ad4703b360a1). */
	const struct {
		uint64_t seed, stream, want[4];
	} cases[] = {
	    {42,
	     0,
	     {0x15780b2e0c2ec716ULL, 0x6104d9866d113a7eULL, 0xae17533239e499a1ULL,
	      0xecb8ad4703b360a1ULL}},
	    {42,
	     7,
	     {0x11a904479c05b3daULL, 0xcffd69429302c462ULL, 0x79e6a4245def3af9ULL,
	      0x501c914b15828b2bULL}},
	    {0xdeadbeefcafef00dULL,
	     123456789,
	     {0x9ef9a5ff59707d8dULL, 0x5b116309d72c92adULL, 0x63fe9349612eedfeULL,
	      0xea5ce6c295f80ac0ULL}},
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct rl_rng r;

		rl_rng_seed(&r, cases[c].seed, cases[c].stream);
		for (int i = 0; i < 4; i++)
			cr_expect_eq(rl_rng_next(&r), cases[c].want[i], "case %zu output %d", c, i);
	}
}

/* The first uniforms of seed 42, stream 7, from the same Python script. */
static const double uniform_42_7[4] = {0x1.1a904479c05b0p-4, 0x1.9ffad28526058p-1,
                                       0x1.e79a909177bcep-2, 0x1.4072452c560a2p-2};

Test(rng, uniform_53_bits)
{
	struct rl_rng r;

	rl_rng_seed(&r, 42, 7);
	for (int i = 0; i < 4; i++)
		cr_expect_eq(rl_rng_uniform(&r), uniform_42_7[i], "uniform %d", i);
	/* Multiples of 2^-53 in [0, 1). */
	for (int i = 0; i < 100000; i++) {
		double u = rl_rng_uniform(&r);

		cr_assert(u >= 0 && u < 1);
		cr_assert_eq(u, ldexp(floor(ldexp(u, 53)), -53));
	}
}

/* ---- greedy ---- */

static int argmax_ref(const float *l, int vocab)
{
	int best = 0;

	for (int i = 1; i < vocab; i++)
		if (l[i] > l[best])
			best = i;
	return best;
}

/* log softmax(l / t)[tok] in double. */
static double logprob_ref(const float *l, int vocab, double t, int tok)
{
	double m = -INFINITY, sum = 0;

	for (int i = 0; i < vocab; i++)
		m = fmax(m, l[i] / t);
	for (int i = 0; i < vocab; i++)
		sum += exp(l[i] / t - m);
	return l[tok] / t - m - log(sum);
}

Test(sampler, greedy_argmax_and_ties)
{
	const float l[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, 3.0f};
	const struct rl_sampling g = {0.0f, 0, 1.0f};
	int32_t tok = -1;
	float lp = 0;
	char err[256];

	/* Ties go to the lowest id, as torch.argmax; no rng, no work. */
	cr_assert_eq(rl_sample(l, 6, &g, NULL, &tok, &lp, NULL, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(tok, 1);
	cr_expect_float_eq(lp, logprob_ref(l, 6, 1.0, 1), 1e-6);
	/* Top-k and top-p do not matter when greedy. */
	const struct rl_sampling g2 = {0.0f, 3, 0.2f};
	cr_assert_eq(rl_sample(l, 6, &g2, NULL, &tok, NULL, NULL, err, sizeof(err)), 0);
	cr_expect_eq(tok, 1);

	uint32_t s = 7;
	for (int rep = 0; rep < 20; rep++) {
		float *r = random_logits(&s, 3000, 4.0f);

		cr_assert_eq(rl_sample(r, 3000, &g, NULL, &tok, &lp, NULL, err, sizeof(err)), 0);
		cr_expect_eq(tok, argmax_ref(r, 3000));
		cr_expect_float_eq(lp, logprob_ref(r, 3000, 1.0, tok), 2e-5);
		free(r);
	}
}

Test(sampler, top_k_1_is_greedy)
{
	const float temps[] = {0.05f, 0.3f, 1.0f, 2.5f, 40.0f};
	const float top_ps[] = {1.0f, 0.5f};
	const int vocab = 2000;
	float *work = alloc_work(vocab);
	uint32_t s = 99;
	struct rl_rng rng;
	char err[256];

	rl_rng_seed(&rng, 5, 0);
	for (int rep = 0; rep < 10; rep++) {
		float *l = random_logits(&s, vocab, 3.0f);
		int want = argmax_ref(l, vocab);

		for (size_t t = 0; t < sizeof(temps) / sizeof(temps[0]); t++) {
			for (int p = 0; p < 2; p++) {
				const struct rl_sampling k1 = {temps[t], 1, top_ps[p]};
				int32_t tok = -1;

				cr_assert_eq(rl_sample(l, vocab, &k1, &rng, &tok, NULL, work, err,
				                       sizeof(err)),
				             0, "%s", err);
				cr_expect_eq(tok, want, "T %g", (double)temps[t]);
			}
		}
		free(l);
	}
	/* A tie for the top: exactly one token survives, the lower id. */
	const float tie[4] = {0.5f, 3.0f, 3.0f, 1.0f};
	const struct rl_sampling k1 = {2.0f, 1, 1.0f};
	for (int i = 0; i < 200; i++) {
		int32_t tok = -1;

		cr_assert_eq(rl_sample(tie, 4, &k1, &rng, &tok, NULL, work, err, sizeof(err)), 0);
		cr_expect_eq(tok, 1);
	}
	free(work);
}

/* ---- top-k / top-p sets against a brute-force reference ---- */

static const float *sort_key;

/* The ranking of sampler.h: scaled logit descending, then id ascending. */
static int by_rank(const void *pa, const void *pb)
{
	int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;

	if (sort_key[a] != sort_key[b])
		return sort_key[a] > sort_key[b] ? -1 : 1;
	return a < b ? -1 : a > b;
}

/* Full sort, probabilities in double, then the definition. ids gets the
 * whole ranking; returns the kept count. A cumulative sum within 1e-6 of
 * top_p is closer than fp32 probabilities can decide, so [*lo, *hi] is the
 * range of counts a correct sampler may keep (lo = hi away from such ties). */
static int support_ref(const float *l, int vocab, float t, int k, float p, int32_t *ids, int *lo,
                       int *hi)
{
	float *z = malloc((size_t)vocab * sizeof(*z));
	double zmax = -INFINITY, mass = 0, cum = 0;
	int n = vocab, keep;

	cr_assert_not_null(z);
	for (int i = 0; i < vocab; i++) {
		z[i] = l[i] / t; /* fp32 scaling, as specified */
		ids[i] = i;
		zmax = fmax(zmax, z[i]);
	}
	sort_key = z;
	qsort(ids, (size_t)vocab, sizeof(*ids), by_rank);
	if (k > 0 && k < vocab)
		n = k;
	for (int j = 0; j < n; j++)
		mass += exp(z[ids[j]] - zmax);
	keep = *lo = *hi = n;
	if (p < 1) {
		for (int j = 0; j < n; j++) {
			double prev = cum;

			cum += exp(z[ids[j]] - zmax) / mass;
			if (cum >= p) {
				keep = *lo = *hi = j + 1;
				if (j > 0 && fabs(prev - p) < 1e-6)
					*lo = j;
				if (j + 1 < n && fabs(cum - p) < 1e-6)
					*hi = j + 2;
				break;
			}
		}
	}
	free(z);
	return keep;
}

static void check_support(const float *l, int vocab, float t, int k, float p, float *work,
                          int *close)
{
	int32_t *got = malloc((size_t)vocab * sizeof(*got));
	int32_t *rank = malloc((size_t)vocab * sizeof(*rank));
	const struct rl_sampling s = {t, k, p};
	int n_got = -1, n_want, lo, hi;
	char err[256];

	cr_assert(got && rank);
	n_want = support_ref(l, vocab, t, k, p, rank, &lo, &hi);
	*close += lo != hi;
	cr_assert_eq(rl_sample_support(l, vocab, &s, got, &n_got, work, err, sizeof(err)), 0, "%s",
	             err);
	cr_expect(n_got >= lo && n_got <= hi, "vocab %d T %g k %d p %g: kept %d, want %d", vocab,
	          (double)t, k, (double)p, n_got, n_want);
	if (n_got >= lo && n_got <= hi)
		cr_expect_eq(memcmp(got, rank, (size_t)n_got * sizeof(*got)), 0,
		             "vocab %d T %g k %d p %g: ids differ", vocab, (double)t, k, (double)p);
	free(got);
	free(rank);
}

Test(sampler, top_k_top_p_sets_match_brute_force)
{
	const struct {
		int k;
		float p;
	} params[] = {{7, 1.0f},    {50, 1.0f}, {0, 0.5f},   {0, 0.9f},    {-1, 0.99f}, {40, 0.8f},
	              {500, 0.95f}, {0, 0.05f}, {3, 0.999f}, {0, 0.9999f}, {2000, 0.7f}};
	const float temps[] = {0.6f, 1.0f, 1.5f};
	const int vocabs[] = {1000, 150000};
	uint32_t s = 12345;
	int close = 0, total = 0;

	for (int v = 0; v < 2; v++) {
		int vocab = vocabs[v];
		float *work = alloc_work(vocab);
		float *l = random_logits(&s, vocab, 3.0f);

		for (size_t t = 0; t < sizeof(temps) / sizeof(temps[0]); t++)
			for (size_t c = 0; c < sizeof(params) / sizeof(params[0]); c++, total++)
				check_support(l, vocab, temps[t], params[c].k, params[c].p, work,
				              &close);
		free(l);
		free(work);
	}
	/* Mostly exact comparisons, not a test of tolerances. */
	cr_expect_leq(close, total / 5, "%d of %d cases within rounding", close, total);
}

Test(sampler, top_p_flat_and_wide_distributions)
{
	const int vocab = 150000;
	float *work = alloc_work(vocab);
	float *l = malloc((size_t)vocab * sizeof(*l));
	uint32_t s = 4242;
	int close = 0;

	cr_assert_not_null(l);
	/* Nearly flat: the nucleus is most of the vocabulary. */
	for (int i = 0; i < vocab; i++)
		l[i] = xs_uniform(&s) - 0.5f;
	check_support(l, vocab, 1.0f, 0, 0.9f, work, &close);
	check_support(l, vocab, 1.0f, 0, 0.3f, work, &close);
	/* Spread over hundreds of nats, so the histogram's last bucket holds
	 * mass that a top_p close to 1 needs. */
	for (int i = 0; i < vocab; i++)
		l[i] = -300.0f * xs_uniform(&s);
	check_support(l, vocab, 30.0f, 0, 0.999999f, work, &close);
	check_support(l, vocab, 30.0f, 0, 0.9f, work, &close);
	/* Many exact ties: the ranking must break them by id on both sides. */
	for (int i = 0; i < vocab; i++)
		l[i] = (float)(gc_rng(&s) % 16);
	check_support(l, vocab, 1.0f, 0, 0.1f, work, &close);
	check_support(l, vocab, 1.0f, 100, 0.5f, work, &close);
	free(l);
	free(work);
}

Test(sampler, top_k_ties_at_the_boundary)
{
	const float l[6] = {5.0f, 4.0f, 1.0f, 4.0f, 4.0f, 2.0f};
	const struct rl_sampling s = {1.0f, 2, 1.0f};
	float *work = alloc_work(6);
	int32_t ids[6];
	int n = 0;
	char err[256];

	cr_assert_eq(rl_sample_support(l, 6, &s, ids, &n, work, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(n, 2);
	cr_expect_eq(ids[0], 0);
	cr_expect_eq(ids[1], 1);
	free(work);
}

/* ---- distributions ---- */

static double chi_square(const long *count, const double *p, int n, long draws)
{
	double x = 0;

	for (int i = 0; i < n; i++) {
		double e = p[i] * (double)draws;

		x += (count[i] - e) * (count[i] - e) / e;
	}
	return x;
}

/* chi-square quantiles at tail probability 1e-6, by degrees of freedom
 * (1..4), from the regularized incomplete gamma function: a correct
 * sampler fails one of these with probability 1e-6 for a random seed. */
static const double chi2_1e6[5] = {0, 23.928, 27.631, 30.665, 33.377};

static void softmax_ref(const float *l, int n, double t, double *p)
{
	double m = -INFINITY, sum = 0;

	for (int i = 0; i < n; i++)
		m = fmax(m, l[i] / t);
	for (int i = 0; i < n; i++)
		sum += p[i] = exp(l[i] / t - m);
	for (int i = 0; i < n; i++)
		p[i] /= sum;
}

Test(sampler, frequencies_match_softmax)
{
	const float l[5] = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
	const struct rl_sampling s = {0.8f, 0, 1.0f};
	const long draws = 200000;
	float *work = alloc_work(5);
	long count[5] = {0};
	double p[5], q[5], x;
	struct rl_rng rng;
	char err[256];

	rl_rng_seed(&rng, 2024, 0);
	for (long d = 0; d < draws; d++) {
		int32_t tok = -1;

		cr_assert_eq(rl_sample(l, 5, &s, &rng, &tok, NULL, work, err, sizeof(err)), 0);
		cr_assert(tok >= 0 && tok < 5);
		count[tok]++;
	}
	softmax_ref(l, 5, 0.8, p);
	x = chi_square(count, p, 5, draws);
	cr_expect_lt(x, chi2_1e6[4], "chi-square %g", x);
	/* The same counts are far off the untempered distribution: the check
	 * has the power to see a sampler that ignores the temperature. */
	softmax_ref(l, 5, 1.0, q);
	cr_expect_gt(chi_square(count, q, 5, draws), 1000.0);
	free(work);
}

Test(sampler, frequencies_match_truncated_softmax)
{
	/* top-4 drops id 3; renormalized over the rest, sorted as 1, 4, 0, 2,
	 * the cumulative sums are .455, .731, .898: top_p .75 keeps 1, 4, 0. */
	const float l[5] = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
	const struct rl_sampling s = {1.0f, 4, 0.75f};
	const long draws = 200000;
	float *work = alloc_work(5);
	int32_t kept[5];
	long count[5] = {0}, kcount[5];
	double mass = 0, p[5];
	int n, lo, hi;
	struct rl_rng rng;
	char err[256];

	n = support_ref(l, 5, 1.0f, 4, 0.75f, kept, &lo, &hi);
	cr_assert_eq(n, 3);
	cr_assert_eq(lo, hi);
	rl_rng_seed(&rng, 77, 3);
	for (long d = 0; d < draws; d++) {
		int32_t tok = -1;

		cr_assert_eq(rl_sample(l, 5, &s, &rng, &tok, NULL, work, err, sizeof(err)), 0);
		count[tok]++;
	}
	for (int j = 0; j < n; j++)
		mass += exp(l[kept[j]]);
	for (int j = 0; j < n; j++) {
		p[j] = exp(l[kept[j]]) / mass;
		kcount[j] = count[kept[j]];
	}
	cr_expect_eq(count[2] + count[3], 0, "truncated tokens drawn");
	double x = chi_square(kcount, p, n, draws);
	cr_expect_lt(x, chi2_1e6[n - 1], "chi-square %g", x);
	free(work);
}

/* ---- reproducibility ---- */

static void draw_run(const float *l, int vocab, uint64_t seed, uint64_t stream, int n, int32_t *out,
                     float *work)
{
	const struct rl_sampling s = {1.0f, 0, 0.95f};
	struct rl_rng rng;
	char err[256];

	rl_rng_seed(&rng, seed, stream);
	for (int i = 0; i < n; i++)
		cr_assert_eq(rl_sample(l, vocab, &s, &rng, &out[i], NULL, work, err, sizeof(err)),
		             0);
}

Test(sampler, reproducible_per_stream)
{
	enum { vocab = 1000, n = 500, batch = 4 };
	uint32_t s = 31337;
	float *l = random_logits(&s, vocab, 1.0f), *work = alloc_work(vocab);
	int32_t a[n], b[n], c[n], inter[batch][n];
	int differ = 0;

	draw_run(l, vocab, 11, 2, n, a, work);
	draw_run(l, vocab, 11, 2, n, b, work);
	draw_run(l, vocab, 11, 3, n, c, work);
	cr_expect_eq(memcmp(a, b, sizeof(a)), 0);
	for (int i = 0; i < n; i++)
		differ += a[i] != c[i];
	cr_expect_gt(differ, n / 2, "streams 2 and 3 agree on %d of %d", n - differ, n);

	/* A batch of four sampled step by step, interleaved: sequence 2 gets
	 * what it gets alone. */
	struct rl_rng rng[batch];
	const struct rl_sampling sp = {1.0f, 0, 0.95f};
	char err[256];
	for (int q = 0; q < batch; q++)
		rl_rng_seed(&rng[q], 11, (uint64_t)q);
	for (int i = 0; i < n; i++)
		for (int q = 0; q < batch; q++)
			cr_assert_eq(rl_sample(l, vocab, &sp, &rng[q], &inter[q][i], NULL, work,
			                       err, sizeof(err)),
			             0);
	cr_expect_eq(memcmp(inter[2], a, sizeof(a)), 0);
	free(l);
	free(work);
}

Test(sampler, draws_follow_the_uniforms)
{
	/* Seed 42, stream 7 gives the uniforms uniform_42_7 (Python); with no
	 * truncation the token is the first id whose cumulative probability
	 * exceeds u, computed here in double. Same tokens on any platform. */
	const float l[5] = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f};
	const struct rl_sampling s = {1.0f, 0, 1.0f};
	float *work = alloc_work(5);
	double p[5];
	struct rl_rng rng;
	char err[256];

	softmax_ref(l, 5, 1.0, p);
	rl_rng_seed(&rng, 42, 7);
	for (int d = 0; d < 4; d++) {
		double cum = 0;
		int want = -1;
		int32_t tok = -1;

		for (int i = 0; i < 5 && want < 0; i++) {
			cum += p[i];
			cr_assert_gt(fabs(cum - uniform_42_7[d]), 1e-6);
			if (uniform_42_7[d] < cum)
				want = i;
		}
		cr_assert_eq(rl_sample(l, 5, &s, &rng, &tok, NULL, work, err, sizeof(err)), 0);
		cr_expect_eq(tok, want, "draw %d", d);
	}
	free(work);
}

/* ---- log-probabilities ---- */

Test(sampler, logprob_is_full_tempered_softmax)
{
	const struct rl_sampling cases[] = {
	    {0.7f, 10, 0.9f}, {1.3f, 0, 1.0f}, {1.0f, 0, 0.5f}, {0.25f, 3, 1.0f}};
	const int vocab = 500;
	uint32_t s = 8080;
	float *l = random_logits(&s, vocab, 2.0f), *work = alloc_work(vocab);
	struct rl_rng rng;
	char err[256];

	rl_rng_seed(&rng, 1, 0);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		for (int d = 0; d < 50; d++) {
			int32_t tok = -1;
			float lp = 1;

			cr_assert_eq(
			    rl_sample(l, vocab, &cases[c], &rng, &tok, &lp, work, err, sizeof(err)),
			    0, "%s", err);
			double want = logprob_ref(l, vocab, cases[c].temperature, tok);
			cr_expect(fabs(lp - want) <= 2e-5 * fmax(1, fabs(want)),
			          "case %zu token %d: %.9g vs %.9g", c, tok, (double)lp, want);
		}
	}
	free(l);
	free(work);
}

/* ---- bad input ---- */

static void expect_error(const float *l, int vocab, struct rl_sampling s, int with_rng,
                         const char *needle)
{
	float *work = alloc_work(vocab > 0 ? vocab : 1);
	struct rl_rng rng;
	int32_t tok;
	char err[256] = "";

	rl_rng_seed(&rng, 0, 0);
	cr_expect_eq(
	    rl_sample(l, vocab, &s, with_rng ? &rng : NULL, &tok, NULL, work, err, sizeof(err)), -1,
	    "accepted: %s", needle);
	cr_expect(strstr(err, needle) != NULL, "\"%s\" not in \"%s\"", needle, err);
	free(work);
}

Test(sampler, bad_input)
{
	float l[4] = {0, 1, 2, 3};
	const struct rl_sampling ok = {1.0f, 0, 1.0f};
	const struct rl_sampling greedy = {0.0f, 0, 1.0f};
	char err[256];
	int32_t tok;

	l[2] = NAN;
	expect_error(l, 4, ok, 1, "logits[2]");
	expect_error(l, 4, greedy, 1, "logits[2]");
	l[2] = INFINITY;
	expect_error(l, 4, ok, 1, "logits[2]");
	l[2] = -INFINITY;
	expect_error(l, 4, greedy, 1, "logits[2]");
	l[2] = 3e38f;
	expect_error(l, 4, (struct rl_sampling){0.01f, 0, 1.0f}, 1, "overflows");
	l[2] = 2;
	expect_error(l, 4, (struct rl_sampling){-1.0f, 0, 1.0f}, 1, "temperature");
	expect_error(l, 4, (struct rl_sampling){NAN, 0, 1.0f}, 1, "temperature");
	expect_error(l, 4, (struct rl_sampling){1.0f, -2, 1.0f}, 1, "top_k");
	expect_error(l, 4, (struct rl_sampling){1.0f, 0, 0.0f}, 1, "top_p");
	expect_error(l, 4, (struct rl_sampling){1.0f, 0, 1.5f}, 1, "top_p");
	expect_error(l, 4, (struct rl_sampling){1.0f, 0, NAN}, 1, "top_p");
	expect_error(l, 0, ok, 1, "vocab");
	expect_error(l, 4, ok, 0, "rng");
	cr_expect_eq(rl_sample(l, 4, &ok, NULL, &tok, NULL, NULL, err, sizeof(err)), -1);
	struct rl_rng rng;
	rl_rng_seed(&rng, 0, 0);
	cr_expect_eq(rl_sample(l, 4, &ok, &rng, &tok, NULL, NULL, err, sizeof(err)), -1);
	cr_expect(strstr(err, "work") != NULL, "%s", err);
	/* top_k -1 and 0 are both off; top_k beyond the vocabulary is off. */
	float *work = alloc_work(4);
	const struct rl_sampling offs[] = {{1.0f, -1, 1.0f}, {1.0f, 0, 1.0f}, {1.0f, 99, 1.0f}};
	for (int i = 0; i < 3; i++) {
		int32_t ids[4];
		int n = 0;

		cr_expect_eq(rl_sample_support(l, 4, &offs[i], ids, &n, work, err, sizeof(err)), 0);
		cr_expect_eq(n, 4);
	}
	free(work);
}
