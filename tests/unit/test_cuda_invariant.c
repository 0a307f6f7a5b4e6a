/* The batch-invariant CUDA ops: the invariant linear against the CPU linear
 * and against a host replay of its documented order, the same bits for a
 * row whatever batch it sits in, and the logprob pair (the fused forward
 * and rl_logits_logprobs on the invariant linear's logits) equal to each
 * other bit for bit and close to the CPU's fused forward. The argument
 * checks run without a GPU; everything else starts with CUDA_TEST_BEGIN.
 *
 * Tolerances. The invariant linear sums y[t, o] = sum_k x[t, k] W[o, k]
 * in fp32, and so does the CPU's sgemm, in another order. Any order of a
 * K-term fp32 sum, with or without FMA, is within gamma_K S of the exact
 * value, S = sum_k |x[t, k] W[o, k]| and gamma_K = K u / (1 - K u), u =
 * 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms, 3.1); the
 * bias add rounds once more, by at most u (S + |b|) with |y| <= S + |b|.
 * The two results are then within 2 gamma_K S + 2 u (S + |b|), which for
 * K <= 2896 (so that 2 K^2 u <= 1) is at most (K + 2) 2^-23 (S + |b|):
 * the bound used below, with K = in_dim. The GPU's order is known, so its
 * bits are also compared with a host replay of that order (fmaf from 0,
 * k ascending, then + bias), which must match exactly.
 * The logprobs are held to what test_cuda_logprobs.c allows: 1e-5
 * relative plus 2e-6 (1 + L_t), L_t = scale sum_k |h[t, k]| (|W| <= 1, so
 * it bounds |logit|), there about 30x the largest difference a host
 * emulation of two fp32 GEMM orders showed. Here the target's logit is an
 * fp32 sum too (the CPU's is the same sgemm entry), which that emulation
 * covered, and the float subtraction logprob = tlogit - lse adds half an
 * ulp of lse, inside the relative term. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/linear.h"
#include "kernels/logprobs.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/op_arg_checks.h"
#include "tests/unit/ops_test_util.h"

#ifdef RL_HAVE_CUDA
/* Every check happens before the first CUDA call, so these run (and must
 * not touch the host pointers they are given) on a machine without a GPU. */
