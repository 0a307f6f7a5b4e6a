/* The paged KV cache's CUDA ops (kernels/cuda/paged.cu): the append against
 * a host scatter; the attention against the CPU reference on a mixed call
 * (a prefill and decode tokens of other sequences, keys in shuffled
 * blocks) and against the packed forward (rl_attention_forward_cuda)
 * through a block-1 identity table; and batch invariance: one row's out
 * and lse, bit for bit, alone, among 64 other rows, through a block-1
 * identity table and as one row of a prefill. The argument checks run
 * everywhere; the rest skips without a GPU.
 *
 * Tolerances as in test_cuda_attention.c: both sides compute in fp32 and
 * differ in the order of their sums (an online softmax in tiles and slots
 * against a two-pass one with the sum in double, a per-lane dot against
 * eight lanes) and in exp (expf, 2 ulp; the CPU's polynomial, 1 ulp).
 * Summing n terms in two orders differs by about sqrt(n) eps of the
 * largest partial sum; here n is at most 2600 keys: sqrt(2600) * 6e-8 =
 * 3e-6. out (an average of values in [-1, 1]) and lse are of order one:
 * 1e-4 relative plus 2e-5 absolute. An indexing or masking error is off by
 * a whole term, orders of magnitude more. Cache rows no key lives in hold
 * NaN, so a read of one shows. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/attention.h"
#include "kernels/paged.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/ops_test_util.h"

#ifdef RL_HAVE_CUDA

/* All of these return before any CUDA call, so they run without a GPU; the
 * pointers are host memory that is never dereferenced. */
Test(cuda_paged, bad_arguments)
{
	static const int32_t idx[2] = {0, 1};
	const struct rl_attention_shape ok = {2, 1, 4, 0.5f}, uneven = {3, 2, 4, 0.5f},
	                                no_dim = {2, 1, 0, 0.5f}, wide = {2, 1, 257, 0.5f},
	                                no_heads = {0, 1, 4, 0.5f};
	float x[16] = {0}, l[4] = {0};

	cr_expect_eq(rl_kv_append_cuda(x, x, x, x, idx, 0, 4, NULL), 0, "n == 0");
	cr_expect_eq(rl_kv_append_cuda(x, x, x, x, idx, -1, 4, NULL), -1);
	cr_expect_eq(rl_kv_append_cuda(x, x, x, x, idx, 1, 0, NULL), -1);
	cr_expect_eq(rl_kv_append_cuda(x, x, x, x, idx, 1, -4, NULL), -1);
	cr_expect_eq(rl_kv_append_cuda(NULL, x, x, x, idx, 1, 4, NULL), -1);
	cr_expect_eq(rl_kv_append_cuda(x, NULL, x, x, idx, 1, 4, NULL), -1);
	cr_expect_eq(rl_kv_append_cuda(x, x, NULL, x, idx, 1, 4, NULL), -1);
	cr_expect_eq(rl_kv_append_cuda(x, x, x, NULL, idx, 1, 4, NULL), -1);
	cr_expect_eq(rl_kv_append_cuda(x, x, x, x, NULL, 1, 4, NULL), -1);

	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, idx, idx, 0, 16, &ok, NULL), 0,
	             "n == 0");
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, idx, idx, 1, 16, NULL, NULL), -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, idx, idx, 1, 16, &uneven, NULL),
	             -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, idx, idx, 1, 16, &no_dim, NULL),
	             -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, idx, idx, 1, 16, &no_heads, NULL),
	             -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, idx, idx, 1, 16, &wide, NULL), -1,
	             "head_dim > 256");
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, idx, idx, -1, 16, &ok, NULL), -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, idx, idx, 1, 0, &ok, NULL), -1,
	             "block 0");
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, idx, idx, 1, -16, &ok, NULL), -1);
	cr_expect_eq(rl_attention_paged_cuda(NULL, l, x, x, x, idx, idx, idx, 1, 16, &ok, NULL),
	             -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, NULL, x, x, idx, idx, idx, 1, 16, &ok, NULL),
	             -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, NULL, x, idx, idx, idx, 1, 16, &ok, NULL),
	             -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, NULL, idx, idx, idx, 1, 16, &ok, NULL),
	             -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, NULL, idx, idx, 1, 16, &ok, NULL), -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, NULL, idx, 1, 16, &ok, NULL), -1);
	cr_expect_eq(rl_attention_paged_cuda(x, l, x, x, x, idx, idx, NULL, 1, 16, &ok, NULL), -1);
}

