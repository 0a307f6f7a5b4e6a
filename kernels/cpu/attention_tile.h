/* What the training attention over packed sequences (attention.c) and over
 * chunk tables (attention_chunks.c) share: work cut into tiles of ATTN_BQ
 * query rows of one head, a score tile per thread, both products as
 * cblas_sgemm calls through the row strides, and the softmax of a score
 * row. The op table wants the two in their own files; this header is
 * private to kernels/cpu/.
 * defines: ATTN_BQ, ATTN_SIMD, ATTN_SIMD_MAX, ATTN_SIMD_SUM, attn_threads,
 * attn_thread_id, attn_blas_serial_begin, attn_blas_serial_end,
 * attn_shape_ok, attn_alloc_tiles, attn_softmax_row, attn_tile_forward,
 * attn_head_backward, attn_add_rows */
#ifndef RL_KERNELS_CPU_ATTENTION_TILE_H
#define RL_KERNELS_CPU_ATTENTION_TILE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/attention.h"
#include "kernels/cpu/fast_exp.h"

#define ATTN_BQ 64

/* OpenMP's simd loops, and nothing in a build without -fopenmp */
#ifdef _OPENMP
#define ATTN_PRAGMA(x) _Pragma(#x)
#else
#define ATTN_PRAGMA(x)
#endif
#define ATTN_SIMD        ATTN_PRAGMA(omp simd)
#define ATTN_SIMD_MAX(v) ATTN_PRAGMA(omp simd reduction(max : v))
#define ATTN_SIMD_SUM(v) ATTN_PRAGMA(omp simd reduction(+ : v))

static inline int attn_threads(void)
{
#ifdef _OPENMP
	return omp_get_max_threads();
#else
	return 1;
#endif
}

static inline int attn_thread_id(void)
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
static inline int attn_blas_serial_begin(int parallel)
{
	int n = openblas_get_num_threads();

	if (!parallel || n <= 1 || openblas_get_parallel() != OPENBLAS_THREAD)
		return 0;
	openblas_set_num_threads(1);
	return n;
}

static inline void attn_blas_serial_end(int saved)
{
	if (saved > 0)
		openblas_set_num_threads(saved);
}

static inline int attn_shape_ok(const struct rl_attention_shape *sh)
{
	return sh && sh->n_heads > 0 && sh->n_kv_heads > 0 && sh->head_dim > 0 &&
	       sh->n_heads % sh->n_kv_heads == 0;
}

/* per_thread tiles of tile floats for every thread; NULL when out of memory
 * or when the size does not fit in a size_t. */
static inline float *attn_alloc_tiles(size_t tile, size_t per_thread)
{
	size_t count = (size_t)attn_threads() * per_thread;

	if (tile > SIZE_MAX / sizeof(float) / count)
		return NULL;
	return malloc(tile * count * sizeof(float));
}

/* Softmax of row[0..valid) in place and zeros in row[valid..n), for the
 * masked keys; returns the log-sum-exp. */
static inline float attn_softmax_row(float *row, int valid, int n)
{
	float mx = row[0];
	double sum = 0.0;

	ATTN_SIMD_MAX(mx)
	for (int j = 1; j < valid; j++)
		mx = row[j] > mx ? row[j] : mx;
	ATTN_SIMD
	for (int j = 0; j < valid; j++)
		row[j] = rl_fast_exp_clamp(row[j] - mx);
	ATTN_SIMD_SUM(sum)
	for (int j = 0; j < valid; j++)
		sum += row[j];

	const float inv = (float)(1.0 / sum);

	ATTN_SIMD
	for (int j = 0; j < valid; j++)
		row[j] *= inv;
	for (int j = valid; j < n; j++)
		row[j] = 0.0f;
	return mx + (float)log(sum);
}

/* m consecutive query rows (stride ldq) of one head at positions first ..
 * first + m - 1 of their sequence against key rows 0 .. their own position;
 * s holds m x (first + m) floats. Row r's log-sum-exp goes to
 * lse[r * ldl]. */
static inline void attn_tile_forward(float *out, float *lse, int ldl, const float *q,
                                     const float *k, const float *v, int m, int first, int ldq,
                                     int ldkv, int d, float scale, float *s)
{
	const int n = first + m;

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, d, scale, q, ldq, k, ldkv, 0.0f,
	            s, n);
	for (int r = 0; r < m; r++)
		lse[(size_t)r * ldl] = attn_softmax_row(s + (size_t)r * n, first + r + 1, n);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, d, n, 1.0f, s, n, v, ldkv, 0.0f,
	            out, ldq);
}

/* The backward pass of one query head over len query rows at positions
 * off .. off + len - 1 of their sequence, against its keys 0 .. off +
 * len - 1 (off 0: the whole sequence). The pointers are already moved to
 * the head's column, q's to the chunk's first row and k's to the
 * sequence's first key; dk and dv (row stride ldd) get this head's share
 * only. p and ds are tiles. */
static inline void attn_head_backward(float *dq, float *dk, float *dv, const float *dout,
                                      const float *q, const float *k, const float *v,
                                      const float *out, const float *lse, int off, int len, int ldq,
                                      int ldd, int ldkv, int ldl, int d, float scale, float *p,
                                      float *ds)
{
	for (int first = 0; first < len; first += ATTN_BQ) {
		const int m = len - first < ATTN_BQ ? len - first : ATTN_BQ, n = off + first + m;
		const size_t qo = (size_t)first * ldq;

		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, d, scale, q + qo, ldq, k,
		            ldkv, 0.0f, p, n);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, d, 1.0f, dout + qo, ldq,
		            v, ldkv, 0.0f, ds, n);
		for (int r = 0; r < m; r++) {
			const float *o = out + qo + (size_t)r * ldq,
			            *g = dout + qo + (size_t)r * ldq;
			float *pr = p + (size_t)r * n, *dr = ds + (size_t)r * n;
			const float l = lse[(size_t)(first + r) * ldl];
			const int valid = off + first + r + 1;
			double dot = 0.0;

			for (int i = 0; i < d; i++)
				dot += (double)o[i] * g[i];
			/* dS = P * (dP - rowsum(dO * O)), the score scale folded in */
			const float di = (float)dot;

			ATTN_SIMD
			for (int j = 0; j < valid; j++) {
				pr[j] = rl_fast_exp_clamp(pr[j] - l);
				dr[j] = scale * pr[j] * (dr[j] - di);
			}
			for (int j = valid; j < n; j++)
				pr[j] = dr[j] = 0.0f;
		}
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, d, n, 1.0f, ds, n, k,
		            ldkv, 1.0f, dq + qo, ldq);
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, d, m, 1.0f, ds, n, q + qo,
		            ldq, 1.0f, dk, ldd);
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, d, m, 1.0f, p, n, dout + qo,
		            ldq, 1.0f, dv, ldd);
	}
}

/* dst[t][:] += src[t][:] for len rows of d floats */
static inline void attn_add_rows(float *dst, int ld_dst, const float *src, int ld_src, int len,
                                 int d)
{
	for (int t = 0; t < len; t++) {
		float *a = dst + (size_t)t * ld_dst;
		const float *b = src + (size_t)t * ld_src;

		ATTN_SIMD
		for (int i = 0; i < d; i++)
			a[i] += b[i];
	}
}

#endif
