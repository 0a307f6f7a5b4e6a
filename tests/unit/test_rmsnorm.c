/* RMSNorm: the CPU reference against hand-computed values and an inline
 * double-precision formula, and the CUDA kernel against the CPU reference. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#ifdef RL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "kernels/ops.h"
#include "kernels/rmsnorm.h"
#include "tests/unit/ops_test_util.h"

Test(rmsnorm, table_unit_weights)
{
	const float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1};
	/* mean(x^2) = 30 / 4 = 7.5, rstd = 1 / sqrt(7.5) */
	const double rstd_want = 0.36514837167011072;
	const double y_want[4] = {0.36514837167011072, 0.73029674334022143, 1.0954451150103321,
	                          1.4605934866804429};
	float y[4], rstd;

	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_f32(y), &rstd, rl_cbuf_f32(x), rl_cbuf_f32(w), 1,
	                                    4, 0.0f, NULL),
	             0);
	expect_close("rstd", 0, rstd, rstd_want, 1e-6, 0);
	for (size_t i = 0; i < 4; i++)
		expect_close("y", i, y[i], y_want[i], 1e-6, 0);
}

Test(rmsnorm, table_weights_and_eps)
{
	const float x[9] = {1, -2, 0.5f, 3, 0, -4, 0, 0, 0};
	const float w[3] = {0.5f, -2, 1.5f};
	/* eps = 0.25. Row 0: 5.25 / 3 + 0.25 = 2, rstd = 1 / sqrt(2).
	 * Row 1: 25 / 3 + 0.25 = 103 / 12. Row 2: all zero, so only eps is
	 * left: rstd = 1 / sqrt(0.25) = 2 and y = 0. */
	const double rstd_want[3] = {0.70710678118654757, 0.34132807439314455, 2.0};
	const double y_want[9] = {0.35355339059327379,
	                          2.8284271247461903,
	                          0.5303300858899106,
	                          0.51199211158971691,
	                          0.0,
	                          -2.0479684463588677,
	                          0.0,
	                          0.0,
	                          0.0};
	float y[9], rstd[3];

	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_f32(y), rstd, rl_cbuf_f32(x), rl_cbuf_f32(w), 3,
	                                    3, 0.25f, NULL),
	             0);
	for (size_t r = 0; r < 3; r++)
		expect_close("rstd", r, rstd[r], rstd_want[r], 1e-6, 0);
	for (size_t i = 0; i < 9; i++)
		expect_close("y", i, y[i], y_want[i], 1e-6, 0);
}

Test(rmsnorm, random_shapes_match_double_formula)
{
	static const int dims[] = {1, 3, 7, 64, 1000, 4097};
	uint32_t seed = 0x9e3779b9u;

	for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
		int dim = dims[d];
		int rows = 1 + (int)(gc_rng(&seed) % 7);
		float eps = d % 2 ? 1e-5f : 1e-6f;
		size_t n = (size_t)rows * dim;
		float *x = frand(&seed, n, -3.0f, 3.0f);
		float *w = frand(&seed, (size_t)dim, -2.0f, 2.0f);
		float *y = malloc(n * sizeof(*y)), *rstd = malloc((size_t)rows * sizeof(*rstd));

		cr_assert(y && rstd);
		cr_assert_eq(rl_ops_cpu.rmsnorm_forward(rl_buf_f32(y), rstd, rl_cbuf_f32(x),
		                                        rl_cbuf_f32(w), rows, dim, eps, NULL),
		             0);
		for (int r = 0; r < rows; r++) {
			const float *xr = x + (size_t)r * dim;
			double ss = 0.0;

			for (int i = 0; i < dim; i++)
				ss += (double)xr[i] * (double)xr[i];
			double s = 1.0 / sqrt(ss / dim + (double)eps);

			expect_close("rstd", (size_t)r, rstd[r], s, 1e-5, 0);
			for (int i = 0; i < dim; i++)
				expect_close("y", (size_t)r * dim + i, y[(size_t)r * dim + i],
				             (double)xr[i] * s * (double)w[i], 1e-5, 0);
		}
		/* rstd is optional and must not change y. */
		float *y2 = malloc(n * sizeof(*y2));
		cr_assert_not_null(y2);
		cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_f32(y2), NULL, rl_cbuf_f32(x),
		                                    rl_cbuf_f32(w), rows, dim, eps, NULL),
		             0);
		cr_expect_arr_eq(y, y2, n * sizeof(*y), "dim %d: y differs with rstd == NULL", dim);
		free(x);
		free(w);
		free(y);
		free(y2);
		free(rstd);
	}
}