#else

Test(cuda_paged, bad_arguments)
{
	cr_skip_test("built without --with-cuda");
}

#endif

#ifdef RL_HAVE_CUDA

/* got against want: 1e-4 relative plus 2e-5 absolute (see the top) */
static void expect_near(const char *what, const float *got, const float *want, size_t n)
{
	double *ref = widen(want, n);

	close_all(what, got, ref, n, 1e-4, 2e-5);
	free(ref);
}

static void expect_same_bits(const char *what, const float *a, const float *b, size_t n)
{
	cr_expect(memcmp(a, b, n * sizeof(float)) == 0, "%s: not the same bits", what);
}

/* a[0 .. n) a random permutation of 0 .. n - 1 */
static void permutation(int32_t *a, int n, uint32_t *seed)
{
	for (int i = 0; i < n; i++)
		a[i] = i;
	for (int i = n - 1; i > 0; i--) {
		const int j = (int)(gc_rng(seed) % (uint32_t)(i + 1));
		const int32_t x = a[i];

		a[i] = a[j];
		a[j] = x;
	}
}

/* ---- the append ---- */

/* n rows of row_floats scattered into a cache of `rows` rows at distinct
 * random rows; shift floats of offset on the sources (1: not 16-byte
 * aligned, so the scalar path). */
static void check_append(size_t rows, int n, int row_floats, size_t shift, uint32_t seed)
{
	const size_t cache = rows * (size_t)row_floats, src = (size_t)n * (size_t)row_floats;
	float *kc = frand(&seed, cache, -1, 1), *vc = frand(&seed, cache, -1, 1);
	float *k = frand(&seed, src, -1, 1), *v = frand(&seed, src, -1, 1);
	float *gk = falloc(cache), *gv = falloc(cache);
	int32_t *perm = malloc(rows * sizeof(int32_t));

	cr_assert_not_null(perm);
	cr_assert_leq((size_t)n, rows);
	permutation(perm, (int)rows, &seed);

	float *dkc = dev_upload(kc, cache), *dvc = dev_upload(vc, cache);
	float *dk = dev_alloc((src + shift) * sizeof(float));
	float *dv = dev_alloc((src + shift) * sizeof(float));
	int32_t *drows = dev_upload_i32(perm, (size_t)n);

	cuda_ok(cudaMemcpy(dk + shift, k, src * sizeof(float), cudaMemcpyHostToDevice), "k");
	cuda_ok(cudaMemcpy(dv + shift, v, src * sizeof(float), cudaMemcpyHostToDevice), "v");
	cr_log_info("append: %d rows of %d floats into %zu, shift %zu", n, row_floats, rows, shift);
	cr_assert_eq(
	    rl_kv_append_cuda(dkc, dvc, dk + shift, dv + shift, drows, n, row_floats, NULL), 0);
	dev_download(gk, dkc, cache);
	dev_download(gv, dvc, cache);
	for (int t = 0; t < n; t++) {
		memcpy(kc + (size_t)perm[t] * row_floats, k + (size_t)t * row_floats,
		       (size_t)row_floats * sizeof(float));
		memcpy(vc + (size_t)perm[t] * row_floats, v + (size_t)t * row_floats,
		       (size_t)row_floats * sizeof(float));
	}
	expect_same_bits("k_cache", gk, kc, cache);
	expect_same_bits("v_cache", gv, vc, cache);

	dev_free(dkc);
	dev_free(dvc);
	dev_free(dk);
	dev_free(dv);
	dev_free(drows);
	free(kc);
	free(vc);
	free(k);
	free(v);
	free(gk);
	free(gv);
	free(perm);
}

Test(cuda_paged, append_matches_host_scatter)
{
	CUDA_TEST_BEGIN();

	check_append(100, 37, 256, 0, 0x2545f491u);
	check_append(100, 37, 256, 1, 0x9e3779b9u);
	check_append(9, 5, 30, 0, 0x85ebca6bu);
	check_append(4096, 4096, 64, 0, 0xc2b2ae35u);
}

