/* dQ of the bf16 attention backward. A block owns FL_DQ_BM query rows of
 * one (sequence, head), 16 per warp, and walks the key tiles up to its
 * diagonal as the forward does, recomputing per tile
 *   S = Q K^T, P = exp(S scale - lse), dP = dO V^T,
 *   dS = P (dP - rowsum(dO * O)), dQ += dS K,
 * with dQ in fp32 registers, scaled once at the end. One block sums each
 * row in a fixed order: no atomics, the same bits every run. Key and value
 * tiles are double-buffered. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/flash_bwd.cuh"
#include "kernels/cuda/flash_launch.cuh"
#include "kernels/cuda/flash_mma.cuh"
#include "kernels/cuda/flash_tile.cuh"

#define FL_DQ_BM      64 /* query rows per block: 4 warps of 16 */
#define FL_DQ_BN      64 /* keys per tile */
#define FL_DQ_THREADS 128

/* Q, dO, then two K tiles and two V tiles, interleaved K, V, K, V. */
template <int D> struct fl_dq_cfg {
	static constexpr int q_tile = FL_DQ_BM * D * 2;
	static constexpr int kv_tile = FL_DQ_BN * D * 2;
	static constexpr int smem = 2 * q_tile + 4 * kv_tile + FL_TILE_ALIGN;
};

/* Query rows m0 .. m0 + BM - 1 of head h of the sequence starting at row0. */
template <int D>
static __device__ __forceinline__ void fl_dq_block(const struct fl_bwd_params &p, uint32_t s_q,
                                                   int64_t row0, int h, int m0, int len)
{
	using C = fl_dq_cfg<D>;
	constexpr int BM = FL_DQ_BM, BN = FL_DQ_BN, NT = FL_DQ_THREADS, SUB = 32;
	const uint32_t s_do = s_q + C::q_tile, s_kv = s_do + C::q_tile;
	const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
	const int g = lane / 4, t = lane % 4;
	const int row_w = m0 + warp * 16; /* the warp's first row */
	const int n_end = len < m0 + BM ? len : m0 + BM;
	const int n_kb = (n_end + BN - 1) / BN;
	const int64_t qo = (row0 + m0) * p.ldq + (int64_t)h * D;
	const int64_t kv = row0 * p.ldkv + (int64_t)(h / p.rep) * D;
	const struct fl_lane ln = fl_lane_offsets<D>();

	fl_load_tile<BM, D, NT>(s_q, p.q + qo, p.ldq, len - m0);
	fl_load_tile<BM, D, NT>(s_do, p.dout + qo, p.ldq, len - m0);
	fl_load_tile<BN, D, NT>(s_kv, p.k + kv, p.ldkv, len);
	fl_load_tile<BN, D, NT>(s_kv + C::kv_tile, p.v + kv, p.ldkv, len);
	fl_cp_async_commit();

	/* This lane's rows: g and g + 8 of the warp. Padding rows are
	 * masked, whatever these read as. */
	float lse_l2[2], dsum[2], dq[D / 8][4];

#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int row = row_w + g + i * 8;
		const int64_t lo = (row0 + row) * p.n_heads + h;

		lse_l2[i] = row < len ? p.lse[lo] * FL_LOG2E : 0.0f;
		dsum[i] = row < len ? p.dsum[lo] : 0.0f;
	}
