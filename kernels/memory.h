/* Device memory of the CUDA backend: a caching allocator and the copies and
 * fills the op table's first six fields need. The step loop allocates and
 * frees activations and scratch every step; cudaMalloc/cudaFree there would
 * synchronise the device each time, so allocations come from a memory pool
 * that keeps freed memory for the next request instead of returning it.
 * defines: rl_cuda_alloc, rl_cuda_release, rl_cuda_alloc_async,
 * rl_cuda_release_async, rl_cuda_zero, rl_cuda_to_host, rl_cuda_from_host,
 * rl_cuda_copy, struct rl_cuda_memory_stats, rl_cuda_memory_stats */
#ifndef RL_KERNELS_MEMORY_H
#define RL_KERNELS_MEMORY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Only defined when built --with-cuda (RL_HAVE_CUDA). */

/* bytes of device memory on the current device, 256-byte aligned (what the
 * pool gives), or NULL when CUDA or the pool fails. bytes == 0 still gives a
 * distinct pointer, as the CPU backend's alloc does. Stream-ordered on the
 * legacy default stream, where every op runs: the memory may be used at once
 * by work on that stream or on a blocking stream (cudaStreamCreate's
 * default); a cudaStreamNonBlocking stream must be ordered by the caller. */
void *rl_cuda_alloc(size_t bytes);
/* Returns p to the pool once the work already queued on the legacy default
 * stream (and so on every blocking stream) is done: no synchronisation, and
 * memory still being read by queued kernels is not reused under them.
 * NULL is a no-op; p must come from rl_cuda_alloc or rl_cuda_alloc_async. */
void rl_cuda_release(void *p);

/* The same from and to the pool, ordered on stream (a cudaStream_t; NULL is
 * the legacy default stream): for scratch that an op on any stream uses
 * between the two calls. */
void *rl_cuda_alloc_async(size_t bytes, void *stream);
void rl_cuda_release_async(void *p, void *stream);

/* The copies and fills return 0, or -1 on a CUDA error or bad arguments (a
 * NULL pointer with bytes > 0), the latter before any CUDA call; bytes == 0
 * does nothing and returns 0. stream as above. */

/* p[0, bytes) = 0, queued on stream. */
int rl_cuda_zero(void *p, size_t bytes, void *stream);
/* device -> host; returns once host holds the data (synchronises stream). */
int rl_cuda_to_host(void *host, const void *src, size_t bytes, void *stream);
/* host -> device; the caller may reuse or free host as soon as this returns
 * (it waits for the copy, see memory.cu), the data is on the device for
 * work queued on stream after it. */
int rl_cuda_from_host(void *dst, const void *host, size_t bytes, void *stream);
/* device -> device, queued on stream; dst and src may overlap, as with the
 * CPU backend's memmove. */
int rl_cuda_copy(void *dst, const void *src, size_t bytes, void *stream);

/* Bytes of the current device's pool: in use by live allocations (at the
 * pool's granularity), the most ever in use, and held from the driver (in
 * use plus cached). A released block may count as in use until the stream
 * reaches the free; synchronise first for exact numbers. */
struct rl_cuda_memory_stats {
	size_t in_use;
	size_t peak_in_use;
	size_t reserved;
	/* the device's, from the driver (cudaMemGetInfo): free memory (the
	 * pool's cached blocks not counted) and the whole */
	size_t device_free;
	size_t device_total;
};

/* 0 and *out (all zero before the first allocation on this device), or -1
 * when out is NULL or CUDA fails. */
int rl_cuda_memory_stats(struct rl_cuda_memory_stats *out);

#ifdef __cplusplus
}
#endif

#endif