/* ---- the attention ---- */

/* A paged cache on the host: sequence s's key j at row table[off[s] + j /
 * block] * block + j % block; every other row is NaN. */
struct pool {
	int block, n_table;
	size_t width, rows; /* floats a row (n_kv_heads * head_dim), rows */
	float *k, *v;
	int32_t *table;
	int32_t off[8];
};

/* Sequences s < n_seqs, of lens[s] keys taken from rows start[s] .. of ks
 * and vs, laid out in blocks of `block`: shuffled, the block ids are a
 * random permutation of a pool with spare blocks nobody owns; else the
 * identity (with block 1 and packed sequences: row = packed token). */
static void pool_build(struct pool *p, const float *ks, const float *vs, const int *start,
                       const int *lens, int n_seqs, int block, bool shuffle, size_t width,
                       uint32_t *seed)
{
	int owned = 0;

	cr_assert_leq(n_seqs, 8);
	for (int s = 0; s < n_seqs; s++)
		owned += (lens[s] + block - 1) / block;
	p->block = block;
	p->width = width;
	p->n_table = owned + (shuffle ? 5 : 0);
	p->rows = (size_t)p->n_table * (size_t)block;
	p->table = malloc((size_t)p->n_table * sizeof(int32_t));
	cr_assert_not_null(p->table);
	if (shuffle) {
		permutation(p->table, p->n_table, seed);
	} else {
		for (int i = 0; i < p->n_table; i++)
			p->table[i] = i;
	}
	p->k = falloc(p->rows * width);
	p->v = falloc(p->rows * width);
	for (size_t i = 0; i < p->rows * width; i++)
		p->k[i] = p->v[i] = NAN;

	int at = 0;

	for (int s = 0; s < n_seqs; s++) {
		p->off[s] = at;
		for (int j = 0; j < lens[s]; j++) {
			const size_t row =
			    (size_t)p->table[at + j / block] * (size_t)block + (size_t)(j % block);
			const size_t from = ((size_t)start[s] + (size_t)j) * width;

			memcpy(p->k + row * width, ks + from, width * sizeof(float));
			memcpy(p->v + row * width, vs + from, width * sizeof(float));
		}
		at += (lens[s] + block - 1) / block;
	}
}

static void pool_free(struct pool *p)
{
	free(p->k);
	free(p->v);
	free(p->table);
}

/* a pool's device copy */
struct dev_pool {
	int block;
	float *k, *v;
	int32_t *table;
};

static void dev_pool_init(struct dev_pool *d, const struct pool *p)
{
	d->block = p->block;
	d->k = dev_upload(p->k, p->rows * p->width);
	d->v = dev_upload(p->v, p->rows * p->width);
	d->table = dev_upload_i32(p->table, (size_t)p->n_table);
}

static void dev_pool_free(struct dev_pool *d)
{
	dev_free(d->k);
	dev_free(d->v);
	dev_free(d->table);
}

/* The CUDA op on n host query rows against a device pool; out (and lse
 * unless NULL) back on the host. The outputs start as 7, which no row can
 * be, so a row left unwritten shows. */
static void gpu_paged(float *out, float *lse, const float *q, const int32_t *pos,
                      const int32_t *off, int n, const struct dev_pool *d,
                      const struct rl_attention_shape *sh, cudaStream_t st)
{
	const size_t nq = (size_t)n * (size_t)sh->n_heads * (size_t)sh->head_dim;
	const size_t nl = (size_t)n * (size_t)sh->n_heads;
	float *init = falloc(nq);

	for (size_t i = 0; i < nq; i++)
		init[i] = 7.0f;

	float *dq = dev_upload(q, nq), *dout = dev_upload(init, nq);
	float *dlse = lse ? dev_upload(init, nl) : NULL;
	int32_t *dpos = dev_upload_i32(pos, (size_t)n), *doff = dev_upload_i32(off, (size_t)n);

	cr_assert_eq(rl_attention_paged_cuda(dout, dlse, dq, d->k, d->v, d->table, doff, dpos, n,
	                                     d->block, sh, st),
	             0);
	dev_download(out, dout, nq);
	if (lse)
		dev_download(lse, dlse, nl);
	dev_free(dq);
	dev_free(dout);
	dev_free(dlse);
	dev_free(dpos);
	dev_free(doff);
	free(init);
}

