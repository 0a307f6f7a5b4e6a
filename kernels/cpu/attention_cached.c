/* Attention of new tokens against a KV cache, for generation. The same tiles
 * as the training forward in attention.c (ATTN_BQ query rows of one head,
 * cblas_sgemm for both products), shifted: the queries start at position
 * len - n_new, and no lse is kept because nothing runs backward. Each thread
 * owns an ATTN_BQ x len score tile (a 1 x len row when decoding). The
 * helpers are copies of attention.c's: the op table wants this in its own
 * file and there is no private header to share them through. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/attention.h"

#define ATTN_BQ 64

static int cached_threads(void)
{
#ifdef _OPENMP
	return omp_get_max_threads();
#else
	return 1;
#endif
}

static int cached_thread_id(void)
{
#ifdef _OPENMP
	return omp_get_thread_num();
#else
	return 0;
#endif
}

/* OpenBLAS on pthreads (Debian's default) splits every large sgemm across
 * its own threads even when called from inside an OpenMP loop; nested, the
 * two pools fight (T=512, H=8, D=64 on 2 cores: 60 ms instead of 4). So the
 * tiles' products run single-threaded while the loop runs in parallel. An
 * OpenMP OpenBLAS does this by itself, and there its set_num_threads would
 * resize our own team, so it is left alone. Returns what to restore. */
static int cached_blas_serial_begin(int parallel)
{
	int n = openblas_get_num_threads();

	if (!parallel || n <= 1 || openblas_get_parallel() != OPENBLAS_THREAD)
		return 0;
	openblas_set_num_threads(1);
	return n;
}

static void cached_blas_serial_end(int saved)
{
	if (saved > 0)
		openblas_set_num_threads(saved);
}

/* OpenMP's simd loops, and nothing in a build without -fopenmp */
#ifdef _OPENMP
#define CACHED_PRAGMA(x) _Pragma(#x)
#else
#define CACHED_PRAGMA(x)
#endif
#define CACHED_SIMD        CACHED_PRAGMA(omp simd)
#define CACHED_SIMD_MAX(v) CACHED_PRAGMA(omp simd reduction(max : v))
#define CACHED_SIMD_SUM(v) CACHED_PRAGMA(omp simd reduction(+ : v))

/* The same e^x as attn_exp in attention.c, which says why it is not expf:
 * 1 ulp for |x| <= 87, vectorized by GCC at -O2, NaN kept. */
static inline float cached_exp(float x)
{
	union {
		float f;
		uint32_t u;
	} a = {x};
	uint32_t mag = a.u & 0x7fffffffu;

	mag = mag < 0x42ae0000u ? mag : 0x42ae0000u; /* 87.0f */
	a.u = (a.u & 0x80000000u) | mag;

	/* x = n ln2 + r, |r| <= ln2 / 2; adding 1.5 * 2^23 rounds to an integer */
	const float shift = 12582912.0f;
	const float t = a.f * 1.44269504088896341f + shift, n = t - shift;
	float r = a.f - n * 0.693359375f;

	r = r - n * -2.12194440e-4f;

	float p = 1.9875691500e-4f;

	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;

	union {
		float f;
		int32_t i;
	} ti = {t}, two_n;

	two_n.i = (ti.i - 0x4b400000 + 127) * (1 << 23);
	return p * two_n.f + (x - x);
}

/* Softmax of row[0..valid) in place and zeros in row[valid..n), for the
 * masked keys. */
static void cached_softmax_row(float *row, int valid, int n)
{
	float mx = row[0];
	double sum = 0.0;

	CACHED_SIMD_MAX(mx)
	for (int j = 1; j < valid; j++)
		mx = row[j] > mx ? row[j] : mx;
	CACHED_SIMD
	for (int j = 0; j < valid; j++)
		row[j] = cached_exp(row[j] - mx);
	CACHED_SIMD_SUM(sum)
	for (int j = 0; j < valid; j++)
		sum += row[j];

	const float inv = (float)(1.0 / sum);

	CACHED_SIMD
	for (int j = 0; j < valid; j++)
		row[j] *= inv;
	for (int j = valid; j < n; j++)
		row[j] = 0.0f;
}

/* m query rows (stride ldq) at positions first + r * step against cache rows
 * 0 .. their position; s holds m x (last position + 1) floats. step is 1
 * for a tile of consecutive tokens of one head, 0 for the heads of one token
 * that share a kv head. */
static void cached_tile(float *out, const float *q, const float *k, const float *v, int m,
                        int first, int step, int ldq, int ldkv, int d, float scale, float *s)
{
	const int n = first + (m - 1) * step + 1;

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, d, scale, q, ldq, k, ldkv, 0.0f,
	            s, n);
	for (int r = 0; r < m; r++)
		cached_softmax_row(s + (size_t)r * n, first + r * step + 1, n);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, d, n, 1.0f, s, n, v, ldkv, 0.0f,
	            out, ldq);
}

int rl_attention_cached_cpu(float *out, const float *q, const float *k_cache, const float *v_cache,
                            int n_new, int len, const struct rl_attention_shape *shape,
                            void *stream)
{
	(void)stream;
	if (!shape || shape->n_heads <= 0 || shape->n_kv_heads <= 0 || shape->head_dim <= 0 ||
	    shape->n_heads % shape->n_kv_heads)
		return -1;
	if (n_new < 0 || len < n_new)
		return -1;
	if (n_new == 0)
		return 0;
	if (!out || !q || !k_cache || !v_cache)
		return -1;

	const int H = shape->n_heads, Hkv = shape->n_kv_heads, D = shape->head_dim;
	const int rep = H / Hkv, ldq = H * D, ldkv = Hkv * D;
	/* Decoding, the query heads of a kv head are one rep x D matrix, so each
	 * cache row is read once per kv head instead of once per query head. */
	const int decode = n_new == 1;
	const int n_tiles = (n_new + ATTN_BQ - 1) / ATTN_BQ;
	const int n_items = decode ? Hkv : n_tiles * H;
	const int rows = decode ? rep : n_new < ATTN_BQ ? n_new : ATTN_BQ;
	const size_t tile = (size_t)rows * (size_t)len;
	const size_t threads = (size_t)cached_threads();
	float *scratch = NULL;

	if (tile <= SIZE_MAX / sizeof(float) / threads)
		scratch = malloc(tile * threads * sizeof(float));
	if (!scratch)
		return -1;

	const int parallel = n_items > 1 && threads > 1;
	const int blas_threads = cached_blas_serial_begin(parallel);

	/* tiles from the last (most keys) to the first, for the dynamic schedule */
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
#endif
	for (int i = 0; i < n_items; i++) {
		float *tile_s = scratch + (size_t)cached_thread_id() * tile;

		if (decode) {
			const size_t qo = (size_t)i * rep * D, kvo = (size_t)i * D;

			cached_tile(out + qo, q + qo, k_cache + kvo, v_cache + kvo, rep, len - 1, 0,
			            D, ldkv, D, shape->scale, tile_s);
			continue;
		}

		const int t = n_tiles - 1 - i / H, h = i % H;
		const int row = t * ATTN_BQ, m = n_new - row < ATTN_BQ ? n_new - row : ATTN_BQ;
		const size_t qo = (size_t)row * ldq + (size_t)h * D;
		const size_t kvo = (size_t)(h / rep) * D;

		cached_tile(out + qo, q + qo, k_cache + kvo, v_cache + kvo, m, len - n_new + row, 1,
		            ldq, ldkv, D, shape->scale, tile_s);
	}
	cached_blas_serial_end(blas_threads);
	free(scratch);
	return 0;
}
