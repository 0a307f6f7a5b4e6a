/* SwiGLU on the device, computed as kernels/cpu/swiglu.c computes it: the
 * sigmoid from exp(-|g|) (exact for either sign of g, flushed to 0 below
 * -87.34), with the exp being a copy of kernels/cpu/fast_exp.h's
 * rl_fast_exp_neg_flush rather than CUDA's expf. Every float step is written
 * unfused (__f*_rn) in the CPU's order, so the two backends agree to the bit
 * wherever the CPU's compiler does not contract either. Elementwise, one
 * grid-stride loop over int64 n. */
#include <stdint.h>

#include "kernels/cuda/common.cuh"
#include "kernels/swiglu.h"

#define RL_SWIGLU_THREADS 256
/* a grid-stride loop needs no more blocks than this to fill any GPU */
#define RL_SWIGLU_MAX_BLOCKS 65536

/* rl_fast_exp_neg_flush: x = n ln2 + r, Cephes' polynomial for e^r, 2^n
 * built in the exponent bits; x <= 0, 0 below -87.34, NaN for NaN. */
static __device__ __forceinline__ float rl_exp_neg_flush(float x)
{
	const float lo = -87.33654f, magic = 12582912.0f;
	float xc = x > lo ? x : lo;
	float n = __fsub_rn(__fadd_rn(__fmul_rn(xc, 1.44269504088896341f), magic), magic);
	float r = __fsub_rn(xc, __fmul_rn(n, 0.693359375f));

	r = __fsub_rn(r, __fmul_rn(n, -2.12194440e-4f));

	float p = 1.9875691500e-4f;

	p = __fadd_rn(__fmul_rn(p, r), 1.3981999507e-3f);
	p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
	p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
	p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
	p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
	p = __fadd_rn(__fadd_rn(__fmul_rn(__fmul_rn(p, r), r), r), 1.0f);

	float y = __fmul_rn(p, __int_as_float(((int)n + 127) << 23));

	return x >= lo ? y : x < lo ? 0.0f : x;
}

static __device__ __forceinline__ float rl_sigmoid(float g)
{
	float e = rl_exp_neg_flush(-fabsf(g));
	float r = __fdiv_rn(1.0f, __fadd_rn(1.0f, e)), er = __fmul_rn(e, r);

	return g >= 0.0f ? r : er;
}

static __global__ void __launch_bounds__(RL_SWIGLU_THREADS)
    rl_swiglu_forward_kernel(float *__restrict__ h, const float *__restrict__ gate,
                             const float *__restrict__ up, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)RL_SWIGLU_THREADS + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * RL_SWIGLU_THREADS) {
		float g = gate[i];

		h[i] = __fmul_rn(__fmul_rn(g, rl_sigmoid(g)), up[i]);
	}
}

/* d silu / dg = s (1 + g (1 - s)) */
static __global__ void __launch_bounds__(RL_SWIGLU_THREADS)
    rl_swiglu_backward_kernel(float *__restrict__ dgate, float *__restrict__ dup,
                              const float *__restrict__ dh, const float *__restrict__ gate,
                              const float *__restrict__ up, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)RL_SWIGLU_THREADS + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * RL_SWIGLU_THREADS) {
		float g = gate[i], s = rl_sigmoid(g), d = dh[i];
		float ds = __fadd_rn(1.0f, __fmul_rn(g, __fsub_rn(1.0f, s)));

		dup[i] = __fadd_rn(dup[i], __fmul_rn(__fmul_rn(d, g), s));
		dgate[i] = __fadd_rn(dgate[i], __fmul_rn(__fmul_rn(__fmul_rn(d, up[i]), s), ds));
	}
}

static unsigned rl_swiglu_blocks(int64_t n)
{
	int64_t b = rl_ceil_div(n, RL_SWIGLU_THREADS);

	return (unsigned)(b < RL_SWIGLU_MAX_BLOCKS ? b : RL_SWIGLU_MAX_BLOCKS);
}

extern "C" int rl_swiglu_forward_cuda(float *h, const float *gate, const float *up, int64_t n,
                                      void *stream)
{
	if (!h || !gate || !up || n < 0)
		return -1;
	if (n == 0)
		return 0;
	rl_swiglu_forward_kernel<<<rl_swiglu_blocks(n), RL_SWIGLU_THREADS, 0, rl_stream(stream)>>>(
	    h, gate, up, n);
	return rl_launched();
}

extern "C" int rl_swiglu_backward_cuda(float *dgate, float *dup, const float *dh, const float *gate,
                                       const float *up, int64_t n, void *stream)
{
	if (!dgate || !dup || !dh || !gate || !up || n < 0)
		return -1;
	if (n == 0)
		return 0;
	rl_swiglu_backward_kernel<<<rl_swiglu_blocks(n), RL_SWIGLU_THREADS, 0, rl_stream(stream)>>>(
	    dgate, dup, dh, gate, up, n);
	return rl_launched();
}
