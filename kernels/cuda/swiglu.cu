/* SwiGLU on the device, computed as kernels/cpu/swiglu.c computes it: the
 * sigmoid from exp(-|g|) (exact for either sign of g, flushed to 0 below
 * -87.34), with the exp being a copy of kernels/cpu/fast_exp.h's
 * rl_fast_exp_neg_flush rather than CUDA's expf. Every float step is written
 * unfused (__f*_rn) in the CPU's order, so the two backends agree to the bit
 * wherever the CPU's compiler does not contract either. Elementwise, one
 * grid-stride loop over int64 n. bf16 buffers (T = uint16_t) are widened
 * on load and rounded once on store, as the CPU op rounds them, so the two
 * agree to the bit there too. */
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

template <typename T>
static __global__ void __launch_bounds__(RL_SWIGLU_THREADS)
    rl_swiglu_forward_kernel(T *__restrict__ h, const T *__restrict__ gate,
                             const T *__restrict__ up, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)RL_SWIGLU_THREADS + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * RL_SWIGLU_THREADS) {
		float g = rl_widen(gate[i]);

		rl_narrow_store(h + i, __fmul_rn(__fmul_rn(g, rl_sigmoid(g)), rl_widen(up[i])));
	}
}

/* d silu / dg = s (1 + g (1 - s)) */
template <typename T>
static __global__ void __launch_bounds__(RL_SWIGLU_THREADS)
    rl_swiglu_backward_kernel(T *__restrict__ dgate, T *__restrict__ dup, const T *__restrict__ dh,
                              const T *__restrict__ gate, const T *__restrict__ up, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)RL_SWIGLU_THREADS + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * RL_SWIGLU_THREADS) {
		float g = rl_widen(gate[i]), s = rl_sigmoid(g), d = rl_widen(dh[i]);
		float ds = __fadd_rn(1.0f, __fmul_rn(g, __fsub_rn(1.0f, s)));
		float u = rl_widen(up[i]);

		rl_narrow_store(dup + i,
		                __fadd_rn(rl_widen(dup[i]), __fmul_rn(__fmul_rn(d, g), s)));
		rl_narrow_store(dgate + i, __fadd_rn(rl_widen(dgate[i]),
		                                     __fmul_rn(__fmul_rn(__fmul_rn(d, u), s), ds)));
	}
}

static unsigned rl_swiglu_blocks(int64_t n)
{
	int64_t b = rl_ceil_div(n, RL_SWIGLU_THREADS);

	return (unsigned)(b < RL_SWIGLU_MAX_BLOCKS ? b : RL_SWIGLU_MAX_BLOCKS);
}

extern "C" int rl_swiglu_forward_cuda(struct rl_buf h, struct rl_cbuf gate, struct rl_cbuf up,
                                      int64_t n, void *stream)
{
	if (!h.p || !gate.p || !up.p || n < 0 || !rl_swiglu_types_ok(h.t, gate.t, up.t, h.t, h.t))
		return -1;
	if (n == 0)
		return 0;

	cudaStream_t st = rl_stream(stream);

	if (h.t == RL_BF16)
		rl_swiglu_forward_kernel<uint16_t>
		    <<<rl_swiglu_blocks(n), RL_SWIGLU_THREADS, 0, st>>>(
		        (uint16_t *)h.p, (const uint16_t *)gate.p, (const uint16_t *)up.p, n);
	else
		rl_swiglu_forward_kernel<float><<<rl_swiglu_blocks(n), RL_SWIGLU_THREADS, 0, st>>>(
		    (float *)h.p, (const float *)gate.p, (const float *)up.p, n);
	return rl_launched();
}

extern "C" int rl_swiglu_backward_cuda(struct rl_buf dgate, struct rl_buf dup, struct rl_cbuf dh,
                                       struct rl_cbuf gate, struct rl_cbuf up, int64_t n,
                                       void *stream)
{
	if (!dgate.p || !dup.p || !dh.p || !gate.p || !up.p || n < 0 ||
	    !rl_swiglu_types_ok(dgate.t, dup.t, dh.t, gate.t, up.t))
		return -1;
	if (n == 0)
		return 0;

	cudaStream_t st = rl_stream(stream);

	if (dgate.t == RL_BF16)
		rl_swiglu_backward_kernel<uint16_t>
		    <<<rl_swiglu_blocks(n), RL_SWIGLU_THREADS, 0, st>>>(
		        (uint16_t *)dgate.p, (uint16_t *)dup.p, (const uint16_t *)dh.p,
		        (const uint16_t *)gate.p, (const uint16_t *)up.p, n);
	else
		rl_swiglu_backward_kernel<float><<<rl_swiglu_blocks(n), RL_SWIGLU_THREADS, 0, st>>>(
		    (float *)dgate.p, (float *)dup.p, (const float *)dh.p, (const float *)gate.p,
		    (const float *)up.p, n);
	return rl_launched();
}
