/* Attention backward, the query side: dq += dS K per (query tile, head),
 * with P recomputed from q, k and the forward's lse and dS = scale P (dP -
 * Dsum), dP = dO V^T, Dsum = rowsum(dO * O) computed here per row (the host
 * does not know the number of rows, so there is no buffer to hold it).
 * Warp w owns query rows w * RPW ..: it loads their Q and dO rows itself
 * and accumulates their dq in registers; K and V tiles of BK rows are
 * shared by the block. Every dq element has one writer, so the sums are
 * race-free and the same bits on every run. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/attention_common.cuh"

template <int DC> struct rl_attn_dq_tile {
	static constexpr int RPW = rl_attn_dq_rpw(DC), BK = rl_attn_dq_bk(DC);
	static constexpr int BQ = RL_ATTN_WARPS * RPW, KPL = BK / RL_WARP, SS = RL_WARP * DC + 4;
	/* Q, dO, K, V and every warp's dS */
	static constexpr size_t SMEM =
	    ((size_t)(2 * BQ + 2 * BK) * SS + (size_t)BQ * BK) * sizeof(float);
};

template <int DC>
static __global__ void __launch_bounds__(RL_ATTN_THREADS, 1)
    rl_attn_dq_kernel(float *__restrict__ dq, const float *__restrict__ dout,
                      const float *__restrict__ q, const float *__restrict__ k,
                      const float *__restrict__ v, const float *__restrict__ out,
                      const float *__restrict__ lse, struct rl_attn_src src,
                      const int *__restrict__ ts, int H, int Hkv, int D, float scale)
{
	typedef rl_attn_dq_tile<DC> T;
	constexpr int RPW = T::RPW, BK = T::BK, BQ = T::BQ, KPL = T::KPL, SS = T::SS;
	extern __shared__ float4 rl_attn_smem[];
	float *sQ = (float *)rl_attn_smem, *sO = sQ + BQ * SS, *sK = sO + BQ * SS,
	      *sV = sK + BK * SS, *sS = sV + BK * SS;
	const int w = threadIdx.x / RL_WARP, lane = threadIdx.x % RL_WARP, wr0 = w * RPW;
	const int rep = H / Hkv;
	const size_t ldq = (size_t)H * D, ldkv = (size_t)Hkv * D;
	const long long n_items = (long long)rl_attn_n_tiles(ts, src) * H;
	float *myS = sS + wr0 * BK;

	for (long long it = blockIdx.x; it < n_items; it += gridDim.x) {
		const int h = (int)(it % H);
		int c, lt;

		rl_attn_find(ts, src, (int)(it / H), &c, &lt);

		const struct rl_attn_chunk ch = rl_attn_get(src, c);
		const int i0 = lt * BQ, m = min(BQ, ch.len - i0);
		const int last = ch.off + i0 + m - 1;
		const size_t row0 = (size_t)ch.qs + i0;
		const size_t kvo = (size_t)ch.ks * ldkv + (size_t)(h / rep) * D;
		const int wm = min(RPW, m - wr0);
		const int wlast = ch.off + i0 + wr0 + wm - 1;
		/* per row: lse and rowsum(dO * O), zero for rows past m */
		float rl[RPW], rd[RPW], acc[RPW][DC];

		/* Only this warp reads its rows of sQ and sO, and it is done
		 * with the previous item's (same warp, program order). */
#pragma unroll
		for (int r = 0; r < RPW; r++) {
			const bool valid = r < wm;
			const size_t row = row0 + wr0 + r;
			const size_t o = row * ldq + (size_t)h * D;
			float dot = 0.0f;

			rl_attn_load_row<DC>(sQ + (wr0 + r) * SS, q + o, valid, D);
			rl_attn_load_row<DC>(sO + (wr0 + r) * SS, dout + o, valid, D);
#pragma unroll
			for (int c2 = 0; c2 < DC; c2++) {
				const int d = lane + c2 * RL_WARP;

				if (valid && d < D)
					dot = fmaf(sO[(wr0 + r) * SS + d], out[o + d], dot);
				acc[r][c2] = 0.0f;
			}
			rd[r] = rl_warp_sum(dot);
			rl[r] = valid ? lse[row * H + h] : 0.0f;
		}
		__syncwarp();

		for (int k0 = 0; k0 <= last; k0 += BK) {
			const int nk = min(BK, last - k0 + 1);

			__syncthreads(); /* the previous K and V tiles are consumed */
			for (int r = w; r < BK; r += RL_ATTN_WARPS) {
				const size_t o = kvo + (size_t)(k0 + r) * ldkv;

				rl_attn_load_row<DC>(sK + r * SS, k + o, r < nk, D);
				rl_attn_load_row<DC>(sV + r * SS, v + o, r < nk, D);
			}
			__syncthreads();
			if (wm <= 0 || wlast < k0)
				continue;

			float s[RPW][KPL], dp[RPW][KPL];
			const float4 *q4 = (const float4 *)(sQ + wr0 * SS);
			const float4 *o4 = (const float4 *)(sO + wr0 * SS);
			const float4 *k4 = (const float4 *)(sK + lane * SS);
			const float4 *v4 = (const float4 *)(sV + lane * SS);

#pragma unroll
			for (int r = 0; r < RPW; r++)
#pragma unroll
				for (int u = 0; u < KPL; u++)
					s[r][u] = dp[r][u] = 0.0f;
#pragma unroll 2
			for (int d4 = 0; d4 < SS / 4 - 1; d4++) {
				float4 kv[KPL], vv[KPL];

#pragma unroll
				for (int u = 0; u < KPL; u++) {
					kv[u] = k4[u * RL_WARP * (SS / 4) + d4];
					vv[u] = v4[u * RL_WARP * (SS / 4) + d4];
				}
#pragma unroll
				for (int r = 0; r < RPW; r++) {
					const float4 qv = q4[r * (SS / 4) + d4];
					const float4 ov = o4[r * (SS / 4) + d4];

#pragma unroll
					for (int u = 0; u < KPL; u++) {
						s[r][u] = rl_attn_dot4(qv, kv[u], s[r][u]);
						dp[r][u] = rl_attn_dot4(ov, vv[u], dp[r][u]);
					}
				}
			}
#pragma unroll
			for (int r = 0; r < RPW; r++) {
				const int pos = ch.off + i0 + wr0 + r;

#pragma unroll
				for (int u = 0; u < KPL; u++) {
					const int kp = k0 + lane + u * RL_WARP;
					const float p = kp <= pos && r < wm
					                    ? expf(s[r][u] * scale - rl[r])
					                    : 0.0f;

					myS[r * BK + lane + u * RL_WARP] =
					    scale * p * (dp[r][u] - rd[r]);
				}
			}
			__syncwarp();
			rl_attn_rows_mm<RPW, DC, BK, SS>(acc, myS, sK);
			__syncwarp(); /* myS is rewritten by the next tile */
		}

#pragma unroll
		for (int r = 0; r < RPW; r++) {
			if (r >= wm)
				break;

			float *g = dq + (row0 + wr0 + r) * ldq + (size_t)h * D;

#pragma unroll
			for (int c2 = 0; c2 < DC; c2++) {
				const int d = lane + c2 * RL_WARP;

				if (d < D)
					g[d] += acc[r][c2];
			}
		}
	}
}

template <int DC> static int rl_attn_dq_run(const struct rl_attn_bwd *b, cudaStream_t st)
{
	typedef rl_attn_dq_tile<DC> T;
	static int cache[RL_ATTN_MAX_DEVICES];
	int grid;

	if (rl_attn_grid((const void *)rl_attn_dq_kernel<DC>, T::SMEM, cache, &grid) != 0)
		return -1;
	rl_attn_dq_kernel<DC><<<grid, RL_ATTN_THREADS, T::SMEM, st>>>(
	    b->dq, b->dout, b->q, b->k, b->v, b->out, b->lse, b->src, b->ts, b->H, b->Hkv, b->D,
	    b->scale);
	return rl_launched();
}

int rl_attn_dq_launch(const struct rl_attn_bwd *b, cudaStream_t st)
{
	static decltype(&rl_attn_dq_run<1>) const by_dc[] = RL_ATTN_BY_DC(rl_attn_dq_run);
	const int dc = rl_attn_dc(b->D);

	return rl_attn_dc_ok(dc) ? by_dc[dc - 1](b, st) : -1;
}
