/* Token sampling on the GPU (kernels/sample.h), one thread block per row.
 * The CPU reference sorts candidates in scratch memory; the op has no
 * scratch argument, a block's shared memory cannot hold a 150k-entry row,
 * and allocating per call would break graph capture. So every selection
 * here is a search instead: over the order-preserving bit pattern (the key)
 * of z = logit / T, each pass re-reads the row (from L2 after the first)
 * and counts, or weighs, the tokens at or above SP_WAYS thresholds spread
 * over the interval of keys that holds the answer, shrinking it about
 * fifteenfold, so 32-bit keys take at most 9 passes. Tokens above the
 * interval are carried as one known sum and tokens below it are skipped,
 * so after the first pass almost no token needs its exponential. A cut
 * keeps a prefix of the ranking, so the tokens tied on the key where it
 * falls are only counted: every later walk takes ties by id and stops
 * within the count. Only the drawn token's id is looked up, with one scan
 * in id order.
 *
 * Per row: one pass for the checks, the maximum and the smallest key; then
 * - greedy: the argmax instead, ties to the lowest id;
 * - nothing cut: the total mass, then the draw as a running sum in id order;
 * - top-k: the k-th key by counts, then the kept mass in one pass;
 * - top-p: the key where the running mass down the ranking reaches the
 *   target, and how many of the ties at it that takes;
 * - the draw: the key where the kept mass at or above it first exceeds
 *   u times the kept mass, how many ties at it that takes, and the id of
 *   the last of them.
 * Sums are doubles over fixed trees and nothing uses atomics, so the same
 * counters give the same tokens on every run; they run in another order
 * than the CPU's, so only a u within rounding of a boundary may differ. */
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/philox.h"
#include "kernels/sample.h"

/* Whole warps; 512 leaves room in the registers for the SP_WAYS sums of
 * a search pass without spilling. */
#define SP_THREADS 512
#define SP_WARPS   (SP_THREADS / RL_WARP)
/* Thresholds per search pass. */
#define SP_WAYS 15
/* Consecutive ids per thread in the id-order scans: a chunk of 4096 ids
 * per step, so a 150k row takes 37 steps of two barriers each. */
#define SP_ITEMS 8
#define SP_CHUNK (SP_THREADS * SP_ITEMS)
#define SP_FULL  0xffffffffu

/* What every pass over a row needs. */
struct sp_row {
	const float *x;
	int vocab;
	float temp;
	float zmax;
};

/* The kept tokens at or above a key: their mass and count. */
struct sp_bound {
	double m;
	int c;
};

/* A search's state: the answer lies in [lo, hi]; at_lo holds for the
 * tokens at or above lo, above for those above hi. */
struct sp_range {
	uint32_t lo, hi;
	struct sp_bound at_lo, above;
};

/* What a search looks for: the largest key whose tokens at or above it
 * number at least the target (top-k), weigh at least it (top-p) or weigh
 * more than it (the draw). */
enum sp_test { SP_COUNT_AT_LEAST, SP_MASS_AT_LEAST, SP_MASS_ABOVE };

static __device__ __forceinline__ bool sp_finite(float v)
{
	return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u;
}

/* z's place in float order as an unsigned integer: a negative's bits all
 * flipped, a positive's sign bit set. -0 first becomes +0, since the
 * ranking compares floats and so ties the two. */
