/* The CUDA LM-head logprobs against the CPU op on the same random data:
 * odd shapes, chunks that do and do not divide the vocabulary, targets of
 * -1, logit_scale != 1, each of dh and dw alone, a vocabulary slice with
 * the whole vocabulary's lse (tensor parallelism), large logits, NaN, bad
 * targets, and the same bits from two runs. The argument checks run without
 * a GPU; everything else starts with CUDA_TEST_BEGIN.
 *
 * Tolerances. Both ops compute the logits as fp32 GEMMs, in different
 * orders: a logit's rounding error is about sqrt(dim) ulps of the partial
 * sums, bounded by dim * 2^-24 * L_t with L_t = scale * sum_k |h[t, k]|
 * (|W| <= 1 here, so |logit| <= L_t); logprob and lse are held to
 * 1e-5 relative plus 2e-6 (1 + L_t), about 30x the largest difference
 * seen in a host emulation of the kernels over these shapes (the GEMMs
 * summing k in either order), as the GPU's order is unknown. A logit error dz
 * moves each softmax entry by p dz, so dh[t] moves by at most
 * scale |dlogprob[t]| dz max|W| and dw[v] by at most scale sum_t |dlogprob[t]|
 * dz max|h|: those bounds plus 1e-4 of the gradient itself and 1e-6 for
 * the rounding of the accumulated values. expf against the CPU's
 * polynomial exp (both within 2 ulps) is far below all of this. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/logprobs.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/op_arg_checks.h"
#include "tests/unit/ops_test_util.h"

#ifdef RL_HAVE_CUDA
/* Every check happens before the first CUDA call, so these run (and must
 * not touch the host pointers they are given) on a machine without a GPU. */
Test(cuda_logprobs, bad_arguments)
{
	float v[8] = {0}, g[8], work[8];
	int32_t tgt[2] = {0, 1};
	struct rl_lm_logprobs_shape s = {
	    .n = 2, .dim = 2, .vocab = 2, .chunk = 2, .logit_scale = 1.0f};

	expect_logprobs_arg_checks(rl_lm_logprobs_forward_cuda, rl_lm_logprobs_backward_cuda);

	/* nothing to do: 0 without touching the device */
	struct rl_lm_logprobs_shape empty = s;
	empty.n = 0;
	cr_expect_eq(rl_lm_logprobs_forward_cuda(g, g + 2, rl_cbuf_f32(v), rl_cbuf_f32(v), tgt,
	                                         &empty, work, NULL),
	             0);
	cr_expect_eq(rl_lm_logprobs_backward_cuda(rl_buf_f32(g), g, v, rl_cbuf_f32(v),
	                                          rl_cbuf_f32(v), tgt, v, &empty, work, NULL),
	             0);
	cr_expect_eq(rl_lm_logprobs_backward_cuda(rl_buf_f32(NULL), NULL, v, rl_cbuf_f32(v),
	                                          rl_cbuf_f32(v), tgt, v, &s, work, NULL),
	             0);
}
#else
Test(cuda_logprobs, bad_arguments)
{
	cr_skip_test("built without --with-cuda");
}
#endif

#ifdef RL_HAVE_CUDA
/* The inputs of one case, on the host and on the device. W sits w_off
 * floats into its buffer, so an odd offset misaligns every chunk of it, as
 * a tensor-parallel slice does. */
struct lp_data {
	struct rl_lm_logprobs_shape s;
	float *h, *w, *dlp, *dh0, *dw0; /* host; dh0, dw0: what dh, dw start as */
	int32_t *tgt;
	float *d_h, *d_wbuf, *d_w, *d_dlp, *d_lp, *d_lse, *d_work, *d_dh, *d_dw;
	int32_t *d_tgt;
};

