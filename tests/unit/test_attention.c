/* Causal GQA attention: the forward against a hand-computed table and a naive
 * double-precision reference, and the backward against central finite
 * differences of that reference. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <criterion/criterion.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/attention.h"
#include "tests/unit/ops_test_util.h"

/* ---- the reference: softmax over keys j <= i of one sequence, in double ---- */

struct attn_case {
	int n_seqs;
	const int32_t *cu; /* n_seqs + 1 offsets */
	int H, Hkv, D;
	double scale;
};

static size_t case_tokens(const struct attn_case *c)
{
	return (size_t)c->cu[c->n_seqs];
}

static void attn_ref(double *out, double *lse, const double *q, const double *k, const double *v,
                     const struct attn_case *c)
{
	const int H = c->H, Hkv = c->Hkv, D = c->D, rep = H / Hkv;
	double *w = dalloc(case_tokens(c));

	for (int s = 0; s < c->n_seqs; s++)
		for (int i = c->cu[s]; i < c->cu[s + 1]; i++)
			for (int h = 0; h < H; h++) {
				const double *qi = q + ((size_t)i * H + h) * D;
				double *oi = out + ((size_t)i * H + h) * D;
				double mx = -INFINITY, sum = 0.0;

				for (int j = c->cu[s]; j <= i; j++) {
					const double *kj = k + ((size_t)j * Hkv + h / rep) * D;
					double dot = 0.0;

					for (int d = 0; d < D; d++)
						dot += qi[d] * kj[d];
					w[j] = c->scale * dot;
					mx = fmax(mx, w[j]);
				}
				for (int j = c->cu[s]; j <= i; j++)
					sum += w[j] = exp(w[j] - mx);
				for (int d = 0; d < D; d++)
					oi[d] = 0.0;
				for (int j = c->cu[s]; j <= i; j++) {
					const double *vj = v + ((size_t)j * Hkv + h / rep) * D;

					for (int d = 0; d < D; d++)
						oi[d] += w[j] / sum * vj[d];
				}
				if (lse)
					lse[(size_t)i * H + h] = mx + log(sum);
			}
	free(w);
}

/* Inputs of one case in fp32 and in double, and the fp32 outputs. */
struct attn_data {
	size_t nq, nkv, nl;
	float *q, *k, *v, *out, *lse;
	double *qd, *kd, *vd, *outd, *lsed;
};

static void data_init(struct attn_data *a, const struct attn_case *c, uint32_t seed, float range)
{
	size_t T = case_tokens(c);

	a->nq = T * c->H * c->D;
	a->nkv = T * c->Hkv * c->D;
	a->nl = T * c->H;
	a->q = frand(&seed, a->nq, -range, range);
	a->k = frand(&seed, a->nkv, -range, range);
	a->v = frand(&seed, a->nkv, -1.0f, 1.0f);
	a->out = falloc(a->nq);
	a->lse = falloc(a->nl);
	a->qd = widen(a->q, a->nq);
	a->kd = widen(a->k, a->nkv);
	a->vd = widen(a->v, a->nkv);
	a->outd = dalloc(a->nq);
	a->lsed = dalloc(a->nl);
}

static void data_free(struct attn_data *a)
{
	free(a->q);
	free(a->k);
	free(a->v);
	free(a->out);
	free(a->lse);
	free(a->qd);
	free(a->kd);
	free(a->vd);
	free(a->outd);
	free(a->lsed);
}

static struct rl_attention_shape case_shape(const struct attn_case *c)
{
	return (struct rl_attention_shape){c->H, c->Hkv, c->D, (float)c->scale};
}

