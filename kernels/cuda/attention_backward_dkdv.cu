/* Attention backward, the key side: dk += dS^T Q and dv += P^T dO per (key
 * tile, kv head). Key tiles are BK rows of k counted from row 0, not from a
 * sequence's start: then every dk and dv row belongs to exactly one item,
 * whichever chunks read it, and no two blocks ever add to the same row. An
 * item takes the chunks whose key rows meet its tile in index order, for
 * each the query heads of its kv head in order and their query tiles that
 * see any of its keys, recomputing P and dS as attention_backward_dq.cu
 * does; the sums are therefore in a fixed order, the same bits every run.
 * Only rows some chunk reads are written (the CPU op leaves the others
 * alone too). Warp w owns key rows w * RPW .. and their dk, dv columns
 * lane + 32 c in registers; lane l takes queries l + 32 u of a tile. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/attention_common.cuh"

template <int DC> struct rl_attn_kv_tile {
	static constexpr int RPW = rl_attn_kv_rpw(DC), BQ = rl_attn_kv_bq(DC);
	static constexpr int BK = RL_ATTN_WARPS * RPW, QPL = BQ / RL_WARP, SS = RL_WARP * DC + 4;
	/* K, V, Q, dO, every warp's P and dS, and lse and rowsum(dO * O) per query */
	static constexpr size_t SMEM =
	    ((size_t)(2 * BK + 2 * BQ) * SS + 2 * (size_t)BK * BQ + 2 * (size_t)BQ) * sizeof(float);
};

/* The tiles in shared memory: K, V (the item's key rows), Q, dO (one
 * query tile), L, Dsum (its lse and rowsum(dO * O)), P, dS (every warp's). */
struct rl_attn_kv_smem {
	float *K, *V, *Q, *O, *L, *Dsum, *P, *S;
};

/* Query rows i0 .. i0 + mq - 1 of chunk ch, head h, into Q, O, L and Dsum
 * (zeros past mq), by the whole block. */
template <int DC>
static __device__ __forceinline__ void
rl_attn_kv_load_queries(const struct rl_attn_kv_smem &sm, const float *__restrict__ dout,
                        const float *__restrict__ q, const float *__restrict__ out,
                        const float *__restrict__ lse, size_t row0, int mq, int h, int H, int D)
{
	typedef rl_attn_kv_tile<DC> T;
	const int w = threadIdx.x / RL_WARP, lane = threadIdx.x % RL_WARP;
	const size_t ldq = (size_t)H * D;

	for (int r = w; r < T::BQ; r += RL_ATTN_WARPS) {
		const bool valid = r < mq;
		const size_t o = (row0 + r) * ldq + (size_t)h * D;
		float dot = 0.0f;

		rl_attn_load_row<DC>(sm.Q + r * T::SS, q + o, valid, D);
		rl_attn_load_row<DC>(sm.O + r * T::SS, dout + o, valid, D);
#pragma unroll
		for (int c = 0; c < DC; c++) {
			const int d = lane + c * RL_WARP;

			/* the lane's own store just above */
			if (valid && d < D)
				dot = fmaf(sm.O[r * T::SS + d], out[o + d], dot);
		}
		dot = rl_warp_sum(dot);
		if (lane == 0) {
			sm.Dsum[r] = dot;
			sm.L[r] = valid ? lse[(row0 + r) * H + h] : 0.0f;
		}
	}
}

/* One warp: its key rows a + wr0 .. against the query tile in shared
 * memory (queries i0 .. i0 + mq - 1 of chunk ch), into acck and accv. */