static __device__ __forceinline__ uint32_t sp_key(float z)
{
	uint32_t b = __float_as_uint(z == 0.0f ? 0.0f : z);

	return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

static __device__ __forceinline__ float sp_unkey(uint32_t k)
{
	return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/* The IEEE quotient whatever the flags: the ranking and its ties are the
 * CPU's only if z is the same float. */
static __device__ __forceinline__ float sp_z(const struct sp_row &r, int i)
{
	return __fdiv_rn(__ldg(r.x + i), r.temp);
}

/* e = exp(z - zmax) as the CPU gets it: the difference in fp32, then the
 * exponential in double rounded once, which is glibc's expf (correctly
 * rounded but for rare near-halfway cases). CUDA's expf is off by up to 2
 * ulps, and ulps that lean one way over a row of ties would move every
 * running mass by far more than the rounding the tests allow. */
static __device__ __forceinline__ float sp_mass(float z, float zmax)
{
	return __double2float_rn(exp((double)__fsub_rn(z, zmax)));
}

struct sp_min {
	template <typename T> __device__ T operator()(T a, T b) const
	{
		return b < a ? b : a;
	}
};

struct sp_max {
	template <typename T> __device__ T operator()(T a, T b) const
	{
		return b > a ? b : a;
	}
};

/* op over the block, given to every thread; none is op's identity. The
 * leading barrier lets one block call it again (as rl_block_sum). */
template <typename T, typename Op> static __device__ T sp_block_fold(T v, Op op, T none)
{
	__shared__ T part[SP_WARPS];
	int lane = threadIdx.x % RL_WARP;
	int warp = threadIdx.x / RL_WARP;

	for (int o = RL_WARP / 2; o > 0; o >>= 1)
		v = op(v, __shfl_xor_sync(SP_FULL, v, o));
	__syncthreads();
	if (lane == 0)
		part[warp] = v;
	__syncthreads();
	v = lane < SP_WARPS ? part[lane] : none;
	for (int o = RL_WARP / 2; o > 0; o >>= 1)
		v = op(v, __shfl_xor_sync(SP_FULL, v, o));
	return v;
}

/* The sum of v over the threads before this one, in thread order, and the
 * block's total in *total. The warps' totals are added in one fixed order
 * by every thread, so the result repeats bit for bit. */
template <typename T> static __device__ T sp_block_scan(T v, T *total)
{
	__shared__ T part[SP_WARPS];
	int lane = threadIdx.x % RL_WARP;
	int warp = threadIdx.x / RL_WARP;
	T inc = v, excl, before = 0, all = 0;

	for (int o = 1; o < RL_WARP; o <<= 1) {
		T up = __shfl_up_sync(SP_FULL, inc, o);

		if (lane >= o)
			inc += up;
	}
	excl = __shfl_up_sync(SP_FULL, inc, 1);
	if (lane == 0)
		excl = 0;
	__syncthreads();
	if (lane == RL_WARP - 1)
		part[warp] = inc;
	__syncthreads();
	for (int w = 0; w < SP_WARPS; w++) {
		if (w == warp)
			before = all;
		all += part[w];
	}
	*total = all;
	return before + excl;
}

/* The SP_WAYS counts (and masses) of a search pass summed over the block,
 * each by a fixed tree, given to every thread. */
template <bool MASS> static __device__ void sp_block_sums(double (&m)[SP_WAYS], int (&c)[SP_WAYS])
{
	__shared__ double wm[SP_WARPS][SP_WAYS];
	__shared__ int wc[SP_WARPS][SP_WAYS];
	__shared__ double tm[SP_WAYS];
	__shared__ int tc[SP_WAYS];
	int lane = threadIdx.x % RL_WARP;
	int warp = threadIdx.x / RL_WARP;

#pragma unroll
	for (int j = 0; j < SP_WAYS; j++) {
		c[j] = __reduce_add_sync(SP_FULL, c[j]);
		if (MASS)
			m[j] = rl_warp_sum(m[j]);
	}
	__syncthreads(); /* the last pass may still be reading tm and tc */
	if (lane == 0) {
#pragma unroll
		for (int j = 0; j < SP_WAYS; j++) {
			wc[warp][j] = c[j];
			if (MASS)
				wm[warp][j] = m[j];
		}
	}
	__syncthreads();
	if (threadIdx.x < SP_WAYS) {
		int j = threadIdx.x, cs = 0;
		double ms = 0;

		for (int w = 0; w < SP_WARPS; w++) {
			cs += wc[w][j];
			if (MASS)
				ms += wm[w][j];
		}
		tc[j] = cs;
		tm[j] = ms;
	}
	__syncthreads();
#pragma unroll
	for (int j = 0; j < SP_WAYS; j++) {
		c[j] = tc[j];
		if (MASS)
			m[j] = tm[j];
	}
}

static __device__ __forceinline__ bool sp_passes(enum sp_test test, struct sp_bound f,
                                                 double target)
{
	switch (test) {
	case SP_COUNT_AT_LEAST:
		return (double)f.c >= target;
	case SP_MASS_AT_LEAST:
		return f.m >= target;
	default:
		return f.m > target;
	}
}

/* Narrows s to the single key that test looks for; at its end s->at_lo and
 * s->above are the sums at and above that key. On entry lo must pass and
 * every token above hi must be kept; a token at lo itself is never read,
 * so lo may hold ties that a cut left partly out. With measure > 0 the
 * first pass also weighs the tokens at or above lo (all of them kept then)
 * and sets *target = measure times that: top-p over the whole vocabulary
 * needs the total before it can test anything. The tests are monotone in
 * the key: a thread's sums for a higher threshold add a subset of the same
 * terms in the same order, and the trees are the same. */
template <bool MASS>
static __device__ void sp_search(const struct sp_row &r, struct sp_range *s, enum sp_test test,
                                 double *target, float measure)
{
	bool first = measure > 0;

	while (s->lo < s->hi || first) {
		uint32_t t[SP_WAYS], span = s->hi - s->lo;
		double m[SP_WAYS];
		int c[SP_WAYS], skip = first ? 1 : 0;

		/* t[0] = lo + 1 leaves nothing between lo and it, so a span of
		 * up to SP_WAYS ends in one pass */
		t[0] = s->lo;
#pragma unroll
		for (int j = 0; j < SP_WAYS; j++) {
			if (j >= skip)
				t[j] = span ? s->lo + 1 +
				                  (uint32_t)((uint64_t)(j - skip) * span /
				                             (uint64_t)(SP_WAYS - skip))
				            : s->lo;
			m[j] = 0;
			c[j] = 0;
		}
		for (int i = threadIdx.x; i < r.vocab; i += SP_THREADS) {
			float z = sp_z(r, i);
			uint32_t k = sp_key(z);

			if (k < t[0] || k > s->hi)
				continue;

			float e = MASS ? sp_mass(z, r.zmax) : 0.0f;

#pragma unroll
			for (int j = 0; j < SP_WAYS; j++) {
				if (k >= t[j]) {
					c[j]++;
					if (MASS)
						m[j] += (double)e;
				}
			}
		}
		sp_block_sums<MASS>(m, c);
		if (first) {
			s->at_lo.m = s->above.m + m[0];
			s->at_lo.c = s->above.c + c[0];
			*target = (double)measure * s->at_lo.m;
			first = false;
		}

		/* every thread holds the same sums: the same decisions */
		uint32_t lo = s->lo, hi = s->hi;
		struct sp_bound at_lo = s->at_lo, above = s->above;
		bool failed = false;

#pragma unroll
		for (int j = 0; j < SP_WAYS; j++) {
			struct sp_bound f = {s->above.m + m[j], s->above.c + c[j]};

			if (failed)
				continue;
			if (sp_passes(test, f, *target)) {
				lo = t[j];
				at_lo = f;
			} else {
				failed = true;
				hi = t[j] - 1;
				above = f;
			}
		}
		s->lo = lo;
		s->hi = hi;
		s->at_lo = at_lo;
		s->above = above;
	}
}

/* The nth (from 1) id in id order whose key is key. */
static __device__ int sp_nth_tie(const struct sp_row &r, uint32_t key, int nth)
{
	__shared__ int found;
	int end = r.vocab, seen = 0;

	for (int base = 0; base < end; base += SP_CHUNK) {
		int first = base + (int)threadIdx.x * SP_ITEMS, total, before;
		unsigned hits = 0;

#pragma unroll
		for (int j = 0; j < SP_ITEMS; j++)
			if (first + j < end && sp_key(sp_z(r, first + j)) == key)
				hits |= 1u << j;
		before = sp_block_scan<int>(__popc(hits), &total);
		if (seen + total < nth) {
			seen += total;
			continue;
		}
		/* exactly one thread holds it */
		int want = nth - seen - before;

		if (want >= 1 && want <= __popc(hits)) {
			for (int j = 0; j < SP_ITEMS; j++)
				if ((hits >> j & 1u) && --want == 0) {
					found = first + j;
					break;
				}
		}
		__syncthreads();
		return found;
	}
	return -1; /* unreachable: the counts said there were nth */
}

/* The mass of the tokens above key. */
static __device__ double sp_mass_above(const struct sp_row &r, uint32_t key)
{
	double m = 0;

	for (int i = threadIdx.x; i < r.vocab; i += SP_THREADS) {
		float z = sp_z(r, i);
		uint32_t k = sp_key(z);

		if (k > key)
			m += (double)sp_mass(z, r.zmax);
	}
	return rl_block_sum<SP_THREADS>(m);
}

/* Nothing cut: the first id whose running mass in id order exceeds u times
 * the total, as the CPU walks it. The scan's partial sums are not the
 * total's tree, so where the two round apart a thread may see a crossing
 * its neighbour missed: the lowest claim wins, and only a token of nonzero
 * mass may claim (the CPU's walk never stops on one). Past the end without
 * a crossing: the last token of nonzero mass, the CPU's fallback. */
static __device__ int sp_draw_in_id_order(const struct sp_row &r, double u)
{
	/* key 0 would be a NaN: every token is above it */
	double x = u * sp_mass_above(r, 0), run = 0;
	int last = -1;

	for (int base = 0; base < r.vocab; base += SP_CHUNK) {
		int first = base + (int)threadIdx.x * SP_ITEMS, hit = INT32_MAX;
		float e[SP_ITEMS];
		double part = 0, total, cum;

#pragma unroll
		for (int j = 0; j < SP_ITEMS; j++) {
			e[j] = first + j < r.vocab ? sp_mass(sp_z(r, first + j), r.zmax) : 0.0f;
			part += (double)e[j];
			if (e[j] > 0)
				last = first + j;
		}
		cum = run + sp_block_scan<double>(part, &total);
#pragma unroll
		for (int j = 0; j < SP_ITEMS; j++) {
			cum += (double)e[j];
			if (hit == INT32_MAX && e[j] > 0 && x < cum)
				hit = first + j;
		}
		hit = sp_block_fold(hit, sp_min(), INT32_MAX);
		if (hit != INT32_MAX)
			return hit;
		run += total;
	}
	return sp_block_fold(last, sp_max(), -1);
}

/* The argmax of the raw logits, ties to the lowest id; -1 if one is not
 * finite. Key and flipped id in one word make both orders one maximum. */
static __device__ int sp_greedy(const float *x, int vocab)
{
	unsigned long long best = 0;
	bool bad = false;

	for (int i = threadIdx.x; i < vocab; i += SP_THREADS) {
		float l = __ldg(x + i);
		unsigned long long v =
		    (unsigned long long)sp_key(l) << 32 | (uint32_t) ~(uint32_t)i;

		bad |= !sp_finite(l);
		best = v > best ? v : best;
	}
	if (__syncthreads_or(bad))
		return -1;
	best = sp_block_fold(best, sp_max(), 0ull);
	return (int)~(uint32_t)best;
}

/* The tied tokens to walk at a key with mass e each: the draw stops at the
 * first whose running mass exceeds x, top-p at the first that reaches the
 * target; from 1 to ties either way. */
static __device__ int sp_ties_to_walk(double need, float e, int ties, bool reach)
{
	double q = need / (double)e;

	q = reach ? ceil(q) : floor(q) + 1;
	return !(q < ties) ? ties : q < 1 ? 1 : (int)q;
}

static __device__ int sp_sample_row(const float *x, int vocab, const struct rl_sample_params &p,
                                    double u)
{
	struct sp_row r = {x, vocab, p.temperature, -INFINITY};
	uint32_t kmin = UINT32_MAX;
	bool bad = false;

	for (int i = threadIdx.x; i < vocab; i += SP_THREADS) {
		float l = __ldg(x + i), z = __fdiv_rn(l, p.temperature);

		if (!sp_finite(l) || !sp_finite(z)) {
			bad = true;
			continue;
		}
		r.zmax = fmaxf(r.zmax, z);
		kmin = min(kmin, sp_key(z));
	}
	if (__syncthreads_or(bad))
		return -1;
	r.zmax = sp_block_fold(r.zmax, sp_max(), -INFINITY);
	kmin = sp_block_fold(kmin, sp_min(), UINT32_MAX);

	uint32_t kmax = sp_key(r.zmax);
	bool top_k = p.top_k > 0 && p.top_k < vocab, top_p = p.top_p < 1.0f;

	if (!top_k && !top_p)
		return sp_draw_in_id_order(r, u);

	/* The kept tokens: those above b_key and, of those at it, as many as
	 * make count, lowest ids first; they weigh mass (>= 1: the top token
	 * is always kept). Every later walk takes ties by id and stops within
	 * the count, so which ids a cut leaves out never needs finding. */
	uint32_t b_key = kmin;
	int count = vocab;
	double mass = 0, target = 0;
	struct sp_range s;

	if (top_k) {
		s = {kmin, kmax, {0, vocab}, {0, 0}};
		target = p.top_k;
		sp_search<false>(r, &s, SP_COUNT_AT_LEAST, &target, 0);
		b_key = s.lo;
		count = p.top_k;
		mass = sp_mass_above(r, b_key) +
		       (double)(count - s.above.c) * (double)sp_mass(sp_unkey(b_key), r.zmax);
	}
	if (top_p) {
		s = {b_key, kmax, {mass, count}, {0, 0}};
		target = (double)p.top_p * mass;
		sp_search<true>(r, &s, SP_MASS_AT_LEAST, &target, top_k ? 0.0f : p.top_p);

		int ties = s.at_lo.c - s.above.c;
		float e = sp_mass(sp_unkey(s.lo), r.zmax);
		int c = sp_ties_to_walk(target - s.above.m, e, ties, true);

		b_key = s.lo;
		count = s.above.c + c;
		mass = s.above.m + (double)c * (double)e;
	}

	/* u < 1, but u * mass could still round up to mass */
	double xu = u * mass;

	if (!(xu < mass))
		xu = nextafter(mass, 0.0);
	s = {b_key, kmax, {mass, count}, {0, 0}};
	sp_search<true>(r, &s, SP_MASS_ABOVE, &xu, 0);

	int ties = s.at_lo.c - s.above.c;
	float e = sp_mass(sp_unkey(s.lo), r.zmax);

	return sp_nth_tie(r, s.lo, sp_ties_to_walk(xu - s.above.m, e, ties, false));
}

static __global__ void __launch_bounds__(SP_THREADS)
    sp_sample(int32_t *__restrict__ tokens, const float *__restrict__ logits, int vocab, int ld,
              struct rl_sample_params p, const int64_t *__restrict__ counters)
{
	const float *x = logits + (size_t)blockIdx.x * (size_t)ld;
	int token;

	if (p.temperature < RL_SAMPLE_GREEDY_EPS) {
		token = sp_greedy(x, vocab);
	} else {
		const int64_t *ctr = counters + 2 * (size_t)blockIdx.x;
		double u = rl_philox_uniform(p.seed, (uint64_t)ctr[0], (uint64_t)ctr[1]);

		token = sp_sample_row(x, vocab, p, u);
	}
	if (threadIdx.x == 0)
		tokens[blockIdx.x] = token;
}

extern "C" int rl_sample_cuda(int32_t *tokens, const float *logits, int n, int vocab, int ld,
                              const struct rl_sample_params *p, const int64_t *counters,
                              void *stream)
{
	/* the CPU op's checks, before any CUDA call */
	if (!tokens || !logits || !p || !counters || n < 0 || vocab < 1 || ld < vocab)
		return -1;
	if (!isfinite(p->temperature) || p->temperature < 0 || p->top_k < -1 ||
	    !(p->top_p > 0 && p->top_p <= 1))
		return -1;
	if (n == 0)
		return 0;
	/* p is read here, on the host, and travels by value */
	sp_sample<<<n, SP_THREADS, 0, rl_stream(stream)>>>(tokens, logits, vocab, ld, *p, counters);
	return rl_launched();
}