/* atol: the scores' own fp32 rounding grows with their size */
static void check_forward(const struct attn_case *c, uint32_t seed, float range, double atol)
{
	struct attn_data a;
	struct rl_attention_shape sh = case_shape(c);

	data_init(&a, c, seed, range);
	cr_assert_eq(
	    rl_attention_forward_cpu(a.out, a.lse, a.q, a.k, a.v, c->cu, c->n_seqs, &sh, NULL), 0);
	attn_ref(a.outd, a.lsed, a.qd, a.kd, a.vd, c);
	for (size_t i = 0; i < a.nq; i++)
		expect_close("out", i, a.out[i], a.outd[i], 1e-5, atol);
	for (size_t i = 0; i < a.nl; i++)
		expect_close("lse", i, a.lse[i], a.lsed[i], 1e-6, atol);
	data_free(&a);
}

Test(attention, table_two_tokens)
{
	/* One head, head_dim 1, scale 1. Token 0 sees only itself: out = v0 = 4,
	 * lse = q0 k0 = 0. Token 1 scores 0 and ln 3 against k = (0, 1): weights
	 * 1/4 and 3/4, out = 4/4 + 3 * 8/4 = 7, lse = ln 4. */
	const int32_t cu[2] = {0, 2};
	const struct rl_attention_shape sh = {1, 1, 1, 1.0f};
	const float q[2] = {5.0f, 1.0986122886681098f}, k[2] = {0.0f, 1.0f}, v[2] = {4.0f, 8.0f};
	float out[2], lse[2];

	cr_assert_eq(rl_attention_forward_cpu(out, lse, q, k, v, cu, 1, &sh, NULL), 0);
	expect_close("out", 0, out[0], 4.0, 0, 1e-6);
	expect_close("out", 1, out[1], 7.0, 1e-6, 0);
	expect_close("lse", 0, lse[0], 0.0, 0, 1e-6);
	expect_close("lse", 1, lse[1], 1.3862943611198906, 1e-6, 0);
}

Test(attention, forward_matches_double_reference)
{
	/* an empty sequence between short ones; tiles of 64 query rows, crossed
	 * by 70 and 130; MQA; plain multi-head with head_dim 64 */
	static const int32_t cu_a[] = {0, 1, 1, 5, 12};
	static const int32_t cu_b[] = {0, 70, 73, 203};
	static const int32_t cu_c[] = {0, 65};
	const struct attn_case cases[] = {
	    {4, cu_a, 4, 2, 8, 0.35355339059327373},
	    {3, cu_b, 4, 1, 16, 0.25},
	    {1, cu_c, 2, 2, 64, 0.125},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_forward(&cases[i], 0x1000u + (uint32_t)i, 2.0f, 2e-6);
}

Test(attention, large_scores_stay_finite)
{
	/* scores in the thousands: exp overflows unless the maximum is taken
	 * out. An fp32 dot product of terms near 900 is good to ~1e-4. */
	static const int32_t cu[] = {0, 9, 20};
	const struct attn_case c = {2, cu, 2, 1, 8, 1.0};

	check_forward(&c, 0x77u, 30.0f, 2e-3);
}

Test(attention, rows_outside_the_sequences_are_untouched)
{
	/* the table starts at token 2 and ends before the last: those rows of
	 * out and lse keep what the caller had */
	static const int32_t cu[] = {2, 4, 7};
	const int T = 8, H = 2, Hkv = 1, D = 4;
	const struct rl_attention_shape sh = {H, Hkv, D, 0.5f};
	uint32_t seed = 5;
	float *q = frand(&seed, (size_t)T * H * D, -1, 1);
	float *k = frand(&seed, (size_t)T * Hkv * D, -1, 1);
	float *v = frand(&seed, (size_t)T * Hkv * D, -1, 1);
	float out[8 * 2 * 4], lse[8 * 2];

	for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++)
		out[i] = 42.0f;
	for (size_t i = 0; i < sizeof(lse) / sizeof(lse[0]); i++)
		lse[i] = 42.0f;
	cr_assert_eq(rl_attention_forward_cpu(out, lse, q, k, v, cu, 2, &sh, NULL), 0);
	for (int t = 0; t < T; t++) {
		int inside = t >= 2 && t < 7;

		for (int i = 0; i < H * D; i++)
			cr_expect_eq(out[t * H * D + i] == 42.0f, !inside, "out row %d", t);
		/* the first token of each sequence only sees itself: out = its v */
		if (t == 2 || t == 4)
			for (int i = 0; i < H * D; i++)
				expect_close("out", (size_t)i, out[t * H * D + i], v[t * D + i % D],
				             0, 1e-6);
	}
	free(q);
	free(k);
	free(v);
}