Test(cuda_invariant, bad_arguments)
{
	float v[8] = {0}, g[8], work[8];
	int32_t tgt[2] = {0, 1};
	struct rl_lm_logprobs_shape s = {
	    .n = 2, .dim = 2, .vocab = 2, .chunk = 2, .logit_scale = 1.0f};

	cr_expect_eq(rl_linear_forward_invariant_cuda(rl_buf_f32(NULL), rl_cbuf_f32(v),
	                                              rl_cbuf_f32(v), rl_cbuf_f32(NULL), 1, 2, 2,
	                                              NULL),
	             -1);
	cr_expect_eq(rl_linear_forward_invariant_cuda(rl_buf_f32(g), rl_cbuf_f32(NULL),
	                                              rl_cbuf_f32(v), rl_cbuf_f32(NULL), 1, 2, 2,
	                                              NULL),
	             -1);
	cr_expect_eq(rl_linear_forward_invariant_cuda(rl_buf_f32(g), rl_cbuf_f32(v),
	                                              rl_cbuf_f32(NULL), rl_cbuf_f32(NULL), 1, 2, 2,
	                                              NULL),
	             -1);
	cr_expect_eq(rl_linear_forward_invariant_cuda(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                              rl_cbuf_f32(NULL), -1, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_linear_forward_invariant_cuda(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                              rl_cbuf_f32(NULL), 1, 0, 2, NULL),
	             -1);
	cr_expect_eq(rl_linear_forward_invariant_cuda(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                              rl_cbuf_f32(NULL), 1, 2, -2, NULL),
	             -1);
	cr_expect_eq(rl_linear_forward_invariant_cuda(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                              rl_cbuf_f32(v), 0, 2, 2, NULL),
	             0);

	/* the fused forward takes the checks of the ordinary one (whose
	 * backward is also the invariant forward's) */
	expect_logprobs_arg_checks(rl_lm_logprobs_forward_invariant_cuda,
	                           rl_lm_logprobs_backward_cuda);

	cr_expect_eq(rl_logits_logprobs_cuda(NULL, g, v, 2, tgt, &s, work, NULL), -1);
	cr_expect_eq(rl_logits_logprobs_cuda(g, NULL, v, 2, tgt, &s, work, NULL), -1);
	cr_expect_eq(rl_logits_logprobs_cuda(g, g + 2, NULL, 2, tgt, &s, work, NULL), -1);
	cr_expect_eq(rl_logits_logprobs_cuda(g, g + 2, v, 2, NULL, &s, work, NULL), -1);
	cr_expect_eq(rl_logits_logprobs_cuda(g, g + 2, v, 2, tgt, NULL, work, NULL), -1);
	cr_expect_eq(rl_logits_logprobs_cuda(g, g + 2, v, 2, tgt, &s, NULL, NULL), -1);
	cr_expect_eq(rl_logits_logprobs_cuda(g, g + 2, v, 1, tgt, &s, work, NULL), -1,
	             "ld < vocab");

	struct rl_lm_logprobs_shape bad[3] = {s, s, s};
	bad[0].n = -1;
	bad[1].vocab = 0;
	bad[2].chunk = 0;
	for (int i = 0; i < 3; i++)
		cr_expect_eq(rl_logits_logprobs_cuda(g, g + 2, v, 2, tgt, &bad[i], work, NULL), -1,
		             "shape %d", i);

	/* nothing to do: 0 without touching the device; logits_logprobs does
	 * not read dim */
	struct rl_lm_logprobs_shape empty = s;
	empty.n = 0;
	cr_expect_eq(rl_lm_logprobs_forward_invariant_cuda(g, g + 2, rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                                   tgt, &empty, work, NULL),
	             0);
	empty.dim = 0;
	cr_expect_eq(rl_logits_logprobs_cuda(g, g + 2, v, 2, tgt, &empty, work, NULL), 0);
}
#else
Test(cuda_invariant, bad_arguments)
{
	cr_skip_test("built without --with-cuda");
}
#endif

#ifdef RL_HAVE_CUDA
/* y [n, out] = x W^T (+ bias) through the invariant op on device copies;
 * W sits w_off floats into its buffer, so its rows are misaligned for an
 * odd offset, as a slice of a larger W is. */
static void inv_linear(float *y, const float *x, const float *w, const float *bias, int n,
                       int in_dim, int out_dim, int w_off)
{
	size_t nw = (size_t)out_dim * in_dim;
	float *d_x = dev_upload(x, (size_t)n * in_dim);
	float *d_wbuf = dev_alloc((nw + (size_t)w_off) * sizeof(float));
	float *d_b = bias ? dev_upload(bias, (size_t)out_dim) : NULL;
	float *d_y = dev_alloc((size_t)n * out_dim * sizeof(float));

	cuda_ok(cudaMemcpy(d_wbuf + w_off, w, nw * sizeof(float), cudaMemcpyHostToDevice),
	        "upload w");
	cr_assert_eq(rl_linear_forward_invariant_cuda(rl_buf_f32(d_y), rl_cbuf_f32(d_x),
	                                              rl_cbuf_f32(d_wbuf + w_off), rl_cbuf_f32(d_b),
	                                              n, in_dim, out_dim, NULL),
	             0, "n %d in %d out %d", n, in_dim, out_dim);
	dev_download(y, d_y, (size_t)n * out_dim);
	dev_free(d_x);
	dev_free(d_wbuf);
	dev_free(d_b);
	dev_free(d_y);
}

/* The documented order of an element: one fmaf chain from +0 over k
 * ascending. fmaf is correctly rounded, so this has the GPU's bits. */
static float chain_dot(const float *x, const float *w, int k)
{
	float acc = 0.0f;

	for (int i = 0; i < k; i++)
		acc = fmaf(x[i], w[i], acc);
	return acc;
}

static void linear_parity(uint32_t *seed, int n, int in_dim, int out_dim, int with_bias, int w_off)
{
	size_t ny = (size_t)n * out_dim;
	float *x = frand(seed, (size_t)n * in_dim, -1, 1);
	float *w = frand(seed, (size_t)out_dim * in_dim, -1, 1);
	float *b = with_bias ? frand(seed, (size_t)out_dim, -1, 1) : NULL;
	float *y = falloc(ny), *y_cpu = falloc(ny);
	int bad = 0, off_bits = 0;

	inv_linear(y, x, w, b, n, in_dim, out_dim, w_off);
	cr_assert_eq(rl_linear_forward_cpu(rl_buf_f32(y_cpu), rl_cbuf_f32(x), rl_cbuf_f32(w),
	                                   rl_cbuf_f32(b), n, in_dim, out_dim, NULL),
	             0);
	for (int t = 0; t < n; t++)
		for (int o = 0; o < out_dim; o++) {
			const float *xt = x + (size_t)t * in_dim, *wo = w + (size_t)o * in_dim;
			double mag = b ? fabs(b[o]) : 0.0;
			float got = y[(size_t)t * out_dim + o];
			float want = y_cpu[(size_t)t * out_dim + o];
			float replay = chain_dot(xt, wo, in_dim);

			if (b)
				replay += b[o];
			for (int k = 0; k < in_dim; k++)
				mag += fabs((double)xt[k] * wo[k]);

			double tol = (in_dim + 2) * ldexp(mag, -23);

			if (fabs((double)got - want) > tol && bad++ < 5)
				cr_expect(0, "y[%d, %d] of %dx%dx%d: got %.9g, cpu %.9g (tol %.3g)",
				          t, o, n, in_dim, out_dim, (double)got, (double)want, tol);
			if (memcmp(&got, &replay, sizeof(got)) != 0 && off_bits++ < 5)
				cr_expect(0, "y[%d, %d] of %dx%dx%d: got %.9g, replay %.9g", t, o,
				          n, in_dim, out_dim, (double)got, (double)replay);
		}
	cr_expect(bad == 0, "%dx%dx%d: %d of %zu off the cpu", n, in_dim, out_dim, bad, ny);
	cr_expect(off_bits == 0, "%dx%dx%d: %d of %zu off the replay", n, in_dim, out_dim, off_bits,
	          ny);
	free(x);
	free(w);
	free(b);
	free(y);
	free(y_cpu);
}
#endif

/* Shapes on both sides of each tile configuration's n (16, 64), in_dim
 * short of, at and past the 32- and 64-wide k slices, out_dim not a
 * multiple of the 32- or 64-wide column tiles. */
Test(cuda_invariant, linear_parity_with_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int shapes[][3] = {
	    {1, 1, 1},     {1, 100, 129}, {3, 31, 33},     {16, 64, 32},    {17, 33, 65},
	    {64, 96, 100}, {65, 257, 70}, {130, 1000, 64}, {300, 129, 131}, {7, 2048, 40},
	};
	uint32_t seed = 0x1a2b3c4du;

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		linear_parity(&seed, shapes[i][0], shapes[i][1], shapes[i][2], (int)(i % 2 == 0),
		              (int)(i % 3 == 1));
#endif
}

/* Probe rows computed alone, then at the first, middle and last position
 * of batches of random rows sized for each tile configuration (1, 7, 16:
 * 16-row tiles; 17, 64: one 64-row tile; 65, 300: 64 x 64 tiles, the last
 * tile partial), and with W cut to a slice of its rows at an odd offset:
 * every output keeps its bits. */
Test(cuda_invariant, linear_batch_invariant)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	enum { IN = 257, OUT = 131, PROBES = 3, SLICE0 = 40 };
	static const int ns[] = {1, 7, 16, 17, 64, 65, 300};
	uint32_t seed = 0xb47c4u;
	float *probe = frand(&seed, (size_t)PROBES * IN, -1, 1);
	float *w = frand(&seed, (size_t)OUT * IN, -1, 1);
	float *b = frand(&seed, OUT, -1, 1);
	float ref[PROBES][OUT];

	for (int i = 0; i < PROBES; i++)
		inv_linear(ref[i], probe + (size_t)i * IN, w, b, 1, IN, OUT, 0);

	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
		int n = ns[a];
		const int pos[3] = {0, n / 2, n - 1};
		float *x = frand(&seed, (size_t)n * IN, -1, 1);
		float *y = falloc((size_t)n * OUT);

		int p = 0;

		for (int q = 0; q < 3; q++) {
			p = (int)(a + q) % PROBES;
			memcpy(x + (size_t)pos[q] * IN, probe + (size_t)p * IN, IN * sizeof(float));
			inv_linear(y, x, w, b, n, IN, OUT, q);
			cr_expect(memcmp(y + (size_t)pos[q] * OUT, ref[p], sizeof(ref[p])) == 0,
			          "probe %d at row %d of %d: other bits", p, pos[q], n);
		}

		/* the same batch against W[SLICE0 : OUT] and its bias; row n - 1
		 * holds probe p, the last placed */
		inv_linear(y, x, w + (size_t)SLICE0 * IN, b + SLICE0, n, IN, OUT - SLICE0, 1);
		cr_expect(memcmp(y + (size_t)(n - 1) * (OUT - SLICE0), ref[p] + SLICE0,
		                 (OUT - SLICE0) * sizeof(float)) == 0,
		          "probe %d of %d rows against a slice of W: other bits", p, n);
		free(x);
		free(y);
	}
	free(probe);
	free(w);
	free(b);
