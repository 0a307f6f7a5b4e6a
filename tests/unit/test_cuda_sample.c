/* The CUDA sample op against the CPU one (kernels/cpu/sample.c) on the same
 * logits and counters. Greedy must give the CPU's token everywhere (a
 * maximum is exact). A sampled row must too, but for one thing sample.h
 * allows: the GPU sums the masses in another order, so a u within rounding
 * of the boundary between two tokens may pick the neighbour. Such a row is
 * told apart on the host: the CPU row op at u - 1e-9 or u + 1e-9 gives
 * another token, and the GPU's token must then be one of those; a summing
 * error even a thousand times the double rounding of a 150k-term sum stays
 * far inside 1e-9 of the mass. Rows mix flat, peaked, wide and heavily
 * tied logits (quantised, and one row all equal), so top-k, top-p and the
 * draw all meet ties at their boundaries; the padding past vocab is NaN,
 * so a kernel that read it would return -1. Also: non-finite rows give -1
 * and leave their neighbours alone, repeated calls give the same tokens,
 * and a row's token does not depend on n or on its place in the batch.
 * The argument checks run without a GPU. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/philox.h"
#include "kernels/sample.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/ops_test_util.h"

#ifdef RL_HAVE_CUDA
/* Host pointers stand in for device ones: every check comes before any
 * CUDA call, and n == 0 returns before one too. The CPU op makes the same
 * checks, so both are held to them here. */
Test(cuda_sample, bad_arguments)
{
	float l[4] = {0};
	int32_t tok[2] = {7, 7};
	int64_t ctr[4] = {0};
	const struct rl_sample_params ok = {
	    .temperature = 0.7f, .top_k = -1, .top_p = 1.0f, .seed = 1};
	struct rl_sample_params bad[] = {ok, ok, ok, ok, ok, ok, ok, ok, ok};
	rl_sample_fn fns[2] = {rl_sample_cpu, rl_sample_cuda};

	bad[0].temperature = -1.0f;
	bad[1].temperature = NAN;
	bad[2].temperature = INFINITY;
	bad[3].top_k = -2;
	bad[4].top_p = 0.0f;
	bad[5].top_p = -0.5f;
	bad[6].top_p = 1.5f;
	bad[7].top_p = NAN;
	bad[8].temperature = -0.0f; /* -0 >= 0: greedy, not an error */
	for (int f = 0; f < 2; f++) {
		rl_sample_fn fn = fns[f];

		cr_expect_eq(fn(NULL, l, 1, 4, 4, &ok, ctr, NULL), -1, "fn %d: tokens NULL", f);
		cr_expect_eq(fn(tok, NULL, 1, 4, 4, &ok, ctr, NULL), -1, "fn %d: logits NULL", f);
		cr_expect_eq(fn(tok, l, 1, 4, 4, NULL, ctr, NULL), -1, "fn %d: params NULL", f);
		cr_expect_eq(fn(tok, l, 1, 4, 4, &ok, NULL, NULL), -1, "fn %d: counters NULL", f);
		cr_expect_eq(fn(tok, l, -1, 4, 4, &ok, ctr, NULL), -1, "fn %d: n -1", f);
		cr_expect_eq(fn(tok, l, 1, 0, 4, &ok, ctr, NULL), -1, "fn %d: vocab 0", f);
		cr_expect_eq(fn(tok, l, 1, 4, 3, &ok, ctr, NULL), -1, "fn %d: ld < vocab", f);
		for (int b = 0; b < 8; b++)
			cr_expect_eq(fn(tok, l, 1, 4, 4, &bad[b], ctr, NULL), -1, "fn %d: case %d",
			             f, b);
		cr_expect_eq(fn(tok, l, 0, 4, 4, &ok, ctr, NULL), 0, "fn %d: n 0", f);
		cr_expect_eq(fn(tok, l, 0, 4, 4, &bad[8], ctr, NULL), 0, "fn %d: T -0", f);
	}
	cr_expect(tok[0] == 7 && tok[1] == 7, "n 0 wrote tokens");
}
#else
Test(cuda_sample, bad_arguments)
{
	cr_skip_test("built without --with-cuda");
}
#endif