/* ---- backward: central differences of L = sum(out * R), all in double ---- */

static double loss_ref(const struct attn_data *a, const struct attn_case *c, const float *r)
{
	double l = 0.0;

	attn_ref(a->outd, NULL, a->qd, a->kd, a->vd, c);
	for (size_t i = 0; i < a->nq; i++)
		l += a->outd[i] * r[i];
	return l;
}

/* Compares grad (the kernel's) with d loss_ref / d x for every element of x
 * (one of a's double inputs). */
static void check_grad(const char *what, double *x, size_t n, const float *grad,
                       struct attn_data *a, const struct attn_case *c, const float *r)
{
	const double h = 1e-5;
	double *fd = dalloc(n), scale = 0.0;

	for (size_t i = 0; i < n; i++) {
		double keep = x[i], lp, lm;

		x[i] = keep + h;
		lp = loss_ref(a, c, r);
		x[i] = keep - h;
		lm = loss_ref(a, c, r);
		x[i] = keep;
		fd[i] = (lp - lm) / (2 * h);
		scale = fmax(scale, fabs(fd[i]));
	}
	cr_assert_gt(scale, 0.0, "%s: the loss does not depend on it", what);
	/* fp32 rounding in the kernel, relative to the gradient's own size */
	for (size_t i = 0; i < n; i++)
		expect_close(what, i, grad[i], fd[i], 1e-4, 1e-5 * scale);
	free(fd);
}

static void check_backward(const struct attn_case *c, uint32_t seed)
{
	struct attn_data a;
	struct rl_attention_shape sh = case_shape(c);

	data_init(&a, c, seed, 1.5f);
	float *r = frand(&seed, a.nq, -1.0f, 1.0f);
	/* the backward adds: start from something and take it off again */
	float *dq = frand(&seed, a.nq, -1.0f, 1.0f), *dk = frand(&seed, a.nkv, -1.0f, 1.0f);
	float *dv = frand(&seed, a.nkv, -1.0f, 1.0f);
	double *dq0 = widen(dq, a.nq), *dk0 = widen(dk, a.nkv), *dv0 = widen(dv, a.nkv);

	cr_assert_eq(
	    rl_attention_forward_cpu(a.out, a.lse, a.q, a.k, a.v, c->cu, c->n_seqs, &sh, NULL), 0);
	cr_assert_eq(rl_attention_backward_cpu(dq, dk, dv, r, a.q, a.k, a.v, a.out, a.lse, c->cu,
	                                       c->n_seqs, &sh, NULL),
	             0);
	for (size_t i = 0; i < a.nq; i++)
		dq[i] = (float)(dq[i] - dq0[i]);
	for (size_t i = 0; i < a.nkv; i++) {
		dk[i] = (float)(dk[i] - dk0[i]);
		dv[i] = (float)(dv[i] - dv0[i]);
	}
	check_grad("dq", a.qd, a.nq, dq, &a, c, r);
	check_grad("dk", a.kd, a.nkv, dk, &a, c, r);
	check_grad("dv", a.vd, a.nkv, dv, &a, c, r);
	free(r);
	free(dq);
	free(dk);
	free(dv);
	free(dq0);
	free(dk0);
	free(dv0);
	data_free(&a);
}

Test(attention, backward_matches_finite_differences)
{
	/* lengths 1, 0, 4, 7 with two query heads per kv head */
	static const int32_t cu[] = {0, 1, 1, 5, 12};
	const struct attn_case c = {4, cu, 4, 2, 8, 0.35355339059327373};

	check_backward(&c, 0xc0ffeeu);
}