#endif
}

#ifdef RL_HAVE_CUDA
/* The logprob cases: W has LD_EXTRA rows past the vocabulary, so the
 * logits the invariant linear writes for it have rows of ld = vocab +
 * LD_EXTRA, of which rl_logits_logprobs reads the first vocab; the fused
 * forward gets the first vocab rows of the same W. */
enum { LD_EXTRA = 3 };

struct inv_lp {
	struct rl_lm_logprobs_shape s;
	int ld;
	float *h, *w; /* host: h [n, dim], w [ld, dim] */
	int32_t *tgt;
	float *d_h, *d_w, *d_logits, *d_lp, *d_lse, *d_work;
	int32_t *d_tgt;
};

/* Random targets (a quarter -1), the vocabulary's first and last entry
 * included; wild adds targets outside [-1, vocab), which the GPU ops must
 * answer with logprob 0 (vocab itself would be a row of this W). */
static void inv_lp_init(struct inv_lp *d, uint32_t *seed, struct rl_lm_logprobs_shape s, int wild)
{
	size_t nh = (size_t)s.n * s.dim;

	memset(d, 0, sizeof(*d));
	d->s = s;
	d->ld = s.vocab + LD_EXTRA;
	d->h = frand(seed, nh, -1, 1);
	d->w = frand(seed, (size_t)d->ld * s.dim, -1, 1);
	d->tgt = malloc((size_t)s.n * sizeof(*d->tgt));
	cr_assert_not_null(d->tgt);
	for (int t = 0; t < s.n; t++)
		d->tgt[t] =
		    gc_rng(seed) % 4 == 0 ? -1 : (int32_t)(gc_rng(seed) % (uint32_t)s.vocab);
	if (s.n >= 2) {
		d->tgt[0] = 0;
		d->tgt[s.n - 1] = s.vocab - 1;
	}
	if (wild && s.n >= 4) {
		d->tgt[1] = s.vocab;
		d->tgt[2] = -7;
	}
	d->d_h = dev_upload(d->h, nh);
	d->d_w = dev_upload(d->w, (size_t)d->ld * s.dim);
	d->d_tgt = dev_upload_i32(d->tgt, (size_t)s.n);
	d->d_logits = dev_alloc((size_t)s.n * d->ld * sizeof(float));
	d->d_lp = dev_alloc((size_t)s.n * sizeof(float));
	d->d_lse = dev_alloc((size_t)s.n * sizeof(float));
	/* exactly what the header asks for, so compute-sanitizer sees overruns */
	d->d_work = dev_alloc((size_t)rl_lm_logprobs_work_floats(&s, RL_F32) * sizeof(float));
}

