/* Causal GQA attention forward in fp32, FlashAttention-style: one kernel for
 * packed sequences and chunk tables (attention_common.cuh).
 *
 * An item is BQ query rows of one head: the Q tile sits in shared memory,
 * K and V tiles of 64 rows stream through one buffer (K, scores, then V),
 * and each query row keeps its running max, sum and output in registers
 * (online softmax), so no score matrix is ever stored beyond one tile. Key
 * tiles past the tile's last query are skipped; the diagonal one is
 * masked. Warp w owns query rows w * RPW .. w * RPW + RPW - 1; lane l
 * scores keys l and l + 32 and holds output columns l + 32 c.
 *
 * exp is expf (within 2 ulp), the backward's too; lse = max + logf(sum). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/attention.h"
#include "kernels/cuda/attention_common.cuh"

#define RL_ATTN_FWD_BK 64

template <int DC, int RPW> struct rl_attn_fwd_tile {
	static constexpr int BQ = RL_ATTN_WARPS * RPW, BK = RL_ATTN_FWD_BK;
	static constexpr int KPL = BK / RL_WARP, SS = RL_WARP * DC + 4;
	/* Q, K or V, and every warp's probabilities */
	static constexpr size_t SMEM = ((size_t)(BQ + BK) * SS + (size_t)BQ * BK) * sizeof(float);
};

/* ts: the tile map for BQ. */
template <int DC, int RPW>
static __global__ void __launch_bounds__(RL_ATTN_THREADS, 1)
    rl_attn_fwd_kernel(float *__restrict__ out, float *__restrict__ lse,
                       const float *__restrict__ q, const float *__restrict__ k,
                       const float *__restrict__ v, struct rl_attn_src src,
                       const int *__restrict__ ts, int H, int Hkv, int D, float scale)
{
	typedef rl_attn_fwd_tile<DC, RPW> T;
	constexpr int BQ = T::BQ, BK = T::BK, KPL = T::KPL, SS = T::SS;
	extern __shared__ float4 rl_attn_smem[];
	float *sQ = (float *)rl_attn_smem, *sKV = sQ + BQ * SS, *sP = sKV + BK * SS;
	const int w = threadIdx.x / RL_WARP, lane = threadIdx.x % RL_WARP, wr0 = w * RPW;
	const int rep = H / Hkv;
	const size_t ldq = (size_t)H * D, ldkv = (size_t)Hkv * D;
	const long long n_items = (long long)rl_attn_n_tiles(ts, src) * H;
	float *myP = sP + wr0 * BK;

	for (long long it = blockIdx.x; it < n_items; it += gridDim.x) {
		const int h = (int)(it % H);
		int c, lt;

		rl_attn_find(ts, src, (int)(it / H), &c, &lt);

		const struct rl_attn_chunk ch = rl_attn_get(src, c);
		const int i0 = lt * BQ, m = min(BQ, ch.len - i0);
		/* the tile's last query sees keys 0 .. last */
		const int last = ch.off + i0 + m - 1;
		const float *qt = q + ((size_t)ch.qs + i0) * ldq + (size_t)h * D;
		const size_t kvo = (size_t)ch.ks * ldkv + (size_t)(h / rep) * D;
		/* rows past m are zeros and never written; a warp with none
		 * left does no arithmetic */
		const int wm = min(RPW, m - wr0);
		/* the last position among the warp's valid rows */
		const int wlast = ch.off + i0 + wr0 + wm - 1;

		__syncthreads(); /* the previous item is done with the tiles */
		for (int r = w; r < BQ; r += RL_ATTN_WARPS)
			rl_attn_load_row<DC>(sQ + r * SS, qt + (size_t)r * ldq, r < m, D);

		float mx[RPW], l[RPW], acc[RPW][DC];

		rl_attn_rows_init<RPW, DC>(mx, l, acc);

		for (int k0 = 0; k0 <= last; k0 += BK) {
			const int nk = min(BK, last - k0 + 1);
			const bool active = wm > 0 && wlast >= k0;

			__syncthreads(); /* the previous V tile is consumed */
			for (int r = w; r < BK; r += RL_ATTN_WARPS)
				rl_attn_load_row<DC>(sKV + r * SS,
				                     k + kvo + (size_t)(k0 + r) * ldkv, r < nk, D);
			__syncthreads();
			if (active) {
				float s[RPW][KPL];

				rl_attn_scores<RPW, KPL, SS>(s, sQ + wr0 * SS, sKV);
				/* The max stays finite: key 0 of the first tile is seen
				 * by every row, so only later tiles can be all masked. */
#pragma unroll
				for (int r = 0; r < RPW; r++)
					rl_attn_softmax_row<KPL, DC>(
					    s[r], k0, ch.off + i0 + wr0 + r, scale, mx[r], l[r],
					    acc[r], myP + r * BK);
			}
			__syncthreads(); /* every warp is done with K */
			for (int r = w; r < BK; r += RL_ATTN_WARPS)
				rl_attn_load_row<DC>(sKV + r * SS,
				                     v + kvo + (size_t)(k0 + r) * ldkv, r < nk, D);
			__syncthreads();
			if (active)
				rl_attn_rows_mm<RPW, DC, BK, SS>(acc, myP, sKV);
		}

#pragma unroll
		for (int r = 0; r < RPW; r++) {
			if (r >= wm)
				break;

			const size_t row = (size_t)ch.qs + i0 + wr0 + r;
			/* >= 1: the maximum's own term is exp(0) */
			const float sum = rl_warp_sum(l[r]), inv = 1.0f / sum;
			float *o = out + row * ldq + (size_t)h * D;

#pragma unroll
			for (int c2 = 0; c2 < DC; c2++) {
				const int d = lane + c2 * RL_WARP;

				if (d < D)
					o[d] = acc[r][c2] * inv;
			}
			if (lane == 0)
				lse[row * H + h] = mx[r] + logf(sum);
		}
	}
}

