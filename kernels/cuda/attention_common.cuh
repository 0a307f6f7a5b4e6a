/* What the CUDA attention kernels (attention_forward.cu, attention_backward*.cu)
 * share. Private to kernels/cuda/attention*.cu.
 *
 * Both forwards and both backwards are one machine: a "source" of chunks
 * (packed sequences from cu_seqlens, or a chunk table), a "work item" of
 * one query tile of one chunk and one head (the key tiles of the dk/dv pass
 * are items of their own), and a persistent grid whose blocks stride over
 * the items. The tables live in device memory and the host never learns T
 * or the longest sequence, so the number of items is read by the kernel
 * itself from a tile map (per chunk an exclusive scan of its query tiles,
 * built by a one-block kernel); a block finds its chunk by binary search.
 *
 * Lanes of a warp own head-dim columns lane + 32 c (c < DC, DC = head_dim
 * rounded up to whole warps / 32) for the products with V (or K, Q, dO), and
 * rows lane + 32 u of the other operand for the dot products. Tiles in
 * shared memory have a row stride of 32 DC + 4 floats: an odd number of
 * float4, so that lanes reading float4 from different rows hit different
 * banks. Columns head_dim .. 32 DC - 1 are stored as zeros, so every dot
 * product runs over 32 DC columns with a compile-time trip count.
 * defines: RL_ATTN_*, struct rl_attn_src, struct rl_attn_chunk, struct rl_attn_bwd,
 * rl_attn_get, rl_attn_n_tiles, rl_attn_find, rl_attn_next_chunk, rl_attn_load_row,
 * rl_attn_dot4, rl_attn_rows_init, rl_attn_scores, rl_attn_softmax_row,
 * rl_attn_rows_mm, rl_attn_*_rpw/bk/bq, rl_attn_dc, RL_ATTN_BY_DC, rl_attn_dc_ok,
 * rl_attn_seqs_src, rl_attn_chunks_ok, rl_attn_chunks_src, rl_attn_chunks_check,
 * rl_attn_build_map, rl_attn_release_map, rl_attn_shape_ok, rl_attn_grid, rl_attn_dq_launch,
 * rl_attn_dkdv_launch */
#ifndef RL_KERNELS_CUDA_ATTENTION_COMMON_CUH
#define RL_KERNELS_CUDA_ATTENTION_COMMON_CUH

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"

#define RL_ATTN_THREADS 256
#define RL_ATTN_WARPS   (RL_ATTN_THREADS / RL_WARP)
/* the widest head the register tiles hold: 8 columns per lane */
#define RL_ATTN_MAX_DC  8
#define RL_ATTN_MAX_DIM (RL_ATTN_MAX_DC * RL_WARP)
/* devices whose launch configuration is cached */
#define RL_ATTN_MAX_DEVICES 64

/* Where the chunks come from: cu (packed sequences, chunk s is sequence s),
 * else the chunk table. n chunks. */
struct rl_attn_src {
	const int32_t *cu;
	const int32_t *q_start, *k_start, *offset, *len;
	int n;
};

/* queries rows qs .. qs + len - 1 at positions off .. off + len - 1, keys
 * from row ks */
struct rl_attn_chunk {
	int qs, ks, off, len;
};

/* Chunk c. A malformed one (a negative row, offset or length, or rows past
 * INT_MAX) reads as empty: the CPU op refuses such tables, but a device
 * table cannot be checked from the host without a synchronisation, so here
 * it is at least never read out of its rows. */
static __device__ __forceinline__ struct rl_attn_chunk rl_attn_get(const struct rl_attn_src &s,
                                                                   int c)
{
	struct rl_attn_chunk ch;
	long long len;

	if (s.cu) {
		ch.qs = ch.ks = s.cu[c];
		ch.off = 0;
		len = (long long)s.cu[c + 1] - s.cu[c];
	} else {
		ch.qs = s.q_start[c];
		ch.ks = s.k_start[c];
		ch.off = s.offset[c];
		len = s.len[c];
	}
	if (ch.qs < 0 || ch.ks < 0 || ch.off < 0 || len < 0 || ch.qs + len > INT_MAX ||
	    (long long)ch.ks + ch.off + len > INT_MAX)
		len = 0;
	ch.len = (int)len;
	return ch;
}

/* Query tiles of all chunks: the tile map's total. */
static __device__ __forceinline__ int rl_attn_n_tiles(const int *ts, const struct rl_attn_src &s)
{
	return ts[s.n];
}