static struct rl_attention_shape shape_of(int H, int Hkv, int D)
{
	return (struct rl_attention_shape){H, Hkv, D, (float)(1.0 / sqrt((double)D))};
}

/* One call of mixed rows against the CPU reference: a decode token of
 * sequence 1, the 37-token prefill of sequence 0, decode tokens of
 * sequences 2 .. 5; keys in shuffled blocks of 16. */
static void check_mixed(int H, int Hkv, int D, uint32_t seed, cudaStream_t st)
{
	static const int lens[6] = {37, 6, 64, 65, 301, 701};
	enum { N = 37 + 5 };
	const struct rl_attention_shape sh = shape_of(H, Hkv, D);
	const size_t width = (size_t)Hkv * D, wq = (size_t)H * D;
	int start[6], total = 0;

	for (int s = 0; s < 6; s++) {
		start[s] = total;
		total += lens[s];
	}

	float *ks = frand(&seed, (size_t)total * width, -2, 2);
	float *vs = frand(&seed, (size_t)total * width, -1, 1);
	float *q = frand(&seed, N * wq, -2, 2);
	struct pool p;
	struct dev_pool d;
	int32_t pos[N], off[N];
	int t = 0;

	pool_build(&p, ks, vs, start, lens, 6, 16, true, width, &seed);
	dev_pool_init(&d, &p);
	pos[t] = lens[1] - 1;
	off[t++] = p.off[1];
	for (int i = 0; i < lens[0]; i++) {
		pos[t] = i;
		off[t++] = p.off[0];
	}
	for (int s = 2; s < 6; s++) {
		pos[t] = lens[s] - 1;
		off[t++] = p.off[s];
	}
	cr_assert_eq(t, N);

	float *out = falloc(N * wq), *lse = falloc((size_t)N * H);
	float *gout = falloc(N * wq), *glse = falloc((size_t)N * H), *gout2 = falloc(N * wq);

	cr_log_info("mixed: H %d Hkv %d D %d", H, Hkv, D);
	cr_assert_eq(
	    rl_attention_paged_cpu(out, lse, q, p.k, p.v, p.table, off, pos, N, 16, &sh, NULL), 0);
	gpu_paged(gout, glse, q, pos, off, N, &d, &sh, st);
	expect_near("out", gout, out, N * wq);
	expect_near("lse", glse, lse, (size_t)N * H);
	/* lse is optional and changes nothing else */
	gpu_paged(gout2, NULL, q, pos, off, N, &d, &sh, st);
	expect_same_bits("out without lse", gout2, gout, N * wq);

	dev_pool_free(&d);
	pool_free(&p);
	free(ks);
	free(vs);
	free(q);
	free(out);
	free(lse);
	free(gout);
	free(glse);
	free(gout2);
}

