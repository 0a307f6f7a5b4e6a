/* The fp32 CUDA attention ops (kernels/cuda/attention*.cu) against the CPU
 * references: packed sequences and chunk tables, forward and backward, on
 * shapes around the kernels' tile sizes (64 query and key rows, 32 head
 * columns a lane), and the backward's bits over two runs.
 * The argument checks run everywhere; the rest skips without a GPU.
 *
 * Tolerances. Both sides compute in fp32 and differ in the order of their
 * sums (BLAS blocks against our per-lane chains, per-head against grouped
 * dk/dv sums, an online softmax against a two-pass one) and in exp (the
 * CPU's polynomial, 1 ulp; expf, 2 ulp). Summing n terms in two orders
 * differs by about sqrt(n) eps of the largest partial sum in practice (n eps
 * at worst); here n is at most 1500 keys, or 1500 queries times 4 heads for
 * dk and dv: sqrt(6000) * 6e-8 = 5e-6. out and lse are averages and
 * log-sums of order one: 1e-4 relative plus 2e-5 absolute. The gradients
 * (and the values they are added to, of order one) are held to 1e-4
 * relative plus 2e-4 of their largest entry. An indexing or masking error
 * is off by the size of a whole term, orders of magnitude more. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/attention.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/ops_test_util.h"

#ifdef RL_HAVE_CUDA

Test(cuda_attention, nothing_to_do)
{
	static const int32_t zero[1] = {0};
	const struct rl_attention_shape sh = {2, 1, 4, 0.5f};
	const struct rl_attention_chunks none = {0, NULL, NULL, NULL, NULL};

	cr_expect_eq(rl_attention_forward_cuda(NULL, NULL, NULL, NULL, NULL, NULL, 0, &sh, NULL),
	             0);
	cr_expect_eq(rl_attention_backward_cuda(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	                                        NULL, zero, 0, &sh, NULL),
	             0);
	cr_expect_eq(
	    rl_attention_chunks_forward_cuda(NULL, NULL, NULL, NULL, NULL, &none, &sh, NULL), 0);
	cr_expect_eq(rl_attention_chunks_backward_cuda(NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	                                               NULL, NULL, &none, &sh, NULL),
	             0);
}

/* All of these fail before any CUDA call, so they run without a GPU; the
 * pointers are host memory that is never dereferenced. */
