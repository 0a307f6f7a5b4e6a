/* Elementwise vector ops on the GPU: residual adds, gradient scaling, and the
 * sum of squares behind global grad-norm clipping.
 *
 * add and scale are grid-stride loops over float4 when every pointer is
 * 16-byte aligned (the last n % 4 elements by the first threads), over
 * floats otherwise. sum_squares must give the same bits on every run, so it
 * has no atomics: the grid is a function of n alone, each thread adds its
 * elements in a fixed order, each block writes one partial, and a second
 * one-block kernel adds the partials in a fixed order into *out. */
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/memory.h"
#include "kernels/vector.h"

#define RL_VEC_THREADS 256
/* Enough blocks to fill any GPU we run on, few enough that the grid-stride
 * loops do some work per thread. */
#define RL_VEC_MAX_BLOCKS 8192
/* sum_squares: blocks of partials, a fixed count for a given n */
#define RL_SS_THREADS    256
#define RL_SS_MAX_BLOCKS 1024

static __global__ void __launch_bounds__(RL_VEC_THREADS)
    rl_add_kernel(float *__restrict__ y, const float *__restrict__ x, int64_t n, bool vec)
{
	int64_t t = rl_grid_thread(), stride = rl_grid_stride();
	int64_t head = 0;

	if (vec) {
		int64_t n4 = n / 4;
		float4 *y4 = reinterpret_cast<float4 *>(y);
		const float4 *x4 = reinterpret_cast<const float4 *>(x);

		for (int64_t i = t; i < n4; i += stride) {
			float4 a = y4[i], b = x4[i];

			a.x += b.x;
			a.y += b.y;
			a.z += b.z;
			a.w += b.w;
			y4[i] = a;
		}
		head = n4 * 4;
	}
	for (int64_t i = head + t; i < n; i += stride)
		y[i] += x[i];
}

static __global__ void __launch_bounds__(RL_VEC_THREADS)
    rl_scale_kernel(float *__restrict__ x, int64_t n, float s, bool vec)
{
	int64_t t = rl_grid_thread(), stride = rl_grid_stride();
	int64_t head = 0;

	if (vec) {
		int64_t n4 = n / 4;
		float4 *x4 = reinterpret_cast<float4 *>(x);

		for (int64_t i = t; i < n4; i += stride) {
			float4 a = x4[i];

			a.x *= s;
			a.y *= s;
			a.z *= s;
			a.w *= s;
			x4[i] = a;
		}
		head = n4 * 4;
	}
	for (int64_t i = head + t; i < n; i += stride)
		x[i] *= s;
}

/* y[i] = y[i] + x[i] on bf16, rounded once: the CPU op's bits. */
static __global__ void __launch_bounds__(RL_VEC_THREADS)
    rl_add_bf16_kernel(uint16_t *__restrict__ y, const uint16_t *__restrict__ x, int64_t n)
{
	for (int64_t i = rl_grid_thread(); i < n; i += rl_grid_stride())
		rl_narrow_store(y + i, __fadd_rn(rl_widen(y[i]), rl_widen(x[i])));
}

extern "C" int rl_add_cuda(struct rl_buf yb, struct rl_cbuf xb, int64_t n, void *stream)
{
	if (!yb.p || !xb.p || n < 0 || !rl_act_type_ok(yb.t) || xb.t != yb.t)
		return -1;
	if (n == 0)
		return 0;
	if (yb.t == RL_BF16) {
		rl_add_bf16_kernel<<<rl_stride_blocks(n, RL_VEC_THREADS, RL_VEC_MAX_BLOCKS),
		                     RL_VEC_THREADS, 0, rl_stream(stream)>>>(
		    (uint16_t *)yb.p, (const uint16_t *)xb.p, n);
		return rl_launched();
	}

	float *y = (float *)yb.p;
	const float *x = (const float *)xb.p;
	bool vec = rl_aligned16(y) && rl_aligned16(x);

	rl_add_kernel<<<rl_stride_blocks(vec ? n / 4 : n, RL_VEC_THREADS, RL_VEC_MAX_BLOCKS),
	                RL_VEC_THREADS, 0, rl_stream(stream)>>>(y, x, n, vec);
	return rl_launched();
}

extern "C" int rl_scale_cuda(float *x, int64_t n, float s, void *stream)
{
	if (!x || n < 0)
		return -1;
	if (n == 0)
		return 0;

	bool vec = rl_aligned16(x);

	rl_scale_kernel<<<rl_stride_blocks(vec ? n / 4 : n, RL_VEC_THREADS, RL_VEC_MAX_BLOCKS),
	                  RL_VEC_THREADS, 0, rl_stream(stream)>>>(x, n, s, vec);
	return rl_launched();
}

/* __float2bfloat16_rn rounds to nearest, ties to even, and keeps a NaN a
 * NaN, as rl_f32_to_bf16 does; the payload bits of a NaN may differ, which
 * the model never produces on purpose. */
