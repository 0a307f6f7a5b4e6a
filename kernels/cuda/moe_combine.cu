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
 * twice), so no atomics are needed. bf16 rows (T = uint16_t) are widened on
 * load and each output rounded once, as the CPU op rounds them. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/moe.h"

#define RL_COMBINE_THREADS 128
#define RL_COMBINE_WARPS   8 /* backward: pairs a block */
#define RL_COMBINE_BLOCKS  (1 << 20)

template <typename T>
static __global__ void __launch_bounds__(RL_COMBINE_THREADS)
    rl_combine_forward_kernel(T *out, const T *__restrict__ y, const int32_t *__restrict__ slot,
                              const float *__restrict__ weight, int k, int dim)
{
	int64_t t = blockIdx.x;
	const int32_t *s = slot + t * k;
	const float *wt = weight + t * k;
	T *o = out + t * dim;

	for (int c = threadIdx.x; c < dim; c += RL_COMBINE_THREADS) {
		float acc = 0.0f;

		for (int j = 0; j < k; j++) {
			int32_t sl = s[j];

			/* a slot of -1 adds nothing, and its weight is not read */
			if (sl < 0)
				continue;
			acc = __fadd_rn(acc, __fmul_rn(wt[j], rl_widen(y[(int64_t)sl * dim + c])));
		}
		rl_narrow_store(o + c, acc);
	}
}

template <typename T>
static __global__ void __launch_bounds__(RL_COMBINE_WARPS *RL_WARP)
    rl_combine_backward_kernel(T *dy, float *dweight, const T *__restrict__ dout,
                               const T *__restrict__ y, const int32_t *__restrict__ slot,
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
		const T *g = dout + (i / k) * dim;
		const T *row = y + (int64_t)sl * dim;
		double dot = 0.0;

		for (int c = lane; c < dim; c += RL_WARP)
			dot += (double)rl_widen(g[c]) * (double)rl_widen(row[c]);
		dot = rl_warp_sum(dot);
		if (lane == 0)
			dweight[i] = (float)dot;
		if (!dy)
			continue;
		float wt = weight[i];
		T *d = dy + (int64_t)sl * dim;
		for (int c = lane; c < dim; c += RL_WARP)
			rl_narrow_store(d + c,
			                __fadd_rn(rl_widen(d[c]), __fmul_rn(wt, rl_widen(g[c]))));
	}
}

extern "C" int rl_moe_combine_forward_cuda(struct rl_buf out, struct rl_cbuf y, const int32_t *slot,
                                           const float *weight, int n_tokens, int k, int dim,
                                           int n_slots, void *stream)
{
	/* the CPU op's checks, less the slot range: the slots are device memory */
	if (!out.p || !slot || !weight || n_tokens < 0 || k <= 0 || dim <= 0 || n_slots < 0 ||
	    (!y.p && n_slots > 0) || !rl_act_type_ok(out.t) || y.t != out.t)
		return -1;
	if (n_tokens == 0)
		return 0;

	cudaStream_t st = rl_stream(stream);

	if (out.t == RL_BF16)
		rl_combine_forward_kernel<uint16_t>
		    <<<(unsigned)n_tokens, RL_COMBINE_THREADS, 0, st>>>(
		        (uint16_t *)out.p, (const uint16_t *)y.p, slot, weight, k, dim);
	else
		rl_combine_forward_kernel<float><<<(unsigned)n_tokens, RL_COMBINE_THREADS, 0, st>>>(
		    (float *)out.p, (const float *)y.p, slot, weight, k, dim);
	return rl_launched();
}

extern "C" int rl_moe_combine_backward_cuda(struct rl_buf dy, float *dweight, struct rl_cbuf dout,
                                            struct rl_cbuf y, const int32_t *slot,
                                            const float *weight, int n_tokens, int k, int dim,
                                            void *stream)
{
	if (!dweight || !dout.p || !y.p || !slot || !weight || n_tokens < 0 || k <= 0 || dim <= 0 ||
	    !rl_act_type_ok(y.t) || dout.t != y.t || (dy.p && dy.t != y.t))
		return -1;
	if (n_tokens == 0)
		return 0;

	int64_t pairs = (int64_t)n_tokens * k;
	unsigned blocks = (unsigned)rl_stride_blocks(pairs, RL_COMBINE_WARPS, RL_COMBINE_BLOCKS);
	cudaStream_t st = rl_stream(stream);

	if (y.t == RL_BF16)
		rl_combine_backward_kernel<uint16_t><<<blocks, RL_COMBINE_WARPS * RL_WARP, 0, st>>>(
		    (uint16_t *)dy.p, dweight, (const uint16_t *)dout.p, (const uint16_t *)y.p,
		    slot, weight, pairs, k, dim);
	else
		rl_combine_backward_kernel<float><<<blocks, RL_COMBINE_WARPS * RL_WARP, 0, st>>>(
		    (float *)dy.p, dweight, (const float *)dout.p, (const float *)y.p, slot, weight,
		    pairs, k, dim);
	return rl_launched();
}
