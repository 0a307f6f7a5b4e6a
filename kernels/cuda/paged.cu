/* The paged KV cache on the GPU (kernels/paged.h): the append of a step's
 * keys and values, and fp32 attention of any mix of prefill and decode
 * tokens against keys reached through a block table.
 *
 * Batch invariance decides the shape of the attention. A row's keys are
 * cut by key index alone: tile i is keys 32 i .. 32 i + 31; tiles group in
 * fours (group i / 4, one tile for each of a block's four warps, warp
 * i % 4), and group c belongs to slot c % 16. A warp runs an online softmax
 * over its tiles of a slot in key order, the four warps of a slot are then
 * folded in warp order into the slot's state, and the slots in slot order
 * into the row's. Every one of those steps depends on the key indices and
 * pos only, so a row gets the same bits whatever else is in the call, how
 * its keys are stored, or whether it came in a prefill or a decode step.
 *
 * What the call's size does change is only who computes what: a block
 * takes one (token, kv head, group of up to 8 query heads) and, when the
 * call is too small to fill the GPU, only every Z-th slot of it (split-KV,
 * for long decodes). Then its slot states go to scratch and a second
 * kernel folds them; otherwise the block folds them itself. Both folds are
 * the same function on the same floats, every product and sum rounded on
 * its own (__fmul_rn, __fadd_rn), so no contraction into an FMA can make
 * the two differ.
 *
 * Within a tile (attention_common.cuh's layout): the warp stages the 32
 * key rows in its own shared-memory tile, lane l scores key l against the
 * group's query heads, and then the value rows go through the same tile
 * while lane l holds output columns l + 32 c. Each key row is read once per
 * query group. The tiles of one block's warps are independent (no block
 * barrier inside the key loop): a row of up to 32 keys costs one warp one
 * tile.
 *
 * exp is expf, lse = max + logf(sum), out = acc / sum. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/memory.h"
#include "kernels/paged.h"

#define RL_PAGED_THREADS 128
#define RL_PAGED_WARPS   (RL_PAGED_THREADS / RL_WARP)
/* Part of the row's arithmetic: changing either changes the bits. */
#define RL_PAGED_SLOTS 16
/* the most query heads of one kv head a block takes */
#define RL_PAGED_MAX_ROWS 8

/* ---- the append ---- */

/* Element i of the n rows (in float4 when vec): row i / per_row of k and v
 * to row rows[...] of the caches. A negative row is skipped: the host
 * cannot check device rows without a synchronisation. */
template <typename V>
static __global__ void rl_kv_append_kernel(V *__restrict__ kc, V *__restrict__ vc,
                                           const V *__restrict__ k, const V *__restrict__ v,
                                           const int32_t *__restrict__ rows, int n, int per_row)
{
	const int64_t total = (int64_t)n * per_row;

	for (int64_t i = rl_grid_thread(); i < total; i += rl_grid_stride()) {
		const int64_t t = i / per_row, c = i % per_row;
		const int32_t row = rows[t];

		if (row < 0)
			continue;

		const int64_t dst = (int64_t)row * per_row + c;

		kc[dst] = k[i];
		vc[dst] = v[i];
	}
}

extern "C" int rl_kv_append_cuda(float *k_cache, float *v_cache, const float *k, const float *v,
                                 const int32_t *rows, int n, int row_floats, void *stream)
{
	if (n < 0 || row_floats <= 0)
		return -1;
	if (n == 0)
		return 0;
	if (!k_cache || !v_cache || !k || !v || !rows)
		return -1;

	const cudaStream_t st = rl_stream(stream);
	const bool vec = row_floats % 4 == 0 && rl_aligned16(k_cache) && rl_aligned16(v_cache) &&
	                 rl_aligned16(k) && rl_aligned16(v);
	const int per_row = vec ? row_floats / 4 : row_floats;
	const int blocks = rl_stride_blocks((int64_t)n * per_row, 256, 4096);

	if (vec)
		rl_kv_append_kernel<float4><<<blocks, 256, 0, st>>>(
		    (float4 *)k_cache, (float4 *)v_cache, (const float4 *)k, (const float4 *)v,
		    rows, n, per_row);
	else
		rl_kv_append_kernel<float>
		    <<<blocks, 256, 0, st>>>(k_cache, v_cache, k, v, rows, n, per_row);
	return rl_launched();
}