static void inv_lp_free(struct inv_lp *d)
{
	free(d->h);
	free(d->w);
	free(d->tgt);
	dev_free(d->d_h);
	dev_free(d->d_w);
	dev_free(d->d_tgt);
	dev_free(d->d_logits);
	dev_free(d->d_lp);
	dev_free(d->d_lse);
	dev_free(d->d_work);
}

static void inv_lp_fused(struct inv_lp *d, float *lp, float *lse)
{
	cr_assert_eq(rl_lm_logprobs_forward_invariant_cuda(d->d_lp, d->d_lse, rl_cbuf_f32(d->d_h),
	                                                   rl_cbuf_f32(d->d_w), d->d_tgt, &d->s,
	                                                   d->d_work, NULL),
	             0, "fused n %d dim %d vocab %d chunk %d", d->s.n, d->s.dim, d->s.vocab,
	             d->s.chunk);
	dev_download(lp, d->d_lp, (size_t)d->s.n);
	dev_download(lse, d->d_lse, (size_t)d->s.n);
}

/* generation's way: the invariant LM head's unscaled logits, then
 * rl_logits_logprobs on them */
static void inv_lp_from_logits(struct inv_lp *d, float *lp, float *lse)
{
	cr_assert_eq(rl_linear_forward_invariant_cuda(rl_buf_f32(d->d_logits), rl_cbuf_f32(d->d_h),
	                                              rl_cbuf_f32(d->d_w), rl_cbuf_f32(NULL),
	                                              d->s.n, d->s.dim, d->ld, NULL),
	             0);
	cr_assert_eq(rl_logits_logprobs_cuda(d->d_lp, d->d_lse, d->d_logits, d->ld, d->d_tgt, &d->s,
	                                     d->d_work, NULL),
	             0, "logits n %d vocab %d chunk %d", d->s.n, d->s.vocab, d->s.chunk);
	dev_download(lp, d->d_lp, (size_t)d->s.n);
	dev_download(lse, d->d_lse, (size_t)d->s.n);
}

