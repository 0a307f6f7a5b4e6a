/* The batch-invariant linear forward: a tiled fp32 SIMT GEMM of our own, no
 * cuBLAS, whose every output is one fmaf chain over k in increasing order:
 *
 *	acc = +0; for k = 0 .. in_dim - 1: acc = fmaf(x[t, k], W[o, k], acc);
 *	y[t, o] = acc (+ bias[o], one fp32 add)
 *
 * No split of k (across blocks, warps or lanes) and no padding of the k loop,
 * so that order, and with it the bits, depend on in_dim and the two rows
 * alone: not on n, on t's position, on out_dim, on W's offset or on which of
 * the tile configurations below computed the element. The configurations
 * differ only in how the operands reach the threads (tile sizes, staging
 * width), which is why the launcher may pick one by n without breaking the
 * invariance: the arithmetic of an element is the same chain on every path.
 * Rows past n and columns past out_dim are staged as zeros and never
 * written; they share no accumulator with valid ones. bf16 operands are
 * widened exactly as they are loaded, so the chain is the fp32 one of the
 * same values; a bf16 y is the chain's end (+ bias) rounded once.
 *
 * rl_lm_logprobs_forward_invariant_cuda (logprobs_invariant.cu) calls this
 * for its chunk logits and repeats the chain above for the target's logit;
 * a change to the order here must be made there too (test_cuda_invariant.c
 * compares the two bit for bit). */
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/linear.h"

#define LI_THREADS    256
#define LI_MAX_GRID_Y 65535 /* column tiles ride in gridDim.y */

/* acc[i][j] += x_k[i] * w_k[j] for the thread's TM x TN outputs: the one
 * step of every element's chain. xk and wk point at the thread's first row
 * and column in the staged k-slice; its others are RT and CT apart. */
template <int TM, int TN, int RT, int CT>
static __device__ __forceinline__ void li_step(float (&acc)[TM][TN], const float *xk,
                                               const float *wk)
{
	float a[TM], b[TN];

#pragma unroll
	for (int i = 0; i < TM; i++)
		a[i] = xk[i * RT];
#pragma unroll
	for (int j = 0; j < TN; j++)
		b[j] = wk[j * CT];
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++)
			acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
}

/* One thread's share of a [ROWS, BK] slice of src [rows, in_dim] starting
 * at (r0, k0), into registers: entries lr + l STEP of column kk. A warp
 * reads 32 consecutive k of one row, so the loads coalesce. Outside the
 * matrix: 0, which is only ever multiplied into outputs that are dropped. */
template <int L, int STEP, typename TI>
static __device__ __forceinline__ void li_load(float (&reg)[L], const TI *__restrict__ src,
                                               int64_t r0, int64_t rows, int lr, int kk, int k0,
                                               int in_dim)
{
	bool k_in = k0 + kk < in_dim;

#pragma unroll
	for (int l = 0; l < L; l++) {
		int64_t r = r0 + lr + (int64_t)l * STEP;

		reg[l] = k_in && r < rows ? rl_widen(src[r * in_dim + k0 + kk]) : 0.0f;
	}
}

/* Block (blockIdx.x, blockIdx.y) computes y[BM rows, BN columns]; thread
 * (ty, tx) the rows ty + i RT and columns tx + j CT of it, so that a warp's
 * reads of the staged W are consecutive words (no bank conflicts) and its
 * stores consecutive columns. x and W go through shared memory k-major,
 * BK of k at a time; the next slice is loaded into registers while this
 * one is used. The row stride BM + 1 (BN + 1) is odd, so the transposing
 * stores, a warp's 32 k of one row, hit 32 different banks. */