Test(cuda_attention, rejects_bad_arguments)
{
	static const int32_t cu[2] = {0, 2}, arr[1] = {0};
	const struct rl_attention_shape ok = {2, 1, 4, 0.5f}, uneven = {3, 2, 4, 0.5f},
	                                no_dim = {2, 1, 0, 0.5f}, wide = {2, 1, 257, 0.5f},
	                                no_heads = {0, 1, 4, 0.5f};
	const struct rl_attention_chunks ch = {1, arr, arr, arr, arr},
	                                 negative = {-1, arr, arr, arr, arr},
	                                 no_len = {1, arr, arr, arr, NULL};
	float x[8] = {0}, l[4] = {0};

	cr_expect_eq(rl_attention_forward_cuda(x, l, x, x, x, cu, 1, NULL, NULL), -1);
	cr_expect_eq(rl_attention_forward_cuda(x, l, x, x, x, cu, 1, &uneven, NULL), -1);
	cr_expect_eq(rl_attention_forward_cuda(x, l, x, x, x, cu, 1, &no_dim, NULL), -1);
	cr_expect_eq(rl_attention_forward_cuda(x, l, x, x, x, cu, 1, &no_heads, NULL), -1);
	cr_expect_eq(rl_attention_forward_cuda(x, l, x, x, x, cu, 1, &wide, NULL), -1,
	             "head_dim > 256");
	cr_expect_eq(rl_attention_forward_cuda(x, l, x, x, x, cu, -1, &ok, NULL), -1);
	cr_expect_eq(rl_attention_forward_cuda(x, l, x, x, x, NULL, 1, &ok, NULL), -1);
	cr_expect_eq(rl_attention_forward_cuda(x, NULL, x, x, x, cu, 1, &ok, NULL), -1);
	cr_expect_eq(rl_attention_forward_cuda(NULL, l, x, x, x, cu, 1, &ok, NULL), -1);
	cr_expect_eq(rl_attention_forward_cuda(x, l, x, x, NULL, cu, 1, &ok, NULL), -1);

	cr_expect_eq(rl_attention_backward_cuda(x, x, x, x, x, x, x, x, l, cu, 1, &uneven, NULL),
	             -1);
	cr_expect_eq(rl_attention_backward_cuda(x, x, x, x, x, x, x, x, l, cu, 1, &wide, NULL), -1);
	cr_expect_eq(rl_attention_backward_cuda(x, x, x, x, x, x, x, x, l, cu, -1, &ok, NULL), -1);
	cr_expect_eq(rl_attention_backward_cuda(x, x, x, x, x, x, x, x, l, NULL, 1, &ok, NULL), -1);
	cr_expect_eq(rl_attention_backward_cuda(x, x, NULL, x, x, x, x, x, l, cu, 1, &ok, NULL),
	             -1);
	cr_expect_eq(rl_attention_backward_cuda(x, x, x, x, x, x, x, x, NULL, cu, 1, &ok, NULL),
	             -1);

	cr_expect_eq(rl_attention_chunks_forward_cuda(x, l, x, x, x, NULL, &ok, NULL), -1);
	cr_expect_eq(rl_attention_chunks_forward_cuda(x, l, x, x, x, &negative, &ok, NULL), -1);
	cr_expect_eq(rl_attention_chunks_forward_cuda(x, l, x, x, x, &no_len, &ok, NULL), -1);
	cr_expect_eq(rl_attention_chunks_forward_cuda(x, l, x, x, x, &ch, &uneven, NULL), -1);
	cr_expect_eq(rl_attention_chunks_forward_cuda(x, NULL, x, x, x, &ch, &ok, NULL), -1);
	cr_expect_eq(
	    rl_attention_chunks_backward_cuda(x, x, x, x, x, x, x, x, l, &negative, &ok, NULL), -1);
	cr_expect_eq(
	    rl_attention_chunks_backward_cuda(x, x, x, x, x, x, x, x, l, &no_len, &ok, NULL), -1);
	cr_expect_eq(rl_attention_chunks_backward_cuda(x, x, x, x, x, x, x, x, l, &ch, &wide, NULL),
	             -1);
	cr_expect_eq(
	    rl_attention_chunks_backward_cuda(x, NULL, x, x, x, x, x, x, l, &ch, &ok, NULL), -1);
}

#else

Test(cuda_attention, nothing_to_do)
{
	cr_skip_test("built without --with-cuda");
}

Test(cuda_attention, rejects_bad_arguments)
{
	cr_skip_test("built without --with-cuda");
}

#endif

#ifdef RL_HAVE_CUDA

/* got against want, both host floats: 1e-4 relative plus atol, plus frac
 * of want's largest entry */
static void expect_near(const char *what, const float *got, const float *want, size_t n,
                        double frac, double atol)
{
	double *ref = widen(want, n);

	close_all(what, got, ref, n, 1e-4, atol + frac * absmax(ref, n));
	free(ref);
}

static void expect_same_bits(const char *what, const float *a, const float *b, size_t n)
{
	cr_expect(memcmp(a, b, n * sizeof(float)) == 0, "%s: two runs differ", what);
}

static float *dev_copy_of(const float *host, size_t n)
{
	return dev_upload(host, n);
}

/* Random inputs of one problem: q, dout and out [nq, H, D], k and v
 * [nk, Hkv, D], lse [nq, H]; grads start random (the ops add to them). */
struct problem {
	struct rl_attention_shape sh;
	size_t nq, nk, wq, wkv;
	float *q, *k, *v, *dout, *dq0, *dk0, *dv0;
};