Test(cuda_paged, mixed_rows_match_cpu)
{
	CUDA_TEST_BEGIN();

	/* H, Hkv, D: the two asked for, three query heads a kv head, twelve
	 * (two groups of a block's eight), D % 4 != 0 (scalar loads) and the
	 * widest head */
	static const int cases[][3] = {
	    {8, 2, 64}, {8, 2, 128}, {6, 2, 80}, {12, 1, 96}, {4, 4, 30}, {2, 1, 256},
	};
	uint32_t seed = 0x6a09e667u;
	cudaStream_t stream;

	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_mixed(cases[i][0], cases[i][1], cases[i][2], seed + (uint32_t)i,
		            i % 2 ? stream : NULL);
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

/* Sequence X (LX keys) and Y (LY keys) in shuffled blocks of 16, X alone
 * in a block-1 identity layout. Row P of X (its query, position P) is
 * computed as one row of X's whole prefill (a large call: each block folds
 * its row's slots itself), alone (a call of one row: its slots split over
 * blocks and merged by a second kernel), as row 17 of 65 whose others read
 * Y, and alone through the identity layout; all four must have the same
 * bits, and match the CPU. The positions straddle the tiles (32 keys),
 * the groups of four tiles and the wrap of the 16 slots (2048 keys). */
static void check_invariance(int H, int Hkv, int D, uint32_t seed)
{
	enum { LX = 2600, LY = 900, NB = 65, AT = 17 };
	static const int targets[] = {0, 31, 32, 127, 128, 700, 2047, 2048, 2599};
	const struct rl_attention_shape sh = shape_of(H, Hkv, D);
	const size_t width = (size_t)Hkv * D, wq = (size_t)H * D;
	const int start[2] = {0, LX}, lens[2] = {LX, LY};
	float *ks = frand(&seed, (size_t)(LX + LY) * width, -2, 2);
	float *vs = frand(&seed, (size_t)(LX + LY) * width, -1, 1);
	float *qx = frand(&seed, LX * wq, -2, 2), *qb = frand(&seed, NB * wq, -2, 2);
	struct pool p16, p1;
	struct dev_pool d16, d1;

	pool_build(&p16, ks, vs, start, lens, 2, 16, true, width, &seed);
	pool_build(&p1, ks, vs, start, lens, 1, 1, false, width, &seed);
	dev_pool_init(&d16, &p16);
	dev_pool_init(&d1, &p1);

	float *pf_out = falloc(LX * wq), *pf_lse = falloc((size_t)LX * H);
	int32_t *pf_pos = malloc(LX * sizeof(int32_t)), *pf_off = malloc(LX * sizeof(int32_t));

	cr_assert(pf_pos && pf_off);
	for (int i = 0; i < LX; i++) {
		pf_pos[i] = i;
		pf_off[i] = p16.off[0];
	}
	cr_log_info("invariance: H %d Hkv %d D %d", H, Hkv, D);
	gpu_paged(pf_out, pf_lse, qx, pf_pos, pf_off, LX, &d16, &sh, NULL);

	float *one = falloc(wq), *one_lse = falloc((size_t)H);
	float *ident = falloc(wq), *ident_lse = falloc((size_t)H);
	float *ref = falloc(wq), *ref_lse = falloc((size_t)H);
	float *b_out = falloc(NB * wq), *b_lse = falloc((size_t)NB * H);
	int32_t b_pos[NB], b_off[NB];

	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		const int32_t P = targets[i], zero = 0;
		const float *qp = qx + (size_t)P * wq;

		gpu_paged(one, one_lse, qp, &P, &p16.off[0], 1, &d16, &sh, NULL);
		gpu_paged(ident, ident_lse, qp, &P, &zero, 1, &d1, &sh, NULL);
		for (int t = 0; t < NB; t++) {
			b_pos[t] = (int32_t)(gc_rng(&seed) % LY);
			b_off[t] = p16.off[1];
		}
		b_pos[AT] = P;
		b_off[AT] = p16.off[0];
		memcpy(qb + (size_t)AT * wq, qp, wq * sizeof(float));
		gpu_paged(b_out, b_lse, qb, b_pos, b_off, NB, &d16, &sh, NULL);

		cr_log_info("position %d", P);
		expect_same_bits("alone vs prefill", one, pf_out + (size_t)P * wq, wq);
		expect_same_bits("alone vs prefill lse", one_lse, pf_lse + (size_t)P * H,
		                 (size_t)H);
		expect_same_bits("alone vs batch", one, b_out + (size_t)AT * wq, wq);
		expect_same_bits("alone vs batch lse", one_lse, b_lse + (size_t)AT * H, (size_t)H);
		expect_same_bits("block 16 vs identity", one, ident, wq);
		expect_same_bits("block 16 vs identity lse", one_lse, ident_lse, (size_t)H);

		cr_assert_eq(rl_attention_paged_cpu(ref, ref_lse, qp, p16.k, p16.v, p16.table,
		                                    &p16.off[0], &P, 1, 16, &sh, NULL),
		             0);
		expect_near("alone vs cpu", one, ref, wq);
		expect_near("alone vs cpu lse", one_lse, ref_lse, (size_t)H);
	}

	dev_pool_free(&d16);
	dev_pool_free(&d1);
	pool_free(&p16);
	pool_free(&p1);
	free(ks);
	free(vs);
	free(qx);
	free(qb);
	free(pf_out);
	free(pf_lse);
	free(pf_pos);
	free(pf_off);
	free(one);
	free(one_lse);
	free(ident);
	free(ident_lse);
	free(ref);
	free(ref_lse);
	free(b_out);
	free(b_lse);
}