template <int BM, int BN, int BK, int TM, int TN, typename TI, typename TO>
static __global__ void __launch_bounds__(LI_THREADS)
    li_forward(TO *__restrict__ y, const TI *__restrict__ x, const TI *__restrict__ w,
               const TI *__restrict__ bias, int n, int in_dim, int out_dim)
{
	constexpr int RT = BM / TM, CT = BN / TN;
	constexpr int STEP = LI_THREADS / BK; /* rows one load round covers */
	constexpr int XL = BM / STEP, WL = BN / STEP;

	static_assert(RT * CT == LI_THREADS, "one thread per TM x TN outputs");
	static_assert(LI_THREADS % BK == 0 && BK % RL_WARP == 0, "whole warps per staged row");
	static_assert(BM % STEP == 0 && BN % STEP == 0, "every thread loads alike");

	__shared__ float xs[BK][BM + 1];
	__shared__ float ws[BK][BN + 1];
	int tid = threadIdx.x, tx = tid % CT, ty = tid / CT;
	int kk = tid % BK, lr = tid / BK;
	int64_t r0 = (int64_t)blockIdx.x * BM, c0 = (int64_t)blockIdx.y * BN;
	/* a thread whose first row is past n has no valid row: it still loads
	 * and stages, but skips the multiply (decode has most threads so) */
	bool busy = r0 + ty < n;
	float xr[XL], wr[WL];
	float acc[TM][TN];

#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++)
			acc[i][j] = 0.0f;

	li_load<XL, STEP>(xr, x, r0, n, lr, kk, 0, in_dim);
	li_load<WL, STEP>(wr, w, c0, out_dim, lr, kk, 0, in_dim);
	for (int k0 = 0; k0 < in_dim; k0 += BK) {
#pragma unroll
		for (int l = 0; l < XL; l++)
			xs[kk][lr + l * STEP] = xr[l];
#pragma unroll
		for (int l = 0; l < WL; l++)
			ws[kk][lr + l * STEP] = wr[l];
		__syncthreads();

		if (k0 + BK < in_dim) {
			li_load<XL, STEP>(xr, x, r0, n, lr, kk, k0 + BK, in_dim);
			li_load<WL, STEP>(wr, w, c0, out_dim, lr, kk, k0 + BK, in_dim);
		}

		/* the last slice stops at in_dim: no fmaf(0, 0, acc) steps, which
		 * could turn an underflowed -0 into +0 and make the bits depend on
		 * the padding */
		int kt = in_dim - k0 < BK ? in_dim - k0 : BK;

		if (busy && kt == BK) {
#pragma unroll
			for (int k = 0; k < BK; k++)
				li_step<TM, TN, RT, CT>(acc, &xs[k][ty], &ws[k][tx]);
		} else if (busy) {
			for (int k = 0; k < kt; k++)
				li_step<TM, TN, RT, CT>(acc, &xs[k][ty], &ws[k][tx]);
		}
		__syncthreads(); /* before the next slice overwrites xs, ws */
	}

#pragma unroll
	for (int i = 0; i < TM; i++) {
		int64_t r = r0 + ty + i * RT;

		if (r >= n)
			continue;
#pragma unroll
		for (int j = 0; j < TN; j++) {
			int64_t c = c0 + tx + j * CT;

			if (c < out_dim)
				rl_narrow_store(y + r * out_dim + c,
				                bias ? __fadd_rn(acc[i][j], rl_widen(bias[c]))
				                     : acc[i][j]);
		}
	}
}

template <int BM, int BN, int BK, int TM, int TN, typename TI, typename TO>
static int li_launch(TO *y, const TI *x, const TI *w, const TI *bias, int n, int in_dim,
                     int out_dim, cudaStream_t st)
{
	int64_t col_tiles = rl_ceil_div(out_dim, BN);

	if (col_tiles > LI_MAX_GRID_Y)
		return -1;

	dim3 grid((unsigned)rl_ceil_div(n, BM), (unsigned)col_tiles);

	/* row tiles vary fastest, so the blocks that share a W tile run
	 * together and W comes from DRAM about once */
	li_forward<BM, BN, BK, TM, TN, TI, TO>
	    <<<grid, LI_THREADS, 0, st>>>(y, x, w, bias, n, in_dim, out_dim);
	return rl_launched();
}

/* Only the staging changes with n (see the top); the chain does not.
 * Decode (n <= 64) is bound by streaming W: one row tile covers every
 * token, so W is read once, in narrow column tiles (more blocks in flight)
 * and wide k slices (more bytes per load round); up to 16 tokens, 16-row
 * tiles, so that threads do not multiply empty rows. Larger n is bound by
 * the FMAs: 64 x 64 tiles, 16 outputs a thread. */
template <typename TI, typename TO>
static int li_dispatch(void *y, const void *x, const void *w, const void *bias, int n, int in_dim,
                       int out_dim, cudaStream_t st)
{
	TO *yt = (TO *)y;
	const TI *xt = (const TI *)x, *wt = (const TI *)w, *bt = (const TI *)bias;

	if (n <= 16)
		return li_launch<16, 32, 64, 1, 2>(yt, xt, wt, bt, n, in_dim, out_dim, st);
	if (n <= 64)
		return li_launch<64, 32, 64, 4, 2>(yt, xt, wt, bt, n, in_dim, out_dim, st);
	return li_launch<64, 64, 32, 4, 4>(yt, xt, wt, bt, n, in_dim, out_dim, st);
}

extern "C" int rl_linear_forward_invariant_cuda(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                                struct rl_cbuf bias, int n, int in_dim, int out_dim,
                                                void *stream)
{
	if (!y.p || !x.p || !w.p || n < 0 || in_dim <= 0 || out_dim <= 0 ||
	    !rl_linear_forward_types_ok(y, x, w, bias))
		return -1;
	if (n == 0)
		return 0;

	cudaStream_t st = rl_stream(stream);

	if (x.t == RL_F32)
		return li_dispatch<float, float>(y.p, x.p, w.p, bias.p, n, in_dim, out_dim, st);
	if (y.t == RL_BF16)
		return li_dispatch<uint16_t, uint16_t>(y.p, x.p, w.p, bias.p, n, in_dim, out_dim,
		                                       st);
	return li_dispatch<uint16_t, float>(y.p, x.p, w.p, bias.p, n, in_dim, out_dim, st);
}
