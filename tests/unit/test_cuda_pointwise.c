/* The CUDA embedding, RMSNorm backward, RoPE and SwiGLU ops against their CPU
 * references on random shapes, odd sizes included. The embedding is held to
 * the same bits (a gather is a copy; the backward adds in the CPU's order),
 * the others to tolerances worked out beside each check. The argument checks
 * are run on both backends and need no GPU. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/embedding.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/ops_test_util.h"

/* ---- argument checks: the same contract on both backends ---- */

/* Host arrays stand in for device ones: the CUDA ops check their arguments
 * before any CUDA call and return before one when there is nothing to do. */
static void bad_embedding(rl_embedding_forward_fn fwd, rl_embedding_backward_fn bwd,
                          const char *name)
{
	float out[8] = {0}, table[8] = {0};
	int32_t ids[2] = {0, 1};

	cr_expect_eq(fwd(rl_buf_f32(NULL), ids, rl_cbuf_f32(table), 2, 4, 2, NULL), -1,
	             "%s: out == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(out), NULL, rl_cbuf_f32(table), 2, 4, 2, NULL), -1,
	             "%s: ids == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(out), ids, rl_cbuf_f32(NULL), 2, 4, 2, NULL), -1,
	             "%s: table == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(out), ids, rl_cbuf_f32(table), -1, 4, 2, NULL), -1, "%s: n < 0",
	             name);
	cr_expect_eq(fwd(rl_buf_f32(out), ids, rl_cbuf_f32(table), 2, -1, 2, NULL), -1,
	             "%s: dim < 0", name);
	cr_expect_eq(fwd(rl_buf_f32(out), ids, rl_cbuf_f32(table), 2, 4, -1, NULL), -1,
	             "%s: vocab < 0", name);
	cr_expect_eq(fwd(rl_buf_f32(out), ids, rl_cbuf_f32(table), 0, 4, 2, NULL), 0, "%s: n == 0",
	             name);

	cr_expect_eq(bwd(NULL, rl_cbuf_f32(out), ids, 2, 4, NULL), -1, "%s: dtable == NULL", name);
	cr_expect_eq(bwd(table, rl_cbuf_f32(NULL), ids, 2, 4, NULL), -1, "%s: dout == NULL", name);
	cr_expect_eq(bwd(table, rl_cbuf_f32(out), NULL, 2, 4, NULL), -1, "%s: ids == NULL", name);
	cr_expect_eq(bwd(table, rl_cbuf_f32(out), ids, -1, 4, NULL), -1, "%s: n < 0", name);
	cr_expect_eq(bwd(table, rl_cbuf_f32(out), ids, 2, -1, NULL), -1, "%s: dim < 0", name);
	cr_expect_eq(bwd(table, rl_cbuf_f32(out), ids, 0, 4, NULL), 0, "%s: n == 0", name);
	cr_expect_eq(bwd(table, rl_cbuf_f32(out), ids, 2, 0, NULL), 0, "%s: dim == 0", name);
	for (int i = 0; i < 8; i++)
		cr_expect(out[i] == 0 && table[i] == 0, "%s: wrote to a buffer", name);
}