static void inv_lp_expect_rows(const char *what, const struct inv_lp *d, const float *got,
                               const float *want)
{
	int bad = 0;

	for (int t = 0; t < d->s.n; t++) {
		double l = 0.0;

		for (int k = 0; k < d->s.dim; k++)
			l += fabs(d->h[(size_t)t * d->s.dim + k]);

		double tol = 1e-5 * fabs(want[t]) + 2e-6 * (1.0 + fabs(d->s.logit_scale) * l);

		if (fabs((double)got[t] - want[t]) <= tol)
			continue;
		if (bad++ < 5)
			cr_expect(0, "%s[%d]: got %.9g, want %.9g (tol %.3g)", what, t,
			          (double)got[t], (double)want[t], tol);
	}
	cr_expect(bad == 0, "%s: %d of %d off", what, bad, d->s.n);
}

/* n on both sides of the linear's tile switches; chunks that divide the
 * vocabulary, that do not, and that exceed it (clamped); dim not a
 * multiple of 32. */
static const int lp_ns[] = {1, 37, 100};
static const int lp_chunks[] = {1000, 333, 6000};
static const float lp_scales[] = {1.0f, 1.0f / 0.7f};
enum { LP_DIM = 67, LP_VOCAB = 5000 };
#define LP_COUNT(a) (sizeof(a) / sizeof((a)[0]))
#endif

/* The pair's promise: the same h, W, scale and chunk give the same bits
 * through the fused forward and through rl_logits_logprobs on the
 * invariant linear's logits; targets outside [-1, vocab) give 0. */
Test(cuda_invariant, fused_equals_logits_path)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	uint32_t seed = 0xfeedbeefu;

	for (size_t a = 0; a < LP_COUNT(lp_ns); a++)
		for (size_t c = 0; c < LP_COUNT(lp_chunks); c++)
			for (size_t k = 0; k < LP_COUNT(lp_scales); k++) {
				struct rl_lm_logprobs_shape s = {.n = lp_ns[a],
				                                 .dim = LP_DIM,
				                                 .vocab = LP_VOCAB,
				                                 .chunk = lp_chunks[c],
				                                 .logit_scale = lp_scales[k]};
				struct inv_lp d;
				size_t bytes = (size_t)s.n * sizeof(float);

				inv_lp_init(&d, &seed, s, 1);

				float *lp = falloc((size_t)s.n), *lse = falloc((size_t)s.n);
				float *lp2 = falloc((size_t)s.n), *lse2 = falloc((size_t)s.n);

				inv_lp_fused(&d, lp, lse);
				inv_lp_from_logits(&d, lp2, lse2);
				cr_expect(memcmp(lp, lp2, bytes) == 0 &&
				              memcmp(lse, lse2, bytes) == 0,
				          "n %d chunk %d scale %g: the two paths differ", s.n,
				          s.chunk, (double)s.logit_scale);
				for (int t = 0; t < s.n; t++) {
					if (d.tgt[t] >= 0 && d.tgt[t] < s.vocab)
						continue;
					cr_expect(lp[t] == 0.0f, "fused logprob[%d], target %d: %g",
					          t, d.tgt[t], (double)lp[t]);
					cr_expect(lp2[t] == 0.0f,
					          "logits logprob[%d], target %d: %g", t, d.tgt[t],
					          (double)lp2[t]);
				}
				inv_lp_free(&d);
				free(lp);
				free(lse);
				free(lp2);
				free(lse2);
			}
