/* The CUDA backend's memory: argument checks (no GPU needed), round trips
 * host -> device -> device -> host of odd sizes and at odd offsets, zeroing,
 * overlapping copies (memmove, as the CPU backend), and the caching pool's
 * numbers: memory released stays reserved and serves the next allocation. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "kernels/memory.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/gradcheck.h"

Test(cuda_memory, bad_arguments)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	/* A host buffer stands in for device memory: the checks, and the
	 * bytes == 0 no-op, come before any CUDA call. */
	char buf[8] = "abcdefg";

	cr_expect_eq(rl_cuda_zero(NULL, 4, NULL), -1);
	cr_expect_eq(rl_cuda_to_host(NULL, buf, 4, NULL), -1);
	cr_expect_eq(rl_cuda_to_host(buf, NULL, 4, NULL), -1);
	cr_expect_eq(rl_cuda_from_host(NULL, buf, 4, NULL), -1);
	cr_expect_eq(rl_cuda_from_host(buf, NULL, 4, NULL), -1);
	cr_expect_eq(rl_cuda_copy(NULL, buf, 4, NULL), -1);
	cr_expect_eq(rl_cuda_copy(buf, NULL, 4, NULL), -1);
	cr_expect_eq(rl_cuda_memory_stats(NULL), -1);

	cr_expect_eq(rl_cuda_zero(NULL, 0, NULL), 0);
	cr_expect_eq(rl_cuda_zero(buf, 0, NULL), 0);
	cr_expect_eq(rl_cuda_to_host(NULL, NULL, 0, NULL), 0);
	cr_expect_eq(rl_cuda_from_host(NULL, NULL, 0, NULL), 0);
	cr_expect_eq(rl_cuda_copy(NULL, NULL, 0, NULL), 0);
	cr_expect_eq(rl_cuda_copy(buf, buf + 1, 0, NULL), 0);
	cr_expect_str_eq(buf, "abcdefg");

	rl_cuda_release(NULL);
	rl_cuda_release_async(NULL, NULL);
#endif
}

#ifdef RL_HAVE_CUDA
static unsigned char *random_bytes(uint32_t *seed, size_t n)
{
	unsigned char *b = malloc(n ? n : 1);

	cr_assert_not_null(b);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(gc_rng(seed) >> 24);
	return b;
}
#endif

Test(cuda_memory, round_trips)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const size_t sizes[] = {1, 3, 4, 255, 256, 257, 4097, (1u << 20) + 3};
	uint32_t seed = 0x6d656d31u;
	cudaStream_t stream;

	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		void *st = k % 2 ? (void *)stream : NULL;
		unsigned char *want = random_bytes(&seed, n), *host = malloc(n), *got = malloc(n);
		unsigned char *a = rl_cuda_alloc(n), *b = rl_cuda_alloc(n);

		cr_assert(host && got);
		cr_assert(a && b, "alloc %zu bytes failed", n);
		cr_expect(((uintptr_t)a & 255) == 0 && ((uintptr_t)b & 255) == 0,
		          "alloc %zu: %p %p not 256-byte aligned", n, (void *)a, (void *)b);
		cr_expect(a != b);

		/* from_host: the host buffer is free to change once it returns */
		memcpy(host, want, n);
		cr_assert_eq(rl_cuda_from_host(a, host, n, st), 0, "from_host %zu", n);
		memset(host, 0xa5, n);
		cr_assert_eq(rl_cuda_copy(b, a, n, st), 0, "copy %zu", n);
		cr_assert_eq(rl_cuda_zero(a, n, st), 0, "zero %zu", n);
		/* to_host: got holds the data when it returns, no sync needed */
		memset(got, 0x5a, n);
		cr_assert_eq(rl_cuda_to_host(got, b, n, st), 0, "to_host %zu", n);
		cr_expect_arr_eq(got, want, n, "round trip of %zu bytes", n);
		cr_assert_eq(rl_cuda_to_host(got, a, n, st), 0, "to_host %zu", n);
		memset(host, 0, n);
		cr_expect_arr_eq(got, host, n, "zero of %zu bytes", n);

		rl_cuda_release(a);
		rl_cuda_release(b);
		free(want);
		free(host);
		free(got);
	}
	dev_sync();
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
#endif
}