static void bad_rmsnorm_backward(rl_rmsnorm_backward_fn f, const char *name)
{
	float dx[4] = {0}, dw[4] = {0}, dy[4] = {0}, x[4] = {0}, w[4] = {0}, r[1] = {1};

	cr_expect_eq(
	    f(rl_buf_f32(NULL), dw, rl_cbuf_f32(dy), rl_cbuf_f32(x), rl_cbuf_f32(w), r, 1, 4, NULL),
	    -1, "%s: dx == NULL", name);
	cr_expect_eq(
	    f(rl_buf_f32(dx), dw, rl_cbuf_f32(NULL), rl_cbuf_f32(x), rl_cbuf_f32(w), r, 1, 4, NULL),
	    -1, "%s: dy == NULL", name);
	cr_expect_eq(f(rl_buf_f32(dx), dw, rl_cbuf_f32(dy), rl_cbuf_f32(NULL), rl_cbuf_f32(w), r, 1,
	               4, NULL),
	             -1, "%s: x == NULL", name);
	cr_expect_eq(f(rl_buf_f32(dx), dw, rl_cbuf_f32(dy), rl_cbuf_f32(x), rl_cbuf_f32(NULL), r, 1,
	               4, NULL),
	             -1, "%s: weight == NULL", name);
	cr_expect_eq(f(rl_buf_f32(dx), dw, rl_cbuf_f32(dy), rl_cbuf_f32(x), rl_cbuf_f32(w), NULL, 1,
	               4, NULL),
	             -1, "%s: rstd == NULL", name);
	cr_expect_eq(
	    f(rl_buf_f32(dx), dw, rl_cbuf_f32(dy), rl_cbuf_f32(x), rl_cbuf_f32(w), r, -1, 4, NULL),
	    -1, "%s: rows < 0", name);
	cr_expect_eq(
	    f(rl_buf_f32(dx), dw, rl_cbuf_f32(dy), rl_cbuf_f32(x), rl_cbuf_f32(w), r, 1, 0, NULL),
	    -1, "%s: dim == 0", name);
	cr_expect_eq(
	    f(rl_buf_f32(dx), dw, rl_cbuf_f32(dy), rl_cbuf_f32(x), rl_cbuf_f32(w), r, 1, -4, NULL),
	    -1, "%s: dim < 0", name);
	cr_expect_eq(
	    f(rl_buf_f32(dx), dw, rl_cbuf_f32(dy), rl_cbuf_f32(x), rl_cbuf_f32(w), r, 0, 4, NULL),
	    0, "%s: rows == 0", name);
	cr_expect_eq(
	    f(rl_buf_f32(dx), NULL, rl_cbuf_f32(dy), rl_cbuf_f32(x), rl_cbuf_f32(w), r, 0, 4, NULL),
	    0, "%s: rows == 0, no dweight", name);
}

static void bad_rope(rl_rope_forward_fn f, const char *name)
{
	float x[8] = {0}, inv_freq[2] = {1, 1};
	int32_t pos[1] = {0};

	cr_expect_eq(f(rl_buf_f32(x), pos, inv_freq, -1, 1, 4, NULL), -1, "%s: n < 0", name);
	cr_expect_eq(f(rl_buf_f32(x), pos, inv_freq, 1, 0, 4, NULL), -1, "%s: n_heads == 0", name);
	cr_expect_eq(f(rl_buf_f32(x), pos, inv_freq, 1, 1, 0, NULL), -1, "%s: head_dim == 0", name);
	cr_expect_eq(f(rl_buf_f32(x), pos, inv_freq, 1, 1, 3, NULL), -1, "%s: odd head_dim", name);
	cr_expect_eq(f(rl_buf_f32(NULL), pos, inv_freq, 1, 1, 4, NULL), -1, "%s: x == NULL", name);
	cr_expect_eq(f(rl_buf_f32(x), NULL, inv_freq, 1, 1, 4, NULL), -1, "%s: pos == NULL", name);
	cr_expect_eq(f(rl_buf_f32(x), pos, NULL, 1, 1, 4, NULL), -1, "%s: inv_freq == NULL", name);
	/* no tokens: nothing is read, so NULL is fine */
	cr_expect_eq(f(rl_buf_f32(NULL), NULL, NULL, 0, 1, 4, NULL), 0, "%s: n == 0", name);
}

