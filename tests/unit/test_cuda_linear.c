/* rl_cuda_gemm against a double-precision product on the host, for every
 * transpose pair, padded leading dimensions, beta 0 and 1, the bias, odd
 * sizes, k == 0 and bf16/fp16 operands; the CUDA linear layer against the
 * CPU one, with the bias gradient's bits equal on two runs. The argument
 * checks run without a GPU (they come before any CUDA call).
 *
 * Tolerances: fp32 rounding of a k-term sum is about eps sqrt(k) times the
 * sum of |terms| ("mag") when the errors are random, eps k at worst. The
 * checks allow 4e-6 sqrt(k) mag (about 60 eps sqrt(k)), well under what a
 * wrong index, transpose or bias costs (of the order of mag itself). TF32
 * rounds each input to 11 significant bits (2^-11, or 2^-10 truncated), so
 * a product is off by up to 2^-9 of itself: 5e-3 mag. bf16 operands are
 * exact in the reference (it uses the same bf16 values) and their products
 * are exact in fp32, so they get the fp32 tolerance. A bf16 or fp16 C is
 * judged in ulps of its own type (out_ulp, which keeps the subnormals' fixed
 * spacing: fp16 results near 3e-5 are subnormal, spaced 2^-24): the result
 * rounded adds half an ulp of |want|, and with beta != 0 cuBLASLt may round
 * alpha A B to the output type before it adds beta C (the H200 run of
 * 2026-11-26 saw results 0.74 ulp off), half an ulp of |alpha A B| more. */
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

#include "kernels/dtype.h"
#include "kernels/linear.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/op_arg_checks.h"
#include "tests/unit/ops_test_util.h"

#ifdef RL_HAVE_CUDA
#include "kernels/cuda/gemm.h"
#endif

Test(cuda_linear, bad_arguments)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	/* host pointers: only their NULL-ness is looked at before a CUDA call */
	expect_linear_arg_checks(rl_linear_forward_cuda, rl_linear_backward_cuda);
#endif
}

#ifdef RL_HAVE_CUDA
/* A valid 2x3x4 fp32 product on host pointers, for the argument checks. */
static struct rl_gemm valid_gemm(float *buf)
{
	struct rl_gemm g;

	memset(&g, 0, sizeof(g));
	g.m = 2;
	g.n = 3;
	g.k = 4;
	g.a = buf;
	g.lda = 4;
	g.b = buf;
	g.ldb = 3;
	g.c = buf;
	g.ldc = 3;
	g.alpha = 1.0f;
	g.ab_type = RL_F32;
	g.c_type = RL_F32;
	return g;
}

static void expect_gemm_error(const struct rl_gemm *g, const char *word)
{
	char err[256] = "";

	cr_expect_eq(rl_cuda_gemm(g, NULL, err, sizeof(err)), -1, "expected an error naming %s",
	             word);
	cr_expect(strstr(err, word) != NULL, "error '%s' does not name '%s'", err, word);
	cr_expect_eq(rl_cuda_gemm(g, NULL, NULL, 0), -1, "NULL err: still -1 (%s)", word);
}
#endif

