/* The attention kernels' tile map and persistent grid (attention_common.cuh).
 * The map is one small block-wide scan over the chunk table, so that the
 * main kernels find a tile's chunk by binary search without the host ever
 * reading the table back. */
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/memory.h"

#define RL_ATTN_MAP_THREADS 256

/* Inclusive sum over the block, for whole warps; every thread gets its
 * prefix. */
static __device__ int rl_attn_block_scan(int v, int *warp_tot)
{
	const int lane = threadIdx.x % RL_WARP, w = threadIdx.x / RL_WARP;

	for (int o = 1; o < RL_WARP; o <<= 1) {
		const int y = __shfl_up_sync(0xffffffffu, v, o);

		if (lane >= o)
			v += y;
	}
	if (lane == RL_WARP - 1)
		warp_tot[w] = v;
	__syncthreads();
	if (w == 0) {
		int t = lane < RL_ATTN_MAP_THREADS / RL_WARP ? warp_tot[lane] : 0;

		for (int o = 1; o < RL_WARP; o <<= 1) {
			const int y = __shfl_up_sync(0xffffffffu, t, o);

			if (lane >= o)
				t += y;
		}
		if (lane < RL_ATTN_MAP_THREADS / RL_WARP)
			warp_tot[lane] = t;
	}
	__syncthreads();
	return v + (w > 0 ? warp_tot[w - 1] : 0);
}

/* One block: thread i takes a contiguous run of chunks, so the scan's
 * order, and the map, are the same on every run. */
static __global__ void __launch_bounds__(RL_ATTN_MAP_THREADS)
    rl_attn_map_kernel(int *ts, struct rl_attn_src src, int bq)
{
	__shared__ int warp_tot[RL_ATTN_MAP_THREADS / RL_WARP];
	__shared__ int warp_max[RL_ATTN_MAP_THREADS / RL_WARP];
	const int per = (src.n + RL_ATTN_MAP_THREADS - 1) / RL_ATTN_MAP_THREADS;
	const int c0 = min(src.n, (int)threadIdx.x * per), c1 = min(src.n, c0 + per);
	int tiles = 0, kend = 0;

	for (int c = c0; c < c1; c++) {
		const struct rl_attn_chunk ch = rl_attn_get(src, c);

		tiles += (ch.len + bq - 1) / bq;
		if (ch.len > 0)
			kend = max(kend, ch.ks + ch.off + ch.len);
	}

	int start = rl_attn_block_scan(tiles, warp_tot) - tiles;

	for (int c = c0; c < c1; c++) {
		const struct rl_attn_chunk ch = rl_attn_get(src, c);

		ts[c] = start;
		start += (ch.len + bq - 1) / bq;
	}
	if (threadIdx.x == RL_ATTN_MAP_THREADS - 1)
		ts[src.n] = start;

	for (int o = RL_WARP / 2; o > 0; o >>= 1)
		kend = max(kend, __shfl_xor_sync(0xffffffffu, kend, o));
	if (threadIdx.x % RL_WARP == 0)
		warp_max[threadIdx.x / RL_WARP] = kend;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int w = 1; w < RL_ATTN_MAP_THREADS / RL_WARP; w++)
			kend = max(kend, warp_max[w]);
		ts[src.n + 1] = kend;
	}
}

int *rl_attn_build_map(const struct rl_attn_src *src, int bq, cudaStream_t st)
{
	int *ts = (int *)rl_cuda_alloc_async(((size_t)src->n + 2) * sizeof(int), st);

	if (!ts)
		return NULL;
	rl_attn_map_kernel<<<1, RL_ATTN_MAP_THREADS, 0, st>>>(ts, *src, bq);
	if (rl_launched() != 0) {
		rl_cuda_release_async(ts, st);
		return NULL;
	}
	return ts;
}

void rl_attn_release_map(int *ts, cudaStream_t st)
{
	rl_cuda_release_async(ts, st);
}

/* multiprocessors per device, 0 until asked */
static int rl_attn_sms[RL_ATTN_MAX_DEVICES];

int rl_attn_grid(const void *kernel, size_t smem, int *cache, int *grid)
{
	int dev, sms, blocks, optin;

	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= RL_ATTN_MAX_DEVICES)
		goto fail;
	/* Benign races: two threads configuring the same kernel store the
	 * same values. */
	blocks = __atomic_load_n(&cache[dev], __ATOMIC_ACQUIRE);
	sms = __atomic_load_n(&rl_attn_sms[dev], __ATOMIC_ACQUIRE);
	if (blocks > 0 && sms > 0) {
		*grid = blocks * sms;
		return 0;
	}
	if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
	        cudaSuccess ||
	    sms <= 0 || smem > (size_t)optin)
		goto fail;
	if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
	        cudaSuccess ||
	    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, RL_ATTN_THREADS, smem) !=
	        cudaSuccess ||
	    blocks <= 0)
		goto fail;
	__atomic_store_n(&rl_attn_sms[dev], sms, __ATOMIC_RELEASE);
	__atomic_store_n(&cache[dev], blocks, __ATOMIC_RELEASE);
	*grid = blocks * sms;
	return 0;
fail:
	/* the failed call's error is not the next launch's */
	(void)cudaGetLastError();
	return -1;
}
