/* Attention of new tokens against a KV cache, for generation. The same tiles
 * as the training forward in attention.c (ATTN_BQ query rows of one head,
 * cblas_sgemm for both products), shifted: the queries start at position
 * len - n_new, and no lse is kept because nothing runs backward. Each thread
 * owns an ATTN_BQ x len score tile (a 1 x len row when decoding). */
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

/* m queries at positions first .. first + m - 1 against cache rows
 * 0 .. first + m - 1; s holds m x (first + m) floats. */
static void cached_tile(float *out, const float *q, const float *k, const float *v, int m,
                        int first, int ldq, int ldkv, int d, float scale, float *s)
{
	const int n = first + m;

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, d, scale, q, ldq, k, ldkv, 0.0f,
	            s, n);
	for (int r = 0; r < m; r++) {
		float *row = s + (size_t)r * n;
		const int valid = first + r + 1;
		float mx = row[0];
		double sum = 0.0;

		for (int j = 1; j < valid; j++)
			mx = row[j] > mx ? row[j] : mx;
		for (int j = 0; j < valid; j++) {
			row[j] = expf(row[j] - mx);
			sum += row[j];
		}
		const float inv = (float)(1.0 / sum);

		for (int j = 0; j < valid; j++)
			row[j] *= inv;
		for (int j = valid; j < n; j++)
			row[j] = 0.0f;
	}
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
	const int n_tiles = (n_new + ATTN_BQ - 1) / ATTN_BQ, n_items = n_tiles * H;
	const int rows = n_new < ATTN_BQ ? n_new : ATTN_BQ;
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
		const int t = n_tiles - 1 - i / H, h = i % H;
		const int row = t * ATTN_BQ, m = n_new - row < ATTN_BQ ? n_new - row : ATTN_BQ;
		const size_t qo = (size_t)row * ldq + (size_t)h * D;
		const size_t kvo = (size_t)(h / rep) * D;

		cached_tile(out + qo, q + qo, k_cache + kvo, v_cache + kvo, m, len - n_new + row,
		            ldq, ldkv, D, shape->scale,
		            scratch + (size_t)cached_thread_id() * tile);
	}
	cached_blas_serial_end(blas_threads);
	free(scratch);
	return 0;
}