/* The same edits on a host model and on a device buffer, at offsets that
 * are neither word- nor float4-aligned, then the whole buffer compared: an
 * edit that spilled over its range shows up in the bytes around it. */
Test(cuda_memory, offsets_and_overlaps)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	const size_t n = 4097;
	uint32_t seed = 0x6d656d32u;
	unsigned char *model = random_bytes(&seed, n), *src = random_bytes(&seed, 1000);
	unsigned char *got = malloc(n), *d = rl_cuda_alloc(n), *e = rl_cuda_alloc(n);

	cr_assert(got && d && e);
	cr_assert_eq(rl_cuda_from_host(d, model, n, NULL), 0);
	cr_assert_eq(rl_cuda_from_host(e, model, n, NULL), 0);

	cr_assert_eq(rl_cuda_from_host(d + 5, src, 999, NULL), 0);
	memcpy(model + 5, src, 999);
	cr_assert_eq(rl_cuda_zero(d + 1001, 3, NULL), 0);
	memset(model + 1001, 0, 3);
	cr_assert_eq(rl_cuda_zero(d + 2049, 1021, NULL), 0);
	memset(model + 2049, 0, 1021);
	/* into another buffer and back, odd lengths */
	cr_assert_eq(rl_cuda_copy(e + 3, d + 7, 1501, NULL), 0);
	cr_assert_eq(rl_cuda_copy(d + 3001, e + 3, 1001, NULL), 0);
	memcpy(model + 3001, model + 7, 1001);
	/* overlapping, both directions, as memmove */
	cr_assert_eq(rl_cuda_copy(d + 1, d, 1000, NULL), 0);
	memmove(model + 1, model, 1000);
	cr_assert_eq(rl_cuda_copy(d + 100, d + 133, 2000, NULL), 0);
	memmove(model + 100, model + 133, 2000);
	cr_assert_eq(rl_cuda_copy(d + 9, d + 9, 50, NULL), 0);

	memset(got, 0, n);
	cr_assert_eq(rl_cuda_to_host(got, d, n, NULL), 0);
	cr_expect_arr_eq(got, model, n, "device buffer differs from the host model");
	/* a piece from the middle */
	memset(got, 0, n);
	cr_assert_eq(rl_cuda_to_host(got, d + 17, 33, NULL), 0);
	cr_expect_arr_eq(got, model + 17, 33);

	rl_cuda_release(d);
	rl_cuda_release(e);
	free(model);
	free(src);
	free(got);
#endif
}

#ifdef RL_HAVE_CUDA
/* Holds a stream for 200 ms from a CUDA host-callback thread (no CUDA call
 * in here, as cudaLaunchHostFunc requires). */
static void CUDART_CB hold_stream(void *arg)
{
	struct timespec ts = {0, 200 * 1000 * 1000};

	(void)arg;
	nanosleep(&ts, NULL);
}
#endif

/* With pinned host memory cudaMemcpyAsync returns before the DMA, so only
 * the ops' own waits keep these right. The stream is held back first, so
 * the copies are still queued when an op without its wait would return:
 * then from_host would upload the overwritten buffer and to_host would
 * leave the 0x5a fill, every time, not by a race that usually goes well. */
Test(cuda_memory, pinned_host_buffers_wait)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	const size_t n = (1u << 20) + 5;
	uint32_t seed = 0x6d656d33u;
	unsigned char *want = random_bytes(&seed, n), *host = NULL, *got = NULL;
	unsigned char *d = rl_cuda_alloc(n);
	cudaStream_t stream;

	cr_assert_not_null(d);
	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	cuda_ok(cudaMallocHost((void **)&host, n), "cudaMallocHost");
	cuda_ok(cudaMallocHost((void **)&got, n), "cudaMallocHost");
	for (int k = 0; k < 2; k++) {
		void *st = k ? (void *)stream : NULL;
		cudaStream_t cst = k ? stream : cudaStreamLegacy;

		memcpy(host, want, n);
		cuda_ok(cudaLaunchHostFunc(cst, hold_stream, NULL), "cudaLaunchHostFunc");
		cr_assert_eq(rl_cuda_from_host(d, host, n, st), 0, "from_host, stream %d", k);
		memset(host, 0xa5, n); /* allowed as soon as from_host returns */

		memset(got, 0x5a, n);
		cuda_ok(cudaLaunchHostFunc(cst, hold_stream, NULL), "cudaLaunchHostFunc");
		cr_assert_eq(rl_cuda_to_host(got, d, n, st), 0, "to_host, stream %d", k);
		/* read at once, no synchronisation of our own */
		cr_expect_arr_eq(got, want, n, "pinned round trip on stream %d", k);
	}
	dev_sync();
	rl_cuda_release(d);
	cuda_ok(cudaFreeHost(host), "cudaFreeHost");
	cuda_ok(cudaFreeHost(got), "cudaFreeHost");
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
	free(want);
