/* The KV-cache attention when few queries are new (decoding): split the
 * keys instead of the queries (flash-decoding). A 64-row query tile of one
 * head would hold one useful row, and the grid only n_heads blocks, each
 * walking the whole cache. Here a block takes every new query of every
 * query head of one kv head (n_new * rep <= RL_ATTN_DEC_ROWS rows, so each
 * cache row is read once per kv head) against one slice of the cache, and
 * keeps the slice's unnormalised output, max and sum; a second kernel
 * merges the slices in slice order (the same bits every run).
 *
 * Row r of a block is query r / rep of query head g * rep + r % rep. The
 * tile steps are the forward's (attention_common.cuh): warp w owns rows
 * w * RPW .., lane l scores keys l and l + 32 and holds output columns
 * l + 32 c. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/memory.h"

#define RL_ATTN_DEC_BK 64
/* the blocks a call aims at: two waves of an H100's 132 multiprocessors */
#define RL_ATTN_DEC_BLOCKS 264

template <int DC> struct rl_attn_dec_tile {
	static constexpr int ROWS = RL_ATTN_DEC_ROWS, RPW = ROWS / RL_ATTN_WARPS;
	static constexpr int BK = RL_ATTN_DEC_BK, KPL = BK / RL_WARP, SS = RL_WARP * DC + 4;
	/* the rows' queries, K or V, every warp's probabilities */
	static constexpr size_t SMEM =
	    ((size_t)(ROWS + BK) * SS + (size_t)ROWS * BK) * sizeof(float);
};

/* Block g * n_split + sp: kv head g, cache rows [sp * split, (sp + 1) *
 * split) of len. acc is [n_split, Hkv, ROWS, D], ml [n_split, Hkv, ROWS, 2]
 * (max and sum; the max is -inf where a row sees no key of the slice). */
template <int DC>
static __global__ void __launch_bounds__(RL_ATTN_THREADS, 1)
    rl_attn_dec_kernel(float *__restrict__ acc_out, float *__restrict__ ml,
                       const float *__restrict__ q, const float *__restrict__ k,
                       const float *__restrict__ v, int n_new, int len, int H, int Hkv, int D,
                       float scale, int split, int n_split)
{
	typedef rl_attn_dec_tile<DC> T;
	constexpr int ROWS = T::ROWS, RPW = T::RPW, BK = T::BK, KPL = T::KPL, SS = T::SS;
	extern __shared__ float4 rl_attn_smem[];
	float *sQ = (float *)rl_attn_smem, *sKV = sQ + ROWS * SS, *sP = sKV + BK * SS;
	const int w = threadIdx.x / RL_WARP, lane = threadIdx.x % RL_WARP, wr0 = w * RPW;
	const int rep = H / Hkv, R = n_new * rep, off = len - n_new;
	const int g = blockIdx.x / n_split, sp = blockIdx.x % n_split;
	const int k_lo = sp * split, k_hi = min(len, k_lo + split);
	const size_t ldq = (size_t)H * D, ldkv = (size_t)Hkv * D;
	const size_t kvo = (size_t)g * D;
	const bool active = wr0 < R;
	float *myP = sP + wr0 * BK;
	float mx[RPW], l[RPW], acc[RPW][DC];

	for (int r = w; r < ROWS; r += RL_ATTN_WARPS)
		rl_attn_load_row<DC>(sQ + r * SS,
		                     q + (size_t)(r / rep) * ldq + (size_t)(g * rep + r % rep) * D,
		                     r < R, D);
	rl_attn_rows_init<RPW, DC>(mx, l, acc);

	for (int k0 = k_lo; k0 < k_hi; k0 += BK) {
		const int nk = min(BK, k_hi - k0);

		__syncthreads(); /* the previous V tile is consumed (and sQ written) */
		for (int r = w; r < BK; r += RL_ATTN_WARPS)
			rl_attn_load_row<DC>(sKV + r * SS, k + kvo + (size_t)(k0 + r) * ldkv,
			                     r < nk, D);
		__syncthreads();
		if (active) {
			float s[RPW][KPL];

			rl_attn_scores<RPW, KPL, SS>(s, sQ + wr0 * SS, sKV);
			/* A row can see no key of a late slice: then its max
			 * stays -inf (EMPTY). Keys past the slice are masked. */
#pragma unroll
			for (int r = 0; r < RPW; r++)
				rl_attn_softmax_row<KPL, DC, true>(
				    s[r], k0, min(off + (wr0 + r) / rep, k_hi - 1), scale, mx[r],
				    l[r], acc[r], myP + r * BK);
		}
		__syncthreads(); /* every warp is done with K */
		for (int r = w; r < BK; r += RL_ATTN_WARPS)
			rl_attn_load_row<DC>(sKV + r * SS, v + kvo + (size_t)(k0 + r) * ldkv,
			                     r < nk, D);
		__syncthreads();
		if (active)
			rl_attn_rows_mm<RPW, DC, BK, SS>(acc, myP, sKV);
	}

	const size_t slot = ((size_t)sp * Hkv + g) * ROWS;

#pragma unroll
	for (int r = 0; r < RPW; r++) {
		if (wr0 + r >= R)
			break;

		const float sum = rl_warp_sum(l[r]);
		float *a = acc_out + (slot + wr0 + r) * D;

#pragma unroll
		for (int c2 = 0; c2 < DC; c2++) {
			const int d = lane + c2 * RL_WARP;

			if (d < D)
				a[d] = acc[r][c2];
		}
		if (lane == 0) {
			ml[(slot + wr0 + r) * 2] = mx[r];
			ml[(slot + wr0 + r) * 2 + 1] = sum;
		}
	}
}