/* Tile t (< the total) as (chunk *c, tile *lt of that chunk). Within a
 * chunk the tiles are handed out from the last, which sees the most keys,
 * so that the expensive items are started first. */
static __device__ __forceinline__ void rl_attn_find(const int *ts, const struct rl_attn_src &s,
                                                    int t, int *c, int *lt)
{
	int lo = 0, hi = s.n;

	/* the last chunk with ts[chunk] <= t: empty chunks are skipped */
	while (hi - lo > 1) {
		const int mid = lo + (hi - lo) / 2;

		if (ts[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	*c = lo;
	*lt = ts[lo + 1] - 1 - t;
}

/* The first chunk c >= from whose key rows meet [a, b), or s.n. Called by
 * whole warps with the same arguments (every warp finds the same chunk). */
static __device__ int rl_attn_next_chunk(const struct rl_attn_src &s, int from, int a, int b)
{
	if (s.cu) {
		/* packed sequences are sorted: the first one ending after a */
		int lo = from, hi = s.n;

		while (lo < hi) {
			const int mid = lo + (hi - lo) / 2;

			if (s.cu[mid + 1] > a)
				hi = mid;
			else
				lo = mid + 1;
		}
		for (; lo < s.n; lo++) {
			const struct rl_attn_chunk ch = rl_attn_get(s, lo);

			if (ch.ks >= b)
				return s.n;
			if (ch.len > 0 && ch.ks + ch.len > a)
				return lo;
		}
		return s.n;
	}

	const int lane = threadIdx.x % RL_WARP;

	for (int base = from; base < s.n; base += RL_WARP) {
		bool hit = false;

		if (base + lane < s.n) {
			const struct rl_attn_chunk ch = rl_attn_get(s, base + lane);

			hit = ch.len > 0 && ch.ks < b && (long long)ch.ks + ch.off + ch.len > a;
		}

		const unsigned m = __ballot_sync(0xffffffffu, hit);

		if (m)
			return base + __ffs(m) - 1;
	}
	return s.n;
}

/* One row of a tile, by one warp: dst[0 .. 32 DC) = src[0 .. dim) and zeros
 * after, or all zeros when !valid (src is then not read). */
template <int DC>
static __device__ __forceinline__ void rl_attn_load_row(float *dst, const float *src, bool valid,
                                                        int dim)
{
	const int lane = threadIdx.x % RL_WARP;

#pragma unroll
	for (int c = 0; c < DC; c++) {
		const int d = lane + c * RL_WARP;

		dst[d] = valid && d < dim ? src[d] : 0.0f;
	}
}

/* acc + a . b, the order fixed so that every kernel recomputes the same
 * score bits */
static __device__ __forceinline__ float rl_attn_dot4(float4 a, float4 b, float acc)
{
	acc = fmaf(a.x, b.x, acc);
	acc = fmaf(a.y, b.y, acc);
	acc = fmaf(a.z, b.z, acc);
	return fmaf(a.w, b.w, acc);
}

/* The running state of RPW query rows of one warp: max -inf, sum and
 * output 0. */
template <int RPW, int DC>
static __device__ __forceinline__ void rl_attn_rows_init(float (&mx)[RPW], float (&l)[RPW],
                                                         float (&acc)[RPW][DC])
{
#pragma unroll
	for (int r = 0; r < RPW; r++) {
		mx[r] = -INFINITY;
		l[r] = 0.0f;
#pragma unroll
		for (int c2 = 0; c2 < DC; c2++)
			acc[r][c2] = 0.0f;
	}
}

/* s[r][u] = the unscaled score of query row r of the warp (sQw: its first
 * row) with key row lane + 32 u of the tile sK. */
template <int RPW, int KPL, int SS>
static __device__ __forceinline__ void rl_attn_scores(float (&s)[RPW][KPL], const float *sQw,
                                                      const float *sK)
{
	const int lane = threadIdx.x % RL_WARP;
	const float4 *q4 = (const float4 *)sQw;
	const float4 *k4 = (const float4 *)(sK + lane * SS);

#pragma unroll
	for (int r = 0; r < RPW; r++)
#pragma unroll
		for (int u = 0; u < KPL; u++)
			s[r][u] = 0.0f;
#pragma unroll 4
	for (int d4 = 0; d4 < SS / 4 - 1; d4++) {
		float4 kv[KPL];

#pragma unroll
		for (int u = 0; u < KPL; u++)
			kv[u] = k4[u * RL_WARP * (SS / 4) + d4];
#pragma unroll
		for (int r = 0; r < RPW; r++) {
			const float4 qv = q4[r * (SS / 4) + d4];

#pragma unroll
			for (int u = 0; u < KPL; u++)
				s[r][u] = rl_attn_dot4(qv, kv[u], s[r][u]);
		}
	}
}

/* One online-softmax step of one row over the keys k0 + lane + 32 u: keys
 * past kmax are masked, the row's max, sum and output rescaled, and the
 * probabilities stored to p[lane + 32 u]. The row has seen a key by the end
 * of the tile (key 0 is in the first), so its max is finite. */
template <int KPL, int DC>
static __device__ __forceinline__ void rl_attn_softmax_row(float (&s)[KPL], int k0, int kmax,
                                                           float scale, float &mx, float &l,
                                                           float (&acc)[DC], float *p)
{
	const int lane = threadIdx.x % RL_WARP;
	float tmax = -INFINITY;

#pragma unroll
	for (int u = 0; u < KPL; u++) {
		const int kp = k0 + lane + u * RL_WARP;

		s[u] = kp <= kmax ? s[u] * scale : -INFINITY;
		tmax = fmaxf(tmax, s[u]);
	}

	const float mnew = fmaxf(mx, rl_warp_max(tmax));
	const float alpha = expf(mx - mnew);

	mx = mnew;
	l *= alpha;
#pragma unroll
	for (int c2 = 0; c2 < DC; c2++)
		acc[c2] *= alpha;
#pragma unroll
	for (int u = 0; u < KPL; u++) {
		const float pu = expf(s[u] - mnew);

		l += pu;
		p[lane + u * RL_WARP] = pu;
	}
}

/* acc[r][c] += sum_j w[r][j] x[j][lane + 32 c]: the warp's RPW rows of
 * weights (w: rows of BK floats, 16-byte aligned) times the tile x (BK
 * rows of stride SS), j in order. */
template <int RPW, int DC, int BK, int SS>
static __device__ __forceinline__ void rl_attn_rows_mm(float (&acc)[RPW][DC], const float *w,
                                                       const float *x)
{
	const int lane = threadIdx.x % RL_WARP;

#pragma unroll 2
	for (int j4 = 0; j4 < BK / 4; j4++) {
		float4 p[RPW];

#pragma unroll
		for (int r = 0; r < RPW; r++)
			p[r] = ((const float4 *)(w + r * BK))[j4];
#pragma unroll
		for (int jj = 0; jj < 4; jj++) {
			const float *xr = x + (4 * j4 + jj) * SS + lane;
			float xv[DC];

#pragma unroll
			for (int c2 = 0; c2 < DC; c2++)
				xv[c2] = xr[c2 * RL_WARP];
#pragma unroll
			for (int r = 0; r < RPW; r++) {
				const float pj = jj == 0   ? p[r].x
				                 : jj == 1 ? p[r].y
				                 : jj == 2 ? p[r].z
				                           : p[r].w;

#pragma unroll
				for (int c2 = 0; c2 < DC; c2++)
					acc[r][c2] = fmaf(pj, xv[c2], acc[r][c2]);
			}
		}
	}
}

/* Tile shapes by DC, chosen so that every kernel fits the 163 KiB of
 * shared memory an A100 block can opt in to (the H100 has 227 KiB) and its
 * register tiles stay near 64 floats a thread:
 * forward: rpw query rows a warp, 64 keys a tile;
 * dq: rpw query rows a warp, bk keys a tile;
 * dk/dv: rpw key rows a warp, bq queries a tile. */
static __host__ __device__ constexpr int rl_attn_fwd_rpw(int dc)
{
	return dc <= 4 ? 8 : 4;
}

static __host__ __device__ constexpr int rl_attn_dq_rpw(int dc)
{
	return dc <= 4 ? 8 : 4;
}

static __host__ __device__ constexpr int rl_attn_dq_bk(int dc)
{
	return dc <= 2 ? 64 : 32;
}

static __host__ __device__ constexpr int rl_attn_kv_rpw(int dc)
{
	return dc <= 4 ? 8 : 4;
}

static __host__ __device__ constexpr int rl_attn_kv_bq(int dc)
{
	return dc <= 2 ? 64 : 32;
}

/* columns per lane for head_dim d (1 .. RL_ATTN_MAX_DIM) */
static inline int rl_attn_dc(int d)
{
	return (d + RL_WARP - 1) / RL_WARP;
}

/* The instances f<1> .. f<RL_ATTN_MAX_DC> of a host function templated on
 * DC, as a table indexed by DC - 1: the ops pick theirs with
 * rl_attn_dc_ok(dc) ? table[dc - 1](...) : -1. */
#define RL_ATTN_BY_DC(f)                                                                           \
	{                                                                                          \
		f<1>, f<2>, f<3>, f<4>, f<5>, f<6>, f<7>, f<8>                                     \
	}
static_assert(RL_ATTN_MAX_DC == 8, "RL_ATTN_BY_DC lists every DC");

static inline bool rl_attn_dc_ok(int dc)
{
	return dc >= 1 && dc <= RL_ATTN_MAX_DC;
}

/* The tile map of src for query tiles of bq rows, in device memory from
 * the pool, ordered on st (rl_cuda_alloc_async): ts[0 .. n] the exclusive
 * scan of the chunks' tile counts and ts[n + 1] one past the last key row
 * any chunk reads. Built by a kernel on st; NULL when out of memory or the
 * launch failed. Released after the kernels that read it are queued on st:
 * the pool reuses it only after they ran. */
int *rl_attn_build_map(const struct rl_attn_src *src, int bq, cudaStream_t st);
void rl_attn_release_map(int *ts, cudaStream_t st);

/* The shapes the kernels exist for: the CPU op's, head_dim at most
 * RL_ATTN_MAX_DIM. */
static inline bool rl_attn_shape_ok(const struct rl_attention_shape *sh)
{
	return sh && sh->n_heads > 0 && sh->n_kv_heads > 0 && sh->head_dim > 0 &&
	       sh->head_dim <= RL_ATTN_MAX_DIM && sh->n_heads % sh->n_kv_heads == 0;
}

/* The sources of packed sequences and of a chunk table whose arrays the
 * caller checked (rl_attn_chunks_ok). */
static inline struct rl_attn_src rl_attn_seqs_src(const int32_t *cu_seqlens, int n_seqs)
{
	return {cu_seqlens, NULL, NULL, NULL, NULL, n_seqs};
}

static inline bool rl_attn_chunks_ok(const struct rl_attention_chunks *c)
{
	return c->q_start && c->k_start && c->offset && c->len;
}

static inline struct rl_attn_src rl_attn_chunks_src(const struct rl_attention_chunks *c)
{
	return {NULL, c->q_start, c->k_start, c->offset, c->len, c->n};
}

/* The checks of a chunk-table op before its pointers: -1 (bad shape or
 * table), 0 (no chunk: nothing to do) or 1 (go on). */
static inline int rl_attn_chunks_check(const struct rl_attention_chunks *c,
                                       const struct rl_attention_shape *sh)
{
	if (!rl_attn_shape_ok(sh) || !c || c->n < 0)
		return -1;
	if (c->n == 0)
		return 0;
	return rl_attn_chunks_ok(c) ? 1 : -1;
}

/* The persistent grid for kernel (RL_ATTN_THREADS threads, smem bytes of
 * dynamic shared memory): the blocks that fit on the device at once. Opts
 * the kernel in to smem beyond 48 KiB the first time on each device; cache
 * is the kernel's own array of RL_ATTN_MAX_DEVICES zeros. -1 when the
 * device cannot run it. */
int rl_attn_grid(const void *kernel, size_t smem, int *cache, int *grid);

/* Everything a backward pass reads and writes. */
struct rl_attn_bwd {
	float *dq, *dk, *dv;
	const float *dout, *q, *k, *v, *out, *lse;
	struct rl_attn_src src;
	const int *ts; /* tile map for rl_attn_dq_rpw(dc) * RL_ATTN_WARPS rows */
	int H, Hkv, D;
	float scale;
};

/* dq += ... (attention_backward_dq.cu), dk, dv += ...
 * (attention_backward_dkdv.cu); 0 or -1 on a launch error. */
int rl_attn_dq_launch(const struct rl_attn_bwd *b, cudaStream_t st);
int rl_attn_dkdv_launch(const struct rl_attn_bwd *b, cudaStream_t st);

#endif