static void bad_swiglu(rl_swiglu_forward_fn fwd, rl_swiglu_backward_fn bwd, const char *name)
{
	float a[2] = {0}, b[2] = {0}, c[2] = {0}, d[2] = {0}, e[2] = {0};

	cr_expect_eq(fwd(rl_buf_f32(NULL), rl_cbuf_f32(b), rl_cbuf_f32(c), 2, NULL), -1,
	             "%s: h == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(a), rl_cbuf_f32(NULL), rl_cbuf_f32(c), 2, NULL), -1,
	             "%s: gate == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(a), rl_cbuf_f32(b), rl_cbuf_f32(NULL), 2, NULL), -1,
	             "%s: up == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(a), rl_cbuf_f32(b), rl_cbuf_f32(c), -1, NULL), -1, "%s: n < 0",
	             name);
	cr_expect_eq(fwd(rl_buf_f32(a), rl_cbuf_f32(b), rl_cbuf_f32(c), 0, NULL), 0, "%s: n == 0",
	             name);
	cr_expect_eq(bwd(rl_buf_f32(NULL), rl_buf_f32(b), rl_cbuf_f32(c), rl_cbuf_f32(d),
	                 rl_cbuf_f32(e), 2, NULL),
	             -1, "%s: dgate == NULL", name);
	cr_expect_eq(bwd(rl_buf_f32(a), rl_buf_f32(NULL), rl_cbuf_f32(c), rl_cbuf_f32(d),
	                 rl_cbuf_f32(e), 2, NULL),
	             -1, "%s: dup == NULL", name);
	cr_expect_eq(bwd(rl_buf_f32(a), rl_buf_f32(b), rl_cbuf_f32(NULL), rl_cbuf_f32(d),
	                 rl_cbuf_f32(e), 2, NULL),
	             -1, "%s: dh == NULL", name);
	cr_expect_eq(bwd(rl_buf_f32(a), rl_buf_f32(b), rl_cbuf_f32(c), rl_cbuf_f32(NULL),
	                 rl_cbuf_f32(e), 2, NULL),
	             -1, "%s: gate == NULL", name);
	cr_expect_eq(bwd(rl_buf_f32(a), rl_buf_f32(b), rl_cbuf_f32(c), rl_cbuf_f32(d),
	                 rl_cbuf_f32(NULL), 2, NULL),
	             -1, "%s: up == NULL", name);
	cr_expect_eq(bwd(rl_buf_f32(a), rl_buf_f32(b), rl_cbuf_f32(c), rl_cbuf_f32(d),
	                 rl_cbuf_f32(e), -1, NULL),
	             -1, "%s: n < 0", name);
	cr_expect_eq(bwd(rl_buf_f32(a), rl_buf_f32(b), rl_cbuf_f32(c), rl_cbuf_f32(d),
	                 rl_cbuf_f32(e), 0, NULL),
	             0, "%s: n == 0", name);
}

Test(cuda_pointwise, bad_arguments)
{
	bad_embedding(rl_embedding_forward_cpu, rl_embedding_backward_cpu, "cpu");
	bad_rmsnorm_backward(rl_rmsnorm_backward_cpu, "cpu");
	bad_rope(rl_rope_forward_cpu, "cpu forward");
	bad_rope(rl_rope_backward_cpu, "cpu backward");
	bad_swiglu(rl_swiglu_forward_cpu, rl_swiglu_backward_cpu, "cpu");
#ifdef RL_HAVE_CUDA
	bad_embedding(rl_embedding_forward_cuda, rl_embedding_backward_cuda, "cuda");
	bad_rmsnorm_backward(rl_rmsnorm_backward_cuda, "cuda");
	bad_rope(rl_rope_forward_cuda, "cuda forward");
	bad_rope(rl_rope_backward_cuda, "cuda backward");
	bad_swiglu(rl_swiglu_forward_cuda, rl_swiglu_backward_cuda, "cuda");
#endif
}

#ifdef RL_HAVE_CUDA
/* n floats copied to a fresh device buffer at off floats from its start
 * (off 1 breaks the 16-byte alignment of the float4 paths); *base is what
 * dev_free takes. */
static float *dev_at(float **base, const float *host, size_t n, int off)
{
	*base = dev_alloc((n + 1) * sizeof(float));
	if (n)
		cuda_ok(cudaMemcpy(*base + off, host, n * sizeof(float), cudaMemcpyHostToDevice),
		        "upload");
	return *base + off;
}

/* ids in [0, vocab), with about one in neg_every (0: none) replaced by -1 */
static int32_t *rand_ids(uint32_t *seed, int n, int vocab, int neg_every)
{
	int32_t *ids = malloc((n ? (size_t)n : 1) * sizeof(*ids));

	cr_assert_not_null(ids);
	for (int t = 0; t < n; t++) {
		uint32_t r = gc_rng(seed);

		ids[t] = neg_every && r % (uint32_t)neg_every == 0
		             ? -1
		             : (int32_t)((r >> 8) % (uint32_t)vocab);
	}
	return ids;
}

/* |got - want| <= tol[i], counted; the first few are printed */
static void within(const char *what, const float *got, const float *want, const double *tol,
                   size_t n)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (fabs((double)got[i] - (double)want[i]) <= tol[i])
			continue;
		if (bad++ < 5)
			cr_expect(0, "%s[%zu]: got %.9g, want %.9g (tolerance %.3g)", what, i,
			          (double)got[i], (double)want[i], tol[i]);
	}
	cr_expect(bad == 0, "%s: %zu of %zu off", what, bad, n);
}

static void bits_equal(const char *what, const float *got, const float *want, size_t n)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (memcmp(&got[i], &want[i], sizeof(float)) == 0)
			continue;
		if (bad++ < 5)
			cr_expect(0, "%s[%zu]: got %.9g, want %.9g", what, i, (double)got[i],
			          (double)want[i]);
	}
	cr_expect(bad == 0, "%s: %zu of %zu differ", what, bad, n);
}
#endif