template <int DC>
static int rl_attn_fwd_launch(float *out, float *lse, const float *q, const float *k,
                              const float *v, const struct rl_attn_src *src, const int *ts,
                              const struct rl_attention_shape *sh, cudaStream_t st)
{
	constexpr int RPW = rl_attn_fwd_rpw(DC);
	typedef rl_attn_fwd_tile<DC, RPW> T;
	static int cache[RL_ATTN_MAX_DEVICES];
	int grid;

	if (rl_attn_grid((const void *)rl_attn_fwd_kernel<DC, RPW>, T::SMEM, cache, &grid) != 0)
		return -1;
	rl_attn_fwd_kernel<DC, RPW><<<grid, RL_ATTN_THREADS, T::SMEM, st>>>(
	    out, lse, q, k, v, *src, ts, sh->n_heads, sh->n_kv_heads, sh->head_dim, sh->scale);
	return rl_launched();
}

static int rl_attn_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                       const struct rl_attn_src *src, const int *ts,
                       const struct rl_attention_shape *sh, cudaStream_t st)
{
	static decltype(&rl_attn_fwd_launch<1>) const by_dc[] = RL_ATTN_BY_DC(rl_attn_fwd_launch);
	const int dc = rl_attn_dc(sh->head_dim);

	return rl_attn_dc_ok(dc) ? by_dc[dc - 1](out, lse, q, k, v, src, ts, sh, st) : -1;
}

/* The query tile of the forward for head_dim d. */
static int rl_attn_fwd_bq(int d)
{
	return rl_attn_fwd_rpw(rl_attn_dc(d)) * RL_ATTN_WARPS;
}

/* The table-driven forwards: map, kernel, map released in stream order. */
static int rl_attn_fwd_mapped(float *out, float *lse, const float *q, const float *k,
                              const float *v, const struct rl_attn_src *src,
                              const struct rl_attention_shape *sh, void *stream)
{
	const cudaStream_t st = rl_stream(stream);
	int *ts = rl_attn_build_map(src, rl_attn_fwd_bq(sh->head_dim), st);

	if (!ts)
		return -1;

	const int rc = rl_attn_fwd(out, lse, q, k, v, src, ts, sh, st);

	rl_attn_release_map(ts, st);
	return rc;
}

extern "C" int rl_attention_forward_cuda(float *out, float *lse, const float *q, const float *k,
                                         const float *v, const int32_t *cu_seqlens, int n_seqs,
                                         const struct rl_attention_shape *shape, void *stream)
{
	if (n_seqs < 0 || !rl_attn_shape_ok(shape))
		return -1;
	if (n_seqs == 0)
		return 0;
	if (!cu_seqlens || !out || !lse || !q || !k || !v)
		return -1;

	const struct rl_attn_src src = rl_attn_seqs_src(cu_seqlens, n_seqs);

	return rl_attn_fwd_mapped(out, lse, q, k, v, &src, shape, stream);
}

extern "C" int rl_attention_chunks_forward_cuda(float *out, float *lse, const float *q,
                                                const float *k, const float *v,
                                                const struct rl_attention_chunks *chunks,
                                                const struct rl_attention_shape *shape,
                                                void *stream)
{
	const int go = rl_attn_chunks_check(chunks, shape);

	if (go <= 0)
		return go;
	if (!out || !lse || !q || !k || !v)
		return -1;

	const struct rl_attn_src src = rl_attn_chunks_src(chunks);

	return rl_attn_fwd_mapped(out, lse, q, k, v, &src, shape, stream);
}