Test(rmsnorm, zero_rows_is_a_noop)
{
	float x = 1, w = 1, y = 42, rstd = 42;

	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_f32(&y), &rstd, rl_cbuf_f32(&x), rl_cbuf_f32(&w),
	                                    0, 1, 1e-5f, NULL),
	             0);
	cr_expect(y == 42 && rstd == 42);
}

static void expect_bad_args(rl_rmsnorm_forward_fn f, const char *name)
{
	float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, y[4], rstd[1];

	cr_expect_eq(f(rl_buf_f32(y), rstd, rl_cbuf_f32(x), rl_cbuf_f32(w), -1, 4, 0, NULL), -1,
	             "%s: rows < 0", name);
	cr_expect_eq(f(rl_buf_f32(y), rstd, rl_cbuf_f32(x), rl_cbuf_f32(w), 1, 0, 0, NULL), -1,
	             "%s: dim == 0", name);
	cr_expect_eq(f(rl_buf_f32(y), rstd, rl_cbuf_f32(x), rl_cbuf_f32(w), 1, -4, 0, NULL), -1,
	             "%s: dim < 0", name);
	cr_expect_eq(f(rl_buf_f32(NULL), rstd, rl_cbuf_f32(x), rl_cbuf_f32(w), 1, 4, 0, NULL), -1,
	             "%s: y == NULL", name);
	cr_expect_eq(f(rl_buf_f32(y), rstd, rl_cbuf_f32(NULL), rl_cbuf_f32(w), 1, 4, 0, NULL), -1,
	             "%s: x == NULL", name);
	cr_expect_eq(f(rl_buf_f32(y), rstd, rl_cbuf_f32(x), rl_cbuf_f32(NULL), 1, 4, 0, NULL), -1,
	             "%s: weight == NULL", name);
}

Test(rmsnorm, bad_arguments)
{
	cr_expect_str_eq(rl_ops_cpu.name, "cpu");
	cr_expect(rl_ops_cpu.rmsnorm_forward == rl_rmsnorm_forward_cpu);
	expect_bad_args(rl_rmsnorm_forward_cpu, "cpu");
#ifdef RL_HAVE_CUDA
	/* Arguments are checked before any CUDA call, so this needs no GPU. */
	cr_expect_str_eq(rl_ops_cuda.name, "cuda");
	cr_expect(rl_ops_cuda.rmsnorm_forward == rl_rmsnorm_forward_cuda);
	expect_bad_args(rl_rmsnorm_forward_cuda, "cuda");
#endif
}

#ifdef RL_HAVE_CUDA
static void cuda_ok(cudaError_t err, const char *what)
{
	cr_assert_eq(err, cudaSuccess, "%s: %s", what, cudaGetErrorString(err));
}

/* x_off, y_off and w_off shift the device pointers by whole floats, so that
 * an offset of 1 defeats the kernel's 16-byte alignment check. */