/* ---- embedding ---- */

Test(cuda_pointwise, embedding_forward_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int dims[] = {1, 3, 4, 127, 128, 4097};
	static const int ns[] = {1, 5, 300};
	const int vocab = 37; /* far fewer ids than tokens: repeats */
	uint32_t seed = 0x1234567u;

	cr_assert_eq(rl_embedding_check_cuda(NULL), 0, "a flag before any forward");
	for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
		for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
			int dim = dims[d], n = ns[k];
			size_t nout = (size_t)n * dim;
			float *table = frand(&seed, (size_t)vocab * dim, -1.0f, 1.0f);
			int32_t *ids = rand_ids(&seed, n, vocab, 6);
			float *want = falloc(nout), *got = falloc(nout);
			/* misaligned out, then table: the float4 path must step aside */
			int out_off = k == 2, table_off = k == 1;
			float *out_base, *table_base, *dout, *dtable;
			char what[48];
			int32_t *dids = dev_upload_i32(ids, (size_t)n);

			/* out starts as garbage, not zeros: a kernel that skipped the
			 * rows of -1 ids would otherwise pass */
			for (size_t i = 0; i < nout; i++)
				got[i] = 1234.5f;
			cr_assert_eq(rl_embedding_forward_cpu(rl_buf_f32(want), ids,
			                                      rl_cbuf_f32(table), n, dim, vocab,
			                                      NULL),
			             0);
			dtable = dev_at(&table_base, table, (size_t)vocab * dim, table_off);
			dout = dev_at(&out_base, got, nout, out_off);
			cr_assert_eq(rl_embedding_forward_cuda(rl_buf_f32(dout), dids,
			                                       rl_cbuf_f32(dtable), n, dim, vocab,
			                                       NULL),
			             0, "n %d dim %d", n, dim);
			dev_download(got, dout, nout);
			/* a gather is a copy: the same bits */
			snprintf(what, sizeof(what), "n %d dim %d out", n, dim);
			bits_equal(what, got, want, nout);
			cr_expect_eq(rl_embedding_check_cuda(NULL), 0, "n %d dim %d: flag", n, dim);

			dev_free(out_base);
			dev_free(table_base);
			dev_free(dids);
			free(table);
			free(ids);
			free(want);
			free(got);
		}
	}
#endif
}

Test(cuda_pointwise, embedding_forward_flags_bad_ids)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	enum { N = 8, DIM = 5, VOCAB = 4 };
	const int32_t ids[N] = {0, VOCAB, 3, -2, -1, INT32_MAX, INT32_MIN, 1};
	uint32_t seed = 0xbad1du;
	float *table = frand(&seed, VOCAB * DIM, -1.0f, 1.0f);
	float got[N * DIM], cpu[N * DIM];
	float *dout = dev_alloc(sizeof(got)), *dtable = dev_upload(table, VOCAB * DIM);
	int32_t *dids = dev_upload_i32(ids, N);

	/* NaN everywhere first: fresh cudaMalloc memory is often zero, and the
	 * rows of bad ids must be zero-filled by the op, not by luck */
	cuda_ok(cudaMemset(dout, 0xff, sizeof(got)), "cudaMemset");
	cr_assert_eq(rl_embedding_check_cuda(NULL), 0);
	/* the CPU op sees the ids and says so at once */
	cr_expect_eq(
	    rl_embedding_forward_cpu(rl_buf_f32(cpu), ids, rl_cbuf_f32(table), N, DIM, VOCAB, NULL),
	    -1);
	/* the CUDA op cannot without waiting: it flags, and the check reports */
	cr_expect_eq(rl_embedding_forward_cuda(rl_buf_f32(dout), dids, rl_cbuf_f32(dtable), N, DIM,
	                                       VOCAB, NULL),
	             0);
	dev_download(got, dout, N * DIM);
	cr_expect_eq(rl_embedding_check_cuda(NULL), -1, "bad ids not reported");
	cr_expect_eq(rl_embedding_check_cuda(NULL), 0, "the check did not clear the flag");
	for (int t = 0; t < N; t++) {
		int good = ids[t] >= 0 && ids[t] < VOCAB;

		for (int j = 0; j < DIM; j++)
			cr_expect(got[t * DIM + j] == (good ? table[ids[t] * DIM + j] : 0.0f),
			          "row %d (id %d) col %d: %g", t, (int)ids[t], j,
			          (double)got[t * DIM + j]);
	}
	/* dim == 0 copies nothing but still checks the ids */
	cr_expect_eq(rl_embedding_forward_cuda(rl_buf_f32(dout), dids, rl_cbuf_f32(dtable), N, 0,
	                                       VOCAB, NULL),
	             0);
	cr_expect_eq(rl_embedding_check_cuda(NULL), -1, "dim 0: bad ids not reported");
	dev_free(dout);
	dev_free(dtable);
	dev_free(dids);
	free(table);