static void lp_data_init(struct lp_data *d, uint32_t *seed, struct rl_lm_logprobs_shape s,
                         int w_off)
{
	size_t nh = (size_t)s.n * s.dim, nw = (size_t)s.vocab * s.dim;

	memset(d, 0, sizeof(*d));
	d->s = s;
	d->h = frand(seed, nh, -1, 1);
	d->w = frand(seed, nw, -1, 1);
	d->dlp = frand(seed, (size_t)s.n, -1, 1);
	d->dh0 = frand(seed, nh, -1, 1);
	d->dw0 = frand(seed, nw, -1, 1);
	d->tgt = malloc((size_t)s.n * sizeof(*d->tgt));
	cr_assert_not_null(d->tgt);
	for (int t = 0; t < s.n; t++)
		d->tgt[t] =
		    gc_rng(seed) % 4 == 0 ? -1 : (int32_t)(gc_rng(seed) % (uint32_t)s.vocab);
	if (s.n >= 2) {
		d->tgt[0] = 0;                 /* the first chunk's first entry */
		d->tgt[s.n - 1] = s.vocab - 1; /* the last chunk's last entry */
	}

	d->d_h = dev_upload(d->h, nh);
	d->d_wbuf = dev_alloc((nw + (size_t)w_off) * sizeof(float));
	d->d_w = d->d_wbuf + w_off;
	cuda_ok(cudaMemcpy(d->d_w, d->w, nw * sizeof(float), cudaMemcpyHostToDevice), "upload w");
	d->d_dlp = dev_upload(d->dlp, (size_t)s.n);
	d->d_tgt = dev_upload_i32(d->tgt, (size_t)s.n);
	d->d_lp = dev_alloc((size_t)s.n * sizeof(float));
	d->d_lse = dev_alloc((size_t)s.n * sizeof(float));
	/* exactly what the header asks for, so compute-sanitizer sees overruns */
	d->d_work = dev_alloc((size_t)rl_lm_logprobs_work_floats(&s, RL_F32) * sizeof(float));
	d->d_dh = dev_alloc(nh * sizeof(float));
	d->d_dw = dev_alloc(nw * sizeof(float));
}

static void lp_data_free(struct lp_data *d)
{
	free(d->h);
	free(d->w);
	free(d->dlp);
	free(d->dh0);
	free(d->dw0);
	free(d->tgt);
	dev_free(d->d_h);
	dev_free(d->d_wbuf);
	dev_free(d->d_dlp);
	dev_free(d->d_tgt);
	dev_free(d->d_lp);
	dev_free(d->d_lse);
	dev_free(d->d_work);
	dev_free(d->d_dh);
	dev_free(d->d_dw);
}

/* The bound on a logit's rounding error of token t (see the top). */
static double lp_dz(const struct lp_data *d, int t)
{
	double l = 0.0;

	for (int k = 0; k < d->s.dim; k++)
		l += fabs(d->h[(size_t)t * d->s.dim + k]);
	return 2e-6 * (1.0 + fabs(d->s.logit_scale) * l);
}

static void lp_expect_rows(const char *what, const struct lp_data *d, const float *got,
                           const float *want)
{
	int bad = 0;

	for (int t = 0; t < d->s.n; t++) {
		double tol = 1e-5 * fabs(want[t]) + lp_dz(d, t);

		if (fabs((double)got[t] - want[t]) <= tol)
			continue;
		if (bad++ < 5)
			cr_expect(0, "%s[%d]: got %.9g, want %.9g (tol %.3g)", what, t,
			          (double)got[t], (double)want[t], tol);
	}
	cr_expect(bad == 0, "%s: %d of %d off", what, bad, d->s.n);
}

/* got and want both started as base; their increments are compared with
 * 1e-4 of the increment plus atol. */
static void lp_expect_grad(const char *what, const float *got, const float *want, const float *base,
                           size_t n, double atol)
{
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		double g = (double)got[i] - base[i], w = (double)want[i] - base[i];
		double tol = 1e-4 * fabs(w) + atol + 1e-6;

		if (fabs(g - w) <= tol)
			continue;
		if (bad++ < 5)
			cr_expect(0, "%s[%zu]: got +%.9g, want +%.9g (tol %.3g)", what, i, g, w,
			          tol);
	}
	cr_expect(bad == 0, "%s: %d of %zu off", what, bad, n);
}

/* The gradient tolerances of the top comment, from the largest dz. */
static void lp_grad_atol(const struct lp_data *d, double *dh_atol, double *dw_atol)
{
	double dz = 0.0, dmax = 0.0, dsum = 0.0;

	for (int t = 0; t < d->s.n; t++) {
		dz = fmax(dz, lp_dz(d, t));
		dmax = fmax(dmax, fabs(d->dlp[t]));
		dsum += fabs(d->dlp[t]);
	}
	*dh_atol = fabs(d->s.logit_scale) * dmax * dz;
	*dw_atol = fabs(d->s.logit_scale) * dsum * dz;
}

/* Runs the CUDA backward from dh0, dw0 (either may be left out) and
 * downloads the results; lse is the device lse to use. */