#endif
}

/* Both paths against the CPU's fused forward, on valid targets. */
Test(cuda_invariant, close_to_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	uint32_t seed = 0xc105e7u;

	for (size_t a = 0; a < LP_COUNT(lp_ns); a++)
		for (size_t c = 0; c < LP_COUNT(lp_chunks); c++)
			for (size_t k = 0; k < LP_COUNT(lp_scales); k++) {
				struct rl_lm_logprobs_shape s = {.n = lp_ns[a],
				                                 .dim = LP_DIM,
				                                 .vocab = LP_VOCAB,
				                                 .chunk = lp_chunks[c],
				                                 .logit_scale = lp_scales[k]};
				struct inv_lp d;

				inv_lp_init(&d, &seed, s, 0);

				float *lp = falloc((size_t)s.n), *lse = falloc((size_t)s.n);
				float *lp_gpu = falloc((size_t)s.n), *lse_gpu = falloc((size_t)s.n);
				float *work =
				    falloc((size_t)rl_lm_logprobs_work_floats(&s, RL_F32));

				cr_assert_eq(rl_lm_logprobs_forward_cpu(lp, lse, rl_cbuf_f32(d.h),
				                                        rl_cbuf_f32(d.w), d.tgt, &s,
				                                        work, NULL),
				             0);
				inv_lp_fused(&d, lp_gpu, lse_gpu);
				inv_lp_expect_rows("fused logprob", &d, lp_gpu, lp);
				inv_lp_expect_rows("fused lse", &d, lse_gpu, lse);
				inv_lp_from_logits(&d, lp_gpu, lse_gpu);
				inv_lp_expect_rows("logits logprob", &d, lp_gpu, lp);
				inv_lp_expect_rows("logits lse", &d, lse_gpu, lse);
				for (int t = 0; t < s.n; t++)
					if (d.tgt[t] < 0)
						cr_expect_eq(lp_gpu[t], 0.0f,
						             "logprob[%d] of target -1", t);
				inv_lp_free(&d);
				free(lp);
				free(lse);
				free(lp_gpu);
				free(lse_gpu);
				free(work);
			}
#endif
}

/* A probe token's logprob and lse from the fused forward keep their bits
 * at any row of batches sized for each of the linear's tile
 * configurations, the other rows random. */
Test(cuda_invariant, fused_batch_invariant)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	enum { DIM = 67, VOCAB = 1000, CHUNK = 333, PROBES = 3 };
	static const int ns[] = {1, 7, 17, 64, 65, 300};
	uint32_t seed = 0x1337u;
	float *probe = frand(&seed, (size_t)PROBES * DIM, -1, 1);
	float *w = frand(&seed, (size_t)VOCAB * DIM, -1, 1);
	const int32_t probe_tgt[PROBES] = {0, 517, VOCAB - 1};
	float ref_lp[PROBES], ref_lse[PROBES];
	float *d_w = dev_upload(w, (size_t)VOCAB * DIM);

	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++) {
		int n = ns[a];
		struct rl_lm_logprobs_shape s = {
		    .n = n, .dim = DIM, .vocab = VOCAB, .chunk = CHUNK, .logit_scale = 1.3f};
		const int pos[3] = {0, n / 2, n - 1};
		float *h = frand(&seed, (size_t)n * DIM, -1, 1);
		float *lp = falloc((size_t)n), *lse = falloc((size_t)n);
		int32_t *tgt = malloc((size_t)n * sizeof(*tgt));
		float *d_lp = dev_alloc((size_t)n * sizeof(float));
		float *d_lse = dev_alloc((size_t)n * sizeof(float));
		float *d_work =
		    dev_alloc((size_t)rl_lm_logprobs_work_floats(&s, RL_F32) * sizeof(float));

		cr_assert_not_null(tgt);
		for (int t = 0; t < n; t++)
			tgt[t] = (int32_t)(gc_rng(&seed) % VOCAB);
		/* n == 1 comes first and gives the references, each probe alone */
		for (int q = 0; q < PROBES; q++) {
			int p = (int)(a + q) % PROBES, r = pos[q];

			memcpy(h + (size_t)r * DIM, probe + (size_t)p * DIM, DIM * sizeof(float));
			tgt[r] = probe_tgt[p];

			float *d_h = dev_upload(h, (size_t)n * DIM);
			int32_t *d_tgt = dev_upload_i32(tgt, (size_t)n);

			cr_assert_eq(rl_lm_logprobs_forward_invariant_cuda(
			                 d_lp, d_lse, rl_cbuf_f32(d_h), rl_cbuf_f32(d_w), d_tgt, &s,
			                 d_work, NULL),
			             0);
			dev_download(lp, d_lp, (size_t)n);
			dev_download(lse, d_lse, (size_t)n);
			if (n == 1) {
				ref_lp[p] = lp[0];
				ref_lse[p] = lse[0];
			}
			cr_expect(
			    memcmp(&lp[r], &ref_lp[p], sizeof(float)) == 0 &&
			        memcmp(&lse[r], &ref_lse[p], sizeof(float)) == 0,
			    "probe %d at row %d of %d: logprob %.9g lse %.9g, alone %.9g %.9g", p,
			    r, n, (double)lp[r], (double)lse[r], (double)ref_lp[p],
			    (double)ref_lse[p]);
			dev_free(d_h);
			dev_free(d_tgt);
		}
		free(h);
		free(lp);
		free(lse);
		free(tgt);
		dev_free(d_lp);
		dev_free(d_lse);
		dev_free(d_work);
	}
	free(probe);
	free(w);
	dev_free(d_w);