Test(cuda_gemm, bad_arguments)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	float buf[16] = {0};
	struct rl_gemm g;
	char err[256];

	cr_expect_eq(rl_cuda_gemm_workspace_bytes(), (size_t)32 << 20);
	cr_expect_eq(rl_cuda_gemm(NULL, NULL, err, sizeof(err)), -1);
	cr_expect(strstr(err, "NULL") != NULL, "%s", err);

	g = valid_gemm(buf);
	g.m = -1;
	expect_gemm_error(&g, "negative");
	g = valid_gemm(buf);
	g.k = -1;
	expect_gemm_error(&g, "negative");
	g = valid_gemm(buf);
	g.lda = 3; /* < k */
	expect_gemm_error(&g, "lda");
	g = valid_gemm(buf);
	g.trans_a = true; /* A is [k, m]: lda >= m = 2 */
	g.lda = 1;
	expect_gemm_error(&g, "lda");
	g = valid_gemm(buf);
	g.ldb = 2; /* < n */
	expect_gemm_error(&g, "ldb");
	g = valid_gemm(buf);
	g.trans_b = true; /* B is [n, k]: ldb >= k = 4 */
	expect_gemm_error(&g, "ldb");
	g = valid_gemm(buf);
	g.ldc = 2;
	expect_gemm_error(&g, "ldc");
	g = valid_gemm(buf);
	g.a = NULL;
	expect_gemm_error(&g, "a is NULL");
	g = valid_gemm(buf);
	g.b = NULL;
	expect_gemm_error(&g, "b is NULL");
	g = valid_gemm(buf);
	g.c = NULL;
	expect_gemm_error(&g, "c is NULL");
	g = valid_gemm(buf);
	g.c_type = RL_BF16; /* fp32 inputs give fp32 only */
	expect_gemm_error(&g, "c_type");
	g = valid_gemm(buf);
	g.ab_type = RL_F16;
	g.c_type = RL_BF16;
	expect_gemm_error(&g, "c_type");
	g = valid_gemm(buf);
	g.ab_type = (enum rl_dtype)7;
	expect_gemm_error(&g, "ab_type");

	/* Empty products return before any CUDA call, with any pointers. */
	g = valid_gemm(buf);
	g.m = 0;
	g.a = g.b = g.c = NULL;
	cr_expect_eq(rl_cuda_gemm(&g, NULL, err, sizeof(err)), 0, "m == 0: %s", err);
	g.m = 2;
	g.n = 0;
	cr_expect_eq(rl_cuda_gemm(&g, NULL, err, sizeof(err)), 0, "n == 0: %s", err);
#endif
}

#ifdef RL_HAVE_CUDA
struct gemm_case {
	int m, n, k;
	bool ta, tb;
	int pad, off; /* extra columns in every ld; elements the pointers are shifted by */
	float alpha, beta;
	bool bias, tf32;
	enum rl_dtype ab, c;
};

/* v rounded to t, as the device will read it */
static float round_to(enum rl_dtype t, float v)
{
	return t == RL_BF16  ? rl_bf16_to_f32(rl_f32_to_bf16(v))
	       : t == RL_F16 ? rl_f16_to_f32(rl_f32_to_f16(v))
	                     : v;
}

/* n values of type t in device memory at base + off elements; base is
 * returned through *base for cudaFree. */
static void *to_device(enum rl_dtype t, const float *v, size_t n, int off, void **base)
{
	size_t es = rl_dtype_size(t);
	unsigned char *host = malloc((n + (size_t)off) * es + 1);

	cr_assert_not_null(host);
	for (size_t i = 0; i < n; i++) {
		unsigned char *p = host + (i + (size_t)off) * es;
		if (t == RL_F32) {
			memcpy(p, &v[i], 4);
		} else {
			uint16_t h = t == RL_BF16 ? rl_f32_to_bf16(v[i]) : rl_f32_to_f16(v[i]);
			memcpy(p, &h, 2);
		}
	}
	*base = dev_alloc((n + (size_t)off) * es);
	cuda_ok(cudaMemcpy(*base, host, (n + (size_t)off) * es, cudaMemcpyHostToDevice), "upload");
	free(host);
	return (unsigned char *)*base + (size_t)off * es;
}

static void from_device(enum rl_dtype t, float *v, const void *dev, size_t n)
{
	size_t es = rl_dtype_size(t);
	unsigned char *host = malloc(n * es + 1);

	cr_assert_not_null(host);
	dev_sync();
	cuda_ok(cudaMemcpy(host, dev, n * es, cudaMemcpyDeviceToHost), "download");
	for (size_t i = 0; i < n; i++) {
		uint16_t h;
		if (t == RL_F32) {
			memcpy(&v[i], host + i * 4, 4);
			continue;
		}
		memcpy(&h, host + i * 2, 2);
		v[i] = t == RL_BF16 ? rl_bf16_to_f32(h) : rl_f16_to_f32(h);
	}
	free(host);
}

/* rows x ld values of type t in [-1, 1); the columns past cols are NaN, so
 * a kernel that reads them is caught. */
