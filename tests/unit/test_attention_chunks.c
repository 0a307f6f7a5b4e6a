/* Attention of query chunks against their sequences' keys (context
 * parallelism): every rank's chunks of a packed batch, split as Megatron
 * balances them, against the full attention of attention.c (other code);
 * the backward against central finite differences of a naive double
 * reference; the bits against the number of threads; bad tables. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/attention.h"
#include "tests/unit/ops_test_util.h"

/* A chunk table the test owns. */
struct table {
	int n;
	int32_t q_start[64], k_start[64], offset[64], len[64];
};

static struct rl_attention_chunks table_view(const struct table *t)
{
	return (struct rl_attention_chunks){t->n, t->q_start, t->k_start, t->offset, t->len};
}

static void table_add(struct table *t, int q_start, int k_start, int offset, int len)
{
	cr_assert_lt(t->n, 64);
	t->q_start[t->n] = q_start;
	t->k_start[t->n] = k_start;
	t->offset[t->n] = offset;
	t->len[t->n] = len;
	t->n++;
}

/* Rank r of cp takes chunks r and 2cp-1-r of every sequence (chunk c of a
 * sequence of length L is its positions c L / 2cp .. (c+1) L / 2cp - 1), its
 * query rows packed in that order; empty chunks are left out. rows[i] is the
 * full batch's row of the rank's query row i; returns how many. */
static int rank_table(struct table *t, int *rows, const int32_t *cu, int n_seqs, int cp, int rank)
{
	int n = 0;

	t->n = 0;
	for (int s = 0; s < n_seqs; s++) {
		const int L = cu[s + 1] - cu[s], picks[2] = {rank, 2 * cp - 1 - rank};

		for (int p = 0; p < 2; p++) {
			const int lo = picks[p] * L / (2 * cp), hi = (picks[p] + 1) * L / (2 * cp);

			if (hi == lo)
				continue;
			table_add(t, n, cu[s], lo, hi - lo);
			for (int j = lo; j < hi; j++)
				rows[n++] = cu[s] + j;
		}
	}
	return n;
}

/* dst row i = src row rows[i], rows of w floats */
static void gather(float *dst, const float *src, const int *rows, int n, size_t w)
{
	for (int i = 0; i < n; i++)
		memcpy(dst + (size_t)i * w, src + (size_t)rows[i] * w, w * sizeof(float));
}

/* got row i against want row rows[i], |got - want| <= rtol |want| + atol */
static void expect_rows(const char *what, const float *got, const float *want, const int *rows,
                        int n, size_t w, double rtol, double atol)
{
	double *ref = dalloc((size_t)n * w);

	for (int i = 0; i < n; i++)
		for (size_t e = 0; e < w; e++)
			ref[(size_t)i * w + e] = want[(size_t)rows[i] * w + e];
	close_all(what, got, ref, (size_t)n * w, rtol, atol);
	free(ref);
}

static double fabsmax(const float *x, size_t n)
{
	double m = 0.0;

	for (size_t i = 0; i < n; i++)
		m = fmax(m, fabs((double)x[i]));
	return m;
}

/* Every rank's forward against the full forward's rows; every rank's
 * backward into its own dq and a dk, dv shared by all ranks, against the
 * full backward. */
