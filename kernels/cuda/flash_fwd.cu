/* The bf16 attention forward, FlashAttention-2's algorithm: a block owns
 * FL_FWD_BM query rows of one (sequence, head) and walks the key tiles of
 * FL_FWD_BN keys up to its diagonal, keeping the softmax running (row max
 * m, row sum l) and the output unnormalised in fp32 registers; it divides
 * once at the end. Each warp owns 16 query rows, so a row's statistics live
 * in one quad of lanes and need no shared memory; the scores of a key tile
 * go from the accumulators of S = Q K^T straight to the A operand of O += P V.
 *
 * Key and value tiles are double-buffered: tile j+1 is in flight (cp.async)
 * while tile j is multiplied. The scores are kept in units of log2 (scaled
 * by scale * log2 e), so each exponential is one ex2. */
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/attention_bf16.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/flash_launch.cuh"
#include "kernels/cuda/flash_mma.cuh"
#include "kernels/cuda/flash_tile.cuh"

#define FL_FWD_BM      128 /* query rows per block: 8 warps of 16 */
#define FL_FWD_BN      64  /* keys per tile */
#define FL_FWD_THREADS 256

struct fl_fwd_params {
	uint16_t *out;
	float *lse;
	const uint16_t *q, *k, *v;
	const int32_t *cu;
	int n_heads, rep, ldq, ldkv; /* ld*: elements between tokens */
	float scale_log2;
};

/* Q, then two K tiles, then two V tiles, and the room to align them. */
template <int D> static constexpr int fl_fwd_smem(void)
{
	return (FL_FWD_BM + 4 * FL_FWD_BN) * D * 2 + FL_TILE_ALIGN;
}

/* Query rows m0 .. m0 + BM - 1 of one (sequence, head); q, k, v point at the
 * sequence's first token, moved to the head's columns. */