static float *matrix(uint32_t *seed, enum rl_dtype t, int rows, int cols, int ld)
{
	float *v = falloc((size_t)rows * ld);

	for (int r = 0; r < rows; r++)
		for (int c = 0; c < ld; c++)
			v[(size_t)r * ld + c] =
			    c < cols ? round_to(t, gc_uniform(seed, -1, 1)) : NAN;
	return v;
}

#define PAD_SENTINEL 4096.0f /* exact in every type */

/* The spacing of type t's values around x (0 for fp32, whose rounding
 * rtol_mag covers): bf16 keeps 8 significant bits, fp16 11; below the
 * smallest normal (2^-126, 2^-14) the spacing stays that of the subnormals. */
static double out_ulp(enum rl_dtype t, double x)
{
	int e;

	if (t == RL_F32)
		return 0.0;
	frexp(fabs(x), &e); /* |x| in [2^(e-1), 2^e) */
	int bits = t == RL_BF16 ? 8 : 11, min_exp = t == RL_BF16 ? -125 : -13;
	return ldexp(1.0, (e < min_exp ? min_exp : e) - bits);
}

static void run_gemm_case(uint32_t *seed, const struct gemm_case *gc)
{
	int m = gc->m, n = gc->n, k = gc->k;
	int a_rows = gc->ta ? k : m, a_cols = gc->ta ? m : k;
	int b_rows = gc->tb ? n : k, b_cols = gc->tb ? k : n;
	int lda = a_cols + gc->pad, ldb = b_cols + gc->pad, ldc = n + gc->pad;
	size_t na = (size_t)a_rows * lda, nb = (size_t)b_rows * ldb, nc = (size_t)m * ldc;
	float *a = matrix(seed, gc->ab, a_rows, a_cols, lda);
	float *b = matrix(seed, gc->ab, b_rows, b_cols, ldb);
	float *c0 = falloc(nc), *c = falloc(nc);
	float *bias = gc->bias ? frand(seed, (size_t)n, -1, 1) : NULL;

	/* the bias has C's type (gemm.h): its values are C-type values */
	for (int j = 0; bias && j < n; j++)
		bias[j] = round_to(gc->c, bias[j]);
	double sqrt_k = sqrt(k > 0 ? (double)k : 1.0);
	double rtol_mag = gc->tf32 ? 5e-3 : 4e-6 * sqrt_k;
	void *a_base, *b_base, *c_base, *bias_base = NULL;
	char err[256] = "";
	int bad = 0;

	/* beta == 0 must not read C (BLAS's rule, which the forward relies on
	 * for buffers it has not written), so C starts as NaN there. */
	for (int i = 0; i < m; i++)
		for (int j = 0; j < ldc; j++)
			c0[(size_t)i * ldc + j] = j >= n ? PAD_SENTINEL
			                          : gc->beta == 0.0f
			                              ? NAN
			                              : round_to(gc->c, gc_uniform(seed, -1, 1));

	struct rl_gemm g;
	memset(&g, 0, sizeof(g));
	g.m = m;
	g.n = n;
	g.k = k;
	g.trans_a = gc->ta;
	g.trans_b = gc->tb;
	g.a = to_device(gc->ab, a, na, gc->off, &a_base);
	g.lda = lda;
	g.b = to_device(gc->ab, b, nb, gc->off, &b_base);
	g.ldb = ldb;
	g.c = to_device(gc->c, c0, nc, gc->off, &c_base);
	g.ldc = ldc;
	g.alpha = gc->alpha;
	g.beta = gc->beta;
	g.bias = bias ? to_device(gc->c, bias, (size_t)n, gc->off, &bias_base) : NULL;
	g.ab_type = gc->ab;
	g.c_type = gc->c;
	g.tf32 = gc->tf32;

	cr_assert_eq(rl_cuda_gemm(&g, NULL, err, sizeof(err)), 0,
	             "m %d n %d k %d ta %d tb %d %s->%s: %s", m, n, k, gc->ta, gc->tb,
	             rl_dtype_name(gc->ab), rl_dtype_name(gc->c), err);
	from_device(gc->c, c, g.c, nc);

	for (int i = 0; i < m; i++) {
		for (int j = 0; j < ldc; j++) {
			float got = c[(size_t)i * ldc + j];

			if (j >= n) {
				if (got != PAD_SENTINEL && bad++ < 5)
					cr_expect(0, "c[%d][%d] (padding) changed to %g", i, j,
					          got);
				continue;
			}
			double s = 0.0, mag = 0.0;
			for (int p = 0; p < k; p++) {
				double av =
				    gc->ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
				double bv =
				    gc->tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
				s += av * bv;
				mag += fabs(av * bv);
			}
			double want = gc->alpha * s, cv = c0[(size_t)i * ldc + j];
			mag *= fabs(gc->alpha);
			if (gc->beta != 0.0f) {
				want += gc->beta * cv;
				mag += fabs(gc->beta * cv);
			}
			if (bias) {
				want += bias[j];
				mag += fabs(bias[j]);
			}
			double out_tol = 0.5 * out_ulp(gc->c, want);
			if (gc->beta != 0.0f)
				out_tol += 0.5 * out_ulp(gc->c, gc->alpha * s);
			if (fabs(got - want) <= rtol_mag * mag + out_tol + 1e-30)
				continue;
			if (bad++ < 5)
				cr_expect(0, "c[%d][%d]: got %.9g, want %.9g (mag %g)", i, j, got,
				          want, mag);
		}
	}
	cr_expect(bad == 0,
	          "m %d n %d k %d ta %d tb %d pad %d off %d beta %g bias %d tf32 %d %s->%s: "
	          "%d off",
	          m, n, k, gc->ta, gc->tb, gc->pad, gc->off, gc->beta, gc->bias, gc->tf32,
	          rl_dtype_name(gc->ab), rl_dtype_name(gc->c), bad);

	dev_free(a_base);
	dev_free(b_base);
	dev_free(c_base);
	dev_free(bias_base);
	free(a);
	free(b);
	free(c0);
	free(c);
	free(bias);
}