#ifdef RL_HAVE_CUDA
/* Rows padded to ld = vocab + 3, on the host and on the device. */
struct sp_batch {
	int n, vocab, ld;
	float *logits;     /* n * ld */
	int64_t *counters; /* (stream, position) per row */
	float *d_logits;
	int64_t *d_counters;
	int32_t *d_tokens;
};

/* Row r's kind is r % 5: flat in [-4, 4); the same with five tokens well
 * above the rest (a nucleus of a few); quantised to halves (16 values, so
 * ties at every boundary); wide, [-24, 2) (many masses far below the top,
 * some underflowing at T 0.7); all equal. */
static void sp_fill_row(float *row, int vocab, int r, uint32_t *seed)
{
	switch (r % 5) {
	case 0:
		gc_fill(seed, row, (size_t)vocab, -4.0f, 4.0f);
		break;
	case 1:
		gc_fill(seed, row, (size_t)vocab, -4.0f, 4.0f);
		for (int j = 0; j < 5; j++)
			row[gc_rng(seed) % (uint32_t)vocab] = gc_uniform(seed, 8.0f, 9.0f);
		break;
	case 2:
		gc_fill(seed, row, (size_t)vocab, -4.0f, 4.0f);
		for (int i = 0; i < vocab; i++)
			row[i] = floorf(row[i] * 2.0f) * 0.5f;
		break;
	case 3:
		gc_fill(seed, row, (size_t)vocab, -24.0f, 2.0f);
		break;
	default:
		for (int i = 0; i < vocab; i++)
			row[i] = 1.25f;
		break;
	}
}

static void sp_batch_init(struct sp_batch *b, int n, int vocab, uint32_t seed)
{
	size_t nl;

	b->n = n;
	b->vocab = vocab;
	b->ld = vocab + 3;
	nl = (size_t)n * (size_t)b->ld;
	b->logits = falloc(nl);
	b->counters = calloc(2 * (size_t)n, sizeof(*b->counters));
	cr_assert_not_null(b->counters);
	for (int r = 0; r < n; r++) {
		float *row = b->logits + (size_t)r * (size_t)b->ld;

		sp_fill_row(row, vocab, r, &seed);
		for (int i = vocab; i < b->ld; i++)
			row[i] = NAN;
		/* distinct streams and positions; a large stream as well */
		b->counters[2 * r] = r == n - 1 ? INT64_C(0x123456789) : 1000 + 37 * r;
		b->counters[2 * r + 1] = 5 + 13 * r;
	}
	b->d_logits = dev_upload(b->logits, nl);
	b->d_counters = dev_alloc(2 * (size_t)n * sizeof(int64_t));
	cuda_ok(cudaMemcpy(b->d_counters, b->counters, 2 * (size_t)n * sizeof(int64_t),
	                   cudaMemcpyHostToDevice),
	        "upload counters");
	b->d_tokens = dev_alloc((size_t)n * sizeof(int32_t));
}

/* The device copy again, after the host rows were changed. */
static void sp_batch_upload(struct sp_batch *b)
{
	cuda_ok(cudaMemcpy(b->d_logits, b->logits, (size_t)b->n * (size_t)b->ld * sizeof(float),
	                   cudaMemcpyHostToDevice),
	        "upload logits");
}

static void sp_batch_free(struct sp_batch *b)
{
	free(b->logits);
	free(b->counters);
	dev_free(b->d_logits);
	dev_free(b->d_counters);
	dev_free(b->d_tokens);
}

/* rows [r0, r0 + n) of the batch as a call of their own, into got */
static void sp_run_gpu(const struct sp_batch *b, const struct rl_sample_params *p, int r0, int n,
                       void *stream, int32_t *got)
{
	cuda_ok(cudaMemset(b->d_tokens, 0x7f, (size_t)b->n * sizeof(int32_t)), "memset");
	cr_assert_eq(rl_sample_cuda(b->d_tokens, b->d_logits + (size_t)r0 * (size_t)b->ld, n,
	                            b->vocab, b->ld, p, b->d_counters + 2 * (size_t)r0, stream),
	             0, "launch");
	dev_download_i32(got, b->d_tokens, (size_t)n);
}