/* ---- the attention ---- */

struct rl_paged_args {
	float *out, *lse; /* lse may be NULL */
	const float *q, *k, *v;
	const int32_t *table, *off, *pos;
	/* slot states when Z > 1: acc [rows][32 DC], ml [rows][2] (max, sum),
	 * row ((((t Hkv + g) HG + hg) SLOTS + slot) R + r) */
	float *acc, *ml;
	int n, block, H, Hkv, D, rep;
	int HG; /* query-head groups of a kv head: ceil(rep / R) */
	int Z;  /* blocks a (token, kv head, group) is split over */
	float scale;
	bool vec; /* D % 4 == 0 and both caches 16-byte aligned */
};

/* The tile row stride (attention_common.cuh: an odd number of float4) and
 * the dynamic shared memory of a block: every warp's tile, the query rows,
 * every warp's probabilities and its (max, sum) per row. */
template <int DC> static __host__ __device__ constexpr int rl_paged_ss()
{
	return RL_WARP * DC + 4;
}

template <int DC, int R> static constexpr size_t rl_paged_smem()
{
	return ((size_t)RL_PAGED_WARPS * RL_WARP * rl_paged_ss<DC>() +
	        (size_t)R * rl_paged_ss<DC>() + (size_t)RL_PAGED_WARPS * R * RL_WARP +
	        (size_t)RL_PAGED_WARPS * R * 2) *
	       sizeof(float);
}

/* The tiles of a slot's groups, and the slots of a row with pos p. */
static __device__ __forceinline__ int rl_paged_groups(int p)
{
	const int tiles = p / RL_WARP + 1;

	return (tiles + RL_PAGED_WARPS - 1) / RL_PAGED_WARPS;
}

static __device__ __forceinline__ int rl_paged_slots(int p)
{
	return min(RL_PAGED_SLOTS, rl_paged_groups(p));
}

/* The 32 rows of a tile, by one warp: row j from src + (lane j's ro), or
 * zeros where that ro is negative (a key past pos: its table entry may not
 * exist, and a NaN there would survive a zero weight); columns D .. 32 DC
 * are zeros. Loads go out U at a time before their stores so that several
 * are in flight. */
template <int DC>
static __device__ __forceinline__ void rl_paged_load_tile(float *tile, const float *src,
                                                          long long ro, int D, bool vec)
{
	constexpr int SS = rl_paged_ss<DC>(), COLS = RL_WARP * DC;
	const int lane = threadIdx.x % RL_WARP;

	if (vec) {
		constexpr int F4 = COLS / 4, U = 8, BATCHES = RL_WARP * F4 / (RL_WARP * U);
		const int d4 = D / 4;

#pragma unroll 1
		for (int bt = 0; bt < BATCHES; bt++) {
			float4 x[U];

#pragma unroll
			for (int u = 0; u < U; u++) {
				const int e = (bt * U + u) * RL_WARP + lane, j = e / F4, c = e % F4;
				const long long r = __shfl_sync(0xffffffffu, ro, j);

				x[u] = r >= 0 && c < d4 ? ((const float4 *)(src + r))[c]
				                        : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
			}
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int e = (bt * U + u) * RL_WARP + lane, j = e / F4, c = e % F4;

				*(float4 *)(tile + j * SS + 4 * c) = x[u];
			}
		}
	} else {
		constexpr int U = 16, BATCHES = RL_WARP * COLS / (RL_WARP * U);

#pragma unroll 1
		for (int bt = 0; bt < BATCHES; bt++) {
			float x[U];

#pragma unroll
			for (int u = 0; u < U; u++) {
				const int e = (bt * U + u) * RL_WARP + lane, j = e / COLS,
				          c = e % COLS;
				const long long r = __shfl_sync(0xffffffffu, ro, j);

				x[u] = r >= 0 && c < D ? src[r + c] : 0.0f;
			}
#pragma unroll
			for (int u = 0; u < U; u++) {
				const int e = (bt * U + u) * RL_WARP + lane, j = e / COLS,
				          c = e % COLS;

				tile[j * SS + c] = x[u];
			}
		}
	}
}

/* Folds the state (m, l, a) of a run of keys into (M, L, O), the state of
 * the runs before it; columns lane + 32 c. A run with no key (m = -inf)
 * changes nothing, and the first one is taken as it is. Every operation is
 * rounded on its own: the block's fold and the merge kernel's must agree
 * to the bit. */
