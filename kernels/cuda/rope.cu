/* RoPE on the device, the steps of kernels/cpu/rope.c: the angle is the fp32
 * product (float)pos * inv_freq[i], so it is the CPU's to the bit, and the
 * rotation is two unfused products and a sum (__f*_rn), as the CPU computes
 * it. Only cos and sin differ: sincosf is CUDA's accurate one (not __sinf,
 * which is wrong by far more at the angles of long sequences), within 2 ulp
 * over the whole range against glibc's cosf/sinf within 1, so an output may
 * be off by a few ulp of |x_lo| + |x_hi|.
 *
 * One thread per (token, frequency): it takes cos and sin once and rotates
 * that channel pair in every head; consecutive threads hold consecutive
 * channels, so the loads of a head coalesce. A bf16 x (T = uint16_t) is
 * widened on load and each output rounded once. */
#include <stdint.h>

#include "kernels/cuda/common.cuh"
#include "kernels/rope.h"

#define RL_ROPE_THREADS 256
/* a grid-stride loop needs no more blocks than this to fill any GPU */
#define RL_ROPE_MAX_BLOCKS 65536

template <typename T>
static __global__ void __launch_bounds__(RL_ROPE_THREADS)
    rl_rope_kernel(T *__restrict__ x, const int32_t *__restrict__ pos,
                   const float *__restrict__ inv_freq, int n, int n_heads, int head_dim, float sign)
{
	const int half = head_dim / 2;
	const int64_t total = (int64_t)n * half;

	for (int64_t k = blockIdx.x * (int64_t)RL_ROPE_THREADS + threadIdx.x; k < total;
	     k += (int64_t)gridDim.x * RL_ROPE_THREADS) {
		int64_t t = k / half;
		int i = (int)(k - t * half);
		float a = (float)pos[t] * inv_freq[i];
		float c, s;

		sincosf(a, &s, &c);
		s = sign * s;

		T *lo = x + (size_t)t * n_heads * head_dim + i;

		for (int h = 0; h < n_heads; h++, lo += head_dim) {
			float u = rl_widen(lo[0]), v = rl_widen(lo[half]);

			rl_narrow_store(lo, __fsub_rn(__fmul_rn(u, c), __fmul_rn(v, s)));
			rl_narrow_store(lo + half, __fadd_rn(__fmul_rn(v, c), __fmul_rn(u, s)));
		}
	}
}

/* The CPU op's checks, in its order: a NULL pointer is allowed when n == 0. */
static int rl_rope_apply(struct rl_buf x, const int32_t *pos, const float *inv_freq, int n,
                         int n_heads, int head_dim, float sign, void *stream)
{
	if (n < 0 || n_heads <= 0 || head_dim <= 0 || head_dim % 2 || !rl_act_type_ok(x.t))
		return -1;
	if (n == 0)
		return 0;
	if (!x.p || !pos || !inv_freq)
		return -1;

	int64_t blocks = rl_ceil_div((int64_t)n * (head_dim / 2), RL_ROPE_THREADS);
	unsigned grid = (unsigned)(blocks < RL_ROPE_MAX_BLOCKS ? blocks : RL_ROPE_MAX_BLOCKS);
	cudaStream_t st = rl_stream(stream);

	if (x.t == RL_BF16)
		rl_rope_kernel<uint16_t><<<grid, RL_ROPE_THREADS, 0, st>>>(
		    (uint16_t *)x.p, pos, inv_freq, n, n_heads, head_dim, sign);
	else
		rl_rope_kernel<float><<<grid, RL_ROPE_THREADS, 0, st>>>((float *)x.p, pos, inv_freq,
		                                                        n, n_heads, head_dim, sign);
	return rl_launched();
}

extern "C" int rl_rope_forward_cuda(struct rl_buf x, const int32_t *pos, const float *inv_freq,
                                    int n, int n_heads, int head_dim, void *stream)
{
	return rl_rope_apply(x, pos, inv_freq, n, n_heads, head_dim, 1.0f, stream);
}

/* The rotation is orthogonal, so its transpose is the rotation by -angle. */
extern "C" int rl_rope_backward_cuda(struct rl_buf dx, const int32_t *pos, const float *inv_freq,
                                     int n, int n_heads, int head_dim, void *stream)
{
	return rl_rope_apply(dx, pos, inv_freq, n, n_heads, head_dim, -1.0f, stream);
}