template <int D>
static __device__ __forceinline__ void fl_fwd_block(const struct fl_fwd_params &p, uint32_t s_q,
                                                    uint32_t s_k, uint32_t s_v, const uint16_t *q,
                                                    const uint16_t *k, const uint16_t *v,
                                                    int64_t row0, int h, int m0, int len)
{
	constexpr int BM = FL_FWD_BM, BN = FL_FWD_BN, NT = FL_FWD_THREADS;
	constexpr uint32_t kv_tile = BN * D * 2;
	const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
	const int g = lane / 4, t = lane % 4;
	const int row_w = m0 + warp * 16; /* the warp's first row */
	const int n_end = len < m0 + BM ? len : m0 + BM;
	const int n_kb = (n_end + BN - 1) / BN;
	const struct fl_lane ln = fl_lane_offsets<D>();

	fl_load_tile<BM, D, NT>(s_q, q + (int64_t)m0 * p.ldq, p.ldq, len - m0);
	fl_load_tile<BN, D, NT>(s_k, k, p.ldkv, len);
	fl_load_tile<BN, D, NT>(s_v, v, p.ldkv, len);
	fl_cp_async_commit();

	float o[D / 8][4], mx[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
	uint32_t qf[D / 16][4];

#pragma unroll
	for (int j = 0; j < D / 8; j++)
		o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

	for (int kb = 0; kb < n_kb; kb++) {
		const uint32_t buf = (uint32_t)(kb & 1) * kv_tile;
		const int n0 = kb * BN;

		/* Tile kb has landed everywhere, and every warp is done with
		 * tile kb - 1, whose buffers the prefetch below reuses. */
		fl_cp_async_wait_all();
		__syncthreads();
		if (kb + 1 < n_kb) {
			const uint32_t next = (uint32_t)((kb + 1) & 1) * kv_tile;

			fl_load_tile<BN, D, NT>(s_k + next, k + (int64_t)(n0 + BN) * p.ldkv, p.ldkv,
			                        len - n0 - BN);
			fl_load_tile<BN, D, NT>(s_v + next, v + (int64_t)(n0 + BN) * p.ldkv, p.ldkv,
			                        len - n0 - BN);
			fl_cp_async_commit();
		}
		if (kb == 0) {
#pragma unroll
			for (int kk = 0; kk < D / 16; kk++)
				fl_frag_a<D>(qf[kk], s_q + ln.a, warp * 16, kk * 16);
		}
		/* All of this warp's rows are before the tile (causal), or past
		 * the sequence: nothing to add. Key 0 is never skipped, so every
		 * real row's max is finite from the first tile on. */
		if (n0 > row_w + 15 || row_w >= len)
			continue;

		float s[BN / 8][4];

#pragma unroll
		for (int j = 0; j < BN / 8; j++)
			s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
		for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
			for (int nn = 0; nn < BN / 16; nn++) {
				uint32_t b[4];

				fl_frag_b_nk<D>(b, s_k + buf + ln.nk, nn * 16, kk * 16);
				fl_mma(s[2 * nn], qf[kk], b);
				fl_mma(s[2 * nn + 1], qf[kk], b + 2);
			}

		/* The mask only where the tile reaches past the warp's first row
		 * or past the sequence. */
		const bool edge = n0 + BN - 1 > row_w || n0 + BN > len;

#pragma unroll
		for (int j = 0; j < BN / 8; j++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int key = n0 + j * 8 + 2 * t + (e & 1);
				const int row = row_w + g + (e >> 1) * 8;

				s[j][e] *= p.scale_log2;
				if (edge && (key > row || key >= len))
					s[j][e] = -INFINITY;
			}

#pragma unroll
		for (int i = 0; i < 2; i++) {
			/* The online softmax of row g (i = 0) or g + 8 (i = 1). l
			 * stays this lane's partial sum: the quad's lanes rescale by
			 * the same factor, so it is summed across the quad once, at
			 * the end. */
			float m = mx[i];

#pragma unroll
			for (int j = 0; j < BN / 8; j++)
				m = fmaxf(m, fmaxf(s[j][2 * i], s[j][2 * i + 1]));
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
			m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
			/* A row with no key yet (only padding rows) keeps m = -inf;
			 * 0 keeps its exponentials 0 instead of NaN. */
			const float mu = m == -INFINITY ? 0.0f : m;
			const float alpha = fl_exp2(mx[i] - mu);
			float sum = 0.0f;

			mx[i] = m;
#pragma unroll
			for (int j = 0; j < BN / 8; j++) {
				s[j][2 * i] = fl_exp2(s[j][2 * i] - mu);
				s[j][2 * i + 1] = fl_exp2(s[j][2 * i + 1] - mu);
				sum += s[j][2 * i] + s[j][2 * i + 1];
			}
			l[i] = l[i] * alpha + sum;
#pragma unroll
			for (int j = 0; j < D / 8; j++) {
				o[j][2 * i] *= alpha;
				o[j][2 * i + 1] *= alpha;
			}
		}

#pragma unroll
		for (int kk = 0; kk < BN / 16; kk++) {
			uint32_t a[4];

			fl_c_to_a(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
			for (int dd = 0; dd < D / 16; dd++) {
				uint32_t b[4];

				fl_frag_b_kn<D>(b, s_v + buf + ln.kn, kk * 16, dd * 16);
				fl_mma(o[2 * dd], a, b);
				fl_mma(o[2 * dd + 1], a, b + 2);
			}
		}
	}

#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int row = row_w + g + i * 8;

		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
		l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
		if (row >= len)
			continue;

		const float inv = 1.0f / l[i];
		uint16_t *dst = p.out + (row0 + row) * p.ldq + (int64_t)h * D;

#pragma unroll
		for (int j = 0; j < D / 8; j++)
			*(uint32_t *)(dst + j * 8 + 2 * t) =
			    fl_pack_bf16(o[j][2 * i] * inv, o[j][2 * i + 1] * inv);
		if (t == 0)
			p.lse[(row0 + row) * p.n_heads + h] = mx[i] * FL_LN2 + logf(l[i]);
	}
}

template <int D>
static __global__ void __launch_bounds__(FL_FWD_THREADS) fl_fwd_kernel(const struct fl_fwd_params p)
{
	extern __shared__ __align__(128) unsigned char fl_smem[];
	const uint32_t s_q = fl_smem_addr(fl_smem) + fl_smem_pad(fl_smem);
	const uint32_t s_k = s_q + FL_FWD_BM * D * 2, s_v = s_k + 2 * FL_FWD_BN * D * 2;
	const int seq = (int)blockIdx.x / p.n_heads, h = (int)blockIdx.x % p.n_heads;
	const int64_t row0 = p.cu[seq];
	const int len = p.cu[seq + 1] - p.cu[seq];
	const uint16_t *q = p.q + row0 * p.ldq + (int64_t)h * D;
	const int64_t kv = row0 * p.ldkv + (int64_t)(h / p.rep) * D;

	/* The last row blocks see the most keys: blockIdx.y 0 takes the last
	 * one, so the long blocks start first and the short ones fill in. */
	for (int mb = (int)(gridDim.y - 1 - blockIdx.y); mb * FL_FWD_BM < len;
	     mb += (int)gridDim.y) {
		fl_fwd_block<D>(p, s_q, s_k, s_v, q, p.k + kv, p.v + kv, row0, h, mb * FL_FWD_BM,
		                len);
		__syncthreads(); /* the next row block reloads the tiles */
	}
}

template <int D> static int fl_fwd_launch(const struct fl_fwd_params &p, dim3 grid, void *stream)
{
	const int smem = fl_fwd_smem<D>();

	if (fl_smem_optin(fl_fwd_kernel<D>, smem))
		return -1;
	fl_fwd_kernel<D><<<grid, FL_FWD_THREADS, smem, rl_stream(stream)>>>(p);
	return rl_launched();
}

extern "C" int rl_attention_forward_bf16_cuda(uint16_t *out, float *lse, const uint16_t *q,
                                              const uint16_t *k, const uint16_t *v,
                                              const int32_t *cu_seqlens, int n_seqs, int max_seqlen,
                                              const struct rl_attention_shape *shape, void *stream)
{
	if (n_seqs < 0 || max_seqlen < 0 || !fl_shape_ok(shape, n_seqs) || !cu_seqlens)
		return -1;
	if (!fl_bf16_ok(out) || !fl_bf16_ok(q) || !fl_bf16_ok(k) || !fl_bf16_ok(v) ||
	    !fl_f32_ok(lse))
		return -1;
	if (n_seqs == 0)
		return 0;

	const int D = shape->head_dim;
	struct fl_fwd_params p;

	p.out = out;
	p.lse = lse;
	p.q = q;
	p.k = k;
	p.v = v;
	p.cu = cu_seqlens;
	p.n_heads = shape->n_heads;
	p.rep = shape->n_heads / shape->n_kv_heads;
	p.ldq = shape->n_heads * D;
	p.ldkv = shape->n_kv_heads * D;
	p.scale_log2 = shape->scale * FL_LOG2E;

	const dim3 grid = fl_grid(n_seqs * shape->n_heads, max_seqlen, FL_FWD_BM);

	return D == 64 ? fl_fwd_launch<64>(p, grid, stream) : fl_fwd_launch<128>(p, grid, stream);
}