Test(cuda_paged, batch_invariant)
{
	CUDA_TEST_BEGIN();

	check_invariance(8, 2, 128, 0x3c6ef372u);
	check_invariance(12, 1, 80, 0xa54ff53au);
	check_invariance(4, 2, 30, 0x510e527fu);
}

/* Packed sequences through a block-1 identity table (what the invariant
 * training forward does) against the packed forward. */
static void check_packed(const int *lens, int n_seqs, int H, int Hkv, int D, uint32_t seed)
{
	int32_t cu[9];

	cr_assert_lt(n_seqs, 9);
	cu[0] = 0;
	for (int s = 0; s < n_seqs; s++)
		cu[s + 1] = cu[s] + lens[s];

	const int T = cu[n_seqs];
	const struct rl_attention_shape sh = shape_of(H, Hkv, D);
	const size_t width = (size_t)Hkv * D, wq = (size_t)H * D;
	float *q = frand(&seed, (size_t)T * wq, -2, 2);
	float *k = frand(&seed, (size_t)T * width, -2, 2);
	float *v = frand(&seed, (size_t)T * width, -1, 1);
	int32_t *table = malloc((size_t)T * sizeof(int32_t));
	int32_t *pos = malloc((size_t)T * sizeof(int32_t)),
	        *off = malloc((size_t)T * sizeof(int32_t));

	cr_assert(table && pos && off);
	for (int s = 0; s < n_seqs; s++)
		for (int t = cu[s]; t < cu[s + 1]; t++) {
			table[t] = t;
			pos[t] = t - cu[s];
			off[t] = cu[s];
		}

	float *fout = falloc((size_t)T * wq), *flse = falloc((size_t)T * H);
	float *pout = falloc((size_t)T * wq), *plse = falloc((size_t)T * H);
	float *dq = dev_upload(q, (size_t)T * wq), *dk = dev_upload(k, (size_t)T * width);
	float *dv = dev_upload(v, (size_t)T * width);
	float *dfout = dev_alloc((size_t)T * wq * sizeof(float));
	float *dflse = dev_alloc((size_t)T * H * sizeof(float));
	int32_t *dcu = dev_upload_i32(cu, (size_t)n_seqs + 1);
	struct dev_pool d = {1, dk, dv, dev_upload_i32(table, (size_t)T)};

	cr_log_info("packed: %d seqs, %d tokens, H %d Hkv %d D %d", n_seqs, T, H, Hkv, D);
	cr_assert_eq(rl_attention_forward_cuda(dfout, dflse, dq, dk, dv, dcu, n_seqs, &sh, NULL),
	             0);
	dev_download(fout, dfout, (size_t)T * wq);
	dev_download(flse, dflse, (size_t)T * H);
	gpu_paged(pout, plse, q, pos, off, T, &d, &sh, NULL);
	expect_near("paged vs forward", pout, fout, (size_t)T * wq);
	expect_near("paged vs forward lse", plse, flse, (size_t)T * H);

	dev_free(dq);
	dev_free(dk);
	dev_free(dv);
	dev_free(dfout);
	dev_free(dflse);
	dev_free(dcu);
	dev_free(d.table);
	free(q);
	free(k);
	free(v);
	free(table);
	free(pos);
	free(off);
	free(fout);
	free(flse);
	free(pout);
	free(plse);
}

Test(cuda_paged, packed_matches_forward)
{
	CUDA_TEST_BEGIN();

	static const int lens[] = {100, 1, 333, 64, 700, 2100};

	check_packed(lens, 6, 8, 2, 64, 0x1f83d9abu);
	check_packed(lens, 5, 4, 1, 128, 0x5be0cd19u);
}

#else

Test(cuda_paged, append_matches_host_scatter)
{
	CUDA_TEST_BEGIN();
}

Test(cuda_paged, mixed_rows_match_cpu)
{
	CUDA_TEST_BEGIN();
}

Test(cuda_paged, batch_invariant)
{
	CUDA_TEST_BEGIN();
}

Test(cuda_paged, packed_matches_forward)
{
	CUDA_TEST_BEGIN();
}

#endif