static int32_t sp_row_at(const struct sp_batch *b, const struct rl_sample_params *p, int r,
                         double u, void *work)
{
	int32_t t = -2;

	if (rl_sample_row_cpu(b->logits + (size_t)r * (size_t)b->ld, b->vocab, p->temperature,
	                      p->top_k, p->top_p, u, &t, NULL, work))
		return -1;
	return t;
}

/* got against the CPU's want, row by row (see the top); returns how many
 * rows differed at a boundary. */
static int sp_expect_tokens(const char *what, const struct sp_batch *b,
                            const struct rl_sample_params *p, const int32_t *got,
                            const int32_t *want)
{
	void *work = malloc(rl_sample_row_work_bytes(b->vocab));
	bool greedy = p->temperature < RL_SAMPLE_GREEDY_EPS;
	int near = 0;

	cr_assert_not_null(work);
	for (int r = 0; r < b->n; r++) {
		if (got[r] == want[r])
			continue;
		if (greedy || want[r] < 0) {
			cr_expect(false, "%s: row %d: token %d, CPU %d", what, r, got[r], want[r]);
			continue;
		}

		double u = rl_philox_uniform(p->seed, (uint64_t)b->counters[2 * r],
		                             (uint64_t)b->counters[2 * r + 1]);
		int32_t below = sp_row_at(b, p, r, fmax(u - 1e-9, 0.0), work);
		int32_t above = sp_row_at(b, p, r, fmin(u + 1e-9, nextafter(1.0, 0.0)), work);
		bool boundary = below != want[r] || above != want[r];

		cr_expect(boundary && (got[r] == below || got[r] == above),
		          "%s: row %d (kind %d): token %d, CPU %d (u %.17g; at u -/+ 1e-9: %d, %d)",
		          what, r, r % 5, got[r], want[r], u, below, above);
		near += boundary;
	}
	free(work);
	return near;
}

struct sp_case {
	const char *name;
	struct rl_sample_params p;
};

static const struct sp_case sp_cases[] = {
    {"greedy", {.temperature = 0.0f, .top_k = -1, .top_p = 1.0f, .seed = 11}},
    {"T 0.7", {.temperature = 0.7f, .top_k = -1, .top_p = 1.0f, .seed = 12}},
    {"T 1.3, top_k 0", {.temperature = 1.3f, .top_k = 0, .top_p = 1.0f, .seed = 13}},
    {"top_k 1", {.temperature = 0.7f, .top_k = 1, .top_p = 1.0f, .seed = 14}},
    {"top_k 50", {.temperature = 0.7f, .top_k = 50, .top_p = 1.0f, .seed = 15}},
    {"top_p 0.9", {.temperature = 0.7f, .top_k = -1, .top_p = 0.9f, .seed = 16}},
    {"top_k 50, top_p 0.8", {.temperature = 0.7f, .top_k = 50, .top_p = 0.8f, .seed = 17}},
    {"top_k 600, top_p 0.5", {.temperature = 1.0f, .top_k = 600, .top_p = 0.5f, .seed = 18}},
    {"top_p 0.05, T 2", {.temperature = 2.0f, .top_k = -1, .top_p = 0.05f, .seed = 19}},
};
#define SP_NCASES (sizeof(sp_cases) / sizeof(sp_cases[0]))

/* Every case on one batch: the CPU's tokens, twice the same tokens from
 * the GPU (on the legacy stream and on a stream of its own), and the same
 * tokens again from single rows and from the second half as a call of its
 * own. top_k 1 must also be the argmax of z, which random rows make the
 * argmax of the logits. */
