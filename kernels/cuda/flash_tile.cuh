/* Shared-memory tiles of the bf16 flash-attention kernels: a tile is ROWS
 * rows of D bf16 (one head's slice of ROWS tokens), filled by cp.async and
 * read by ldmatrix.
 *
 * Rows are D * 2 = 128 or 256 bytes, so the 8 rows an ldmatrix reads at the
 * same column would all fall in the same 4 banks. The 16-byte chunk c of row
 * r is therefore stored at chunk c ^ (r % 8) of that row: 8 consecutive rows
 * put a logical chunk in 8 different places of a 128-byte line, and both
 * the cp.async writes (8 threads per row) and the ldmatrix reads (8 rows per
 * matrix, row starts multiples of 8) are free of bank conflicts.
 * defines: fl_swz, FL_TILE_ALIGN, fl_smem_pad, fl_load_tile, fl_load_rows_f32, struct fl_lane,
 * fl_lane_offsets, fl_frag_a, fl_frag_b_nk, fl_frag_b_kn, fl_c_to_a */
#ifndef RL_KERNELS_CUDA_FLASH_TILE_CUH
#define RL_KERNELS_CUDA_FLASH_TILE_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/flash_mma.cuh"

/* Byte offset of chunk c (columns 8c .. 8c+7) of row r in a tile of D-wide
 * rows. */
template <int D> static __device__ __forceinline__ uint32_t fl_swz(int r, int c)
{
	return (uint32_t)(r * (D * 2) + ((c ^ (r & 7)) << 4));
}

/* Tiles start at multiples of FL_TILE_ALIGN bytes of the shared window, so
 * that bits 4-7 of an address are the swizzled chunk alone (see fl_lane).
 * The kernels round their dynamic shared memory up to it. */
#define FL_TILE_ALIGN 256

static __device__ __forceinline__ uint32_t fl_smem_pad(const void *smem)
{
	return (0u - fl_smem_addr(smem)) & (FL_TILE_ALIGN - 1);
}

/* Rows 0 .. ROWS-1 of a tile from the global rows src + r * ld (ld in
 * elements), issued by all NT threads of the block as 16-byte cp.async;
 * rows r >= valid are zero-filled, so padding rows read as zeros (finite,
 * which the masked products rely on) and nothing past a sequence is read.
 * src must be 16-byte aligned and its row 0 readable. A thread keeps one
 * chunk column and steps by NT / (D / 8) rows, a multiple of 8, so its
 * swizzle is the same on every step. */
template <int ROWS, int D, int NT>
static __device__ __forceinline__ void fl_load_tile(uint32_t tile, const uint16_t *src, int64_t ld,
                                                    int valid)
{
	constexpr int cpr = D / 8, step = NT / cpr;

	static_assert(NT % cpr == 0 && step % 8 == 0 && ROWS % step == 0,
	              "every thread copies the same chunk column of rows 8 apart");
	const int r0 = (int)threadIdx.x / cpr, c = (int)threadIdx.x % cpr;
	const uint32_t dst = tile + fl_swz<D>(r0, c);

#pragma unroll
	for (int i = 0; i < ROWS / step; i++) {
		const int r = r0 + i * step;
		const bool ok = r < valid;

		fl_cp_async16(dst + (uint32_t)(i * step * D * 2),
		              src + (ok ? (int64_t)r * ld : 0) + c * 8, ok);
	}
}

/* ROWS floats src[r * ld] into a plain float array, zero for r >= valid. */
template <int ROWS, int NT>
static __device__ __forceinline__ void fl_load_rows_f32(uint32_t dst, const float *src, int64_t ld,
                                                        int valid)
{
	for (int r = (int)threadIdx.x; r < ROWS; r += NT) {
		const bool ok = r < valid;

		fl_cp_async4(dst + (uint32_t)r * 4, src + (ok ? (int64_t)r * ld : 0), ok);
	}
}