static const int gemm_sizes[][3] = {
    {1, 1, 1}, {3, 1, 127},     {1, 257, 3},  {127, 3, 257},   {257, 127, 1},
    {3, 3, 3}, {127, 257, 127}, {64, 48, 80}, {257, 257, 257},
};

/* Every size with every transpose pair, beta 0 and 1; padding, bias,
 * alpha and pointer offsets vary with the case number so all of them meet
 * every transpose pair. off shifts the pointers by elements, below
 * cuBLASLt's preferred alignment. */
static void sweep(enum rl_dtype ab, enum rl_dtype c, bool tf32, bool offsets)
{
	uint32_t seed = 0x1234567u + (uint32_t)ab * 77u + (uint32_t)c * 7u + (uint32_t)tf32;
	int idx = 0;

	for (size_t s = 0; s < sizeof(gemm_sizes) / sizeof(gemm_sizes[0]); s++) {
		for (int t = 0; t < 4; t++) {
			for (int beta = 0; beta <= 1; beta++, idx++) {
				struct gemm_case gc = {
				    .m = gemm_sizes[s][0],
				    .n = gemm_sizes[s][1],
				    .k = gemm_sizes[s][2],
				    .ta = t & 1,
				    .tb = (t >> 1) & 1,
				    .pad = idx % 3 == 1 ? 5 : 0,
				    .off = offsets && idx % 4 == 3 ? 1 : 0,
				    .alpha = idx % 5 == 2 ? -0.5f : 1.0f,
				    .beta = (float)beta,
				    .bias = idx % 3 != 2,
				    .tf32 = tf32,
				    .ab = ab,
				    .c = c,
				};
				run_gemm_case(&seed, &gc);
			}
		}
	}
}
#endif

Test(cuda_gemm, fp32_matches_double)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	sweep(RL_F32, RL_F32, false, true);
	/* big enough for tensor-core kernels and split-K */
	uint32_t seed = 99;
	struct gemm_case big = {.m = 300,
	                        .n = 520,
	                        .k = 1030,
	                        .tb = true,
	                        .alpha = 1,
	                        .beta = 1,
	                        .bias = true,
	                        .ab = RL_F32,
	                        .c = RL_F32};
	run_gemm_case(&seed, &big);
#endif
}

Test(cuda_gemm, tf32_within_its_precision)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	sweep(RL_F32, RL_F32, true, false);
#endif
}