static void lp_gpu_backward(struct lp_data *d, const float *d_lse, int with_dh, int with_dw,
                            float *dh, float *dw, cudaStream_t stream)
{
	size_t nh = (size_t)d->s.n * d->s.dim, nw = (size_t)d->s.vocab * d->s.dim;

	cuda_ok(cudaMemcpy(d->d_dh, d->dh0, nh * sizeof(float), cudaMemcpyHostToDevice), "dh0");
	cuda_ok(cudaMemcpy(d->d_dw, d->dw0, nw * sizeof(float), cudaMemcpyHostToDevice), "dw0");
	cr_assert_eq(rl_lm_logprobs_backward_cuda(rl_buf_f32(with_dh ? d->d_dh : NULL),
	                                          with_dw ? d->d_dw : NULL, d->d_dlp,
	                                          rl_cbuf_f32(d->d_h), rl_cbuf_f32(d->d_w),
	                                          d->d_tgt, d_lse, &d->s, d->d_work, stream),
	             0, "backward n %d dim %d vocab %d chunk %d", d->s.n, d->s.dim, d->s.vocab,
	             d->s.chunk);
	cuda_ok(cudaStreamSynchronize(stream), "backward");
	dev_download(dh, d->d_dh, nh);
	dev_download(dw, d->d_dw, nw);
}

static void lp_parity(uint32_t *seed, struct rl_lm_logprobs_shape s, int w_off, cudaStream_t stream)
{
	struct lp_data d;
	size_t nh = (size_t)s.n * s.dim, nw = (size_t)s.vocab * s.dim;

	lp_data_init(&d, seed, s, w_off);

	float *lp = falloc((size_t)s.n), *lse = falloc((size_t)s.n);
	float *lp_gpu = falloc((size_t)s.n), *lse_gpu = falloc((size_t)s.n);
	float *work = falloc((size_t)rl_lm_logprobs_work_floats(&s, RL_F32));
	float *dh = fdup(d.dh0, nh), *dw = fdup(d.dw0, nw);
	float *dh_gpu = falloc(nh), *dw_gpu = falloc(nw);
	float *dh_gpu2 = falloc(nh), *dw_gpu2 = falloc(nw);
	float *lp_gpu2 = falloc((size_t)s.n), *lse_gpu2 = falloc((size_t)s.n);
	double dh_atol, dw_atol;

	cr_assert_eq(rl_lm_logprobs_forward_cpu(lp, lse, rl_cbuf_f32(d.h), rl_cbuf_f32(d.w), d.tgt,
	                                        &s, work, NULL),
	             0);
	cr_assert_eq(rl_lm_logprobs_backward_cpu(rl_buf_f32(dh), dw, d.dlp, rl_cbuf_f32(d.h),
	                                         rl_cbuf_f32(d.w), d.tgt, lse, &s, work, NULL),
	             0);

	cr_assert_eq(rl_lm_logprobs_forward_cuda(d.d_lp, d.d_lse, rl_cbuf_f32(d.d_h),
	                                         rl_cbuf_f32(d.d_w), d.d_tgt, &s, d.d_work, stream),
	             0, "forward n %d dim %d vocab %d chunk %d", s.n, s.dim, s.vocab, s.chunk);
	cuda_ok(cudaStreamSynchronize(stream), "forward");
	dev_download(lp_gpu, d.d_lp, (size_t)s.n);
	dev_download(lse_gpu, d.d_lse, (size_t)s.n);
	lp_expect_rows("logprob", &d, lp_gpu, lp);
	lp_expect_rows("lse", &d, lse_gpu, lse);
	for (int t = 0; t < s.n; t++)
		if (d.tgt[t] < 0)
			cr_expect_eq(lp_gpu[t], 0.0f, "logprob[%d] of target -1", t);

	/* the CPU's lse, so that the backward is compared on its own */
	cuda_ok(cudaMemcpy(d.d_lse, lse, (size_t)s.n * sizeof(float), cudaMemcpyHostToDevice),
	        "lse");
	lp_grad_atol(&d, &dh_atol, &dw_atol);
	lp_gpu_backward(&d, d.d_lse, 1, 1, dh_gpu, dw_gpu, stream);
	lp_expect_grad("dh", dh_gpu, dh, d.dh0, nh, dh_atol);
	lp_expect_grad("dw", dw_gpu, dw, d.dw0, nw, dw_atol);

	/* one gradient at a time: the other stays as it was, bit for bit */
	lp_gpu_backward(&d, d.d_lse, 1, 0, dh_gpu2, dw_gpu2, stream);
	cr_expect(memcmp(dh_gpu2, dh_gpu, nh * sizeof(float)) == 0, "dh alone differs");
	cr_expect(memcmp(dw_gpu2, d.dw0, nw * sizeof(float)) == 0, "dw written with dw NULL");
	lp_gpu_backward(&d, d.d_lse, 0, 1, dh_gpu2, dw_gpu2, stream);
	cr_expect(memcmp(dw_gpu2, dw_gpu, nw * sizeof(float)) == 0, "dw alone differs");
	cr_expect(memcmp(dh_gpu2, d.dh0, nh * sizeof(float)) == 0, "dh written with dh NULL");

	/* a second run, forward and backward: the same bits */
	cr_assert_eq(rl_lm_logprobs_forward_cuda(d.d_lp, d.d_lse, rl_cbuf_f32(d.d_h),
	                                         rl_cbuf_f32(d.d_w), d.d_tgt, &s, d.d_work, stream),
	             0);
	dev_download(lp_gpu2, d.d_lp, (size_t)s.n);
	dev_download(lse_gpu2, d.d_lse, (size_t)s.n);
	cr_expect(memcmp(lp_gpu2, lp_gpu, (size_t)s.n * sizeof(float)) == 0, "logprob bits");
	cr_expect(memcmp(lse_gpu2, lse_gpu, (size_t)s.n * sizeof(float)) == 0, "lse bits");
	cuda_ok(cudaMemcpy(d.d_lse, lse, (size_t)s.n * sizeof(float), cudaMemcpyHostToDevice),
	        "lse");
	lp_gpu_backward(&d, d.d_lse, 1, 1, dh_gpu2, dw_gpu2, stream);
	cr_expect(memcmp(dh_gpu2, dh_gpu, nh * sizeof(float)) == 0, "dh bits");
	cr_expect(memcmp(dw_gpu2, dw_gpu, nw * sizeof(float)) == 0, "dw bits");

	lp_data_free(&d);
	free(lp);
	free(lse);
	free(lp_gpu);
	free(lse_gpu);
	free(lp_gpu2);
	free(lse_gpu2);
	free(work);
	free(dh);
	free(dw);
	free(dh_gpu);
	free(dw_gpu);
	free(dh_gpu2);
	free(dw_gpu2);
}
#endif