static void problem_init(struct problem *p, int H, int Hkv, int D, size_t nq, size_t nk,
                         uint32_t *seed)
{
	p->sh = (struct rl_attention_shape){H, Hkv, D, (float)(1.0 / sqrt((double)D))};
	p->nq = nq;
	p->nk = nk;
	p->wq = (size_t)H * D;
	p->wkv = (size_t)Hkv * D;
	p->q = frand(seed, nq * p->wq, -2, 2);
	p->k = frand(seed, nk * p->wkv, -2, 2);
	p->v = frand(seed, nk * p->wkv, -1, 1);
	p->dout = frand(seed, nq * p->wq, -1, 1);
	p->dq0 = frand(seed, nq * p->wq, -1, 1);
	p->dk0 = frand(seed, nk * p->wkv, -1, 1);
	p->dv0 = frand(seed, nk * p->wkv, -1, 1);
}

static void problem_free(struct problem *p)
{
	free(p->q);
	free(p->k);
	free(p->v);
	free(p->dout);
	free(p->dq0);
	free(p->dk0);
	free(p->dv0);
}

/* Device copies of a problem's inputs and the outputs of one op. */
struct dev_problem {
	float *q, *k, *v, *dout, *out, *lse, *dq, *dk, *dv;
};

static void dev_problem_init(struct dev_problem *d, const struct problem *p, const float *out,
                             const float *lse)
{
	d->q = dev_copy_of(p->q, p->nq * p->wq);
	d->k = dev_copy_of(p->k, p->nk * p->wkv);
	d->v = dev_copy_of(p->v, p->nk * p->wkv);
	d->dout = dev_copy_of(p->dout, p->nq * p->wq);
	d->out = dev_copy_of(out, p->nq * p->wq);
	d->lse = dev_copy_of(lse, p->nq * (size_t)p->sh.n_heads);
	d->dq = dev_copy_of(p->dq0, p->nq * p->wq);
	d->dk = dev_copy_of(p->dk0, p->nk * p->wkv);
	d->dv = dev_copy_of(p->dv0, p->nk * p->wkv);
}

static void dev_problem_free(struct dev_problem *d)
{
	dev_free(d->q);
	dev_free(d->k);
	dev_free(d->v);
	dev_free(d->dout);
	dev_free(d->out);
	dev_free(d->lse);
	dev_free(d->dq);
	dev_free(d->dk);
	dev_free(d->dv);
}

/* The grads back from the device, then reset to their start for a rerun. */
static void take_grads(const struct problem *p, struct dev_problem *d, float *dq, float *dk,
                       float *dv)
{
	dev_download(dq, d->dq, p->nq * p->wq);
	dev_download(dk, d->dk, p->nk * p->wkv);
	dev_download(dv, d->dv, p->nk * p->wkv);
	cuda_ok(cudaMemcpy(d->dq, p->dq0, p->nq * p->wq * sizeof(float), cudaMemcpyHostToDevice),
	        "reset dq");
	cuda_ok(cudaMemcpy(d->dk, p->dk0, p->nk * p->wkv * sizeof(float), cudaMemcpyHostToDevice),
	        "reset dk");
	cuda_ok(cudaMemcpy(d->dv, p->dv0, p->nk * p->wkv * sizeof(float), cudaMemcpyHostToDevice),
	        "reset dv");
}

/* The outputs start as this, so that rows no sequence owns must keep it. */
#define SENTINEL 7.0f

static float *sentinel(size_t n)
{
	float *x = falloc(n);

	for (size_t i = 0; i < n; i++)
		x[i] = SENTINEL;
	return x;
}

/* The gradients of one backward, CPU (reference) and GPU (two runs). */
struct grads {
	float *dq, *dk, *dv, *dq2, *dk2, *dv2, *rq, *rk, *rv;
};

static void grads_init(struct grads *g, const struct problem *p)
{
	const size_t nq = p->nq * p->wq, nk = p->nk * p->wkv;

	g->dq = falloc(nq);
	g->dk = falloc(nk);
	g->dv = falloc(nk);
	g->dq2 = falloc(nq);
	g->dk2 = falloc(nk);
	g->dv2 = falloc(nk);
	g->rq = fdup(p->dq0, nq);
	g->rk = fdup(p->dk0, nk);
	g->rv = fdup(p->dv0, nk);
}