Test(cuda_gemm, bf16_inputs)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	sweep(RL_BF16, RL_F32, false, true);
	sweep(RL_BF16, RL_BF16, false, true);
	uint32_t seed = 7;
	struct gemm_case big = {.m = 520,
	                        .n = 300,
	                        .k = 1030,
	                        .ta = true,
	                        .alpha = 1,
	                        .beta = 0,
	                        .ab = RL_BF16,
	                        .c = RL_BF16};
	run_gemm_case(&seed, &big);
#endif
}

Test(cuda_gemm, fp16_inputs)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	sweep(RL_F16, RL_F32, false, false);
	sweep(RL_F16, RL_F16, false, false);
#endif
}

/* Small m, n and a long k, the shapes where cuBLASLt would split k over
 * blocks: still right, and the same bits from two runs, the second on
 * another stream (its own workspace). Training compares bits on resume. */
Test(cuda_gemm, long_k_repeats_its_bits)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int shapes[][3] = {{8, 8, 1 << 17}, {64, 32, 40000}, {1, 96, 65537}};
	uint32_t seed = 0x5b17u;
	cudaStream_t stream;

	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
		struct gemm_case gc = {.m = m,
		                       .n = n,
		                       .k = k,
		                       .tb = s == 1,
		                       .alpha = 1,
		                       .beta = 1,
		                       .bias = s != 1,
		                       .ab = RL_F32,
		                       .c = RL_F32};

		run_gemm_case(&seed, &gc);

		size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
		float *a = frand(&seed, na, -1, 1), *b = frand(&seed, nb, -1, 1);
		float *c0 = frand(&seed, nc, -1, 1), *c1 = falloc(nc), *c2 = falloc(nc);
		float *bias = frand(&seed, (size_t)n, -1, 1);
		float *d_a = dev_upload(a, na), *d_b = dev_upload(b, nb), *d_c = dev_upload(c0, nc);
		float *d_bias = dev_upload(bias, (size_t)n);
		struct rl_gemm g;
		char err[256] = "";

		memset(&g, 0, sizeof(g));
		g.m = m;
		g.n = n;
		g.k = k;
		g.a = d_a;
		g.lda = k;
		g.b = d_b;
		g.ldb = n;
		g.c = d_c;
		g.ldc = n;
		g.alpha = 1.0f;
		g.beta = 1.0f;
		g.bias = s != 1 ? d_bias : NULL;
		g.ab_type = RL_F32;
		g.c_type = RL_F32;
		cr_assert_eq(rl_cuda_gemm(&g, NULL, err, sizeof(err)), 0, "%s", err);
		dev_download(c1, d_c, nc);
		cuda_ok(cudaMemcpy(d_c, c0, nc * sizeof(float), cudaMemcpyHostToDevice), "reset c");
		cr_assert_eq(rl_cuda_gemm(&g, stream, err, sizeof(err)), 0, "%s", err);
		cuda_ok(cudaStreamSynchronize(stream), "second run");
		dev_download(c2, d_c, nc);
		cr_expect_arr_eq(c1, c2, nc * sizeof(float), "m %d n %d k %d: two runs differ", m,
		                 n, k);

		dev_free(d_a);
		dev_free(d_b);
		dev_free(d_c);
		dev_free(d_bias);
		free(a);
		free(b);
		free(c0);
		free(c1);
		free(c2);
		free(bias);
	}
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
#endif
}

/* k == 0: C = beta C (+ bias), and beta == 0 overwrites NaN. */
Test(cuda_gemm, k_zero_scales_c)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int shapes[][2] = {{3, 127}, {257, 5}, {1, 1}};
	static const float betas[] = {0.0f, 1.0f, 0.5f};
	uint32_t seed = 5;

	for (size_t s = 0; s < 3; s++)
		for (size_t bi = 0; bi < 3; bi++)
			for (int ct = 0; ct < 2; ct++) {
				struct gemm_case gc = {.m = shapes[s][0],
				                       .n = shapes[s][1],
				                       .k = 0,
				                       .pad = (int)bi,
				                       .alpha = 1,
				                       .beta = betas[bi],
				                       .bias = bi != 1,
				                       .ab = RL_BF16,
				                       .c = ct == 0 ? RL_F32 : RL_BF16};
				run_gemm_case(&seed, &gc);
			}