Test(cuda_logprobs, parity_with_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int ns[] = {1, 3, 37}, dims[] = {1, 17, 64}, vocabs[] = {1, 5, 1000, 4099};
	static const float scales[] = {1.0f, 1.0f / 0.7f, 2.5f};
	uint32_t seed = 0x1f2e3d4cu;
	int i = 0;

	/* chunk 333 divides neither 1000 nor 4099 and exceeds 1 and 5 (clamped) */
	for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
		for (size_t b = 0; b < sizeof(dims) / sizeof(dims[0]); b++)
			for (size_t v = 0; v < sizeof(vocabs) / sizeof(vocabs[0]); v++) {
				const int chunks[] = {1, 7, 333, vocabs[v]};

				for (size_t c = 0; c < 4; c++, i++) {
					struct rl_lm_logprobs_shape s = {.n = ns[a],
					                                 .dim = dims[b],
					                                 .vocab = vocabs[v],
					                                 .chunk = chunks[c],
					                                 .logit_scale =
					                                     scales[i % 3]};

					lp_parity(&seed, s, i % 2, NULL);
				}
			}

	/* a stream of its own, and a work buffer larger than needed */
	cudaStream_t stream;
	struct rl_lm_logprobs_shape s = {
	    .n = 37, .dim = 64, .vocab = 1000, .chunk = 1500, .logit_scale = 0.8f};

	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	lp_parity(&seed, s, 1, stream);
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
#endif
}

/* One rank's slice W[start : start + vocab] of a larger vocabulary with the
 * whole vocabulary's lse, as the tensor-parallel LM head runs: targets
 * outside the slice are -1. The slice starts at an odd float offset, as
 * rank 1's W[333 * 17] would. */