#pragma unroll
	for (int j = 0; j < D / 8; j++)
		dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;

	for (int kb = 0; kb < n_kb; kb++) {
		const uint32_t s_k = s_kv + (uint32_t)(kb & 1) * 2 * C::kv_tile;
		const uint32_t s_v = s_k + C::kv_tile;
		const int n0 = kb * BN;

		/* Tile kb has landed everywhere and every warp is done with
		 * tile kb - 1, whose buffers the prefetch below reuses. */
		fl_cp_async_wait_all();
		__syncthreads();
		if (kb + 1 < n_kb) {
			const uint32_t next = s_kv + (uint32_t)((kb + 1) & 1) * 2 * C::kv_tile;
			const int64_t o = kv + (int64_t)(n0 + BN) * p.ldkv;

			fl_load_tile<BN, D, NT>(next, p.k + o, p.ldkv, len - n0 - BN);
			fl_load_tile<BN, D, NT>(next + C::kv_tile, p.v + o, p.ldkv, len - n0 - BN);
			fl_cp_async_commit();
		}
		/* All of the warp's rows before the tile, or past the end. */
		if (n0 > row_w + 15 || row_w >= len)
			continue;

#pragma unroll 1
		for (int sub = 0; sub < BN; sub += SUB) {
			/* The tile in parts of SUB keys: a part's S and dP (SUB / 4
			 * floats each per lane) beside dQ (D / 2) keep D = 128 clear
			 * of the register limit. */
			const int n1 = n0 + sub;
			const uint32_t k_nk = s_k + ln.nk + (uint32_t)(sub * D * 2);
			const uint32_t v_nk = s_v + ln.nk + (uint32_t)(sub * D * 2);
			const uint32_t k_kn = s_k + ln.kn + (uint32_t)(sub * D * 2);

			if (n1 > row_w + 15)
				break;

			float s[SUB / 8][4], dp[SUB / 8][4];

#pragma unroll
			for (int j = 0; j < SUB / 8; j++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					s[j][e] = dp[j][e] = 0.0f;
#pragma unroll 4
			for (int kk = 0; kk < D / 16; kk++) {
				/* Unrolled by 4, not 8: fully unrolled for D = 128,
				 * ptxas hoists the fragment loads past 255 registers
				 * and spills. */
				uint32_t aq[4], ado[4];

				fl_frag_a<D>(aq, s_q + ln.a, warp * 16, kk * 16);
				fl_frag_a<D>(ado, s_do + ln.a, warp * 16, kk * 16);
#pragma unroll
				for (int nn = 0; nn < SUB / 16; nn++) {
					uint32_t b[4];

					fl_frag_b_nk<D>(b, k_nk, nn * 16, kk * 16);
					fl_mma(s[2 * nn], aq, b);
					fl_mma(s[2 * nn + 1], aq, b + 2);
					fl_frag_b_nk<D>(b, v_nk, nn * 16, kk * 16);
					fl_mma(dp[2 * nn], ado, b);
					fl_mma(dp[2 * nn + 1], ado, b + 2);
				}
			}

			/* dS, in place of dP; masked entries are set, not
			 * computed (their exponentials may overflow). */
			const bool edge = n1 + SUB - 1 > row_w || n1 + SUB > len;

#pragma unroll
			for (int j = 0; j < SUB / 8; j++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					const int key = n1 + j * 8 + 2 * t + (e & 1);
					const int row = row_w + g + (e >> 1) * 8;
					const float pe =
					    fl_exp2(fmaf(s[j][e], p.scale_log2, -lse_l2[e >> 1]));

					dp[j][e] = edge && (key > row || key >= len)
					               ? 0.0f
					               : pe * (dp[j][e] - dsum[e >> 1]);
				}

#pragma unroll
			for (int kk = 0; kk < SUB / 16; kk++) {
				uint32_t a[4];

				fl_c_to_a(a, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
				for (int dd = 0; dd < D / 16; dd++) {
					uint32_t b[4];

					fl_frag_b_kn<D>(b, k_kn, kk * 16, dd * 16);
					fl_mma(dq[2 * dd], a, b);
					fl_mma(dq[2 * dd + 1], a, b + 2);
				}
			}
		}
	}

#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int row = row_w + g + i * 8;

		if (row >= len)
			continue;

		uint16_t *dst = p.dq + (row0 + row) * p.ldq + (int64_t)h * D + 2 * t;

#pragma unroll
		for (int j = 0; j < D / 8; j++)
			*(uint32_t *)(dst + j * 8) =
			    fl_pack_bf16(dq[j][2 * i] * p.scale, dq[j][2 * i + 1] * p.scale);
	}
}

template <int D>
static __global__ void __launch_bounds__(FL_DQ_THREADS) fl_dq_kernel(const struct fl_bwd_params p)
{
	extern __shared__ __align__(128) unsigned char fl_smem[];
	const int seq = (int)blockIdx.x / p.n_heads, h = (int)blockIdx.x % p.n_heads;
	const int64_t row0 = p.cu[seq];
	const int len = p.cu[seq + 1] - p.cu[seq];

	/* The last row blocks see the most keys; they start first. */
	for (int mb = (int)(gridDim.y - 1 - blockIdx.y); mb * FL_DQ_BM < len;
	     mb += (int)gridDim.y) {
		fl_dq_block<D>(p, fl_smem_addr(fl_smem) + fl_smem_pad(fl_smem), row0, h,
		               mb * FL_DQ_BM, len);
		__syncthreads(); /* the next row block reloads the tiles */
	}
}

template <int D> static int fl_dq_run(const struct fl_bwd_params *p, void *stream)
{
	const dim3 grid = fl_grid(p->n_seqs * p->n_heads, p->max_seqlen, FL_DQ_BM);

	if (fl_smem_optin(fl_dq_kernel<D>, fl_dq_cfg<D>::smem))
		return -1;
	fl_dq_kernel<D><<<grid, FL_DQ_THREADS, fl_dq_cfg<D>::smem, rl_stream(stream)>>>(*p);
	return rl_launched();
}

int rl_flash_bwd_dq_launch(const struct fl_bwd_params *p, int head_dim, void *stream)
{
	return head_dim == 64 ? fl_dq_run<64>(p, stream) : fl_dq_run<128>(p, stream);
}