static void check_cp(const int *lens, int n_seqs, int H, int Hkv, int D, int cp, uint32_t seed)
{
	const struct rl_attention_shape sh = {H, Hkv, D, (float)(1.0 / sqrt((double)D))};
	int32_t cu[17] = {0};

	cr_assert_leq(n_seqs, 16);
	for (int s = 0; s < n_seqs; s++)
		cu[s + 1] = cu[s] + lens[s];

	const int T = cu[n_seqs];
	const size_t wq = (size_t)H * D, wkv = (size_t)Hkv * D, nq = T * wq, nkv = T * wkv;
	float *q = frand(&seed, nq, -2, 2), *k = frand(&seed, nkv, -2, 2);
	float *v = frand(&seed, nkv, -1, 1), *dout = frand(&seed, nq, -1, 1);
	float *out = falloc(nq), *lse = falloc((size_t)T * H);
	float *dq = falloc(nq), *dk = falloc(nkv), *dv = falloc(nkv);
	float *dk_sum = falloc(nkv), *dv_sum = falloc(nkv);
	int *rows = calloc((size_t)T + 1, sizeof(int)), *seen = calloc((size_t)T + 1, sizeof(int));

	cr_assert(rows && seen);
	cr_assert_eq(rl_attention_forward_cpu(out, lse, q, k, v, cu, n_seqs, &sh, NULL), 0);
	cr_assert_eq(
	    rl_attention_backward_cpu(dq, dk, dv, dout, q, k, v, out, lse, cu, n_seqs, &sh, NULL),
	    0);

	const double dq_tol = 1e-6 * fabsmax(dq, nq);

	for (int r = 0; r < cp; r++) {
		struct table t;
		const int n = rank_table(&t, rows, cu, n_seqs, cp, r);
		const struct rl_attention_chunks ch = table_view(&t);
		float *rq = falloc(n * wq), *rdout = falloc(n * wq), *rout = falloc(n * wq);
		float *rlse = falloc((size_t)n * H), *rdq = falloc(n * wq);

		for (int i = 0; i < n; i++)
			seen[rows[i]]++;
		gather(rq, q, rows, n, wq);
		gather(rdout, dout, rows, n, wq);
		cr_assert_eq(rl_attention_chunks_forward_cpu(rout, rlse, rq, k, v, &ch, &sh, NULL),
		             0);
		expect_rows("out", rout, out, rows, n, wq, 1e-5, 1e-6);
		expect_rows("lse", rlse, lse, rows, n, H, 1e-5, 1e-6);
		cr_assert_eq(rl_attention_chunks_backward_cpu(rdq, dk_sum, dv_sum, rdout, rq, k, v,
		                                              rout, rlse, &ch, &sh, NULL),
		             0);
		expect_rows("dq", rdq, dq, rows, n, wq, 1e-5, dq_tol);
		free(rq);
		free(rdout);
		free(rout);
		free(rlse);
		free(rdq);
	}
	/* the split itself: every query row on exactly one rank */
	for (int i = 0; i < T; i++)
		cr_expect_eq(seen[i], 1, "row %d is on %d ranks", i, seen[i]);

	double *want = widen(dk, nkv);

	close_all("dk", dk_sum, want, nkv, 1e-5, 1e-6 * absmax(want, nkv));
	free(want);
	want = widen(dv, nkv);
	close_all("dv", dv_sum, want, nkv, 1e-5, 1e-6 * absmax(want, nkv));
	free(want);
	free(q);
	free(k);
	free(v);
	free(dout);
	free(out);
	free(lse);
	free(dq);
	free(dk);
	free(dv);
	free(dk_sum);
	free(dv_sum);
	free(rows);
	free(seen);
}

Test(attention_chunks, ranks_match_the_full_attention_gqa)
{
	/* a 1-token sequence leaves empty chunks; H = 4 over 2 kv heads */
	static const int lens[] = {7, 12, 1, 9};

	check_cp(lens, 4, 4, 2, 8, 2, 0x1001u);
	check_cp(lens, 4, 4, 2, 8, 3, 0x1002u);
}

Test(attention_chunks, ranks_match_the_full_attention_mha)
{
	static const int lens[] = {7, 12, 1, 9};

	check_cp(lens, 4, 3, 3, 5, 2, 0x2001u);
	check_cp(lens, 4, 3, 3, 5, 3, 0x2002u);
}

Test(attention_chunks, ranks_match_across_query_tiles)
{
	/* chunks of 75 and 65 rows cross the 64-row query tile, and the second
	 * chunk's tiles start 75 keys in; MQA */
	static const int lens[] = {150, 3, 131};

	check_cp(lens, 3, 4, 1, 16, 1, 0x3001u);
	check_cp(lens, 3, 4, 1, 16, 2, 0x3002u);
}