Test(cuda_logprobs, vocabulary_slice_with_whole_lse)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	enum { N = 37, DIM = 17, VOCAB = 1000, START = 333, SLICE = 401, CHUNK = 64 };
	uint32_t seed = 0x600dcafeu;
	struct rl_lm_logprobs_shape whole = {
	    .n = N, .dim = DIM, .vocab = VOCAB, .chunk = CHUNK, .logit_scale = 1.25f};
	struct rl_lm_logprobs_shape s = whole;
	struct lp_data d;
	float lp[N], lse[N], lse_whole[N], lp_gpu[N], lse_gpu[N];
	float *work = falloc((size_t)N * CHUNK);
	int32_t tgt_whole[N];

	s.vocab = SLICE;
	lp_data_init(&d, &seed, s, 1);
	/* the whole vocabulary: W of the data plus rows around it */
	float *w_whole = frand(&seed, (size_t)VOCAB * DIM, -1, 1);
	memcpy(w_whole + (size_t)START * DIM, d.w, (size_t)SLICE * DIM * sizeof(float));
	for (int t = 0; t < N; t++) {
		tgt_whole[t] = (int32_t)(gc_rng(&seed) % VOCAB);
		int local = tgt_whole[t] - START;
		d.tgt[t] = local >= 0 && local < SLICE ? local : -1;
	}
	tgt_whole[0] = START; /* the slice's first and last rows */
	d.tgt[0] = 0;
	tgt_whole[1] = START + SLICE - 1;
	d.tgt[1] = SLICE - 1;
	tgt_whole[2] = START - 1; /* just outside */
	d.tgt[2] = -1;
	cuda_ok(cudaMemcpy(d.d_tgt, d.tgt, N * sizeof(int32_t), cudaMemcpyHostToDevice), "tgt");
	cr_assert_eq(rl_lm_logprobs_forward_cpu(lp, lse_whole, rl_cbuf_f32(d.h),
	                                        rl_cbuf_f32(w_whole), tgt_whole, &whole, work,
	                                        NULL),
	             0);

	/* the forward of the slice alone */
	cr_assert_eq(rl_lm_logprobs_forward_cpu(lp, lse, rl_cbuf_f32(d.h), rl_cbuf_f32(d.w), d.tgt,
	                                        &s, work, NULL),
	             0);
	cr_assert_eq(rl_lm_logprobs_forward_cuda(d.d_lp, d.d_lse, rl_cbuf_f32(d.d_h),
	                                         rl_cbuf_f32(d.d_w), d.d_tgt, &s, d.d_work, NULL),
	             0);
	dev_download(lp_gpu, d.d_lp, N);
	dev_download(lse_gpu, d.d_lse, N);
	lp_expect_rows("slice logprob", &d, lp_gpu, lp);
	lp_expect_rows("slice lse", &d, lse_gpu, lse);

	/* the backward of the slice with the whole lse */
	size_t nh = (size_t)N * DIM, nw = (size_t)SLICE * DIM;
	float *dh = fdup(d.dh0, nh), *dw = fdup(d.dw0, nw);
	float *dh_gpu = falloc(nh), *dw_gpu = falloc(nw);
	double dh_atol, dw_atol;

	cr_assert_eq(rl_lm_logprobs_backward_cpu(rl_buf_f32(dh), dw, d.dlp, rl_cbuf_f32(d.h),
	                                         rl_cbuf_f32(d.w), d.tgt, lse_whole, &s, work,
	                                         NULL),
	             0);
	cuda_ok(cudaMemcpy(d.d_lse, lse_whole, N * sizeof(float), cudaMemcpyHostToDevice), "lse");
	lp_gpu_backward(&d, d.d_lse, 1, 1, dh_gpu, dw_gpu, NULL);
	lp_grad_atol(&d, &dh_atol, &dw_atol);
	lp_expect_grad("slice dh", dh_gpu, dh, d.dh0, nh, dh_atol);
	lp_expect_grad("slice dw", dw_gpu, dw, d.dw0, nw, dw_atol);

	lp_data_free(&d);
	free(w_whole);
	free(work);
	free(dh);
	free(dw);
	free(dh_gpu);
	free(dw_gpu);
#endif
}

/* A target outside [-1, vocab) returns -1 and leaves the outputs alone;
 * the next good call works. */
