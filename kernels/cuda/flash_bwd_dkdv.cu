/* dK and dV of the bf16 attention backward. A block owns FL_DKDV_BN keys of
 * one (sequence, kv head); each of its 4 warps owns 16 of those keys and
 * keeps their dK and dV in fp32 registers while the block walks, for each
 * query head of the group in turn, the query tiles from the diagonal to
 * the end of the sequence. Per tile, with the scores transposed (keys on the
 * rows, so every product's A operand belongs to the warp):
 *   S^T = K Q^T, P^T = exp(S^T scale - lse), dV += P^T dO,
 *   dP^T = V dO^T, dS^T = P^T (dP^T - rowsum(dO * O)), dK += dS^T Q,
 * and dK is scaled once at the end. The sums over query heads and tiles run
 * in one fixed order in one block: no atomics, the same bits every run.
 * The query-side tiles (Q, dO, lse, rowsum) are double-buffered. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/flash_bwd.cuh"
#include "kernels/cuda/flash_launch.cuh"
#include "kernels/cuda/flash_mma.cuh"
#include "kernels/cuda/flash_tile.cuh"

#define FL_DKDV_BN      64 /* keys per block: 4 warps of 16 */
#define FL_DKDV_THREADS 128

/* Query rows per step: the warp holds dK, dV (D/2 floats each per lane)
 * and two score tiles (BM/4 floats each); 32 rows keep D = 128 at about 160
 * live floats, clear of the 255-register limit. */
template <int D> struct fl_dkdv_cfg {
	static constexpr int BM = D == 64 ? 64 : 32;
	static constexpr int kv_tile = FL_DKDV_BN * D * 2;
	static constexpr int q_tile = BM * D * 2;
	/* a stage: Q, dO, then lse and rowsum (BM floats each) */
	static constexpr int stage = 2 * q_tile + 2 * BM * 4;
	static constexpr int smem = 2 * kv_tile + 2 * stage + FL_TILE_ALIGN;
};

/* Queues query tile q0 of head h into a stage and commits the group. */
template <int D>
static __device__ __forceinline__ void fl_dkdv_issue(const struct fl_bwd_params &p, uint32_t stage,
                                                     int64_t row0, int h, int q0, int len)
{
	using C = fl_dkdv_cfg<D>;
	const int64_t r = row0 + q0, qo = r * p.ldq + (int64_t)h * D, lo = r * p.n_heads + h;

	fl_load_tile<C::BM, D, FL_DKDV_THREADS>(stage, p.q + qo, p.ldq, len - q0);
	fl_load_tile<C::BM, D, FL_DKDV_THREADS>(stage + C::q_tile, p.dout + qo, p.ldq, len - q0);
	fl_load_rows_f32<C::BM, FL_DKDV_THREADS>(stage + 2 * C::q_tile, p.lse + lo, p.n_heads,
	                                         len - q0);
	fl_load_rows_f32<C::BM, FL_DKDV_THREADS>(stage + 2 * C::q_tile + C::BM * 4, p.dsum + lo,
	                                         p.n_heads, len - q0);
	fl_cp_async_commit();
}