#endif
}

#ifdef RL_HAVE_CUDA
/* |gpu - cpu| <= 4e-6 sqrt(k) mag (+ a floor), both being fp32 sums */
static void expect_near(const char *what, const float *gpu, const float *cpu, const double *mag,
                        size_t n, int k)
{
	double rtol = 4e-6 * sqrt((double)(k > 0 ? k : 1));
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (fabs((double)gpu[i] - cpu[i]) <= rtol * mag[i] + 1e-30)
			continue;
		if (bad++ < 5)
			cr_expect(0, "%s[%zu]: gpu %.9g, cpu %.9g (mag %g)", what, i,
			          (double)gpu[i], (double)cpu[i], mag[i]);
	}
	cr_expect(bad == 0, "%s: %d of %zu off", what, bad, n);
}

static float *down(const float *dev, size_t n)
{
	float *h = falloc(n);

	dev_download(h, dev, n);
	return h;
}

static void lin_case(uint32_t *seed, int n, int in, int out)
{
	size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
	float *x = frand(seed, nx, -1, 1), *w = frand(seed, nw, -1, 1);
	float *b = frand(seed, (size_t)out, -1, 1), *dy = frand(seed, ny, -1, 1);
	float *dx = frand(seed, nx, -1, 1), *dw = frand(seed, nw, -1, 1);
	float *db = frand(seed, (size_t)out, -1, 1);
	float *y = falloc(ny);
	double *ymag = dalloc(ny), *dxmag = dalloc(nx), *dwmag = dalloc(nw);
	double *dbmag = dalloc((size_t)out);

	for (int t = 0; t < n; t++)
		for (int o = 0; o < out; o++) {
			double m = fabs(b[o]), g = fabs(dy[(size_t)t * out + o]);

			dbmag[o] += g;
			for (int i = 0; i < in; i++) {
				double xv = fabs(x[(size_t)t * in + i]),
				       wv = fabs(w[(size_t)o * in + i]);
				m += xv * wv;
				dxmag[(size_t)t * in + i] += g * wv;
				dwmag[(size_t)o * in + i] += g * xv;
			}
			ymag[(size_t)t * out + o] = m;
		}
	for (size_t i = 0; i < nx; i++)
		dxmag[i] += fabs(dx[i]);
	for (size_t i = 0; i < nw; i++)
		dwmag[i] += fabs(dw[i]);
	for (int o = 0; o < out; o++)
		dbmag[o] += fabs(db[o]);

	float *d_x = dev_upload(x, nx), *d_w = dev_upload(w, nw), *d_b = dev_upload(b, out);
	float *d_dy = dev_upload(dy, ny), *d_y = dev_upload(y, ny);
	float *d_dx = dev_upload(dx, nx), *d_dw = dev_upload(dw, nw), *d_db = dev_upload(db, out);
	float *d_db2 = dev_upload(db, out);

	/* forward, with and without the bias */
	for (int with_bias = 0; with_bias <= 1; with_bias++) {
		const float *hb = with_bias ? b : NULL, *devb = with_bias ? d_b : NULL;

		cr_assert_eq(rl_linear_forward_cpu(rl_buf_f32(y), rl_cbuf_f32(x), rl_cbuf_f32(w),
		                                   rl_cbuf_f32(hb), n, in, out, NULL),
		             0);
		cr_assert_eq(rl_linear_forward_cuda(rl_buf_f32(d_y), rl_cbuf_f32(d_x),
		                                    rl_cbuf_f32(d_w), rl_cbuf_f32(devb), n, in, out,
		                                    NULL),
		             0, "forward n %d in %d out %d", n, in, out);
		float *gy = down(d_y, ny);
		expect_near(with_bias ? "y (bias)" : "y", gy, y, ymag, ny, in);
		free(gy);
	}

	/* backward, all three gradients; the CPU's from the same start */
	float *cdx = fdup(dx, nx), *cdw = fdup(dw, nw), *cdb = fdup(db, (size_t)out);
	cr_assert_eq(rl_linear_backward_cpu(rl_buf_f32(cdx), cdw, cdb, rl_cbuf_f32(dy),
	                                    rl_cbuf_f32(x), rl_cbuf_f32(w), n, in, out, NULL),
	             0);
	cr_assert_eq(rl_linear_backward_cuda(rl_buf_f32(d_dx), d_dw, d_db, rl_cbuf_f32(d_dy),
	                                     rl_cbuf_f32(d_x), rl_cbuf_f32(d_w), n, in, out, NULL),
	             0, "backward n %d in %d out %d", n, in, out);
	float *gdx = down(d_dx, nx), *gdw = down(d_dw, nw), *gdb = down(d_db, out);
	expect_near("dx", gdx, cdx, dxmag, nx, out);
	expect_near("dw", gdw, cdw, dwmag, nw, n);
	expect_near("dbias", gdb, cdb, dbmag, (size_t)out, n);

	/* the bias gradient alone, on another stream, from the same start:
	 * the same bits (a fixed order of sums), and x, w may be NULL */
	cudaStream_t st;
	cuda_ok(cudaStreamCreate(&st), "cudaStreamCreate");
	cr_assert_eq(rl_linear_backward_cuda(rl_buf_f32(NULL), NULL, d_db2, rl_cbuf_f32(d_dy),
	                                     rl_cbuf_f32(NULL), rl_cbuf_f32(NULL), n, in, out, st),
	             0);
	cuda_ok(cudaStreamSynchronize(st), "dbias on a stream");
	cuda_ok(cudaStreamDestroy(st), "cudaStreamDestroy");
	float *gdb2 = down(d_db2, out);
	cr_expect_arr_eq(gdb, gdb2, (size_t)out * sizeof(float),
	                 "n %d out %d: dbias bits differ between two runs", n, out);

	/* dx and dw one at a time: each alone gives what all three gave */
	cuda_ok(cudaMemcpy(d_dx, dx, nx * sizeof(float), cudaMemcpyHostToDevice), "reset dx");
	cuda_ok(cudaMemcpy(d_dw, dw, nw * sizeof(float), cudaMemcpyHostToDevice), "reset dw");
	cr_assert_eq(rl_linear_backward_cuda(rl_buf_f32(d_dx), NULL, NULL, rl_cbuf_f32(d_dy),
	                                     rl_cbuf_f32(NULL), rl_cbuf_f32(d_w), n, in, out, NULL),
	             0);
	cr_assert_eq(rl_linear_backward_cuda(rl_buf_f32(NULL), d_dw, NULL, rl_cbuf_f32(d_dy),
	                                     rl_cbuf_f32(d_x), rl_cbuf_f32(NULL), n, in, out, NULL),
	             0);
	float *gdx2 = down(d_dx, nx), *gdw2 = down(d_dw, nw);
	/* cuBLASLt repeats itself on one GPU with one algorithm, so bits too */
	cr_expect_arr_eq(gdx, gdx2, nx * sizeof(float), "dx alone differs");
	cr_expect_arr_eq(gdw, gdw2, nw * sizeof(float), "dw alone differs");

	float *bufs[] = {x,   w,   b,   dy,  dx,  dw,   db,   y,   cdx,
	                 cdw, cdb, gdx, gdw, gdb, gdb2, gdx2, gdw2};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		free(bufs[i]);
	float *dbufs[] = {d_x, d_w, d_b, d_dy, d_y, d_dx, d_dw, d_db, d_db2};
	for (size_t i = 0; i < sizeof(dbufs) / sizeof(dbufs[0]); i++)
		dev_free(dbufs[i]);
	free(ymag);
	free(dxmag);
	free(dwmag);
	free(dbmag);
}
#endif

Test(cuda_linear, matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	uint32_t seed = 0xabcdefu;

	lin_case(&seed, 1, 1, 1);
	lin_case(&seed, 3, 5, 7);
	lin_case(&seed, 127, 33, 257);
	lin_case(&seed, 257, 127, 3);
	lin_case(&seed, 1000, 64, 96); /* 4 row chunks in the bias gradient */
	lin_case(&seed, 3000, 16, 5);  /* 12 */
	lin_case(&seed, 20000, 8, 40); /* 79, capped at 64 */
	lin_case(&seed, 5, 3, 9000);   /* one chunk: the single pass */
#endif
}