template <int DC>
static __device__ __forceinline__ void rl_paged_fold(float &M, float &L, float (&O)[DC], float m,
                                                     float l, const float (&a)[DC])
{
	if (m == -INFINITY)
		return;
	if (M == -INFINITY) {
		M = m;
		L = l;
#pragma unroll
		for (int c = 0; c < DC; c++)
			O[c] = a[c];
		return;
	}

	const float mn = fmaxf(M, m), al = expf(M - mn), be = expf(m - mn);

	L = __fadd_rn(__fmul_rn(L, al), __fmul_rn(l, be));
#pragma unroll
	for (int c = 0; c < DC; c++)
		O[c] = __fadd_rn(__fmul_rn(O[c], al), __fmul_rn(a[c], be));
	M = mn;
}

/* The row's output (head row o of out, lse slot ls or NULL) from its
 * folded state, by one warp. */
template <int DC>
static __device__ __forceinline__ void rl_paged_finish(float *o, float *ls, float M, float L,
                                                       const float (&O)[DC], int D)
{
	const int lane = threadIdx.x % RL_WARP;

#pragma unroll
	for (int c = 0; c < DC; c++) {
		const int d = lane + c * RL_WARP;

		if (d < D)
			o[d] = __fdiv_rn(O[c], L);
	}
	if (ls && lane == 0)
		*ls = __fadd_rn(M, logf(L));
}

/* Block ((t Hkv + g) HG + hg) Z + z: token t, kv head g, query heads
 * g rep + hg R .. (up to R of them), slots z, z + Z, .. of the row. */