/* GPU against CPU, and the second GPU run against the first, bit for bit */
static void grads_check(const struct grads *g, const struct problem *p)
{
	const size_t nq = p->nq * p->wq, nk = p->nk * p->wkv;

	expect_near("dq", g->dq, g->rq, nq, 2e-4, 1e-6);
	expect_near("dk", g->dk, g->rk, nk, 2e-4, 1e-6);
	expect_near("dv", g->dv, g->rv, nk, 2e-4, 1e-6);
	expect_same_bits("dq", g->dq, g->dq2, nq);
	expect_same_bits("dk", g->dk, g->dk2, nk);
	expect_same_bits("dv", g->dv, g->dv2, nk);
}

static void grads_free(struct grads *g)
{
	free(g->dq);
	free(g->dk);
	free(g->dv);
	free(g->dq2);
	free(g->dk2);
	free(g->dv2);
	free(g->rq);
	free(g->rk);
	free(g->rv);
}

/* Packed sequences of lens[] starting at row first (rows before it and two
 * after the last belong to no sequence), forward and backward. */
static void check_packed(const int *lens, int n_seqs, int first, int H, int Hkv, int D,
                         uint32_t seed, cudaStream_t st)
{
	int32_t cu[16];

	cr_assert_lt(n_seqs, 16);
	cu[0] = first;
	for (int s = 0; s < n_seqs; s++)
		cu[s + 1] = cu[s] + lens[s];

	const size_t T = (size_t)cu[n_seqs] + 2;
	struct problem p;
	struct dev_problem d;
	struct grads g;

	problem_init(&p, H, Hkv, D, T, T, &seed);

	float *out = sentinel(T * p.wq), *lse = sentinel(T * H);
	float *gout = falloc(T * p.wq), *glse = falloc(T * H);
	int32_t *dcu = dev_upload_i32(cu, (size_t)n_seqs + 1);

	cr_log_info("packed: %d seqs from row %d, H %d Hkv %d D %d", n_seqs, first, H, Hkv, D);
	dev_problem_init(&d, &p, out, lse);
	cr_assert_eq(rl_attention_forward_cpu(out, lse, p.q, p.k, p.v, cu, n_seqs, &p.sh, NULL), 0);
	cr_assert_eq(rl_attention_forward_cuda(d.out, d.lse, d.q, d.k, d.v, dcu, n_seqs, &p.sh, st),
	             0);
	dev_download(gout, d.out, T * p.wq);
	dev_download(glse, d.lse, T * H);
	expect_near("out", gout, out, T * p.wq, 0, 2e-5);
	expect_near("lse", glse, lse, T * H, 0, 2e-5);

	/* the backward from the CPU's out and lse, so only it is compared */
	grads_init(&g, &p);
	cuda_ok(cudaMemcpy(d.out, out, T * p.wq * sizeof(float), cudaMemcpyHostToDevice), "out");
	cuda_ok(cudaMemcpy(d.lse, lse, T * H * sizeof(float), cudaMemcpyHostToDevice), "lse");
	cr_assert_eq(rl_attention_backward_cpu(g.rq, g.rk, g.rv, p.dout, p.q, p.k, p.v, out, lse,
	                                       cu, n_seqs, &p.sh, NULL),
	             0);
	for (int run = 0; run < 2; run++) {
		cr_assert_eq(rl_attention_backward_cuda(d.dq, d.dk, d.dv, d.dout, d.q, d.k, d.v,
		                                        d.out, d.lse, dcu, n_seqs, &p.sh, st),
		             0);
		take_grads(&p, &d, run ? g.dq2 : g.dq, run ? g.dk2 : g.dk, run ? g.dv2 : g.dv);
	}
	grads_check(&g, &p);

	grads_free(&g);
	dev_problem_free(&d);
	dev_free(dcu);
	free(out);
	free(lse);
	free(gout);
	free(glse);
	problem_free(&p);
}

struct packed_case {
	int lens[6], n_seqs, first, H, Hkv, D;
};

