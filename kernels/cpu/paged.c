/* The paged KV cache's ops on the CPU, the reference of kernels/cuda/paged.cu.
 *
 * Attention goes row by row: for each (token, kv head) the query heads of
 * the group each score every key with one eight-lane dot (lanes.h), take
 * the softmax with the training kernels' exp (the maximum, then the sum of
 * exponentials in double in key order), and add the normalized weights
 * times the value rows in key order. Nothing else enters a row's arithmetic,
 * so it has the same bits in a prefill, a decode step and the
 * batch-invariant training forward, and under any thread count. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/lanes.h"
#include "kernels/paged.h"

int rl_kv_append_cpu(float *k_cache, float *v_cache, const float *k, const float *v,
                     const int32_t *rows, int n, int row_floats, void *stream)
{
	(void)stream;
	if (!k_cache || !v_cache || !k || !v || !rows || n < 0 || row_floats <= 0)
		return -1;

	const size_t bytes = (size_t)row_floats * sizeof(float);

	for (int t = 0; t < n; t++) {
		if (rows[t] < 0)
			return -1;
		memcpy(k_cache + (size_t)rows[t] * (size_t)row_floats,
		       k + (size_t)t * (size_t)row_floats, bytes);
		memcpy(v_cache + (size_t)rows[t] * (size_t)row_floats,
		       v + (size_t)t * (size_t)row_floats, bytes);
	}
	return 0;
}

static inline size_t key_row(const int32_t *table, int32_t off, int block, int j)
{
	return (size_t)table[off + j / block] * (size_t)block + (size_t)(j % block);
}

/* One query head of one token: s has room for pos + 1 scores. */
static void attend(float *out, float *lse, const float *q, const float *k_cache,
                   const float *v_cache, const int32_t *table, int32_t off, int pos, int block,
                   size_t ldkv, int d, float scale, float *s)
{
	float mx = -INFINITY;
	double sum = 0.0;

	for (int j = 0; j <= pos; j++) {
		s[j] = scale * rl_dot8(q, k_cache + key_row(table, off, block, j) * ldkv, d);
		mx = s[j] > mx ? s[j] : mx;
	}
	for (int j = 0; j <= pos; j++) {
		s[j] = rl_fast_exp_clamp(s[j] - mx);
		sum += s[j];
	}

	const float inv = (float)(1.0 / sum);

	for (int i = 0; i < d; i++)
		out[i] = 0.0f;
	for (int j = 0; j <= pos; j++) {
		const float p = s[j] * inv;
		const float *vr = v_cache + key_row(table, off, block, j) * ldkv;

		for (int i = 0; i < d; i++)
			out[i] += p * vr[i];
	}
	if (lse)
		*lse = mx + (float)log(sum);
}

int rl_attention_paged_cpu(float *out, float *lse, const float *q, const float *k_cache,
                           const float *v_cache, const int32_t *table, const int32_t *off,
                           const int32_t *pos, int n, int block,
                           const struct rl_attention_shape *shape, void *stream)
{
	(void)stream;
	if (!shape || shape->n_heads <= 0 || shape->n_kv_heads <= 0 || shape->head_dim <= 0 ||
	    shape->n_heads % shape->n_kv_heads || n < 0 || block <= 0)
		return -1;
	if (n == 0)
		return 0;
	if (!out || !q || !k_cache || !v_cache || !table || !off || !pos)
		return -1;

	const int H = shape->n_heads, Hkv = shape->n_kv_heads, D = shape->head_dim;
	const int rep = H / Hkv;
	int longest = 0;

	for (int t = 0; t < n; t++) {
		if (pos[t] < 0 || off[t] < 0)
			return -1;
		longest = pos[t] + 1 > longest ? pos[t] + 1 : longest;
	}
#ifdef _OPENMP
	const int threads = omp_get_max_threads();
#else
	const int threads = 1;
#endif
	float *scratch = malloc((size_t)threads * (size_t)longest * sizeof(float));

	if (!scratch)
		return -1;

	const long items = (long)n * Hkv;

#pragma omp parallel for schedule(dynamic, 1) if (items > 1 && threads > 1)
	for (long i = 0; i < items; i++) {
#ifdef _OPENMP
		float *s = scratch + (size_t)omp_get_thread_num() * (size_t)longest;
#else
		float *s = scratch;
#endif
		const int t = (int)(i / Hkv), g = (int)(i % Hkv);

		for (int h = g * rep; h < (g + 1) * rep; h++) {
			const size_t qo = ((size_t)t * H + (size_t)h) * (size_t)D;

			attend(out + qo, lse ? lse + (size_t)t * H + h : NULL, q + qo,
			       k_cache + (size_t)g * D, v_cache + (size_t)g * D, table, off[t],
			       pos[t], block, (size_t)Hkv * D, D, shape->scale, s);
		}
	}
	free(scratch);
	return 0;
}