#endif
}

#ifdef RL_HAVE_CUDA
/* dtable += scatter of dout: the CPU, then the GPU twice from the same start.
 * Each dtable element is dtable + dout[t0] + dout[t1] + ... in token order on
 * both backends, float additions in the same order, so the bits must agree. */
static void embedding_backward_case(uint32_t *seed, int n, int dim, int vocab, int neg_every)
{
	size_t ntab = (size_t)vocab * dim, nout = (size_t)n * dim;
	float *dtable0 = frand(seed, ntab, -1.0f, 1.0f);
	float *dout = frand(seed, nout, -1.0f, 1.0f);
	int32_t *ids = rand_ids(seed, n, vocab, neg_every);
	float *want = fdup(dtable0, ntab), *got1 = falloc(ntab), *got2 = falloc(ntab);
	float *d_dout = dev_upload(dout, nout);
	int32_t *d_ids = dev_upload_i32(ids, (size_t)n);

	cr_assert_eq(rl_embedding_backward_cpu(want, rl_cbuf_f32(dout), ids, n, dim, NULL), 0);
	for (int run = 0; run < 2; run++) {
		float *d_tab = dev_upload(dtable0, ntab);

		cr_assert_eq(
		    rl_embedding_backward_cuda(d_tab, rl_cbuf_f32(d_dout), d_ids, n, dim, NULL), 0,
		    "n %d dim %d vocab %d", n, dim, vocab);
		dev_download(run ? got2 : got1, d_tab, ntab);
		dev_free(d_tab);
	}
	cr_expect(memcmp(got1, got2, ntab * sizeof(float)) == 0,
	          "n %d dim %d vocab %d: two runs differ", n, dim, vocab);
	char what[64];

	snprintf(what, sizeof(what), "n %d dim %d vocab %d dtable", n, dim, vocab);
	bits_equal(what, got1, want, ntab);

	dev_free(d_dout);
	dev_free(d_ids);
	free(dtable0);
	free(dout);
	free(ids);
	free(want);
	free(got1);
	free(got2);
}
#endif

Test(cuda_pointwise, embedding_backward_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int dims[] = {1, 3, 127, 4097};
	static const int ns[] = {1, 5, 300};
	uint32_t seed = 0xe3b0c442u;

	for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++)
		for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
			embedding_backward_case(&seed, ns[k], dims[d], 37, 5);
	/* long runs of one id (thousands of tokens each), and a column count
	 * past one block's 256 */
	embedding_backward_case(&seed, 20000, 300, 3, 7);
	/* every token on another rank: nothing changes */
	embedding_backward_case(&seed, 50, 9, 11, 1);
	/* no -1 at all, a vocabulary larger than the batch */
	embedding_backward_case(&seed, 300, 64, 50000, 0);
#endif
}

/* ---- RMSNorm backward ---- */