Test(attention, backward_across_tiles_matches_finite_differences)
{
	/* 70 rows: two query tiles, the second seeing all 70 keys; MQA */
	static const int32_t cu[] = {0, 70, 73};
	const struct attn_case c = {2, cu, 2, 1, 4, 0.5};

	check_backward(&c, 0xbeefu);
}

Test(attention, backward_split_by_query_head_matches_finite_differences)
{
	/* one sequence and one kv head for four query heads: with more threads
	 * than (sequence, kv head) pairs the backward splits by query head and
	 * sums the kv gradients afterwards */
	static const int32_t cu[] = {0, 0, 9};
	const struct attn_case c = {2, cu, 4, 1, 4, 0.5};

#ifdef _OPENMP
	omp_set_num_threads(4);
#endif
	check_backward(&c, 0xfaceu);
}

#ifdef _OPENMP
Test(attention, thread_count_does_not_change_the_bits)
{
	/* 1 thread: by kv head; 3: split by query head (2 sequences x 1 kv head) */
	static const int32_t cu[] = {0, 90, 130};
	const struct attn_case c = {2, cu, 4, 1, 16, 0.25};
	const struct rl_attention_shape sh = case_shape(&c);
	static const int counts[] = {1, 3, 2};
	float *got[3][4];
	struct attn_data a;

	data_init(&a, &c, 1234, 1.5f);
	for (int run = 0; run < 3; run++) {
		omp_set_num_threads(counts[run]);
		got[run][0] = falloc(a.nq);
		got[run][1] = falloc(a.nkv);
		got[run][2] = falloc(a.nkv);
		got[run][3] = falloc(a.nq);
		cr_assert_eq(rl_attention_forward_cpu(got[run][3], a.lse, a.q, a.k, a.v, c.cu,
		                                      c.n_seqs, &sh, NULL),
		             0);
		cr_assert_eq(rl_attention_backward_cpu(got[run][0], got[run][1], got[run][2], a.q,
		                                       a.q, a.k, a.v, got[run][3], a.lse, c.cu,
		                                       c.n_seqs, &sh, NULL),
		             0);
	}
	for (int run = 1; run < 3; run++) {
		cr_expect(memcmp(got[0][3], got[run][3], a.nq * sizeof(float)) == 0, "out, %d",
		          counts[run]);
		cr_expect(memcmp(got[0][0], got[run][0], a.nq * sizeof(float)) == 0, "dq, %d",
		          counts[run]);
		cr_expect(memcmp(got[0][1], got[run][1], a.nkv * sizeof(float)) == 0, "dk, %d",
		          counts[run]);
		cr_expect(memcmp(got[0][2], got[run][2], a.nkv * sizeof(float)) == 0, "dv, %d",
		          counts[run]);
	}
	for (int run = 0; run < 3; run++)
		for (int i = 0; i < 4; i++)
			free(got[run][i]);
	data_free(&a);
}
#endif

Test(attention, reruns_are_bit_identical)
{
	static const int32_t cu[] = {0, 100, 101, 230};
	const struct attn_case c = {3, cu, 4, 2, 32, 0.17677669529663687};
	const struct rl_attention_shape sh = case_shape(&c);
	struct attn_data a;
	float *grads[2][3];

	data_init(&a, &c, 99, 1.0f);
	for (int run = 0; run < 2; run++) {
		grads[run][0] = falloc(a.nq);
		grads[run][1] = falloc(a.nkv);
		grads[run][2] = falloc(a.nkv);
		cr_assert_eq(rl_attention_forward_cpu(a.out, a.lse, a.q, a.k, a.v, c.cu, c.n_seqs,
		                                      &sh, NULL),
		             0);
		/* dout = q: any fixed tensor of the right shape will do */
		cr_assert_eq(rl_attention_backward_cpu(grads[run][0], grads[run][1], grads[run][2],
		                                       a.q, a.q, a.k, a.v, a.out, a.lse, c.cu,
		                                       c.n_seqs, &sh, NULL),
		             0);
	}
	cr_expect(memcmp(grads[0][0], grads[1][0], a.nq * sizeof(float)) == 0, "dq");
	cr_expect(memcmp(grads[0][1], grads[1][1], a.nkv * sizeof(float)) == 0, "dk");
	cr_expect(memcmp(grads[0][2], grads[1][2], a.nkv * sizeof(float)) == 0, "dv");
	for (int run = 0; run < 2; run++)
		for (int i = 0; i < 3; i++)
			free(grads[run][i]);
	data_free(&a);
}

