/* Attention of new tokens against a KV cache, for generation. The same tiles
 * as the training forward in attention.c (attention_tile.h), shifted: the
 * queries start at position len - n_new, and no lse is kept because nothing
 * runs backward. Each thread owns an ATTN_BQ x len score tile (a rep x len
 * one when decoding). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/attention.h"
#include "kernels/cpu/attention_tile.h"

int rl_attention_cached_cpu(float *out, const float *q, const float *k_cache, const float *v_cache,
                            int n_new, int len, const struct rl_attention_shape *shape,
                            void *stream)
{
	(void)stream;
	if (!attn_shape_ok(shape))
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
	const int threads = attn_threads();
	float *scratch = attn_alloc_tiles(tile, 1);

	if (!scratch)
		return -1;

	const int parallel = n_items > 1 && threads > 1;
	const int blas_threads = attn_blas_serial_begin(parallel);

	/* tiles from the last (most keys) to the first, for the dynamic schedule */
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
#endif
	for (int i = 0; i < n_items; i++) {
		float *tile_s = scratch + (size_t)attn_thread_id() * tile;

		if (decode) {
			const size_t qo = (size_t)i * rep * D, kvo = (size_t)i * D;

			attn_tile_forward(out + qo, NULL, 0, q + qo, k_cache + kvo, v_cache + kvo,
			                  rep, len - 1, 0, D, ldkv, D, shape->scale, tile_s);
			continue;
		}

		const int t = n_tiles - 1 - i / H, h = i % H;
		const int row = t * ATTN_BQ, m = n_new - row < ATTN_BQ ? n_new - row : ATTN_BQ;
		const size_t qo = (size_t)row * ldq + (size_t)h * D;
		const size_t kvo = (size_t)(h / rep) * D;

		attn_tile_forward(out + qo, NULL, 0, q + qo, k_cache + kvo, v_cache + kvo, m,
		                  len - n_new + row, 1, ldq, ldkv, D, shape->scale, tile_s);
	}
	attn_blas_serial_end(blas_threads);
	free(scratch);
	return 0;
}