/* One warp per (kv head, row): the slices merged in order. Slice 0 holds
 * key 0, which every query sees, so the overall max is finite. */
static __global__ void __launch_bounds__(RL_ATTN_THREADS)
    rl_attn_dec_merge_kernel(float *__restrict__ out, const float *__restrict__ acc,
                             const float *__restrict__ ml, int n_new, int H, int Hkv, int D,
                             int n_split)
{
	const int rep = H / Hkv, R = n_new * rep;
	const int task = blockIdx.x * RL_ATTN_WARPS + threadIdx.x / RL_WARP;
	const int lane = threadIdx.x % RL_WARP;

	if (task >= Hkv * R)
		return;

	const int g = task / R, r = task % R;
	float m = -INFINITY, sum = 0.0f;

	for (int sp = 0; sp < n_split; sp++)
		m = fmaxf(m, ml[(((size_t)sp * Hkv + g) * RL_ATTN_DEC_ROWS + r) * 2]);
	for (int sp = 0; sp < n_split; sp++) {
		const float *x = ml + (((size_t)sp * Hkv + g) * RL_ATTN_DEC_ROWS + r) * 2;

		sum += x[1] * expf(x[0] - m);
	}

	float *o = out + (size_t)(r / rep) * H * D + (size_t)(g * rep + r % rep) * D;

	for (int d = lane; d < D; d += RL_WARP) {
		float y = 0.0f;

		for (int sp = 0; sp < n_split; sp++) {
			const size_t slot = ((size_t)sp * Hkv + g) * RL_ATTN_DEC_ROWS + r;

			y = fmaf(acc[slot * D + d], expf(ml[slot * 2] - m), y);
		}
		o[d] = y / sum;
	}
}

template <int DC>
static int rl_attn_dec_run(float *out, const float *q, const float *k, const float *v, int n_new,
                           int len, const struct rl_attention_shape *sh, cudaStream_t st)
{
	typedef rl_attn_dec_tile<DC> T;
	static int cache[RL_ATTN_MAX_DEVICES];
	const int Hkv = sh->n_kv_heads, D = sh->head_dim;
	const int R = n_new * (sh->n_heads / Hkv);
	int grid; /* only the opt-in to the shared memory is needed */

	if (rl_attn_grid((const void *)rl_attn_dec_kernel<DC>, T::SMEM, cache, &grid) != 0)
		return -1;

	/* About RL_ATTN_DEC_BLOCKS blocks, slices of whole key tiles. Not the
	 * device's grid: the slices, and so the bits, are the same on every
	 * GPU. */
	const int tiles = (len + RL_ATTN_DEC_BK - 1) / RL_ATTN_DEC_BK;
	int n_split = (RL_ATTN_DEC_BLOCKS + Hkv - 1) / Hkv;

	n_split = n_split < 1 ? 1 : n_split > tiles ? tiles : n_split;

	const int split = (tiles + n_split - 1) / n_split * RL_ATTN_DEC_BK;

	n_split = (len + split - 1) / split;

	const size_t rows = (size_t)n_split * Hkv * RL_ATTN_DEC_ROWS;
	float *acc = (float *)rl_cuda_alloc_async(rows * ((size_t)D + 2) * sizeof(float), st);

	if (!acc)
		return -1;

	float *ml = acc + rows * D;

	rl_attn_dec_kernel<DC><<<n_split * Hkv, RL_ATTN_THREADS, T::SMEM, st>>>(
	    acc, ml, q, k, v, n_new, len, sh->n_heads, Hkv, D, sh->scale, split, n_split);

	int rc = rl_launched();

	if (rc == 0) {
		const int blocks = (Hkv * R + RL_ATTN_WARPS - 1) / RL_ATTN_WARPS;

		rl_attn_dec_merge_kernel<<<blocks, RL_ATTN_THREADS, 0, st>>>(
		    out, acc, ml, n_new, sh->n_heads, Hkv, D, n_split);
		rc = rl_launched();
	}
	rl_cuda_release_async(acc, st);
	return rc;
}

int rl_attn_decode(float *out, const float *q, const float *k, const float *v, int n_new, int len,
                   const struct rl_attention_shape *sh, cudaStream_t st)
{
	static decltype(&rl_attn_dec_run<1>) const by_dc[] = RL_ATTN_BY_DC(rl_attn_dec_run);
	const int dc = rl_attn_dc(sh->head_dim);

	return rl_attn_dc_ok(dc) ? by_dc[dc - 1](out, q, k, v, n_new, len, sh, st) : -1;
}