/* ---- the backward against finite differences of a double reference ---- */

struct fd_case {
	const struct table *t;
	int tq, tk, H, Hkv, D;
	double scale;
	double *q, *k, *v;
	const float *r; /* the loss is sum(out * r) */
};

/* chunk by chunk, query by query, the softmax over its keys in double */
static double fd_loss(const struct fd_case *c)
{
	const int H = c->H, Hkv = c->Hkv, D = c->D, rep = H / Hkv;
	double *w = dalloc((size_t)c->tk), loss = 0.0;

	for (int i = 0; i < c->t->n; i++)
		for (int j = 0; j < c->t->len[i]; j++)
			for (int h = 0; h < H; h++) {
				const size_t row = (size_t)(c->t->q_start[i] + j) * H + h;
				const double *qi = c->q + row * D;
				const int k0 = c->t->k_start[i], k1 = k0 + c->t->offset[i] + j;
				double mx = -INFINITY, sum = 0.0;

				for (int s = k0; s <= k1; s++) {
					const double *ks = c->k + ((size_t)s * Hkv + h / rep) * D;
					double dot = 0.0;

					for (int d = 0; d < D; d++)
						dot += qi[d] * ks[d];
					w[s] = c->scale * dot;
					mx = fmax(mx, w[s]);
				}
				for (int s = k0; s <= k1; s++)
					sum += w[s] = exp(w[s] - mx);
				for (int d = 0; d < D; d++) {
					double o = 0.0;

					for (int s = k0; s <= k1; s++)
						o += w[s] / sum *
						     c->v[((size_t)s * Hkv + h / rep) * D + d];
					loss += o * c->r[row * D + d];
				}
			}
	free(w);
	return loss;
}

static void fd_check(const char *what, double *x, size_t n, const float *grad,
                     const struct fd_case *c)
{
	const double h = 1e-5;
	double *fd = dalloc(n), scale = 0.0;

	for (size_t i = 0; i < n; i++) {
		const double keep = x[i];

		x[i] = keep + h;
		const double lp = fd_loss(c);
		x[i] = keep - h;
		const double lm = fd_loss(c);
		x[i] = keep;
		fd[i] = (lp - lm) / (2 * h);
		scale = fmax(scale, fabs(fd[i]));
	}
	cr_assert_gt(scale, 0.0, "%s: the loss does not depend on it", what);
	for (size_t i = 0; i < n; i++)
		expect_close(what, i, grad[i], fd[i], 1e-4, 1e-5 * scale);
	free(fd);
}

/* The table: two sequences' keys, 5 and 7 rows, their chunks out of order
 * in q, two chunks sharing the second sequence's keys, one empty chunk. */