/* ---- edges ---- */

Test(attention, leaves_openblas_threads_as_they_were)
{
	/* the kernels make OpenBLAS single-threaded inside their own parallel
	 * loops; the linear layers after them want it back */
	static const int32_t cu[] = {0, 100, 200};
	const struct attn_case c = {2, cu, 4, 2, 16, 0.25};
	const struct rl_attention_shape sh = case_shape(&c);
	struct attn_data a;
	float *dq, *dk, *dv;

	openblas_set_num_threads(2);
	data_init(&a, &c, 3, 1.0f);
	dq = falloc(a.nq);
	dk = falloc(a.nkv);
	dv = falloc(a.nkv);
	cr_assert_eq(
	    rl_attention_forward_cpu(a.out, a.lse, a.q, a.k, a.v, c.cu, c.n_seqs, &sh, NULL), 0);
	cr_expect_eq(openblas_get_num_threads(), 2, "after the forward");
	cr_assert_eq(rl_attention_backward_cpu(dq, dk, dv, a.q, a.q, a.k, a.v, a.out, a.lse, c.cu,
	                                       c.n_seqs, &sh, NULL),
	             0);
	cr_expect_eq(openblas_get_num_threads(), 2, "after the backward");
	free(dq);
	free(dk);
	free(dv);
	data_free(&a);
}

Test(attention, nothing_to_do)
{
	static const int32_t empty[] = {0, 0, 0};
	const struct rl_attention_shape sh = {2, 1, 4, 0.5f};

	cr_expect_eq(rl_attention_forward_cpu(NULL, NULL, NULL, NULL, NULL, NULL, 0, &sh, NULL), 0);
	cr_expect_eq(rl_attention_backward_cpu(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	                                       NULL, 0, &sh, NULL),
	             0);
	cr_expect_eq(rl_attention_forward_cpu(NULL, NULL, NULL, NULL, NULL, empty, 2, &sh, NULL),
	             0);
	cr_expect_eq(rl_attention_backward_cpu(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	                                       empty, 2, &sh, NULL),
	             0);
}

Test(attention, rejects_bad_arguments)
{
	static const int32_t cu[] = {0, 2}, backwards[] = {0, 2, 1};
	const struct rl_attention_shape ok = {2, 1, 1, 1.0f}, uneven = {3, 2, 1, 1.0f},
	                                no_dim = {2, 1, 0, 1.0f};
	float x[4] = {0}, l[4] = {0};

	cr_expect_eq(rl_attention_forward_cpu(x, l, x, x, x, cu, 1, &uneven, NULL), -1);
	cr_expect_eq(rl_attention_forward_cpu(x, l, x, x, x, cu, 1, &no_dim, NULL), -1);
	cr_expect_eq(rl_attention_forward_cpu(x, l, x, x, x, cu, 1, NULL, NULL), -1);
	cr_expect_eq(rl_attention_forward_cpu(x, l, x, x, x, cu, -1, &ok, NULL), -1);
	cr_expect_eq(rl_attention_forward_cpu(x, l, x, x, x, backwards, 2, &ok, NULL), -1);
	cr_expect_eq(rl_attention_forward_cpu(x, NULL, x, x, x, cu, 1, &ok, NULL), -1);
	cr_expect_eq(rl_attention_backward_cpu(x, x, x, x, x, x, x, x, l, backwards, 2, &ok, NULL),
	             -1);
	cr_expect_eq(rl_attention_backward_cpu(x, x, NULL, x, x, x, x, x, l, cu, 1, &ok, NULL), -1);
}