template <int DC, int R>
static __global__ void __launch_bounds__(RL_PAGED_THREADS)
    rl_paged_kernel(const struct rl_paged_args a)
{
	constexpr int SS = rl_paged_ss<DC>(), COLS = RL_WARP * DC, W = RL_PAGED_WARPS;
	constexpr int RW = (R + W - 1) / W; /* rows each warp folds */
	extern __shared__ float4 rl_paged_smem_[];
	float *const s_tiles = (float *)rl_paged_smem_;
	float *const s_q = s_tiles + W * RL_WARP * SS;
	float *const s_p = s_q + R * SS;
	float *const s_ml = s_p + W * R * RL_WARP;
	const int w = threadIdx.x / RL_WARP, lane = threadIdx.x % RL_WARP;
	float *const tile = s_tiles + w * RL_WARP * SS;
	float *const my_p = s_p + w * R * RL_WARP;

	long long b = blockIdx.x;
	const int z = (int)(b % a.Z);

	b /= a.Z;

	const int hg = (int)(b % a.HG);

	b /= a.HG;

	const int g = (int)(b % a.Hkv), t = (int)(b / a.Hkv);
	const int p = a.pos[t], o = a.off[t];

	/* a malformed row is skipped (the CPU op refuses it); the merge
	 * kernel makes the same test */
	if (p < 0 || o < 0)
		return;

	const int groups = rl_paged_groups(p), A = rl_paged_slots(p);

	if (z >= A)
		return;

	/* this block holds every slot the row has: it folds them itself */
	const bool direct = a.Z == 1 || A == 1;
	const int h0 = g * a.rep + hg * R, nr = min(R, a.rep - hg * R);
	const size_t ldkv = (size_t)a.Hkv * a.D;
	const float *__restrict__ kg = a.k + (size_t)g * a.D;
	const float *__restrict__ vg = a.v + (size_t)g * a.D;
	const int32_t *__restrict__ tb = a.table + o;

	/* the group's query rows, zeros past nr and past D */
	for (int i = threadIdx.x; i < R * COLS; i += RL_PAGED_THREADS) {
		const int r = i / COLS, d = i % COLS;

		s_q[r * SS + d] =
		    r < nr && d < a.D ? a.q[((size_t)t * a.H + h0 + r) * a.D + d] : 0.0f;
	}
	__syncthreads();

	float tm[RW], tl[RW], to[RW][DC];

#pragma unroll
	for (int rr = 0; rr < RW; rr++) {
		tm[rr] = -INFINITY;
		tl[rr] = 0.0f;
#pragma unroll
		for (int c = 0; c < DC; c++)
			to[rr][c] = 0.0f;
	}

	for (int s = z; s < A; s += a.Z) {
		float mx[R], l[R], acc[R][DC];

		rl_attn_rows_init<R, DC>(mx, l, acc);

		/* this warp's tiles of the slot, in key order */
		for (int gi = s; gi < groups; gi += RL_PAGED_SLOTS) {
			const int k0 = (gi * W + w) * RL_WARP, key = k0 + lane;

			if (k0 > p)
				break;

			long long ro = -1;

			if (key <= p) {
				const int32_t blk = tb[key / a.block];

				if (blk >= 0)
					ro = ((long long)blk * a.block + key % a.block) *
					     (long long)ldkv;
			}
			__syncwarp(); /* every lane is done with the last V tile */
			rl_paged_load_tile<DC>(tile, kg, ro, a.D, a.vec);
			__syncwarp();

			float sc[R];
			const float4 *k4 = (const float4 *)(tile + lane * SS);

#pragma unroll
			for (int r = 0; r < R; r++)
				sc[r] = 0.0f;
#pragma unroll 4
			for (int d4 = 0; d4 < COLS / 4; d4++) {
				const float4 kv = k4[d4];

#pragma unroll
				for (int r = 0; r < R; r++)
					sc[r] = rl_attn_dot4(((const float4 *)(s_q + r * SS))[d4],
					                     kv, sc[r]);
			}

			/* Lane 0's key is always seen, so the max is finite and
			 * masked keys weigh exp(-inf) = 0. The first tile's
			 * rescale is exp(-inf) = 0 of zeros. */
#pragma unroll
			for (int r = 0; r < R; r++) {
				const float x = key <= p ? __fmul_rn(sc[r], a.scale) : -INFINITY;
				const float mn = fmaxf(mx[r], rl_warp_max(x));
				const float al = expf(mx[r] - mn), pr = expf(x - mn);

				mx[r] = mn;
				l[r] = __fadd_rn(__fmul_rn(l[r], al), pr);
#pragma unroll
				for (int c = 0; c < DC; c++)
					acc[r][c] = __fmul_rn(acc[r][c], al);
				my_p[r * RL_WARP + lane] = pr;
			}
			__syncwarp(); /* K is read and the weights are stored */
			rl_paged_load_tile<DC>(tile, vg, ro, a.D, a.vec);
			__syncwarp();
			rl_attn_rows_mm<R, DC, RL_WARP, SS>(acc, my_p, tile);
		}

		/* The warp's state to its own tile (rows of 32 DC), then the
		 * four warps folded in warp order by the warp owning each row. */
		float lsum[R];

#pragma unroll
		for (int r = 0; r < R; r++)
			lsum[r] = rl_warp_sum(l[r]);
		__syncwarp();
#pragma unroll
		for (int r = 0; r < R; r++) {
#pragma unroll
			for (int c = 0; c < DC; c++)
				tile[r * COLS + lane + c * RL_WARP] = acc[r][c];
			if (lane == 0) {
				s_ml[(w * R + r) * 2] = mx[r];
				s_ml[(w * R + r) * 2 + 1] = lsum[r];
			}
		}
		__syncthreads();
#pragma unroll
		for (int rr = 0; rr < RW; rr++) {
			const int r = w + rr * W;

			if (r >= nr)
				break;

			float sm = -INFINITY, sl = 0.0f, so[DC];

#pragma unroll
			for (int c = 0; c < DC; c++)
				so[c] = 0.0f;
			for (int w2 = 0; w2 < W; w2++) {
				const float *src = s_tiles + w2 * RL_WARP * SS + r * COLS + lane;
				float x[DC];

#pragma unroll
				for (int c = 0; c < DC; c++)
					x[c] = src[c * RL_WARP];
				rl_paged_fold<DC>(sm, sl, so, s_ml[(w2 * R + r) * 2],
				                  s_ml[(w2 * R + r) * 2 + 1], x);
			}
			if (direct) {
				rl_paged_fold<DC>(tm[rr], tl[rr], to[rr], sm, sl, so);
			} else {
				const size_t e =
				    ((((size_t)t * a.Hkv + g) * a.HG + hg) * RL_PAGED_SLOTS + s) *
				        R +
				    r;

#pragma unroll
				for (int c = 0; c < DC; c++)
					a.acc[e * COLS + lane + c * RL_WARP] = so[c];
				if (lane == 0) {
					a.ml[e * 2] = sm;
					a.ml[e * 2 + 1] = sl;
				}
			}
		}
		__syncthreads(); /* the states are read before the next slot's tiles */
	}

	if (direct) {
#pragma unroll
		for (int rr = 0; rr < RW; rr++) {
			const int r = w + rr * W;
			const size_t row = (size_t)t * a.H + h0 + r;

			if (r >= nr)
				break;
			rl_paged_finish<DC>(a.out + row * a.D, a.lse ? a.lse + row : NULL, tm[rr],
			                    tl[rr], to[rr], a.D);
		}
	}
}