Test(cuda_attention, packed_matches_cpu)
{
	CUDA_TEST_BEGIN();

	static const struct packed_case cases[] = {
	    {{1}, 1, 0, 1, 1, 8},
	    {{3}, 1, 0, 4, 2, 64},
	    {{63}, 1, 0, 4, 1, 128},
	    {{64}, 1, 0, 4, 4, 80},
	    {{65}, 1, 0, 1, 1, 64},
	    {{200}, 1, 0, 4, 2, 128},
	    {{0, 5, 0, 64, 130, 1}, 6, 0, 4, 1, 64},
	    {{63, 65, 200}, 3, 3, 4, 4, 8},
	    {{129, 0, 33}, 3, 0, 2, 2, 30},
	    {{130, 7}, 2, 1, 2, 1, 256},
	    {{70, 96}, 2, 0, 4, 2, 96},
	    {{200, 1}, 2, 0, 4, 4, 200},
	};
	uint32_t seed = 0x1234abcdu;
	cudaStream_t stream;

	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct packed_case *c = &cases[i];

		check_packed(c->lens, c->n_seqs, c->first, c->H, c->Hkv, c->D, seed + (uint32_t)i,
		             i % 2 ? stream : NULL);
	}
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

/* More items than the persistent grid has blocks, and long rows of keys. */
Test(cuda_attention, long_packed_batch_matches_cpu)
{
	CUDA_TEST_BEGIN();

	static const int lens[] = {1500, 1, 1096, 1499};

	check_packed(lens, 4, 0, 8, 2, 64, 0x51ed270bu, NULL);
}

/* A chunk table the test owns, at most 32 chunks. */
struct table {
	int n;
	int32_t q_start[32], k_start[32], offset[32], len[32];
};

static void table_add(struct table *t, int q_start, int k_start, int offset, int len)
{
	cr_assert_lt(t->n, 32);
	t->q_start[t->n] = q_start;
	t->k_start[t->n] = k_start;
	t->offset[t->n] = offset;
	t->len[t->n] = len;
	t->n++;
}

/* The table's chunks against nk key rows, forward and backward. */
static void check_chunks(const struct table *t, int nk, int H, int Hkv, int D, uint32_t seed,
                         cudaStream_t st)
{
	size_t nq = 0;

	for (int i = 0; i < t->n; i++)
		if ((size_t)t->q_start[i] + t->len[i] > nq)
			nq = (size_t)t->q_start[i] + t->len[i];

	struct problem p;
	struct dev_problem d;
	struct grads g;

	problem_init(&p, H, Hkv, D, nq, (size_t)nk, &seed);

	const struct rl_attention_chunks hc = {t->n, t->q_start, t->k_start, t->offset, t->len};
	int32_t *arr[4];
	const int32_t *src[4] = {t->q_start, t->k_start, t->offset, t->len};
	float *out = sentinel(nq * p.wq), *lse = sentinel(nq * H);
	float *gout = falloc(nq * p.wq), *glse = falloc(nq * H);

	for (int a = 0; a < 4; a++)
		arr[a] = dev_upload_i32(src[a], (size_t)t->n);

	const struct rl_attention_chunks dc = {t->n, arr[0], arr[1], arr[2], arr[3]};

	cr_log_info("chunks: %d chunks, %d keys, H %d Hkv %d D %d", t->n, nk, H, Hkv, D);
	dev_problem_init(&d, &p, out, lse);
	cr_assert_eq(rl_attention_chunks_forward_cpu(out, lse, p.q, p.k, p.v, &hc, &p.sh, NULL), 0);
	cr_assert_eq(rl_attention_chunks_forward_cuda(d.out, d.lse, d.q, d.k, d.v, &dc, &p.sh, st),
	             0);
	dev_download(gout, d.out, nq * p.wq);
	dev_download(glse, d.lse, nq * H);
	expect_near("chunks out", gout, out, nq * p.wq, 0, 2e-5);
	expect_near("chunks lse", glse, lse, nq * H, 0, 2e-5);

	grads_init(&g, &p);
	cuda_ok(cudaMemcpy(d.out, out, nq * p.wq * sizeof(float), cudaMemcpyHostToDevice), "out");
	cuda_ok(cudaMemcpy(d.lse, lse, nq * H * sizeof(float), cudaMemcpyHostToDevice), "lse");
	cr_assert_eq(rl_attention_chunks_backward_cpu(g.rq, g.rk, g.rv, p.dout, p.q, p.k, p.v, out,
	                                              lse, &hc, &p.sh, NULL),
	             0);
	for (int run = 0; run < 2; run++) {
		cr_assert_eq(rl_attention_chunks_backward_cuda(d.dq, d.dk, d.dv, d.dout, d.q, d.k,
		                                               d.v, d.out, d.lse, &dc, &p.sh, st),
		             0);
		take_grads(&p, &d, run ? g.dq2 : g.dq, run ? g.dk2 : g.dk, run ? g.dv2 : g.dv);
	}
	grads_check(&g, &p);

	grads_free(&g);
	dev_problem_free(&d);
	for (int a = 0; a < 4; a++)
		dev_free(arr[a]);
	free(out);
	free(lse);
	free(gout);
	free(glse);
	problem_free(&p);
}

