/* RMSNorm forward: achieved bandwidth against the machine's own copy
 * bandwidth for the same bytes, measured in the same run (the op reads x
 * and writes y, so a copy of x is its ceiling). With the CUDA backend and a
 * GPU, the same against cudaMemcpy device-to-device. */
#define _GNU_SOURCE
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/rmsnorm.h"
#include "tests/bench/clock.h"
#ifdef RL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Repeats fn until at least 0.2 s have passed; seconds per call. */
#define TIME_IT(secs, stmt)                                                                        \
	do {                                                                                       \
		int reps_ = 0;                                                                     \
		double t0_ = bench_now(), t_;                                                      \
		do {                                                                               \
			stmt;                                                                      \
			reps_++;                                                                   \
		} while ((t_ = bench_now() - t0_) < 0.2);                                          \
		(secs) = t_ / reps_;                                                               \
	} while (0)

static void print_row(const char *device, int rows, int dim, double t_op, double t_copy)
{
	/* the op reads x and writes y: the same bytes a copy of x moves */
	double bytes = 2.0 * (double)rows * (double)dim * sizeof(float);
	printf("%-6s %6d %6d %12.2f %12.2f %8.2f\n", device, rows, dim, bytes / t_op / 1e9,
	       bytes / t_copy / 1e9, t_copy / t_op);
}

static const int shapes[][2] = {{1024, 1024}, {4096, 2048}, {8192, 4096}, {2048, 8192}};

static void bench_cpu(void)
{
	printf("%-6s %6s %6s %12s %12s %8s\n", "device", "rows", "dim", "rmsnorm GB/s",
	       "memcpy GB/s", "ratio");
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int rows = shapes[s][0], dim = shapes[s][1];
		size_t n = (size_t)rows * (size_t)dim;
		float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
		float *w = malloc((size_t)dim * sizeof(float)),
		      *rstd = malloc((size_t)rows * sizeof(float));
		if (!x || !y || !w || !rstd)
			return;
		for (size_t i = 0; i < n; i++)
			x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
		for (int i = 0; i < dim; i++)
			w[i] = 1.0f + 0.001f * (float)i;
		double t_op, t_copy;
		TIME_IT(t_op, rl_rmsnorm_forward_cpu(rl_buf_f32(y), rstd, rl_cbuf_f32(x),
		                                     rl_cbuf_f32(w), rows, dim, 1e-6f, NULL));
		TIME_IT(t_copy, memcpy(y, x, n * sizeof(float)));
		print_row("cpu", rows, dim, t_op, t_copy);
		free(x);
		free(y);
		free(w);
		free(rstd);
	}
}

#ifdef RL_HAVE_CUDA
static void bench_cuda(void)
{
	int count = 0;
	cudaError_t err = cudaGetDeviceCount(&count);
	if (err != cudaSuccess || count == 0) {
		printf("cuda: skipped (%s)\n",
		       err != cudaSuccess ? cudaGetErrorString(err) : "no device");
		return;
	}
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int rows = shapes[s][0], dim = shapes[s][1];
		size_t n = (size_t)rows * (size_t)dim;
		float *x, *y, *w, *rstd;
		if (cudaMalloc((void **)&x, n * 4) || cudaMalloc((void **)&y, n * 4) ||
		    cudaMalloc((void **)&w, (size_t)dim * 4) ||
		    cudaMalloc((void **)&rstd, (size_t)rows * 4))
			return;
		cudaMemset(x, 0, n * 4);
		cudaMemset(w, 0, (size_t)dim * 4);
		double t_op, t_copy;
		TIME_IT(t_op, (rl_rmsnorm_forward_cuda(rl_buf_f32(y), rstd, rl_cbuf_f32(x),
		                                       rl_cbuf_f32(w), rows, dim, 1e-6f, NULL),
		               cudaDeviceSynchronize()));
		TIME_IT(t_copy, (cudaMemcpy(y, x, n * 4, cudaMemcpyDeviceToDevice),
		                 cudaDeviceSynchronize()));
		print_row("cuda", rows, dim, t_op, t_copy);
		cudaFree(x);
		cudaFree(y);
		cudaFree(w);
		cudaFree(rstd);
	}
}
#endif

int main(void)
{
	bench_cpu();
#ifdef RL_HAVE_CUDA
	bench_cuda();
#else
	printf("cuda: not built (configure --with-cuda)\n");
#endif
	return 0;
}