/* One warp per (token, head) whose slots were split over blocks: the slot
 * states folded in slot order, as the block would have. */
template <int DC>
static __global__ void __launch_bounds__(RL_PAGED_THREADS)
    rl_paged_merge_kernel(const struct rl_paged_args a, int R)
{
	constexpr int COLS = RL_WARP * DC;
	const long long task = (long long)blockIdx.x * RL_PAGED_WARPS + threadIdx.x / RL_WARP;
	const int lane = threadIdx.x % RL_WARP;

	if (task >= (long long)a.n * a.H)
		return;

	const int t = (int)(task / a.H), h = (int)(task % a.H);
	const int p = a.pos[t], o = a.off[t];

	if (p < 0 || o < 0)
		return;

	const int A = rl_paged_slots(p);

	if (A <= 1)
		return; /* the block wrote it */

	const int g = h / a.rep, i = h % a.rep, hg = i / R, r = i % R;
	const size_t e0 = (((size_t)t * a.Hkv + g) * a.HG + hg) * RL_PAGED_SLOTS;
	float M = -INFINITY, L = 0.0f, O[DC];

#pragma unroll
	for (int c = 0; c < DC; c++)
		O[c] = 0.0f;
	for (int s = 0; s < A; s++) {
		const size_t e = (e0 + s) * R + r;
		float x[DC];

#pragma unroll
		for (int c = 0; c < DC; c++)
			x[c] = a.acc[e * COLS + lane + c * RL_WARP];
		rl_paged_fold<DC>(M, L, O, a.ml[e * 2], a.ml[e * 2 + 1], x);
	}

	const size_t row = (size_t)t * a.H + h;

	rl_paged_finish<DC>(a.out + row * a.D, a.lse ? a.lse + row : NULL, M, L, O, a.D);
}

#define RL_PAGED_MAX_DEVICES 64

/* The blocks of kernel (RL_PAGED_THREADS threads, smem bytes) resident on
 * the whole device at once; opts the kernel in to its shared memory the
 * first time on each device (cache: the kernel's own zeroed array). Only
 * the split of the work depends on it, never a row's bits. */
static int rl_paged_resident(const void *kernel, size_t smem, int *cache, int *resident)
{
	int dev, sms, optin, blocks;

	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= RL_PAGED_MAX_DEVICES)
		goto fail;
	/* benign race: two threads store the same value */
	blocks = __atomic_load_n(&cache[dev], __ATOMIC_ACQUIRE);
	if (blocks > 0) {
		*resident = blocks;
		return 0;
	}
	if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
	        cudaSuccess ||
	    sms <= 0 || smem > (size_t)optin)
		goto fail;
	if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
	        cudaSuccess ||
	    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, RL_PAGED_THREADS,
	                                                  smem) != cudaSuccess ||
	    blocks <= 0)
		goto fail;
	blocks *= sms;
	__atomic_store_n(&cache[dev], blocks, __ATOMIC_RELEASE);
	*resident = blocks;
	return 0;
fail:
	/* the failed call's error is not the next launch's */
	(void)cudaGetLastError();
	return -1;
}