#endif
}

/* Logits of +-2000 need the running maximum (chunk 1: it moves at every
 * step); targets outside [-1, vocab) are not an error on the GPU and give
 * logprob 0 with lse as usual. */
Test(cuda_invariant, large_logits_and_wild_targets)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	const float h[2] = {1000, -1000}, w[3] = {2, 1, -2};
	const int32_t tgt[2] = {0, 2}, wild[2] = {3, -2};
	struct rl_lm_logprobs_shape s = {
	    .n = 2, .dim = 1, .vocab = 3, .chunk = 1, .logit_scale = 1.0f};
	float lp[2], lse[2];
	float *d_h = dev_upload(h, 2), *d_w = dev_upload(w, 3);
	int32_t *d_tgt = dev_upload_i32(tgt, 2), *d_wild = dev_upload_i32(wild, 2);
	float *d_lp = dev_alloc(2 * sizeof(float)), *d_lse = dev_alloc(2 * sizeof(float));
	float *d_logits = dev_alloc(6 * sizeof(float)), *d_work = dev_alloc(2 * sizeof(float));

	for (int i = 0; i < 4; i++) {
		const int32_t *d_t = i % 2 ? d_wild : d_tgt;

		if (i < 2) {
			cr_assert_eq(rl_lm_logprobs_forward_invariant_cuda(
			                 d_lp, d_lse, rl_cbuf_f32(d_h), rl_cbuf_f32(d_w), d_t, &s,
			                 d_work, NULL),
			             0);
		} else {
			cr_assert_eq(rl_linear_forward_invariant_cuda(
			                 rl_buf_f32(d_logits), rl_cbuf_f32(d_h), rl_cbuf_f32(d_w),
			                 rl_cbuf_f32(NULL), 2, 1, 3, NULL),
			             0);
			cr_assert_eq(rl_logits_logprobs_cuda(d_lp, d_lse, d_logits, 3, d_t, &s,
			                                     d_work, NULL),
			             0);
		}
		dev_download(lp, d_lp, 2);
		dev_download(lse, d_lse, 2);
		/* row 0: logits 2000, 1000, -2000; row 1: -2000, -1000, 2000 */
		cr_expect(fabsf(lse[0] - 2000.0f) < 1e-3f && fabsf(lse[1] - 2000.0f) < 1e-3f,
		          "case %d: lse %g %g", i, (double)lse[0], (double)lse[1]);
		if (i % 2)
			cr_expect(lp[0] == 0.0f && lp[1] == 0.0f, "case %d: logprob %g %g", i,
			          (double)lp[0], (double)lp[1]);
		else
			cr_expect(fabsf(lp[0]) < 1e-6f && fabsf(lp[1]) < 1e-6f,
			          "case %d: logprob %g %g", i, (double)lp[0], (double)lp[1]);
	}
	dev_free(d_h);
	dev_free(d_w);
	dev_free(d_tgt);
	dev_free(d_wild);
	dev_free(d_lp);
	dev_free(d_lse);
	dev_free(d_logits);
	dev_free(d_work);
#endif
}