static void sp_check_batch(int vocab, uint32_t seed)
{
	struct sp_batch b;
	cudaStream_t stream;
	int n = 64, near = 0;
	int32_t want[64], got[64], again[64], part[64];

	sp_batch_init(&b, n, vocab, seed);
	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	for (size_t c = 0; c < SP_NCASES; c++) {
		const struct sp_case *k = &sp_cases[c];
		char what[96];

		snprintf(what, sizeof(what), "vocab %d, %s", vocab, k->name);
		cr_assert_eq(rl_sample_cpu(want, b.logits, n, vocab, b.ld, &k->p, b.counters, NULL),
		             0);
		for (int r = 0; r < n; r++)
			cr_assert(want[r] >= 0 && want[r] < vocab, "%s: CPU row %d: %d", what, r,
			          want[r]);
		sp_run_gpu(&b, &k->p, 0, n, NULL, got);
		near += sp_expect_tokens(what, &b, &k->p, got, want);

		sp_run_gpu(&b, &k->p, 0, n, stream, again);
		cr_expect_arr_eq(again, got, sizeof(got), "%s: a second call differs", what);
		for (int r = 0; r < n; r += n / 4 + 1) {
			sp_run_gpu(&b, &k->p, r, 1, NULL, part);
			cr_expect_eq(part[0], got[r], "%s: row %d alone: %d, in the batch %d", what,
			             r, part[0], got[r]);
		}
		sp_run_gpu(&b, &k->p, n / 2, n - n / 2, stream, part);
		cr_expect_arr_eq(part, got + n / 2, (size_t)(n - n / 2) * sizeof(int32_t),
		                 "%s: the second half alone differs", what);

		if (k->p.top_k == 1) {
			struct rl_sample_params g = k->p;

			g.temperature = 0.0f;
			cr_assert_eq(
			    rl_sample_cpu(part, b.logits, n, vocab, b.ld, &g, b.counters, NULL), 0);
			for (int r = 0; r < n; r++)
				cr_expect_eq(got[r], part[r], "%s: row %d: %d, the argmax %d", what,
				             r, got[r], part[r]);
		}
	}
	/* a handful at most in 64 rows x 8 sampled cases: more means the sums
	 * drift, not round */
	cr_expect_leq(near, 4, "vocab %d: %d rows at a boundary", vocab, near);
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
	sp_batch_free(&b);
}
#endif

Test(cuda_sample, matches_cpu_vocab_1000)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	sp_check_batch(1000, 0x5a3b1e01u);
#endif
}

/* Qwen's vocabulary: 297 tokens a thread per pass. */
Test(cuda_sample, matches_cpu_vocab_151936, .timeout = 300)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	sp_check_batch(151936, 0x5a3b1e02u);
#endif
}

/* Small vocabularies: one token, fewer tokens than threads, top_k at
 * vocab - 1 and at vocab (off). */
Test(cuda_sample, small_vocabularies)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int vocabs[] = {1, 2, 7, 33, 513};

	for (size_t v = 0; v < sizeof(vocabs) / sizeof(vocabs[0]); v++) {
		struct sp_batch b;
		int vocab = vocabs[v], n = 10;
		int32_t want[10], got[10];
		struct rl_sample_params ps[] = {
		    {.temperature = 0.0f, .top_k = -1, .top_p = 1.0f, .seed = 3},
		    {.temperature = 0.9f, .top_k = -1, .top_p = 1.0f, .seed = 4},
		    {.temperature = 0.9f, .top_k = vocab - 1, .top_p = 1.0f, .seed = 5},
		    {.temperature = 0.9f, .top_k = vocab, .top_p = 0.7f, .seed = 6},
		    {.temperature = 0.9f, .top_k = 2, .top_p = 0.3f, .seed = 7},
		};

		sp_batch_init(&b, n, vocab, 0x77u + (uint32_t)v);
		for (size_t c = 0; c < sizeof(ps) / sizeof(ps[0]); c++) {
			char what[64];

			snprintf(what, sizeof(what), "vocab %d, case %zu", vocab, c);
			cr_assert_eq(
			    rl_sample_cpu(want, b.logits, n, vocab, b.ld, &ps[c], b.counters, NULL),
			    0);
			sp_run_gpu(&b, &ps[c], 0, n, NULL, got);
			sp_expect_tokens(what, &b, &ps[c], got, want);
		}
		sp_batch_free(&b);
	}
