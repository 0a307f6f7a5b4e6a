/* RMSNorm forward: one block per row. Each thread strides over the row, so
 * loads of consecutive threads coalesce; the sum of squares is reduced within
 * each warp by shuffles, then across warps through shared memory. bf16 rows
 * (T = uint16_t) take the scalar path, widened on load and rounded once on
 * store. */
#include <stdint.h>

#include "kernels/cuda/common.cuh"
#include "kernels/rmsnorm.h"

/* A multiple of the warp size: the cross-warp step assumes whole warps. */
#define RL_RMSNORM_THREADS 256

/* VEC (fp32 only): dim % 4 == 0 and x, y, weight 16-byte aligned, so every
 * row starts aligned and can be read as float4. */
template <bool VEC, typename T>
static __global__ void __launch_bounds__(RL_RMSNORM_THREADS)
    rl_rmsnorm_forward_kernel(T *__restrict__ y, float *__restrict__ rstd, const T *__restrict__ x,
                              const T *__restrict__ weight, int dim, float eps)
{
	size_t row = blockIdx.x;
	const T *xr = x + row * dim;
	T *yr = y + row * dim;
	float ss = 0.0f;

	if (VEC) {
		const float4 *x4 = reinterpret_cast<const float4 *>(xr);
		for (int i = threadIdx.x; i < dim / 4; i += RL_RMSNORM_THREADS) {
			float4 v = x4[i];
			ss = fmaf(v.x, v.x, ss);
			ss = fmaf(v.y, v.y, ss);
			ss = fmaf(v.z, v.z, ss);
			ss = fmaf(v.w, v.w, ss);
		}
	} else {
		for (int i = threadIdx.x; i < dim; i += RL_RMSNORM_THREADS) {
			float v = rl_widen(xr[i]);

			ss = fmaf(v, v, ss);
		}
	}
	ss = rl_block_sum<RL_RMSNORM_THREADS>(ss);

	/* Not rsqrtf: once per row is cheap, and the correctly rounded form
	 * keeps rstd within an ulp of the CPU reference. */
	float s = 1.0f / sqrtf(ss / (float)dim + eps);
	if (threadIdx.x == 0 && rstd)
		rstd[row] = s;

	if (VEC) {
		const float4 *x4 = reinterpret_cast<const float4 *>(xr);
		const float4 *w4 = reinterpret_cast<const float4 *>(weight);
		float4 *y4 = reinterpret_cast<float4 *>(yr);
		for (int i = threadIdx.x; i < dim / 4; i += RL_RMSNORM_THREADS) {
			float4 v = x4[i], w = w4[i];
			y4[i] =
			    make_float4(v.x * s * w.x, v.y * s * w.y, v.z * s * w.z, v.w * s * w.w);
		}
	} else {
		for (int i = threadIdx.x; i < dim; i += RL_RMSNORM_THREADS)
			rl_narrow_store(yr + i, rl_widen(xr[i]) * s * rl_widen(weight[i]));
	}
}

extern "C" int rl_rmsnorm_forward_cuda(struct rl_buf y, float *rstd, struct rl_cbuf x,
                                       struct rl_cbuf weight, int rows, int dim, float eps,
                                       void *stream)
{
	if (!y.p || !x.p || !weight.p || rows < 0 || dim <= 0 ||
	    !rl_rmsnorm_types_ok(y.t, x.t, weight.t))
		return -1;
	if (rows == 0)
		return 0;

	cudaStream_t st = rl_stream(stream);

	if (x.t == RL_BF16) {
		rl_rmsnorm_forward_kernel<false, uint16_t><<<rows, RL_RMSNORM_THREADS, 0, st>>>(
		    (uint16_t *)y.p, rstd, (const uint16_t *)x.p, (const uint16_t *)weight.p, dim,
		    eps);
		return rl_launched();
	}

	float *yf = (float *)y.p;
	const float *xf = (const float *)x.p, *wf = (const float *)weight.p;
	bool vec = dim % 4 == 0 && rl_aligned16(xf) && rl_aligned16(yf) && rl_aligned16(wf);

	if (vec)
		rl_rmsnorm_forward_kernel<true, float>
		    <<<rows, RL_RMSNORM_THREADS, 0, st>>>(yf, rstd, xf, wf, dim, eps);
	else
		rl_rmsnorm_forward_kernel<false, float>
		    <<<rows, RL_RMSNORM_THREADS, 0, st>>>(yf, rstd, xf, wf, dim, eps);
	return rl_launched();
}