static void cuda_case(uint32_t *seed, int rows, int dim, int x_off, int y_off, int w_off,
                      cudaStream_t stream)
{
	size_t n = (size_t)rows * dim;
	float eps = 1e-5f;
	float *x = frand(seed, n, -3.0f, 3.0f);
	float *w = frand(seed, (size_t)dim, -2.0f, 2.0f);
	float *y_cpu = malloc(n * sizeof(float)), *y_gpu = malloc(n * sizeof(float));
	float *rstd_cpu = malloc((size_t)rows * sizeof(float));
	float *rstd_gpu = malloc((size_t)rows * sizeof(float));
	float *dx, *dy, *dw, *drstd;

	cr_assert(y_cpu && y_gpu && rstd_cpu && rstd_gpu);
	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_f32(y_cpu), rstd_cpu, rl_cbuf_f32(x),
	                                    rl_cbuf_f32(w), rows, dim, eps, NULL),
	             0);

	cuda_ok(cudaMalloc((void **)&dx, (n + 1) * sizeof(float)), "cudaMalloc x");
	cuda_ok(cudaMalloc((void **)&dy, (n + 1) * sizeof(float)), "cudaMalloc y");
	cuda_ok(cudaMalloc((void **)&dw, ((size_t)dim + 1) * sizeof(float)), "cudaMalloc w");
	cuda_ok(cudaMalloc((void **)&drstd, (size_t)rows * sizeof(float)), "cudaMalloc rstd");
	cuda_ok(cudaMemcpy(dx + x_off, x, n * sizeof(float), cudaMemcpyHostToDevice), "copy x");
	cuda_ok(cudaMemcpy(dw + w_off, w, (size_t)dim * sizeof(float), cudaMemcpyHostToDevice),
	        "copy w");

	cr_assert_eq(rl_ops_cuda.rmsnorm_forward(rl_buf_f32(dy + y_off), drstd,
	                                         rl_cbuf_f32(dx + x_off), rl_cbuf_f32(dw + w_off),
	                                         rows, dim, eps, stream),
	             0, "rows %d dim %d: launch failed", rows, dim);
	cuda_ok(cudaStreamSynchronize(stream), "kernel");
	cuda_ok(cudaMemcpy(y_gpu, dy + y_off, n * sizeof(float), cudaMemcpyDeviceToHost), "copy y");
	cuda_ok(cudaMemcpy(rstd_gpu, drstd, (size_t)rows * sizeof(float), cudaMemcpyDeviceToHost),
	        "copy rstd");

	for (int r = 0; r < rows; r++)
		expect_close("rstd", (size_t)r, rstd_gpu[r], rstd_cpu[r], 1e-5, 1e-6);
	for (size_t i = 0; i < n; i++)
		expect_close("y", i, y_gpu[i], y_cpu[i], 1e-5, 1e-6);

	/* rstd == NULL (the KV-cache decode's use): y is written, over NaN,
	 * with the same bits, and nothing is written through the NULL */
	float *y2 = malloc(n * sizeof(float));

	cr_assert_not_null(y2);
	cuda_ok(cudaMemset(dy, 0xff, (n + 1) * sizeof(float)), "cudaMemset y");
	cr_assert_eq(rl_ops_cuda.rmsnorm_forward(rl_buf_f32(dy + y_off), NULL,
	                                         rl_cbuf_f32(dx + x_off), rl_cbuf_f32(dw + w_off),
	                                         rows, dim, eps, stream),
	             0, "rows %d dim %d: launch without rstd failed", rows, dim);
	cuda_ok(cudaStreamSynchronize(stream), "kernel without rstd");
	cuda_ok(cudaMemcpy(y2, dy + y_off, n * sizeof(float), cudaMemcpyDeviceToHost), "copy y2");
	cr_expect_arr_eq(y_gpu, y2, n * sizeof(float),
	                 "rows %d dim %d: y differs with rstd == NULL", rows, dim);
	free(y2);

	cudaFree(dx);
	cudaFree(dy);
	cudaFree(dw);
	cudaFree(drstd);
	free(x);
	free(w);
	free(y_cpu);
	free(y_gpu);
	free(rstd_cpu);
	free(rstd_gpu);
}
#endif

Test(rmsnorm, cuda_matches_cpu)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	static const int dims[] = {1, 3, 4, 127, 256, 4097, 8192};
	static const int rows[] = {1, 5, 64};
	uint32_t seed = 0x2545f491u;
	cudaStream_t stream;
	int count = 0;
	cudaError_t err = cudaGetDeviceCount(&count);

	if (err != cudaSuccess)
		cr_skip_test("no CUDA device: %s", cudaGetErrorString(err));
	if (count == 0)
		cr_skip_test("no CUDA device: cudaGetDeviceCount found none");

	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
		for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
			/* Alternate the default stream and a created one. */
			cudaStream_t s = (d + r) % 2 ? stream : NULL;

			cuda_case(&seed, rows[r], dims[d], 0, 0, 0, s);
			/* Misaligned: the float4 path must give way to the
			 * scalar one, whichever pointer is off. */
			cuda_case(&seed, rows[r], dims[d], 1, 0, 0, s);
			cuda_case(&seed, rows[r], dims[d], 0, 1, 1, s);
		}
	}
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
#endif
}