template <int DC>
static __device__ __forceinline__ void
rl_attn_kv_accumulate(float (&acck)[rl_attn_kv_tile<DC>::RPW][DC],
                      float (&accv)[rl_attn_kv_tile<DC>::RPW][DC], const struct rl_attn_kv_smem &sm,
                      const struct rl_attn_chunk &ch, int a, int i0, int mq, float scale)
{
	typedef rl_attn_kv_tile<DC> T;
	constexpr int RPW = T::RPW, BQ = T::BQ, QPL = T::QPL, SS = T::SS;
	const int w = threadIdx.x / RL_WARP, lane = threadIdx.x % RL_WARP, wr0 = w * RPW;
	const int ke = ch.ks + ch.off + ch.len;
	float *myP = sm.P + wr0 * BQ, *myS = sm.S + wr0 * BQ;
	float s[RPW][QPL], dp[RPW][QPL];
	const float4 *k4 = (const float4 *)(sm.K + wr0 * SS);
	const float4 *v4 = (const float4 *)(sm.V + wr0 * SS);
	const float4 *q4 = (const float4 *)(sm.Q + lane * SS);
	const float4 *o4 = (const float4 *)(sm.O + lane * SS);

#pragma unroll
	for (int r = 0; r < RPW; r++)
#pragma unroll
		for (int u = 0; u < QPL; u++)
			s[r][u] = dp[r][u] = 0.0f;
#pragma unroll 2
	for (int d4 = 0; d4 < SS / 4 - 1; d4++) {
		float4 qv[QPL], ov[QPL];

#pragma unroll
		for (int u = 0; u < QPL; u++) {
			qv[u] = q4[u * RL_WARP * (SS / 4) + d4];
			ov[u] = o4[u * RL_WARP * (SS / 4) + d4];
		}
#pragma unroll
		for (int r = 0; r < RPW; r++) {
			const float4 kv = k4[r * (SS / 4) + d4], vv = v4[r * (SS / 4) + d4];

#pragma unroll
			for (int u = 0; u < QPL; u++) {
				s[r][u] = rl_attn_dot4(qv[u], kv, s[r][u]);
				dp[r][u] = rl_attn_dot4(ov[u], vv, dp[r][u]);
			}
		}
	}
#pragma unroll
	for (int r = 0; r < RPW; r++) {
		const int krow = a + wr0 + r;

#pragma unroll
		for (int u = 0; u < QPL; u++) {
			const int qi = lane + u * RL_WARP;
			/* a query of the chunk, a key of the chunk, causal */
			const bool see = qi < mq && krow >= ch.ks && krow < ke &&
			                 krow - ch.ks <= ch.off + i0 + qi;
			const float p = see ? expf(s[r][u] * scale - sm.L[qi]) : 0.0f;

			myP[r * BQ + qi] = p;
			myS[r * BQ + qi] = scale * p * (dp[r][u] - sm.Dsum[qi]);
		}
	}
	__syncwarp();
#pragma unroll 2
	for (int i4 = 0; i4 < BQ / 4; i4++) {
		float4 p4[RPW], s4[RPW];

#pragma unroll
		for (int r = 0; r < RPW; r++) {
			p4[r] = ((const float4 *)(myP + r * BQ))[i4];
			s4[r] = ((const float4 *)(myS + r * BQ))[i4];
		}
#pragma unroll
		for (int ii = 0; ii < 4; ii++) {
			const float *orow = sm.O + (4 * i4 + ii) * SS + lane;
			const float *qrow = sm.Q + (4 * i4 + ii) * SS + lane;
			float oo[DC], qq[DC];

#pragma unroll
			for (int c = 0; c < DC; c++) {
				oo[c] = orow[c * RL_WARP];
				qq[c] = qrow[c * RL_WARP];
			}
#pragma unroll
			for (int r = 0; r < RPW; r++) {
				const float pj = ii == 0   ? p4[r].x
				                 : ii == 1 ? p4[r].y
				                 : ii == 2 ? p4[r].z
				                           : p4[r].w;
				const float sj = ii == 0   ? s4[r].x
				                 : ii == 1 ? s4[r].y
				                 : ii == 2 ? s4[r].z
				                           : s4[r].w;

#pragma unroll
				for (int c = 0; c < DC; c++) {
					accv[r][c] = fmaf(pj, oo[c], accv[r][c]);
					acck[r][c] = fmaf(sj, qq[c], acck[r][c]);
				}
			}
		}
	}
}