#ifdef RL_HAVE_CUDA
static void rmsnorm_backward_case(uint32_t *seed, int rows, int dim, int with_dw)
{
	size_t n = (size_t)rows * dim;
	float *x = frand(seed, n, -3.0f, 3.0f), *w = frand(seed, (size_t)dim, -2.0f, 2.0f);
	float *dy = frand(seed, n, -1.0f, 1.0f), *y = falloc(n), *rstd = falloc((size_t)rows);
	float *dx0 = frand(seed, n, -1.0f, 1.0f), *dw0 = frand(seed, (size_t)dim, -1.0f, 1.0f);
	float *dx_cpu = fdup(dx0, n), *dw_cpu = fdup(dw0, (size_t)dim);
	float *dx_gpu = falloc(n), *dw_gpu = falloc((size_t)dim);

	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_f32(y), rstd, rl_cbuf_f32(x), rl_cbuf_f32(w),
	                                    rows, dim, 1e-5f, NULL),
	             0);
	cr_assert_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(dx_cpu), with_dw ? dw_cpu : NULL,
	                                     rl_cbuf_f32(dy), rl_cbuf_f32(x), rl_cbuf_f32(w), rstd,
	                                     rows, dim, NULL),
	             0);

	float *d_x = dev_upload(x, n), *d_w = dev_upload(w, (size_t)dim);
	float *d_dy = dev_upload(dy, n), *d_rstd = dev_upload(rstd, (size_t)rows);
	float *d_dx = dev_upload(dx0, n), *d_dw = dev_upload(dw0, (size_t)dim);

	cr_assert_eq(rl_rmsnorm_backward_cuda(rl_buf_f32(d_dx), with_dw ? d_dw : NULL,
	                                      rl_cbuf_f32(d_dy), rl_cbuf_f32(d_x), rl_cbuf_f32(d_w),
	                                      d_rstd, rows, dim, NULL),
	             0, "rows %d dim %d", rows, dim);
	dev_download(dx_gpu, d_dx, n);
	dev_download(dw_gpu, d_dw, (size_t)dim);

	/* dx: the GPU repeats the CPU's float steps unfused, from c =
	 * r^2 sum(dy w x) / dim summed in double in another order: c agrees to
	 * the bit or, rarely, one ulp, which moves r x c (|r x| <= sqrt(dim),
	 * here |r x c| ~ 1) by ~1e-7. rtol 1e-5 / atol 1e-6 leave 10x that. */
	double *want = widen(dx_cpu, n);
	char what[64];

	snprintf(what, sizeof(what), "rows %d dim %d dx", rows, dim);
	close_all(what, dx_gpu, want, n, 1e-5, 1e-6);
	free(want);

	if (with_dw) {
		/* Both sum dy x r in double (only the order differs, ~1e-16
		 * relative) and round twice to float: the sum, then dweight +
		 * sum. Each rounding is within half an ulp of a value at most
		 * bound = |dweight| + sum |dy x r|, so the backends differ by at
		 * most 2 ulp(bound) <= 2^-22 bound; 2^-20 bound leaves 4x. */
		double *tol = dalloc((size_t)dim);

		for (int c = 0; c < dim; c++)
			tol[c] = fabs((double)dw0[c]);
		for (int r = 0; r < rows; r++)
			for (int c = 0; c < dim; c++) {
				size_t i = (size_t)r * dim + c;

				tol[c] += fabs((double)dy[i] * x[i] * rstd[r]);
			}
		for (int c = 0; c < dim; c++)
			tol[c] = ldexp(tol[c], -20);
		snprintf(what, sizeof(what), "rows %d dim %d dweight", rows, dim);
		within(what, dw_gpu, dw_cpu, tol, (size_t)dim);
		free(tol);
	} else {
		bits_equal("dweight untouched", dw_gpu, dw0, (size_t)dim);
	}

	dev_free(d_x);
	dev_free(d_w);
	dev_free(d_dy);
	dev_free(d_rstd);
	dev_free(d_dx);
	dev_free(d_dw);
	free(x);
	free(w);
	free(dy);
	free(y);
	free(rstd);
	free(dx0);
	free(dw0);
	free(dx_cpu);
	free(dw_cpu);
	free(dx_gpu);
	free(dw_gpu);
}
#endif

Test(cuda_pointwise, rmsnorm_backward_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int dims[] = {1, 3, 127, 4097};
	static const int rows[] = {1, 5, 300};
	uint32_t seed = 0x5eed0001u;

	for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++)
		for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
			for (int with_dw = 0; with_dw < 2; with_dw++)
				rmsnorm_backward_case(&seed, rows[r], dims[d], with_dw);
	/* many chunks of the dweight reduction: 32-row chunks with a short last
	 * one, then the 256-chunk cap (Qwen3's per-head norms: dim 128, rows =
	 * tokens x heads) */
	rmsnorm_backward_case(&seed, 3001, 129, 1);
	rmsnorm_backward_case(&seed, 20000, 128, 1);
#endif
}

/* ---- RoPE ---- */

#ifdef RL_HAVE_CUDA
/* Packed sequences: positions count up from 0 and restart at random points;
 * from the middle of the batch on they start at 30000, for angles far from
 * the first turn of the circle. */
