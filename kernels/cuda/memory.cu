/* The CUDA backend's memory: a caching allocator on CUDA's stream-ordered
 * allocator, and the fills and copies of the op table.
 *
 * Each device gets a pool of our own (not the device's default pool, which
 * other libraries in the process may trim or reconfigure) with the release
 * threshold at UINT64_MAX: freed memory stays reserved in the pool and the
 * next request of a fitting size is served from it without a cudaMalloc,
 * and without the device-wide synchronisation cudaFree implies. The pool is
 * created on the first allocation on a device, under a mutex, and lives as
 * long as the process, like the CUDA context it belongs to.
 *
 * Allocation and release are ordered on the legacy default stream, where
 * every op runs: a block freed there is reused only by work that comes after
 * the free in that order, so a kernel still reading it is never overwritten.
 * Pointers are 256-byte aligned: the pool's granularity, and what cudaMalloc
 * gives too, so float4 paths of the ops always apply to whole buffers. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/memory.h"

/* more devices than one node has; a device beyond it is refused */
#define RL_MAX_DEVICES 64

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaMemPool_t pools[RL_MAX_DEVICES];

/* A failed CUDA call also leaves its error for cudaGetLastError(), which the
 * ops read after their launches (rl_launched): clear it, so that a refused
 * allocation the caller handles does not fail the next, unrelated launch. */
static int failed(void)
{
	(void)cudaGetLastError();
	return -1;
}

static cudaMemPool_t create_pool(int dev)
{
	cudaMemPoolProps props;
	cudaMemPool_t pool;
	uint64_t keep = UINT64_MAX;
	int supported = 0;

	if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, dev) !=
	        cudaSuccess ||
	    !supported)
		return NULL;
	memset(&props, 0, sizeof(props));
	props.allocType = cudaMemAllocationTypePinned;
	props.handleTypes = cudaMemHandleTypeNone;
	props.location.type = cudaMemLocationTypeDevice;
	props.location.id = dev;
	if (cudaMemPoolCreate(&pool, &props) != cudaSuccess)
		return NULL;
	if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) != cudaSuccess) {
		cudaMemPoolDestroy(pool);
		return NULL;
	}
	return pool;
}

/* The pool of the current device, created on first use; NULL when there is
 * no device or it cannot have one (the next call tries again). With create
 * false, a device without a pool yet gives NULL and *dev_out >= 0. */
static cudaMemPool_t current_pool(bool create, int *dev_out)
{
	cudaMemPool_t pool;
	int dev = -1;

	*dev_out = -1;
	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= RL_MAX_DEVICES)
		return NULL;
	*dev_out = dev;
	pthread_mutex_lock(&pool_lock);
	pool = pools[dev];
	if (!pool && create)
		pool = pools[dev] = create_pool(dev);
	pthread_mutex_unlock(&pool_lock);
	return pool;
}

extern "C" void *rl_cuda_alloc_async(size_t bytes, void *stream)
{
	void *p = NULL;
	int dev;
	cudaMemPool_t pool = current_pool(true, &dev);

	if (!pool) {
		failed();
		return NULL;
	}
	/* a real, distinct block for 0 bytes too, as the CPU backend gives */
	if (cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, pool, rl_stream(stream)) !=
	    cudaSuccess) {
		failed();
		return NULL;
	}
	return p;
}

extern "C" void rl_cuda_release_async(void *p, void *stream)
{
	if (p && cudaFreeAsync(p, rl_stream(stream)) != cudaSuccess)
		failed();
}

extern "C" void *rl_cuda_alloc(size_t bytes)
{
	return rl_cuda_alloc_async(bytes, NULL);
}

extern "C" void rl_cuda_release(void *p)
{
	rl_cuda_release_async(p, NULL);
}

extern "C" int rl_cuda_zero(void *p, size_t bytes, void *stream)
{
	if (!bytes)
		return 0;
	if (!p)
		return -1;
	if (cudaMemsetAsync(p, 0, bytes, rl_stream(stream)) != cudaSuccess)
		return failed();
	return 0;
}

extern "C" int rl_cuda_to_host(void *host, const void *src, size_t bytes, void *stream)
{
	cudaStream_t st = rl_stream(stream);

	if (!bytes)
		return 0;
	if (!host || !src)
		return -1;
	if (cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
	    cudaStreamSynchronize(st) != cudaSuccess)
		return failed();
	return 0;
}

/* cudaMemcpyAsync returns early from pageable memory only once the data is
 * staged, but from pinned memory it returns before the DMA has read the
 * buffer; the caller cannot know which it passed, and a host buffer reused
 * too early would corrupt the device copy silently. Waiting costs little:
 * uploads are weights, batches and checkpoints, not per-kernel traffic. */
extern "C" int rl_cuda_from_host(void *dst, const void *host, size_t bytes, void *stream)
{
	cudaStream_t st = rl_stream(stream);

	if (!bytes)
		return 0;
	if (!dst || !host)
		return -1;
	if (cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, st) != cudaSuccess ||
	    cudaStreamSynchronize(st) != cudaSuccess)
		return failed();
	return 0;
}

/* cudaMemcpy between overlapping ranges is undefined; the CPU backend's copy
 * is memmove, so an overlapping copy goes through a scratch block. */
extern "C" int rl_cuda_copy(void *dst, const void *src, size_t bytes, void *stream)
{
	cudaStream_t st = rl_stream(stream);
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;

	if (!bytes)
		return 0;
	if (!dst || !src)
		return -1;
	if (d == s)
		return 0;
	if (d < s + bytes && s < d + bytes) {
		void *tmp = rl_cuda_alloc_async(bytes, stream);
		int rc = 0;

		if (!tmp)
			return -1;
		if (cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, st) != cudaSuccess ||
		    cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, st) != cudaSuccess)
			rc = failed();
		rl_cuda_release_async(tmp, stream);
		return rc;
	}
	if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st) != cudaSuccess)
		return failed();
	return 0;
}

extern "C" int rl_cuda_memory_stats(struct rl_cuda_memory_stats *out)
{
	uint64_t used = 0, high = 0, reserved = 0;
	int dev;
	cudaMemPool_t pool;

	if (!out)
		return -1;
	memset(out, 0, sizeof(*out));
	pool = current_pool(false, &dev);
	if (dev < 0)
		return failed();
	if (cudaMemGetInfo(&out->device_free, &out->device_total) != cudaSuccess)
		return failed();
	if (!pool)
		return 0;
	if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess ||
	    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high) != cudaSuccess ||
	    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) !=
	        cudaSuccess)
		return failed();
	out->in_use = (size_t)used;
	out->peak_in_use = (size_t)high;
	out->reserved = (size_t)reserved;
	return 0;
}
