/* What every CUDA kernel file shares: the warp and block reductions, the
 * alignment test of the vector paths and the launch-result convention of the
 * op table (0, or -1 on a launch error). Device code only sees this header;
 * the public contracts stay in kernels/<op>.h.
 * defines: RL_WARP, rl_warp_sum, rl_warp_max, rl_block_sum, rl_aligned16,
 * rl_ceil_div, rl_stream, rl_launched, rl_grid_thread, rl_grid_stride,
 * rl_stride_blocks, rl_widen, rl_bf16_rne, rl_narrow_store, rl_gemm_typed,
 * rl_gemm_f32 */
#ifndef RL_KERNELS_CUDA_COMMON_CUH
#define RL_KERNELS_CUDA_COMMON_CUH

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime.h>

#include "kernels/cuda/gemm.h"

#define RL_WARP 32

static __device__ __forceinline__ float rl_warp_sum(float v)
{
	for (int o = RL_WARP / 2; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

static __device__ __forceinline__ double rl_warp_sum(double v)
{
	for (int o = RL_WARP / 2; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

static __device__ __forceinline__ float rl_warp_max(float v)
{
	for (int o = RL_WARP / 2; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* The sum over a block of THREADS threads (a multiple of the warp size),
 * given to every thread, so no broadcast is needed afterwards. The butterfly
 * order is fixed, so the result is the same bits on every run. The scratch
 * is reused after a barrier, so one block may call this more than once. */
template <int THREADS, typename T> static __device__ T rl_block_sum(T v)
{
	static_assert(THREADS % RL_WARP == 0 && THREADS <= RL_WARP * RL_WARP,
	              "whole warps, at most one warp of warp sums");
	__shared__ T warp_sums[THREADS / RL_WARP];
	int lane = threadIdx.x % RL_WARP;
	int warp = threadIdx.x / RL_WARP;

	v = rl_warp_sum(v);
	__syncthreads(); /* an earlier call may still be reading warp_sums */
	if (lane == 0)
		warp_sums[warp] = v;
	__syncthreads();
	v = lane < THREADS / RL_WARP ? warp_sums[lane] : T(0);
	return rl_warp_sum(v);
}

/* bf16 held as its bit pattern (uint16_t, as kernels/dtype.h and the CPU
 * backend hold it): widened exactly, and rounded to nearest even by the
 * integer steps of rl_f32_to_bf16, so a NaN's bits too are the CPU's. The
 * overloads on float let one template read and write either type. */
static __device__ __forceinline__ float rl_widen(float v)
{
	return v;
}

static __device__ __forceinline__ float rl_widen(uint16_t h)
{
	return __uint_as_float((uint32_t)h << 16);
}

static __device__ __forceinline__ uint16_t rl_bf16_rne(float f)
{
	uint32_t u = __float_as_uint(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static __device__ __forceinline__ void rl_narrow_store(float *p, float v)
{
	*p = v;
}

static __device__ __forceinline__ void rl_narrow_store(uint16_t *p, float v)
{
	*p = rl_bf16_rne(v);
}

static inline bool rl_aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

static inline __host__ __device__ int64_t rl_ceil_div(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* The op table's stream argument: NULL is the legacy default stream, which
 * the NCCL backend also uses, so both see one order of work. */
static inline cudaStream_t rl_stream(void *stream)
{
	return stream ? (cudaStream_t)stream : cudaStreamLegacy;
}

/* After a launch: 0, or -1 when the launch failed (bad configuration, no
 * device). Asynchronous faults surface at the next synchronising call. */
static inline int rl_launched(void)
{
	return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* A 1-D grid-stride loop: this thread's first index and the stride. */
static __device__ __forceinline__ int64_t rl_grid_thread(void)
{
	return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

static __device__ __forceinline__ int64_t rl_grid_stride(void)
{
	return (int64_t)gridDim.x * blockDim.x;
}

/* The blocks of threads threads for a grid-stride loop over work items:
 * one item a thread, at least one block, at most max_blocks. */
static inline int rl_stride_blocks(int64_t work, int threads, int max_blocks)
{
	int64_t b = rl_ceil_div(work, threads);

	return (int)(b < 1 ? 1 : b > max_blocks ? max_blocks : b);
}

/* C [m, n] = alpha op(A) op(B) + beta C (+ bias) on rl_cuda_gemm (its
 * conventions): A and B of ab_type, C (and the bias) of c_type, TF32 off.
 * 0 or -1. */
static inline int rl_gemm_typed(int m, int n, int k, bool trans_a, const void *a, int lda,
                                bool trans_b, const void *b, int ldb, void *c, int ldc, float alpha,
                                float beta, const void *bias, enum rl_dtype ab_type,
                                enum rl_dtype c_type, void *stream)
{
	struct rl_gemm g;

	memset(&g, 0, sizeof(g));
	g.m = m;
	g.n = n;
	g.k = k;
	g.trans_a = trans_a;
	g.a = a;
	g.lda = lda;
	g.trans_b = trans_b;
	g.b = b;
	g.ldb = ldb;
	g.c = c;
	g.ldc = ldc;
	g.alpha = alpha;
	g.beta = beta;
	g.bias = bias;
	g.ab_type = ab_type;
	g.c_type = c_type;
	g.tf32 = false;
	return rl_cuda_gemm(&g, stream, NULL, 0);
}

/* The same, all fp32: the product the CPU references compute. */
static inline int rl_gemm_f32(int m, int n, int k, bool trans_a, const float *a, int lda,
                              bool trans_b, const float *b, int ldb, float *c, int ldc, float alpha,
                              float beta, const float *bias, void *stream)
{
	return rl_gemm_typed(m, n, k, trans_a, a, lda, trans_b, b, ldb, c, ldc, alpha, beta, bias,
	                     RL_F32, RL_F32, stream);
}

#endif
