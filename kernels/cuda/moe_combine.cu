/* The weighted combine of each token's expert outputs and its backward.
 *
 * The forward is one block a token, each thread a column, adding the k
 * slots in order. The products and sums are rounded one at a time
 * (__fmul_rn, __fadd_rn): nvcc would otherwise fuse them into an fma, and
 * the CPU reference (C11, no contraction) rounds each step, so the two agree
 * to the bit where the CPU's compiler does not fuse either.
 *
 * The backward is one warp a (token, slot) pair: the weight's gradient is a
 * dot product over dim in double (as the CPU's), each lane summing its
 * columns in order and the lanes combined by a fixed butterfly, so a
 * repeated call gives the same bits; the same warp adds weight x dout into
 * the slot's row of dy, which no other pair touches (no slot appears
 * twice), so no atomics are needed. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/moe.h"

#define RL_COMBINE_THREADS 128
#define RL_COMBINE_WARPS   8 /* backward: pairs a block */
#define RL_COMBINE_BLOCKS  (1 << 20)

static __global__ void __launch_bounds__(RL_COMBINE_THREADS)
    rl_combine_forward_kernel(float *out, const float *__restrict__ y,
                              const int32_t *__restrict__ slot, const float *__restrict__ weight,
                              int k, int dim)
{
	int64_t t = blockIdx.x;
	const int32_t *s = slot + t * k;
	const float *wt = weight + t * k;
	float *o = out + t * dim;

	for (int c = threadIdx.x; c < dim; c += RL_COMBINE_THREADS) {
		float acc = 0.0f;

		for (int j = 0; j < k; j++) {
			int32_t sl = s[j];

			/* a slot of -1 adds nothing, and its weight is not read */
			if (sl < 0)
				continue;
			acc = __fadd_rn(acc, __fmul_rn(wt[j], y[(int64_t)sl * dim + c]));
		}
		o[c] = acc;
	}
}

static __global__ void __launch_bounds__(RL_COMBINE_WARPS *RL_WARP)
    rl_combine_backward_kernel(float *dy, float *dweight, const float *__restrict__ dout,
                               const float *__restrict__ y, const int32_t *__restrict__ slot,
                               const float *__restrict__ weight, int64_t pairs, int k, int dim)
{
	int lane = threadIdx.x % RL_WARP;
	int64_t stride = (int64_t)gridDim.x * RL_COMBINE_WARPS;

	/* i is the same for the whole warp, so the warp sum below has all 32
	 * lanes and the skip of a -1 slot is taken by all of them */
	for (int64_t i = (int64_t)blockIdx.x * RL_COMBINE_WARPS + threadIdx.x / RL_WARP; i < pairs;
	     i += stride) {
		int32_t sl = slot[i];

		if (sl < 0) {
			if (lane == 0)
				dweight[i] = 0.0f;
			continue;
		}
		const float *g = dout + (i / k) * dim;
		const float *row = y + (int64_t)sl * dim;
		double dot = 0.0;

		for (int c = lane; c < dim; c += RL_WARP)
			dot += (double)g[c] * (double)row[c];
		dot = rl_warp_sum(dot);
		if (lane == 0)
			dweight[i] = (float)dot;
		if (!dy)
			continue;
		float wt = weight[i];
		float *d = dy + (int64_t)sl * dim;
		for (int c = lane; c < dim; c += RL_WARP)
			d[c] = __fadd_rn(d[c], __fmul_rn(wt, g[c]));
	}
}

extern "C" int rl_moe_combine_forward_cuda(float *out, const float *y, const int32_t *slot,
                                           const float *weight, int n_tokens, int k, int dim,
                                           int n_slots, void *stream)
{
	/* the CPU op's checks, less the slot range: the slots are device memory */
	if (!out || !slot || !weight || n_tokens < 0 || k <= 0 || dim <= 0 || n_slots < 0 ||
	    (!y && n_slots > 0))
		return -1;
	if (n_tokens == 0)
		return 0;
	rl_combine_forward_kernel<<<(unsigned)n_tokens, RL_COMBINE_THREADS, 0, rl_stream(stream)>>>(
	    out, y, slot, weight, k, dim);
	return rl_launched();
}

extern "C" int rl_moe_combine_backward_cuda(float *dy, float *dweight, const float *dout,
                                            const float *y, const int32_t *slot,
                                            const float *weight, int n_tokens, int k, int dim,
                                            void *stream)
{
	if (!dweight || !dout || !y || !slot || !weight || n_tokens < 0 || k <= 0 || dim <= 0)
		return -1;
	if (n_tokens == 0)
		return 0;

	int64_t pairs = (int64_t)n_tokens * k;

	rl_combine_backward_kernel<<<rl_stride_blocks(pairs, RL_COMBINE_WARPS, RL_COMBINE_BLOCKS),
	                             RL_COMBINE_WARPS * RL_WARP, 0, rl_stream(stream)>>>(
	    dy, dweight, dout, y, slot, weight, pairs, k, dim);
	return rl_launched();
}