static __global__ void __launch_bounds__(RL_VEC_THREADS)
    rl_round_bf16_kernel(float *y, const float *x, int64_t n)
{
	int64_t t = rl_grid_thread(), stride = rl_grid_stride();

	for (int64_t i = t; i < n; i += stride)
		y[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

extern "C" int rl_round_bf16_cuda(float *y, const float *x, int64_t n, void *stream)
{
	if (!y || !x || n < 0)
		return -1;
	if (n == 0)
		return 0;
	rl_round_bf16_kernel<<<rl_stride_blocks(n, RL_VEC_THREADS, RL_VEC_MAX_BLOCKS),
	                       RL_VEC_THREADS, 0, rl_stream(stream)>>>(y, x, n);
	return rl_launched();
}

static __global__ void __launch_bounds__(RL_VEC_THREADS)
    rl_to_bf16_kernel(uint16_t *__restrict__ y, const float *__restrict__ x, int64_t n)
{
	int64_t t = rl_grid_thread(), stride = rl_grid_stride();

	for (int64_t i = t; i < n; i += stride)
		y[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
}

static __global__ void __launch_bounds__(RL_VEC_THREADS)
    rl_from_bf16_kernel(float *__restrict__ y, const uint16_t *__restrict__ x, int64_t n)
{
	int64_t t = rl_grid_thread(), stride = rl_grid_stride();

	for (int64_t i = t; i < n; i += stride)
		y[i] = __bfloat162float(__ushort_as_bfloat16(x[i]));
}

extern "C" int rl_to_bf16_cuda(uint16_t *y, const float *x, int64_t n, void *stream)
{
	if (!y || !x || n < 0)
		return -1;
	if (n == 0)
		return 0;
	rl_to_bf16_kernel<<<rl_stride_blocks(n, RL_VEC_THREADS, RL_VEC_MAX_BLOCKS), RL_VEC_THREADS,
	                    0, rl_stream(stream)>>>(y, x, n);
	return rl_launched();
}

extern "C" int rl_from_bf16_cuda(float *y, const uint16_t *x, int64_t n, void *stream)
{
	if (!y || !x || n < 0)
		return -1;
	if (n == 0)
		return 0;
	rl_from_bf16_kernel<<<rl_stride_blocks(n, RL_VEC_THREADS, RL_VEC_MAX_BLOCKS),
	                      RL_VEC_THREADS, 0, rl_stream(stream)>>>(y, x, n);
	return rl_launched();
}

/* Thread t of the grid takes the groups of four elements t, t + T, ... (T
 * threads in all) and adds their squares in element order; VEC only changes
 * how a whole group is loaded, not which thread adds it or in what order, so
 * the sum is the same bits whatever the alignment of x. A product of two
 * floats is exact in double, so the only roundings are the additions. */
template <bool VEC>
static __global__ void __launch_bounds__(RL_SS_THREADS)
    rl_sum_squares_partial(double *__restrict__ partial, const float *__restrict__ x, int64_t n)
{
	int64_t t = (int64_t)blockIdx.x * RL_SS_THREADS + threadIdx.x;
	int64_t stride = (int64_t)gridDim.x * RL_SS_THREADS;
	int64_t groups = rl_ceil_div(n, 4);
	double acc = 0.0;

	for (int64_t g = t; g < groups; g += stride) {
		int64_t i = g * 4;

		if (VEC && i + 4 <= n) {
			float4 v = reinterpret_cast<const float4 *>(x)[g];

			acc += (double)v.x * v.x;
			acc += (double)v.y * v.y;
			acc += (double)v.z * v.z;
			acc += (double)v.w * v.w;
		} else {
			for (int64_t k = i; k < i + 4 && k < n; k++)
				acc += (double)x[k] * x[k];
		}
	}
	acc = rl_block_sum<RL_SS_THREADS>(acc);
	if (threadIdx.x == 0)
		partial[blockIdx.x] = acc;
}

/* One block: thread t adds partials t, t + THREADS, ... in order, then the
 * fixed butterfly of rl_block_sum. */
static __global__ void __launch_bounds__(RL_SS_THREADS)
    rl_sum_squares_final(double *__restrict__ out, const double *__restrict__ partial, int nb)
{
	double acc = 0.0;

	for (int b = threadIdx.x; b < nb; b += RL_SS_THREADS)
		acc += partial[b];
	acc = rl_block_sum<RL_SS_THREADS>(acc);
	if (threadIdx.x == 0)
		*out += acc;
}

extern "C" int rl_sum_squares_cuda(double *out, const float *x, int64_t n, void *stream)
{
	if (!out || !x || n < 0)
		return -1;
	if (n == 0)
		return 0;

	/* a function of n alone: so are the grid and the order of additions */
	int64_t nb = rl_ceil_div(rl_ceil_div(n, 4), RL_SS_THREADS);
	nb = nb > RL_SS_MAX_BLOCKS ? RL_SS_MAX_BLOCKS : nb;

	cudaStream_t st = rl_stream(stream);
	/* ordered on the op's stream: released after the kernels that use it,
	 * reused only by work queued after them */
	double *partial = (double *)rl_cuda_alloc_async((size_t)nb * sizeof(double), stream);
	int rc;

	if (!partial)
		return -1;
	if (rl_aligned16(x))
		rl_sum_squares_partial<true><<<(int)nb, RL_SS_THREADS, 0, st>>>(partial, x, n);
	else
		rl_sum_squares_partial<false><<<(int)nb, RL_SS_THREADS, 0, st>>>(partial, x, n);
	rc = rl_launched();
	if (rc == 0) {
		rl_sum_squares_final<<<1, RL_SS_THREADS, 0, st>>>(out, partial, (int)nb);
		rc = rl_launched();
	}
	rl_cuda_release_async(partial, stream);
	return rc;
}