static int32_t *packed_positions(uint32_t *seed, int n)
{
	int32_t *pos = malloc((n ? (size_t)n : 1) * sizeof(*pos));
	int32_t p = 0;

	cr_assert_not_null(pos);
	for (int t = 0; t < n; t++) {
		if (t > 0 && gc_rng(seed) % 17 == 0)
			p = t >= n / 2 ? 30000 : 0;
		pos[t] = p++;
	}
	return pos;
}

/* x rotated in place (backward: by -angle) on both backends. The angle
 * pos * inv_freq is the same fp32 product on both and so are the rotation's
 * float steps; only cos and sin differ, CUDA's sincosf (<= 2 ulp) against
 * glibc's cosf/sinf (<= 1 ulp): <= 3 * 2^-24 each, as |cos|, |sin| <= 1. An
 * output u c - v s then differs by <= 3 * 2^-24 (|u| + |v|), plus the two
 * products' and the sum's roundings on each side, <= 4 * 2^-24 (|u| + |v|)
 * together: 7 * 2^-24 (|u| + |v|) in all, and 2^-20 (|u| + |v|) leaves 2x. */
static void rope_case(uint32_t *seed, int n, int n_heads, int head_dim, int backward,
                      const struct rl_rope_scaling *scaling, double theta)
{
	int half = head_dim / 2;
	size_t len = (size_t)n * n_heads * head_dim;
	float *x = frand(seed, len, -1.0f, 1.0f), *want = fdup(x, len), *got = falloc(len);
	float *inv_freq = falloc((size_t)half);
	int32_t *pos = packed_positions(seed, n);
	rl_rope_forward_fn cpu = backward ? rl_rope_backward_cpu : rl_rope_forward_cpu;
	rl_rope_forward_fn gpu = backward ? rl_rope_backward_cuda : rl_rope_forward_cuda;

	rl_rope_inv_freq(inv_freq, head_dim, theta, scaling);
	cr_assert_eq(cpu(rl_buf_f32(want), pos, inv_freq, n, n_heads, head_dim, NULL), 0);

	float *d_x = dev_upload(x, len), *d_f = dev_upload(inv_freq, (size_t)half);
	int32_t *d_pos = dev_upload_i32(pos, (size_t)n);

	cr_assert_eq(gpu(rl_buf_f32(d_x), d_pos, d_f, n, n_heads, head_dim, NULL), 0,
	             "n %d heads %d head_dim %d", n, n_heads, head_dim);
	dev_download(got, d_x, len);
	double *tol = dalloc(len);

	for (size_t i = 0; i < len; i++) {
		int ch = (int)(i % (size_t)head_dim);
		size_t partner = ch < half ? i + half : i - half;

		tol[i] = ldexp(fabs((double)x[i]) + fabs((double)x[partner]), -20);
	}
	char what[80];

	snprintf(what, sizeof(what), "rope %s n %d heads %d head_dim %d",
	         backward ? "backward" : "forward", n, n_heads, head_dim);
	within(what, got, want, tol, len);
	free(tol);

	dev_free(d_x);
	dev_free(d_f);
	dev_free(d_pos);
	free(x);
	free(want);
	free(got);
	free(inv_freq);
	free(pos);
}
#endif

Test(cuda_pointwise, rope_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int heads[] = {1, 3, 5};
	/* half of 130 is 65: not a multiple of a warp */
	static const int head_dims[] = {2, 6, 128, 130};
	static const int ns[] = {1, 7, 300};
	const struct rl_rope_scaling llama3 = {.type = RL_ROPE_LLAMA3,
	                                       .factor = 8.0,
	                                       .low_freq_factor = 1.0,
	                                       .high_freq_factor = 4.0,
	                                       .original_max_position_embeddings = 8192};
	uint32_t seed = 0x0de1u;

	for (size_t h = 0; h < sizeof(heads) / sizeof(heads[0]); h++)
		for (size_t d = 0; d < sizeof(head_dims) / sizeof(head_dims[0]); d++)
			for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
				for (int bw = 0; bw < 2; bw++)
					rope_case(&seed, ns[k], heads[h], head_dims[d], bw,
					          (k + d) % 2 ? &llama3 : NULL, d % 2 ? 1e6 : 1e4);
#endif
}

/* ---- SwiGLU ---- */