/* This lane's offsets into a tile for the three ldmatrix patterns below,
 * swizzle included, at column 0. Row blocks start at multiples of 8, so the
 * swizzle (row % 8) is the lane's own; a 16-column step k0 sets bits of the
 * chunk index the lane's bit does not, so the chunk for column k0 is the
 * chunk for column 0 XOR k0 / 8, and its address the column-0 address XOR
 * 2 k0 (bits 4-7, left alone by the tile's alignment and the row offset).
 * One register per tile then serves every fragment of it. */
struct fl_lane {
	uint32_t a, nk, kn;
};

template <int D> static __device__ __forceinline__ struct fl_lane fl_lane_offsets(void)
{
	const int lane = (int)threadIdx.x & 31, x = lane & 7;
	const int hi = lane >> 4, mid = (lane >> 3) & 1;
	struct fl_lane o;

	/* A: lanes 0-15 rows 0-15 at column 0, lanes 16-31 the same at 8 */
	o.a = (uint32_t)((lane & 15) * D * 2 + ((hi ^ x) << 4));
	/* B, n-major: lanes 0-7 rows 0-7 column 0, 8-15 rows 0-7 column 8,
	 * 16-23 rows 8-15 column 0, 24-31 rows 8-15 column 8 */
	o.nk = (uint32_t)((hi * 8 + x) * D * 2 + ((mid ^ x) << 4));
	/* B, k-major: lanes 0-7 rows 0-7 column 0, 8-15 rows 8-15 column 0,
	 * 16-23 rows 0-7 column 8, 24-31 rows 8-15 column 8 */
	o.kn = (uint32_t)((mid * 8 + x) * D * 2 + ((hi ^ x) << 4));
	return o;
}

/* The A fragment (16 x 16) of rows m0 .. m0+15, columns k0 .. k0+15 of a
 * tile; base is the tile plus fl_lane.a. Matrices 0-3 are A registers 0-3. */
template <int D>
static __device__ __forceinline__ void fl_frag_a(uint32_t a[4], uint32_t base, int m0, int k0)
{
	fl_ldsm_x4(a, (base ^ (uint32_t)(2 * k0)) + (uint32_t)(m0 * D * 2));
}

/* B fragments of two 8-wide n tiles from a tile stored n-major (row n,
 * column k), as K is for S = Q K^T: n rows n0 .. n0+15, k columns k0 ..
 * k0+15; base is the tile plus fl_lane.nk. b[0..1] is n tile n0 .. n0+7,
 * b[2..3] n tile n0+8 .. n0+15. */
template <int D>
static __device__ __forceinline__ void fl_frag_b_nk(uint32_t b[4], uint32_t base, int n0, int k0)
{
	fl_ldsm_x4(b, (base ^ (uint32_t)(2 * k0)) + (uint32_t)(n0 * D * 2));
}

/* The same from a tile stored k-major (row k, column n), as V is for
 * O = P V, through the transposing ldmatrix: k rows k0 .. k0+15, n columns
 * n0 .. n0+15; base is the tile plus fl_lane.kn. */
template <int D>
static __device__ __forceinline__ void fl_frag_b_kn(uint32_t b[4], uint32_t base, int k0, int n0)
{
	fl_ldsm_x4_t(b, (base ^ (uint32_t)(2 * n0)) + (uint32_t)(k0 * D * 2));
}

/* The accumulator tiles 2j and 2j+1 (16 x 16 fp32) as the bf16 A fragment
 * of k block j of the next product. */
static __device__ __forceinline__ void fl_c_to_a(uint32_t a[4], const float c0[4],
                                                 const float c1[4])
{
	a[0] = fl_pack_bf16(c0[0], c0[1]);
	a[1] = fl_pack_bf16(c0[2], c0[3]);
	a[2] = fl_pack_bf16(c1[0], c1[1]);
	a[3] = fl_pack_bf16(c1[2], c1[3]);
}

#endif