#endif
}

/* A NaN, an infinity of either sign, or a logit that overflows once divided
 * by the temperature: that row gets -1 and the rows beside it their tokens. */
Test(cuda_sample, non_finite_rows)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	struct sp_batch b;
	int n = 10, vocab = 5000;
	int32_t want[10], got[10];
	const struct rl_sample_params ps[] = {
	    {.temperature = 0.0f, .top_k = -1, .top_p = 1.0f, .seed = 21},
	    {.temperature = 0.5f, .top_k = -1, .top_p = 1.0f, .seed = 22},
	    {.temperature = 0.5f, .top_k = 40, .top_p = 0.9f, .seed = 23},
	    {.temperature = 0.5f, .top_k = -1, .top_p = 0.9f, .seed = 24},
	};

	sp_batch_init(&b, n, vocab, 0x0bad0001u);
	b.logits[1 * (size_t)b.ld + 0] = NAN;
	b.logits[3 * (size_t)b.ld + (size_t)vocab - 1] = INFINITY;
	b.logits[5 * (size_t)b.ld + 2500] = -INFINITY;
	b.logits[7 * (size_t)b.ld + 17] = 3e38f; /* finite; / 0.5 is not */
	sp_batch_upload(&b);
	for (size_t c = 0; c < sizeof(ps) / sizeof(ps[0]); c++) {
		bool greedy = ps[c].temperature < RL_SAMPLE_GREEDY_EPS;
		char what[64];

		snprintf(what, sizeof(what), "non-finite, case %zu", c);
		cr_assert_eq(
		    rl_sample_cpu(want, b.logits, n, vocab, b.ld, &ps[c], b.counters, NULL), 0);
		sp_run_gpu(&b, &ps[c], 0, n, NULL, got);
		for (int r = 1; r <= 5; r += 2)
			cr_expect_eq(got[r], -1, "%s: row %d: %d", what, r, got[r]);
		/* greedy never divides: 3e38 is just the argmax there */
		cr_expect_eq(got[7], greedy ? 17 : -1, "%s: row 7: %d", what, got[7]);
		sp_expect_tokens(what, &b, &ps[c], got, want);
	}
	sp_batch_free(&b);
#endif
}

/* Greedy ties go to the lowest id, -0 ties with +0, and a tie at the top
 * of a sampled row's ranking goes by id as well (top_k 1). */
Test(cuda_sample, greedy_ties)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	struct sp_batch b;
	int n = 4, vocab = 70000;
	int32_t got[4];
	struct rl_sample_params greedy = {.temperature = 0.0f, .top_k = -1, .top_p = 1.0f};
	struct rl_sample_params top1 = {.temperature = 0.7f, .top_k = 1, .top_p = 1.0f};

	sp_batch_init(&b, n, vocab, 0x71e50001u);
	for (int r = 0; r < n; r++) {
		float *row = b.logits + (size_t)r * (size_t)b.ld;

		for (int i = 0; i < vocab; i++)
			row[i] = r == 3 ? -fabsf(row[i]) - 1.0f : row[i];
		if (r < 3) {
			row[69999] = 50.0f;
			row[40000 - 13000 * r] = 50.0f;
			row[65000] = 50.0f;
		} else {
			row[60001] = 0.0f;
			row[20002] = -0.0f;
			row[50003] = 0.0f;
		}
	}
	sp_batch_upload(&b);
	for (int c = 0; c < 2; c++) {
		sp_run_gpu(&b, c ? &top1 : &greedy, 0, n, NULL, got);
		for (int r = 0; r < 3; r++)
			cr_expect_eq(got[r], 40000 - 13000 * r, "case %d, row %d: %d", c, r,
			             got[r]);
		cr_expect_eq(got[3], 20002, "case %d, row 3 (-0 and +0): %d", c, got[3]);
	}
	sp_batch_free(&b);
#endif
}