Test(cuda_logprobs, bad_targets_write_nothing)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	const int32_t bad[2] = {3, -2};
	uint32_t seed = 0x5eedu;
	struct rl_lm_logprobs_shape s = {
	    .n = 3, .dim = 4, .vocab = 3, .chunk = 2, .logit_scale = 1.0f};
	struct lp_data d;
	const float sentinel[3] = {7, 7, 7};
	float lp[3], lse[3];

	lp_data_init(&d, &seed, s, 0);
	for (int i = 0; i < 2; i++) {
		int32_t tgt[3] = {0, bad[i], 1};

		cuda_ok(cudaMemcpy(d.d_tgt, tgt, sizeof(tgt), cudaMemcpyHostToDevice), "tgt");
		cuda_ok(cudaMemcpy(d.d_lp, sentinel, sizeof(sentinel), cudaMemcpyHostToDevice),
		        "lp");
		cuda_ok(cudaMemcpy(d.d_lse, sentinel, sizeof(sentinel), cudaMemcpyHostToDevice),
		        "lse");
		cr_expect_eq(rl_lm_logprobs_forward_cuda(d.d_lp, d.d_lse, rl_cbuf_f32(d.d_h),
		                                         rl_cbuf_f32(d.d_w), d.d_tgt, &s, d.d_work,
		                                         NULL),
		             -1, "target %d", bad[i]);
		dev_download(lp, d.d_lp, 3);
		dev_download(lse, d.d_lse, 3);
		cr_expect(memcmp(lp, sentinel, sizeof(lp)) == 0 &&
		              memcmp(lse, sentinel, sizeof(lse)) == 0,
		          "outputs written for target %d", bad[i]);
	}
	cuda_ok(cudaMemcpy(d.d_tgt, d.tgt, 3 * sizeof(int32_t), cudaMemcpyHostToDevice), "tgt");
	cr_expect_eq(rl_lm_logprobs_forward_cuda(d.d_lp, d.d_lse, rl_cbuf_f32(d.d_h),
	                                         rl_cbuf_f32(d.d_w), d.d_tgt, &s, d.d_work, NULL),
	             0);
	dev_sync();
	lp_data_free(&d);
#endif
}

/* Logits of +-2000 need the running maximum; a NaN in W must reach every
 * lse and logprob, as on the CPU (test_logprobs.c has the same cases). */
Test(cuda_logprobs, large_logits_and_nan)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	const float h[2] = {1000, -1000}, w[3] = {2, 1, -2};
	const float h2[2] = {1, -1}, w2[4] = {0.5f, NAN, -1, 2};
	const int32_t tgt[2] = {0, 2}, tgt2[2] = {0, 3};
	struct rl_lm_logprobs_shape s = {
	    .n = 2, .dim = 1, .vocab = 3, .chunk = 1, .logit_scale = 1.0f};
	struct rl_lm_logprobs_shape s2 = {
	    .n = 2, .dim = 1, .vocab = 4, .chunk = 3, .logit_scale = 1.0f};
	float lp[2], lse[2];
	float *d_h = dev_upload(h, 2), *d_w = dev_upload(w, 3);
	float *d_h2 = dev_upload(h2, 2), *d_w2 = dev_upload(w2, 4);
	int32_t *d_tgt = dev_upload_i32(tgt, 2), *d_tgt2 = dev_upload_i32(tgt2, 2);
	float *d_lp = dev_alloc(2 * sizeof(float)), *d_lse = dev_alloc(2 * sizeof(float));
	float *d_work = dev_alloc(6 * sizeof(float));

	cr_assert_eq(rl_lm_logprobs_forward_cuda(d_lp, d_lse, rl_cbuf_f32(d_h), rl_cbuf_f32(d_w),
	                                         d_tgt, &s, d_work, NULL),
	             0);
	dev_download(lp, d_lp, 2);
	dev_download(lse, d_lse, 2);
	/* row 0: logits 2000, 1000, -2000; row 1: -2000, -1000, 2000 */
	cr_expect(fabsf(lse[0] - 2000.0f) < 1e-3f && fabsf(lse[1] - 2000.0f) < 1e-3f, "lse %g %g",
	          (double)lse[0], (double)lse[1]);
	cr_expect(fabsf(lp[0]) < 1e-6f && fabsf(lp[1]) < 1e-6f, "logprob %g %g", (double)lp[0],
	          (double)lp[1]);

	cr_assert_eq(rl_lm_logprobs_forward_cuda(d_lp, d_lse, rl_cbuf_f32(d_h2), rl_cbuf_f32(d_w2),
	                                         d_tgt2, &s2, d_work, NULL),
	             0);
	dev_download(lp, d_lp, 2);
	dev_download(lse, d_lse, 2);
	cr_expect(isnan(lse[0]) && isnan(lse[1]) && isnan(lp[0]) && isnan(lp[1]),
	          "lse %g %g, logprob %g %g", (double)lse[0], (double)lse[1], (double)lp[0],
	          (double)lp[1]);
	dev_free(d_h);
	dev_free(d_w);
	dev_free(d_h2);
	dev_free(d_w2);
	dev_free(d_tgt);
	dev_free(d_tgt2);
	dev_free(d_lp);
	dev_free(d_lse);
	dev_free(d_work);
#endif
}
