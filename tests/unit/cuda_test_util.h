/* Device buffers for the CUDA parity tests: each test runs the CPU reference
 * on host copies and the CUDA op on device copies of the same random data,
 * then compares. Built into every test binary; without RL_HAVE_CUDA only
 * CUDA_TEST_BEGIN is defined, and it skips, so CI lists the tests with the
 * reason. With a CUDA build but no GPU they skip too, naming what CUDA said.
 * defines: CUDA_TEST_BEGIN, cuda_ok, dev_alloc, dev_upload, dev_upload_i32,
 * dev_upload_bytes, dev_download, dev_download_i32, dev_download_bytes, dev_free,
 * dev_sync */
#ifndef RL_TESTS_CUDA_TEST_UTIL_H
#define RL_TESTS_CUDA_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#ifndef RL_HAVE_CUDA

#define CUDA_TEST_BEGIN() cr_skip_test("built without --with-cuda")

#else

#include <cuda_runtime_api.h>

/* The first statement of every parity test. */
#define CUDA_TEST_BEGIN()                                                                          \
	do {                                                                                       \
		int count_ = 0;                                                                    \
		cudaError_t err_ = cudaGetDeviceCount(&count_);                                    \
		if (err_ != cudaSuccess)                                                           \
			cr_skip_test("no CUDA device: %s", cudaGetErrorString(err_));              \
		if (count_ == 0)                                                                   \
			cr_skip_test("no CUDA device: cudaGetDeviceCount found none");             \
	} while (0)

static inline void cuda_ok(cudaError_t err, const char *what)
{
	cr_assert_eq(err, cudaSuccess, "%s: %s", what, cudaGetErrorString(err));
}

/* Plain cudaMalloc, not the backend's allocator: the tests must not trust
 * the code they test for their own buffers. */
static inline void *dev_alloc(size_t bytes)
{
	void *p = NULL;

	cuda_ok(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc");
	return p;
}

static inline float *dev_upload(const float *host, size_t n)
{
	float *d = (float *)dev_alloc(n * sizeof(float));

	if (n)
		cuda_ok(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice), "upload");
	return d;
}

static inline int32_t *dev_upload_i32(const int32_t *host, size_t n)
{
	int32_t *d = (int32_t *)dev_alloc(n * sizeof(int32_t));

	if (n)
		cuda_ok(cudaMemcpy(d, host, n * sizeof(int32_t), cudaMemcpyHostToDevice), "upload");
	return d;
}

/* Waits for the device first, so a kernel's fault is reported here, by the
 * test that caused it. */
static inline void dev_download(float *host, const float *dev, size_t n)
{
	cuda_ok(cudaDeviceSynchronize(), "kernel");
	if (n)
		cuda_ok(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost),
		        "download");
}

static inline void dev_download_i32(int32_t *host, const int32_t *dev, size_t n)
{
	cuda_ok(cudaDeviceSynchronize(), "kernel");
	if (n)
		cuda_ok(cudaMemcpy(host, dev, n * sizeof(int32_t), cudaMemcpyDeviceToHost),
		        "download");
}

/* bytes of any type (bf16 bit patterns) to the device, and back into a
 * fresh malloc'd copy */
static inline void *dev_upload_bytes(const void *host, size_t bytes)
{
	void *d = dev_alloc(bytes);

	if (bytes)
		cuda_ok(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), "upload");
	return d;
}

static inline void *dev_download_bytes(const void *dev, size_t bytes)
{
	void *h = malloc(bytes ? bytes : 1);

	cr_assert_not_null(h);
	cuda_ok(cudaDeviceSynchronize(), "kernel");
	if (bytes)
		cuda_ok(cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost), "download");
	return h;
}

static inline void dev_sync(void)
{
	cuda_ok(cudaDeviceSynchronize(), "kernel");
}

static inline void dev_free(void *p)
{
	cudaFree(p);
}

#endif

#endif