static void check_finite_differences(int threads)
{
	struct table t = {0};
	const int H = 4, Hkv = 1, D = 4, tq = 8, tk = 12;
	const struct rl_attention_shape sh = {H, Hkv, D, 0.5f};
	uint32_t seed = 0xfeedu;

	table_add(&t, 0, 5, 4, 3); /* positions 4..6 of the second sequence */
	table_add(&t, 3, 0, 1, 2); /* positions 1..2 of the first */
	table_add(&t, 7, 0, 0, 0);
	table_add(&t, 5, 5, 0, 2); /* positions 0..1 of the second */
	table_add(&t, 7, 0, 4, 1); /* the first's last token */

	const struct rl_attention_chunks ch = table_view(&t);
	const size_t nq = (size_t)tq * H * D, nkv = (size_t)tk * Hkv * D;
	float *q = frand(&seed, nq, -1.5f, 1.5f), *k = frand(&seed, nkv, -1.5f, 1.5f);
	float *v = frand(&seed, nkv, -1, 1), *r = frand(&seed, nq, -1, 1);
	float *out = falloc(nq), *lse = falloc((size_t)tq * H);
	/* the backward adds: start from something and take it off again */
	float *dq = frand(&seed, nq, -1, 1), *dk = frand(&seed, nkv, -1, 1);
	float *dv = frand(&seed, nkv, -1, 1);
	double *dq0 = widen(dq, nq), *dk0 = widen(dk, nkv), *dv0 = widen(dv, nkv);
	struct fd_case c = {&t, tq, tk, H, Hkv, D, 0.5, widen(q, nq), widen(k, nkv), widen(v, nkv),
	                    r};

#ifdef _OPENMP
	omp_set_num_threads(threads);
#else
	(void)threads;
#endif
	cr_assert_eq(rl_attention_chunks_forward_cpu(out, lse, q, k, v, &ch, &sh, NULL), 0);
	cr_assert_eq(
	    rl_attention_chunks_backward_cpu(dq, dk, dv, r, q, k, v, out, lse, &ch, &sh, NULL), 0);
	for (size_t i = 0; i < nq; i++)
		dq[i] = (float)(dq[i] - dq0[i]);
	for (size_t i = 0; i < nkv; i++) {
		dk[i] = (float)(dk[i] - dk0[i]);
		dv[i] = (float)(dv[i] - dv0[i]);
	}
	fd_check("dq", c.q, nq, dq, &c);
	fd_check("dk", c.k, nkv, dk, &c);
	fd_check("dv", c.v, nkv, dv, &c);
	free(q);
	free(k);
	free(v);
	free(r);
	free(out);
	free(lse);
	free(dq);
	free(dk);
	free(dv);
	free(dq0);
	free(dk0);
	free(dv0);
	free(c.q);
	free(c.k);
	free(c.v);
}

Test(attention_chunks, backward_matches_finite_differences)
{
	check_finite_differences(1);
}

Test(attention_chunks, backward_split_by_query_head_matches_finite_differences)
{
	/* two key ranges and one kv head: with four threads the backward splits
	 * by query head and sums the kv gradients afterwards */
	check_finite_differences(4);
}

#ifdef _OPENMP
Test(attention_chunks, thread_count_does_not_change_the_bits)
{
	/* 1 and 2 threads: by (key range, kv head), 2 pairs; 3: by query head */
	static const int32_t cu[] = {0, 90, 130};
	const int H = 4, Hkv = 1, D = 16, T = 130;
	const struct rl_attention_shape sh = {H, Hkv, D, 0.25f};
	static const int counts[] = {1, 3, 2};
	const size_t nq = (size_t)T * H * D, nkv = (size_t)T * Hkv * D;
	uint32_t seed = 1234;
	float *q = frand(&seed, nq, -1.5f, 1.5f), *k = frand(&seed, nkv, -1.5f, 1.5f);
	float *v = frand(&seed, nkv, -1, 1), *got[3][5];
	struct table t;
	int *rows = calloc(T, sizeof(int)), n = 0;

	cr_assert_not_null(rows);
	/* rank 0 of 2 and rank 1 of 2 together: all the rows, four chunks */
	for (int r = 0; r < 2; r++) {
		struct table part;
		const int m = rank_table(&part, rows, cu, 2, 2, r);

		if (r == 0)
			t = part;
		else
			for (int i = 0; i < part.n; i++)
				table_add(&t, part.q_start[i] + n, part.k_start[i], part.offset[i],
				          part.len[i]);
		n += m;
	}
	cr_assert_eq(n, T);

	const struct rl_attention_chunks ch = table_view(&t);

	for (int run = 0; run < 3; run++) {
		omp_set_num_threads(counts[run]);
		for (int i = 0; i < 5; i++)
			got[run][i] = falloc(i == 1 || i == 2 ? nkv : i == 4 ? (size_t)T * H : nq);
		cr_assert_eq(rl_attention_chunks_forward_cpu(got[run][3], got[run][4], q, k, v, &ch,
		                                             &sh, NULL),
		             0);
		/* dout = q: any fixed tensor of the right shape will do */
		cr_assert_eq(rl_attention_chunks_backward_cpu(got[run][0], got[run][1], got[run][2],
		                                              q, q, k, v, got[run][3], got[run][4],
		                                              &ch, &sh, NULL),
		             0);
	}
	static const char *names[] = {"dq", "dk", "dv", "out", "lse"};

	for (int run = 1; run < 3; run++)
		for (int i = 0; i < 5; i++) {
			const size_t n_el = i == 1 || i == 2 ? nkv : i == 4 ? (size_t)T * H : nq;

			cr_expect(memcmp(got[0][i], got[run][i], n_el * sizeof(float)) == 0,
			          "%s, %d threads", names[i], counts[run]);
		}
	for (int run = 0; run < 3; run++)
		for (int i = 0; i < 5; i++)
			free(got[run][i]);
	free(q);
	free(k);
	free(v);
	free(rows);
}
#endif

