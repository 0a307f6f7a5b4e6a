/* AdamW on the GPU, rounding for rounding the formula of kernels/cpu/adamw.c
 * (torch.optim.AdamW on fp32 tensors): the scalars are computed in double on
 * the host by the same code, rounded to float once, and each element does
 * the same float operations in the same order. Every step is written as an
 * _rn intrinsic, so nvcc's FMA contraction (on by default) cannot fuse a
 * product into a following add and skip a rounding the CPU makes, and the
 * division and square root are IEEE whatever -prec-div / -prec-sqrt say.
 * Not --use_fast_math: its -ftz flushes the subnormals the CPU keeps.
 *
 * What can remain against the CPU: its "fused" steps (the lerp of m and the
 * addcmul of v) are emulated in double, a*b + c rounded to double and then
 * to float, while __fmaf_rn rounds once, as PyTorch's fma does. The two
 * differ only when the double sum lands exactly on the midpoint between two
 * floats without the exact sum being there (a double-rounding tie, of the
 * order of one element in 2^28 per step): then m or v is one ulp off, and
 * the parameter one ulp of its update off, which is a few ulps of a
 * parameter much smaller than the update. Otherwise the results are the
 * same bits; run to run they are always the same bits (no reductions). */
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/adamw.h"
#include "kernels/cuda/common.cuh"

#define RL_ADAMW_THREADS    256
#define RL_ADAMW_MAX_BLOCKS 8192

/* The per-step scalars, as rl_adamw_step_cpu computes them. */
struct adamw_scalars {
	float decay;         /* 1 - lr wd */
	float lerp_coef;     /* torch's lerp weight: w1, or w1 - 1 when |w1| >= 0.5 */
	float b2, w2;        /* beta2, 1 - beta2 */
	float neg_step_size; /* -lr / (1 - beta1^step) */
	float bc2_sqrt;      /* sqrt(1 - beta2^step) */
	float eps;
	bool small; /* |1 - beta1| < 0.5 */
};

static __device__ __forceinline__ void adamw_one(float &p, float g, float &m, float &v,
                                                 const adamw_scalars &s)
{
	float pd = __fmul_rn(p, s.decay);
	float mi = __fmaf_rn(s.lerp_coef, __fsub_rn(g, m), s.small ? m : g);
	float vi = __fmaf_rn(__fmul_rn(s.w2, g), g, __fmul_rn(v, s.b2));
	float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bc2_sqrt), s.eps);

	p = __fadd_rn(pd, __fdiv_rn(__fmul_rn(s.neg_step_size, mi), denom));
	m = mi;
	v = vi;
}

/* VEC: all four arrays 16-byte aligned; the last n % 4 elements go to the
 * first threads after the float4 part. */
template <bool VEC>
static __global__ void __launch_bounds__(RL_ADAMW_THREADS)
    rl_adamw_kernel(float *__restrict__ param, const float *__restrict__ grad,
                    float *__restrict__ m, float *__restrict__ v, int64_t n, adamw_scalars s)
{
	int64_t t = rl_grid_thread(), stride = rl_grid_stride();
	int64_t head = 0;

	if (VEC) {
		int64_t n4 = n / 4;
		float4 *p4 = reinterpret_cast<float4 *>(param);
		const float4 *g4 = reinterpret_cast<const float4 *>(grad);
		float4 *m4 = reinterpret_cast<float4 *>(m);
		float4 *v4 = reinterpret_cast<float4 *>(v);

		for (int64_t i = t; i < n4; i += stride) {
			float4 p = p4[i], g = g4[i], mi = m4[i], vi = v4[i];

			adamw_one(p.x, g.x, mi.x, vi.x, s);
			adamw_one(p.y, g.y, mi.y, vi.y, s);
			adamw_one(p.z, g.z, mi.z, vi.z, s);
			adamw_one(p.w, g.w, mi.w, vi.w, s);
			p4[i] = p;
			m4[i] = mi;
			v4[i] = vi;
		}
		head = n4 * 4;
	}
	for (int64_t i = head + t; i < n; i += stride) {
		float p = param[i], mi = m[i], vi = v[i];

		adamw_one(p, grad[i], mi, vi, s);
		param[i] = p;
		m[i] = mi;
		v[i] = vi;
	}
}

extern "C" int rl_adamw_step_cuda(float *param, const float *grad, float *m, float *v, int64_t n,
                                  const struct rl_adamw_hparams *hp, int64_t step, void *stream)
{
	if (!param || !grad || !m || !v || !hp || n < 0 || step < 1)
		return -1;
	if (n == 0)
		return 0;

	/* the host code of rl_adamw_step_cpu, line for line */
	double lr = hp->lr, beta1 = hp->beta1, beta2 = hp->beta2;
	adamw_scalars s;
	float w1 = (float)(1.0 - beta1);

	s.decay = (float)(1.0 - lr * (double)hp->weight_decay);
	s.small = fabsf(w1) < 0.5f;
	s.lerp_coef = s.small ? w1 : w1 - 1.0f;
	s.b2 = hp->beta2;
	s.w2 = (float)(1.0 - beta2);
	s.neg_step_size = (float)(-(lr / (1.0 - pow(beta1, (double)step))));
	s.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)step));
	s.eps = hp->eps;

	bool vec = rl_aligned16(param) && rl_aligned16(grad) && rl_aligned16(m) && rl_aligned16(v);
	int blocks = rl_stride_blocks(vec ? n / 4 : n, RL_ADAMW_THREADS, RL_ADAMW_MAX_BLOCKS);
	cudaStream_t st = rl_stream(stream);

	if (vec)
		rl_adamw_kernel<true><<<blocks, RL_ADAMW_THREADS, 0, st>>>(param, grad, m, v, n, s);
	else
		rl_adamw_kernel<false>
		    <<<blocks, RL_ADAMW_THREADS, 0, st>>>(param, grad, m, v, n, s);
	return rl_launched();
}