#endif
}

Test(cuda_memory, pool_caches_and_counts)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	const size_t big = (size_t)8 << 20;
	struct rl_cuda_memory_stats s0, s1, s2, s3;
	void *p, *q, *z0, *z1;

	/* Criterion runs a test in a process of its own, but nothing here
	 * assumes the pool starts empty: everything is relative to s0. */
	cr_assert_eq(rl_cuda_memory_stats(&s0), 0);

	p = rl_cuda_alloc(big);
	cr_assert_not_null(p);
	dev_sync();
	cr_assert_eq(rl_cuda_memory_stats(&s1), 0);
	cr_expect(s1.in_use >= s0.in_use + big, "in use %zu, was %zu", s1.in_use, s0.in_use);
	cr_expect(s1.peak_in_use >= s1.in_use, "peak %zu < in use %zu", s1.peak_in_use, s1.in_use);
	cr_expect(s1.reserved >= s1.in_use, "reserved %zu < in use %zu", s1.reserved, s1.in_use);

	/* released: no longer in use, but still reserved (the release
	 * threshold keeps it through synchronisation) */
	rl_cuda_release(p);
	dev_sync();
	cr_assert_eq(rl_cuda_memory_stats(&s2), 0);
	cr_expect_eq(s2.in_use, s0.in_use, "in use %zu after release, %zu before alloc", s2.in_use,
	             s0.in_use);
	cr_expect_eq(s2.reserved, s1.reserved, "reserved %zu after release, %zu before",
	             s2.reserved, s1.reserved);
	cr_expect(s2.peak_in_use >= s1.in_use, "peak %zu forgot %zu", s2.peak_in_use, s1.in_use);

	/* again: served from the cache, the pool does not grow */
	q = rl_cuda_alloc(big);
	cr_assert_not_null(q);
	dev_sync();
	cr_assert_eq(rl_cuda_memory_stats(&s3), 0);
	cr_expect_eq(s3.reserved, s2.reserved, "reserved grew from %zu to %zu on reuse",
	             s2.reserved, s3.reserved);
	cr_expect_eq(s3.in_use, s1.in_use);
	/* and usable: write it and read it back */
	cr_assert_eq(rl_cuda_zero(q, big, NULL), 0);
	unsigned char tail[16], zeros[16] = {0};
	cr_assert_eq(rl_cuda_to_host(tail, (unsigned char *)q + big - 16, 16, NULL), 0);
	cr_expect_arr_eq(tail, zeros, 16);
	rl_cuda_release(q);

	/* 0 bytes: a real pointer, distinct, released like any */
	z0 = rl_cuda_alloc(0);
	z1 = rl_cuda_alloc(0);
	cr_expect(z0 && z1 && z0 != z1, "alloc(0): %p %p", z0, z1);
	rl_cuda_release(z0);
	rl_cuda_release(z1);

	/* on another stream, as an op's scratch */
	cudaStream_t stream;
	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	p = rl_cuda_alloc_async(4097, stream);
	cr_assert_not_null(p);
	cr_assert_eq(rl_cuda_zero(p, 4097, stream), 0);
	rl_cuda_release_async(p, stream);
	cuda_ok(cudaStreamSynchronize(stream), "stream");
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
	dev_sync();
	cr_assert_eq(rl_cuda_memory_stats(&s3), 0);
	cr_expect_eq(s3.in_use, s0.in_use, "in use %zu at the end, %zu at the start", s3.in_use,
	             s0.in_use);
#endif
}