template <int DC, int R> static int rl_paged_run(const struct rl_paged_args *args, cudaStream_t st)
{
	constexpr size_t SMEM = rl_paged_smem<DC, R>();
	constexpr int COLS = RL_WARP * DC;
	static int cache[RL_PAGED_MAX_DEVICES];
	struct rl_paged_args a = *args;
	int resident;

	if (rl_paged_resident((const void *)rl_paged_kernel<DC, R>, SMEM, cache, &resident) != 0)
		return -1;
	a.HG = (a.rep + R - 1) / R;

	/* Enough blocks to fill the device once: a small call (few rows,
	 * long keys) splits each row's slots over up to SLOTS blocks. */
	const long long base = (long long)a.n * a.Hkv * a.HG;
	long long z = (resident + base - 1) / base;

	z = z < 1 ? 1 : z > RL_PAGED_SLOTS ? RL_PAGED_SLOTS : z;
	if (base * z > INT_MAX || (long long)a.n * a.H > (long long)INT_MAX * RL_PAGED_WARPS)
		return -1;
	a.Z = (int)z;

	float *scratch = NULL;

	if (a.Z > 1) {
		/* at most a device's worth of blocks' rows: base < resident */
		const size_t rows = (size_t)base * RL_PAGED_SLOTS * R;

		scratch = (float *)rl_cuda_alloc_async(rows * (COLS + 2) * sizeof(float), st);
		if (!scratch)
			return -1;
		a.acc = scratch;
		a.ml = scratch + rows * COLS;
	}
	rl_paged_kernel<DC, R><<<(int)(base * a.Z), RL_PAGED_THREADS, SMEM, st>>>(a);

	int rc = rl_launched();

	if (rc == 0 && a.Z > 1) {
		const long long blocks =
		    ((long long)a.n * a.H + RL_PAGED_WARPS - 1) / RL_PAGED_WARPS;

		rl_paged_merge_kernel<DC><<<(int)blocks, RL_PAGED_THREADS, 0, st>>>(a, R);
		rc = rl_launched();
	}
	rl_cuda_release_async(scratch, st);
	return rc;
}

/* DC rounded up to 1, 2, 4 or 8 columns a lane (the padding columns are
 * zeros and add nothing), R to 1, 2, 4 or 8 query heads a block: sixteen
 * instances instead of sixty-four. */
static int rl_paged_pow2_index(int x)
{
	return x <= 1 ? 0 : x <= 2 ? 1 : x <= 4 ? 2 : 3;
}

extern "C" int rl_attention_paged_cuda(float *out, float *lse, const float *q, const float *k_cache,
                                       const float *v_cache, const int32_t *table,
                                       const int32_t *off, const int32_t *pos, int n, int block,
                                       const struct rl_attention_shape *shape, void *stream)
{
	typedef int (*run_fn)(const struct rl_paged_args *, cudaStream_t);
	static const run_fn by[4][4] = {
	    {rl_paged_run<1, 1>, rl_paged_run<1, 2>, rl_paged_run<1, 4>, rl_paged_run<1, 8>},
	    {rl_paged_run<2, 1>, rl_paged_run<2, 2>, rl_paged_run<2, 4>, rl_paged_run<2, 8>},
	    {rl_paged_run<4, 1>, rl_paged_run<4, 2>, rl_paged_run<4, 4>, rl_paged_run<4, 8>},
	    {rl_paged_run<8, 1>, rl_paged_run<8, 2>, rl_paged_run<8, 4>, rl_paged_run<8, 8>},
	};
	static_assert(RL_ATTN_MAX_DC == 8 && RL_PAGED_MAX_ROWS == 8,
	              "the table covers every shape");

	if (!rl_attn_shape_ok(shape) || n < 0 || block <= 0)
		return -1;
	if (n == 0)
		return 0;
	if (!out || !q || !k_cache || !v_cache || !table || !off || !pos)
		return -1;

	struct rl_paged_args a;

	a.out = out;
	a.lse = lse;
	a.q = q;
	a.k = k_cache;
	a.v = v_cache;
	a.table = table;
	a.off = off;
	a.pos = pos;
	a.acc = NULL;
	a.ml = NULL;
	a.n = n;
	a.block = block;
	a.H = shape->n_heads;
	a.Hkv = shape->n_kv_heads;
	a.D = shape->head_dim;
	a.rep = a.H / a.Hkv;
	a.HG = 1;
	a.Z = 1;
	a.scale = shape->scale;
	a.vec = a.D % 4 == 0 && rl_aligned16(k_cache) && rl_aligned16(v_cache);

	const int dc = rl_paged_pow2_index(rl_attn_dc(a.D));
	const int rows = rl_paged_pow2_index(a.rep < RL_PAGED_MAX_ROWS ? a.rep : RL_PAGED_MAX_ROWS);

	return by[dc][rows](&a, rl_stream(stream));
}