template <int DC>
static __global__ void __launch_bounds__(RL_ATTN_THREADS, 1)
    rl_attn_dkdv_kernel(float *__restrict__ dk, float *__restrict__ dv,
                        const float *__restrict__ dout, const float *__restrict__ q,
                        const float *__restrict__ k, const float *__restrict__ v,
                        const float *__restrict__ out, const float *__restrict__ lse,
                        struct rl_attn_src src, const int *__restrict__ ts, int H, int Hkv, int D,
                        float scale)
{
	typedef rl_attn_kv_tile<DC> T;
	constexpr int RPW = T::RPW, BK = T::BK, BQ = T::BQ, SS = T::SS;
	extern __shared__ float4 rl_attn_smem[];
	struct rl_attn_kv_smem sm;

	sm.K = (float *)rl_attn_smem;
	sm.V = sm.K + BK * SS;
	sm.Q = sm.V + BK * SS;
	sm.O = sm.Q + BQ * SS;
	sm.P = sm.O + BQ * SS;
	sm.S = sm.P + BK * BQ;
	sm.L = sm.S + BK * BQ;
	sm.Dsum = sm.L + BQ;

	const int w = threadIdx.x / RL_WARP, lane = threadIdx.x % RL_WARP, wr0 = w * RPW;
	const int rep = H / Hkv;
	const size_t ldkv = (size_t)Hkv * D;
	/* one past the last key row any chunk reads */
	const int kend = ts[src.n + 1];
	const long long n_items = (kend + (long long)BK - 1) / BK * Hkv;

	for (long long it = blockIdx.x; it < n_items; it += gridDim.x) {
		const int g = (int)(it % Hkv), a = (int)(it / Hkv) * BK;
		const size_t kvo = (size_t)a * ldkv + (size_t)g * D;
		float acck[RPW][DC], accv[RPW][DC];
		/* bit r: key row a + wr0 + r is read by some chunk */
		unsigned covered = 0;

		__syncthreads(); /* the previous item is done with the tiles */
		for (int r = w; r < BK; r += RL_ATTN_WARPS) {
			const size_t o = kvo + (size_t)r * ldkv;

			rl_attn_load_row<DC>(sm.K + r * SS, k + o, a + r < kend, D);
			rl_attn_load_row<DC>(sm.V + r * SS, v + o, a + r < kend, D);
		}
#pragma unroll
		for (int r = 0; r < RPW; r++)
#pragma unroll
			for (int c = 0; c < DC; c++)
				acck[r][c] = accv[r][c] = 0.0f;

		for (int c = rl_attn_next_chunk(src, 0, a, a + BK); c < src.n;
		     c = rl_attn_next_chunk(src, c + 1, a, a + BK)) {
			const struct rl_attn_chunk ch = rl_attn_get(src, c);
			const int ke = ch.ks + ch.off + ch.len;
			/* the warp's key rows within the chunk's: [wlo, whi) */
			const int wlo = max(a + wr0, ch.ks), whi = min(a + wr0 + RPW, ke);
			/* the first query that sees a key of the tile */
			const int i_first = max(0, max(a, ch.ks) - ch.ks - ch.off);

#pragma unroll
			for (int r = 0; r < RPW; r++)
				if (a + wr0 + r >= ch.ks && a + wr0 + r < ke)
					covered |= 1u << r;

			for (int h = g * rep; h < (g + 1) * rep; h++)
				for (int i0 = i_first / BQ * BQ; i0 < ch.len; i0 += BQ) {
					const int mq = min(BQ, ch.len - i0);

					__syncthreads(); /* the previous query tile is consumed */
					rl_attn_kv_load_queries<DC>(
					    sm, dout, q, out, lse, (size_t)ch.qs + i0, mq, h, H, D);
					__syncthreads();
					/* the warp has keys here and the tile's last query
					 * sees the first of them */
					if (wlo < whi && wlo - ch.ks <= ch.off + i0 + mq - 1)
						rl_attn_kv_accumulate<DC>(acck, accv, sm, ch, a, i0,
						                          mq, scale);
				}
		}

#pragma unroll
		for (int r = 0; r < RPW; r++) {
			if (!(covered >> r & 1u))
				continue;

			const size_t o = kvo + (size_t)(wr0 + r) * ldkv;

#pragma unroll
			for (int c = 0; c < DC; c++) {
				const int d = lane + c * RL_WARP;

				if (d < D) {
					dk[o + d] += acck[r][c];
					dv[o + d] += accv[r][c];
				}
			}
		}
	}
}

template <int DC> static int rl_attn_dkdv_run(const struct rl_attn_bwd *b, cudaStream_t st)
{
	typedef rl_attn_kv_tile<DC> T;
	static int cache[RL_ATTN_MAX_DEVICES];
	int grid;

	if (rl_attn_grid((const void *)rl_attn_dkdv_kernel<DC>, T::SMEM, cache, &grid) != 0)
		return -1;
	rl_attn_dkdv_kernel<DC><<<grid, RL_ATTN_THREADS, T::SMEM, st>>>(
	    b->dk, b->dv, b->dout, b->q, b->k, b->v, b->out, b->lse, b->src, b->ts, b->H, b->Hkv,
	    b->D, b->scale);
	return rl_launched();
}

int rl_attn_dkdv_launch(const struct rl_attn_bwd *b, cudaStream_t st)
{
	static decltype(&rl_attn_dkdv_run<1>) const by_dc[] = RL_ATTN_BY_DC(rl_attn_dkdv_run);
	const int dc = rl_attn_dc(b->D);

	return rl_attn_dc_ok(dc) ? by_dc[dc - 1](b, st) : -1;
}