/* ---- edges ---- */

Test(attention_chunks, unseen_rows_are_neither_read_nor_written)
{
	/* one chunk: query rows 2..4 at positions 3..5 of a sequence whose keys
	 * start at row 1; keys past row 6 are NaN and must not be read, query
	 * rows 0, 1 and 5 keep what they had, and so do the key gradients'
	 * rows outside 1..6 */
	enum { TQ = 6, TK = 9, H = 2, HKV = 1, D = 4 };
	const struct rl_attention_shape sh = {H, HKV, D, 0.5f};
	struct table t = {0};
	uint32_t seed = 7;
	float *q = frand(&seed, TQ * H * D, -1, 1), *k = frand(&seed, TK * HKV * D, -1, 1);
	float *v = frand(&seed, TK * HKV * D, -1, 1);
	float out[TQ * H * D], lse[TQ * H], dq[TQ * H * D], dk[TK * D], dv[TK * D];

	table_add(&t, 2, 1, 3, 3);

	const struct rl_attention_chunks ch = table_view(&t);

	for (int i = 7 * D; i < TK * D; i++)
		k[i] = v[i] = NAN;
	for (int i = 0; i < TQ * H * D; i++)
		out[i] = dq[i] = 42.0f;
	for (int i = 0; i < TQ * H; i++)
		lse[i] = 42.0f;
	for (int i = 0; i < TK * D; i++)
		dk[i] = dv[i] = 42.0f;
	cr_assert_eq(rl_attention_chunks_forward_cpu(out, lse, q, k, v, &ch, &sh, NULL), 0);
	cr_assert_eq(
	    rl_attention_chunks_backward_cpu(dq, dk, dv, q, q, k, v, out, lse, &ch, &sh, NULL), 0);
	for (int r = 0; r < TQ; r++) {
		const int inside = r >= 2 && r < 5;

		for (int i = 0; i < H * D; i++) {
			cr_expect_eq(out[r * H * D + i] == 42.0f, !inside, "out row %d", r);
			cr_expect_eq(dq[r * H * D + i] == 42.0f, !inside, "dq row %d", r);
			cr_expect(isfinite(out[r * H * D + i]) && isfinite(dq[r * H * D + i]),
			          "row %d", r);
		}
		for (int h = 0; h < H; h++)
			cr_expect_eq(lse[r * H + h] == 42.0f, !inside, "lse row %d", r);
	}
	for (int r = 0; r < TK; r++) {
		const int inside = r >= 1 && r < 7;

		for (int i = 0; i < D; i++) {
			cr_expect_eq(dk[r * D + i] == 42.0f, !inside, "dk row %d", r);
			cr_expect_eq(dv[r * D + i] == 42.0f, !inside, "dv row %d", r);
		}
	}
	free(q);
	free(k);
	free(v);
}