/* Rank rank of cp, as Megatron balances context parallelism: pieces rank
 * and 2 cp - 1 - rank of every sequence (piece c of a sequence of length L
 * is its positions c L / 2cp .. (c+1) L / 2cp - 1), query rows packed in
 * that order; every chunk of a sequence shares its keys. Empty pieces
 * stay in the table. */
static void rank_table(struct table *t, const int *lens, int n_seqs, int cp, int rank)
{
	int q = 0, kstart = 0;

	t->n = 0;
	for (int s = 0; s < n_seqs; s++) {
		const int L = lens[s], picks[2] = {rank, 2 * cp - 1 - rank};

		for (int i = 0; i < 2; i++) {
			const int lo = picks[i] * L / (2 * cp), hi = (picks[i] + 1) * L / (2 * cp);

			table_add(t, q, kstart, lo, hi - lo);
			q += hi - lo;
		}
		kstart += L;
	}
}

Test(cuda_attention, chunks_match_cpu)
{
	CUDA_TEST_BEGIN();

	static const int lens[] = {65, 200, 3, 0, 64, 1};
	const int nk = 65 + 200 + 3 + 0 + 64 + 1;
	uint32_t seed = 0x7f4a7c15u;
	cudaStream_t stream;
	struct table t = {0};

	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");

	/* the two halves of one sequence */
	table_add(&t, 0, 0, 0, 100);
	table_add(&t, 100, 0, 100, 100);
	check_chunks(&t, 200, 4, 2, 64, seed++, NULL);
	check_chunks(&t, 200, 4, 1, 128, seed++, stream);

	/* context parallelism over a packed batch, every rank of cp = 2 */
	for (int rank = 0; rank < 2; rank++) {
		rank_table(&t, lens, 6, 2, rank);
		check_chunks(&t, nk, 4, 2, 64, seed++, rank ? stream : NULL);
		check_chunks(&t, nk, 4, 4, 80, seed++, rank ? NULL : stream);
	}
	rank_table(&t, lens, 6, 4, 3);
	check_chunks(&t, nk, 1, 1, 8, seed++, NULL);

	/* out of k_start order, keys from row 5, an empty chunk, and one
	 * sequence's three pieces listed last to first */
	t.n = 0;
	table_add(&t, 130, 5 + 70, 60, 10);
	table_add(&t, 0, 5, 0, 0);
	table_add(&t, 100, 5 + 70, 30, 30);
	table_add(&t, 0, 5, 0, 70);
	table_add(&t, 70, 5 + 70, 0, 30);
	check_chunks(&t, 5 + 70 + 70 + 2, 4, 2, 128, seed++, stream);
	check_chunks(&t, 5 + 70 + 70 + 2, 2, 1, 256, seed++, NULL);

	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

#else

Test(cuda_attention, packed_matches_cpu)
{
	CUDA_TEST_BEGIN();
}

Test(cuda_attention, long_packed_batch_matches_cpu)
{
	CUDA_TEST_BEGIN();
}

Test(cuda_attention, chunks_match_cpu)
{
	CUDA_TEST_BEGIN();
}

#endif