#ifdef RL_HAVE_CUDA
/* The GPU repeats the CPU's float steps, fast exp included, unfused: with
 * GCC (which does not contract under -std=c11) the bits agree. The
 * tolerance covers a CPU build that contracts a*b+c into an fma: that moves
 * each step by half an ulp, and in 1 + g (1 - s), cancelling near g = -1.28,
 * by half an ulp of 1 absolutely, so d up s (1 + g (1 - s)) by
 * ~|d up| 2^-24 < 1.2e-7; rtol 1e-5 / atol 1e-6 leave room for a few such
 * steps. */
static void swiglu_case(uint32_t *seed, int64_t n)
{
	size_t len = (size_t)n;
	float *g = frand(seed, len, -20.0f, 20.0f), *u = frand(seed, len, -2.0f, 2.0f);
	float *dh = frand(seed, len, -1.0f, 1.0f);
	float *dg0 = frand(seed, len, -1.0f, 1.0f), *du0 = frand(seed, len, -1.0f, 1.0f);
	/* the sigmoid's branches and the exp's flush below -87.34; NaN is
	 * left out, as it would fail any comparison */
	static const float special[] = {0.0f,   -0.0f,  1e-30f, -1e-30f, -1.28f, 87.0f,
	                                -87.3f, -87.4f, -88.0f, -100.0f, 100.0f, 1e30f};

	for (size_t i = 0; i < len && i < sizeof(special) / sizeof(special[0]); i++)
		g[(size_t)(i * 7919u % len)] = special[i];

	float *h_cpu = falloc(len), *h_gpu = falloc(len);
	float *dg_cpu = fdup(dg0, len), *du_cpu = fdup(du0, len);
	float *dg_gpu = falloc(len), *du_gpu = falloc(len);

	cr_assert_eq(
	    rl_swiglu_forward_cpu(rl_buf_f32(h_cpu), rl_cbuf_f32(g), rl_cbuf_f32(u), n, NULL), 0);
	cr_assert_eq(rl_swiglu_backward_cpu(rl_buf_f32(dg_cpu), rl_buf_f32(du_cpu), rl_cbuf_f32(dh),
	                                    rl_cbuf_f32(g), rl_cbuf_f32(u), n, NULL),
	             0);

	float *d_g = dev_upload(g, len), *d_u = dev_upload(u, len), *d_dh = dev_upload(dh, len);
	float *d_h = dev_alloc(len * sizeof(float));
	float *d_dg = dev_upload(dg0, len), *d_du = dev_upload(du0, len);

	cr_assert_eq(
	    rl_swiglu_forward_cuda(rl_buf_f32(d_h), rl_cbuf_f32(d_g), rl_cbuf_f32(d_u), n, NULL), 0,
	    "n %lld", (long long)n);
	cr_assert_eq(rl_swiglu_backward_cuda(rl_buf_f32(d_dg), rl_buf_f32(d_du), rl_cbuf_f32(d_dh),
	                                     rl_cbuf_f32(d_g), rl_cbuf_f32(d_u), n, NULL),
	             0, "n %lld", (long long)n);
	dev_download(h_gpu, d_h, len);
	dev_download(dg_gpu, d_dg, len);
	dev_download(du_gpu, d_du, len);

	double *want = dalloc(len);

	for (size_t i = 0; i < len; i++)
		want[i] = h_cpu[i];
	close_all("h", h_gpu, want, len, 1e-5, 1e-6);
	for (size_t i = 0; i < len; i++)
		want[i] = dg_cpu[i];
	close_all("dgate", dg_gpu, want, len, 1e-5, 1e-6);
	for (size_t i = 0; i < len; i++)
		want[i] = du_cpu[i];
	close_all("dup", du_gpu, want, len, 1e-5, 1e-6);

	dev_free(d_g);
	dev_free(d_u);
	dev_free(d_dh);
	dev_free(d_h);
	dev_free(d_dg);
	dev_free(d_du);
	free(want);
	free(g);
	free(u);
	free(dh);
	free(dg0);
	free(du0);
	free(h_cpu);
	free(h_gpu);
	free(dg_cpu);
	free(du_cpu);
	free(dg_gpu);
	free(du_gpu);
}
#endif

Test(cuda_pointwise, swiglu_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	/* (1 << 20) + 5: a tail after whole blocks; 65536 * 256 + 1001: past
	 * the grid cap of 65536 blocks, so threads take a second element */
	static const int64_t ns[] = {0, 1, 3, 127, ((int64_t)1 << 20) + 5, 65536 * 256 + 1001};
	uint32_t seed = 0x51u;

	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
		swiglu_case(&seed, ns[k]);
#endif
}