Test(attention_chunks, nothing_to_do)
{
	/* no chunks, or only empty ones: the buffers are never looked at */
	const struct rl_attention_shape sh = {2, 1, 4, 0.5f};
	struct table t = {0};
	struct rl_attention_chunks ch = table_view(&t);

	cr_expect_eq(rl_attention_chunks_forward_cpu(NULL, NULL, NULL, NULL, NULL, &ch, &sh, NULL),
	             0);
	table_add(&t, 5, 3, 2, 0);
	table_add(&t, 5, 0, 0, 0);
	ch = table_view(&t);
	cr_expect_eq(rl_attention_chunks_forward_cpu(NULL, NULL, NULL, NULL, NULL, &ch, &sh, NULL),
	             0);
	cr_expect_eq(rl_attention_chunks_backward_cpu(NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	                                              NULL, NULL, &ch, &sh, NULL),
	             0);
}

static int forward_rc(const struct table *t, const struct rl_attention_shape *sh)
{
	const struct rl_attention_chunks ch = table_view(t);
	float x[64] = {0}, l[16] = {0};

	return rl_attention_chunks_forward_cpu(x, l, x, x, x, &ch, sh, NULL);
}

static int backward_rc(const struct table *t, const struct rl_attention_shape *sh)
{
	const struct rl_attention_chunks ch = table_view(t);
	float x[64] = {0}, g[64] = {0}, l[16] = {0};

	return rl_attention_chunks_backward_cpu(g, g, g, x, x, x, x, x, l, &ch, sh, NULL);
}

Test(attention_chunks, rejects_bad_arguments)
{
	const struct rl_attention_shape ok = {2, 1, 1, 1.0f}, uneven = {3, 2, 1, 1.0f},
	                                no_dim = {2, 1, 0, 1.0f};
	struct table good = {0}, bad;

	table_add(&good, 0, 0, 1, 2);
	table_add(&good, 2, 0, 0, 1);
	cr_assert_eq(forward_rc(&good, &ok), 0, "the good table itself");
	cr_assert_eq(backward_rc(&good, &ok), 0, "the good table itself");

	cr_expect_eq(forward_rc(&good, &uneven), -1);
	cr_expect_eq(forward_rc(&good, &no_dim), -1);
	cr_expect_eq(forward_rc(&good, NULL), -1);
	cr_expect_eq(backward_rc(&good, &uneven), -1);
	cr_expect_eq(backward_rc(&good, NULL), -1);

	/* each field of the second chunk made negative in turn */
	for (int f = 0; f < 4; f++) {
		int32_t *field[4] = {bad.q_start, bad.k_start, bad.offset, bad.len};

		bad = good;
		field[f][1] = -1;
		cr_expect_eq(forward_rc(&bad, &ok), -1, "field %d negative", f);
		cr_expect_eq(backward_rc(&bad, &ok), -1, "field %d negative", f);
	}
	bad = good;
	bad.n = -1;
	cr_expect_eq(forward_rc(&bad, &ok), -1, "n < 0");
	bad = good;
	bad.q_start[1] = 1; /* shares row 1 with the first chunk */
	cr_expect_eq(forward_rc(&bad, &ok), -1, "overlapping query rows");
	cr_expect_eq(backward_rc(&bad, &ok), -1, "overlapping query rows");
	bad = good;
	bad.offset[1] = INT32_MAX;
	cr_expect_eq(forward_rc(&bad, &ok), -1, "k_start + offset + len overflows");

	const struct rl_attention_chunks arrays_missing = {1, NULL, NULL, NULL, NULL};
	float x[4] = {0};

	cr_expect_eq(rl_attention_chunks_forward_cpu(x, x, x, x, x, NULL, &ok, NULL), -1);
	cr_expect_eq(rl_attention_chunks_forward_cpu(x, x, x, x, x, &arrays_missing, &ok, NULL),
	             -1);
	const struct rl_attention_chunks gch = table_view(&good);

	cr_expect_eq(rl_attention_chunks_forward_cpu(x, NULL, x, x, x, &gch, &ok, NULL), -1);
	cr_expect_eq(
	    rl_attention_chunks_backward_cpu(x, x, NULL, x, x, x, x, x, x, &gch, &ok, NULL), -1);
}