/* Keys n0 .. n0 + BN - 1 of kv head kvh of the sequence starting at row0. */
template <int D>
static __device__ __forceinline__ void fl_dkdv_block(const struct fl_bwd_params &p,
                                                     unsigned char *smem, int64_t row0, int kvh,
                                                     int n0, int len)
{
	using C = fl_dkdv_cfg<D>;
	constexpr int BM = C::BM, NT = FL_DKDV_THREADS;
	const uint32_t s_k = fl_smem_addr(smem), s_v = s_k + C::kv_tile, s_st = s_v + C::kv_tile;
	const struct fl_lane ln = fl_lane_offsets<D>();
	const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
	const int g = lane / 4, t = lane % 4;
	const int kw = n0 + warp * 16; /* the warp's first key */
	/* Queries before n0 see none of these keys: start at n0's tile. */
	const int qb_first = n0 / BM, n_qb = (len + BM - 1) / BM - qb_first;
	const int n_it = p.rep * n_qb;
	const int64_t kv = (row0 + n0) * p.ldkv + (int64_t)kvh * D;

	fl_load_tile<FL_DKDV_BN, D, NT>(s_k, p.k + kv, p.ldkv, len - n0);
	fl_load_tile<FL_DKDV_BN, D, NT>(s_v, p.v + kv, p.ldkv, len - n0);
	fl_dkdv_issue<D>(p, s_st, row0, kvh * p.rep, qb_first * BM, len);

	float dk[D / 8][4], dv[D / 8][4];

#pragma unroll
	for (int j = 0; j < D / 8; j++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			dk[j][e] = dv[j][e] = 0.0f;

	for (int it = 0; it < n_it; it++) {
		const int st = it & 1;
		const uint32_t s_q = s_st + (uint32_t)st * C::stage, s_do = s_q + C::q_tile;
		const float *s_lse =
		    (const float *)(smem + 2 * C::kv_tile + st * C::stage + 2 * C::q_tile);
		const float *s_dsum = s_lse + BM;
		const int q0 = (qb_first + it % n_qb) * BM;

		/* Stage st has landed everywhere and every warp is done with
		 * the other one, which the prefetch below overwrites. */
		fl_cp_async_wait_all();
		__syncthreads();
		if (it + 1 < n_it)
			fl_dkdv_issue<D>(p, s_st + (uint32_t)(st ^ 1) * C::stage, row0,
			                 kvh * p.rep + (it + 1) / n_qb,
			                 (qb_first + (it + 1) % n_qb) * BM, len);
		/* Every key of the warp after every query of the tile, or past
		 * the sequence (never stored): P is 0, nothing to add. */
		if (kw > q0 + BM - 1 || kw >= len)
			continue;

		float s[BM / 8][4], dp[BM / 8][4];

#pragma unroll
		for (int j = 0; j < BM / 8; j++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			uint32_t a[4];

			fl_frag_a<D>(a, s_k + ln.a, warp * 16, kk * 16);
#pragma unroll
			for (int nn = 0; nn < BM / 16; nn++) {
				uint32_t b[4];

				fl_frag_b_nk<D>(b, s_q + ln.nk, nn * 16, kk * 16);
				fl_mma(s[2 * nn], a, b);
				fl_mma(s[2 * nn + 1], a, b + 2);
			}
		}

		/* P^T; masked entries (key after query, query past the end)
		 * are set, not computed: their exponentials may overflow. */
		const bool edge = kw + 15 > q0 || q0 + BM > len;

#pragma unroll
		for (int j = 0; j < BM / 8; j++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int col = j * 8 + 2 * t + (e & 1);
				const int key = kw + g + (e >> 1) * 8, q = q0 + col;
				const float pe =
				    fl_exp2(fmaf(s[j][e], p.scale_log2, -s_lse[col] * FL_LOG2E));

				s[j][e] = edge && (key > q || q >= len) ? 0.0f : pe;
			}

#pragma unroll
		for (int kk = 0; kk < BM / 16; kk++) {
			uint32_t a[4];

			fl_c_to_a(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
			for (int dd = 0; dd < D / 16; dd++) {
				uint32_t b[4];

				fl_frag_b_kn<D>(b, s_do + ln.kn, kk * 16, dd * 16);
				fl_mma(dv[2 * dd], a, b);
				fl_mma(dv[2 * dd + 1], a, b + 2);
			}
		}

#pragma unroll
		for (int kk = 0; kk < D / 16; kk++) {
			uint32_t a[4];

			fl_frag_a<D>(a, s_v + ln.a, warp * 16, kk * 16);
#pragma unroll
			for (int nn = 0; nn < BM / 16; nn++) {
				uint32_t b[4];

				fl_frag_b_nk<D>(b, s_do + ln.nk, nn * 16, kk * 16);
				fl_mma(dp[2 * nn], a, b);
				fl_mma(dp[2 * nn + 1], a, b + 2);
			}
		}

		/* dS^T, in place of dP^T */
#pragma unroll
		for (int j = 0; j < BM / 8; j++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				dp[j][e] = s[j][e] * (dp[j][e] - s_dsum[j * 8 + 2 * t + (e & 1)]);

#pragma unroll
		for (int kk = 0; kk < BM / 16; kk++) {
			uint32_t a[4];

			fl_c_to_a(a, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
			for (int dd = 0; dd < D / 16; dd++) {
				uint32_t b[4];

				fl_frag_b_kn<D>(b, s_q + ln.kn, kk * 16, dd * 16);
				fl_mma(dk[2 * dd], a, b);
				fl_mma(dk[2 * dd + 1], a, b + 2);
			}
		}
	}

#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int key = kw + g + i * 8;

		if (key >= len)
			continue;

		const int64_t o = (row0 + key) * p.ldkv + (int64_t)kvh * D + 2 * t;

#pragma unroll
		for (int j = 0; j < D / 8; j++) {
			*(uint32_t *)(p.dk + o + j * 8) =
			    fl_pack_bf16(dk[j][2 * i] * p.scale, dk[j][2 * i + 1] * p.scale);
			*(uint32_t *)(p.dv + o + j * 8) =
			    fl_pack_bf16(dv[j][2 * i], dv[j][2 * i + 1]);
		}
	}
}

template <int D>
static __global__ void __launch_bounds__(FL_DKDV_THREADS)
    fl_dkdv_kernel(const struct fl_bwd_params p)
{
	extern __shared__ __align__(128) unsigned char fl_smem[];
	const int seq = (int)blockIdx.x / p.n_kv_heads, kvh = (int)blockIdx.x % p.n_kv_heads;
	const int64_t row0 = p.cu[seq];
	const int len = p.cu[seq + 1] - p.cu[seq];

	/* The first key tiles see the most queries; they start first. */
	for (int nb = (int)blockIdx.y; nb * FL_DKDV_BN < len; nb += (int)gridDim.y) {
		fl_dkdv_block<D>(p, fl_smem + fl_smem_pad(fl_smem), row0, kvh, nb * FL_DKDV_BN,
		                 len);
		__syncthreads(); /* the next key tile reloads the tiles */
	}
}

template <int D> static int fl_dkdv_run(const struct fl_bwd_params *p, void *stream)
{
	const dim3 grid = fl_grid(p->n_seqs * p->n_kv_heads, p->max_seqlen, FL_DKDV_BN);

	if (fl_smem_optin(fl_dkdv_kernel<D>, fl_dkdv_cfg<D>::smem))
		return -1;
	fl_dkdv_kernel<D><<<grid, FL_DKDV_THREADS, fl_dkdv_cfg<D>::smem, rl_stream(stream)>>>(*p);
	return rl_launched();
}

int rl_flash_bwd_dkdv_launch(const struct fl_bwd_params *p, int head_dim, void *stream)
{
	return head_dim == 64 ? fl_dkdv_run<64>(p, stream) : fl_dkdv_run<128>(p, stream);
}
