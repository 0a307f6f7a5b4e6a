/* The paged KV cache's two ops: appending a step's keys and values to
 * their cache rows, and attention of any set of query tokens against keys
 * reached through a block table.
 *
 * A cache is [rows, n_kv_heads, head_dim] per layer for each of k and v, cut
 * into blocks of `block` rows. A sequence's key j lives in row
 * table[off + j / block] * block + j % block, where off is where the
 * sequence's run of block ids starts in table. A packed training batch is
 * the same thing with block 1 and table the identity (off = the sequence's
 * first token), which is how the batch-invariant training forward reads its
 * keys through the very code generation uses.
 *
 * Batch invariance, the contract both backends keep: a query row's output
 * (and lse) is a function of that row's query, its position and its keys'
 * values only, with a fixed order of every reduction, so it has the same
 * bits whatever the other rows of the call are, how many there are, where
 * its keys are stored and whether it came in a prefill or a decode step.
 * defines: rl_kv_append_fn, rl_attention_paged_fn, rl_kv_append_cpu,
 * rl_attention_paged_cpu and their _cuda twins */
#ifndef RL_KERNELS_PAGED_H
#define RL_KERNELS_PAGED_H

#include <stdint.h>

#include "kernels/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Row rows[t] of k_cache and of v_cache becomes row t of k and of v, for t
 * < n; a row is row_floats floats. rows (backend memory) holds distinct
 * rows. */
typedef int (*rl_kv_append_fn)(float *k_cache, float *v_cache, const float *k, const float *v,
                               const int32_t *rows, int n, int row_floats, void *stream);

/* n query tokens: q and out [n, n_heads, head_dim], lse [n, n_heads] (may be
 * NULL). Token t sits at position pos[t] of its sequence and sees its keys
 * 0 .. pos[t], key j at cache row table[off[t] + j / block] * block +
 * j % block. Query head h reads kv head h / (n_heads / n_kv_heads).
 * table, off and pos are backend memory; the rows they name must exist. */
typedef int (*rl_attention_paged_fn)(float *out, float *lse, const float *q, const float *k_cache,
                                     const float *v_cache, const int32_t *table, const int32_t *off,
                                     const int32_t *pos, int n, int block,
                                     const struct rl_attention_shape *shape, void *stream);

int rl_kv_append_cpu(float *k_cache, float *v_cache, const float *k, const float *v,
                     const int32_t *rows, int n, int row_floats, void *stream);
int rl_attention_paged_cpu(float *out, float *lse, const float *q, const float *k_cache,
                           const float *v_cache, const int32_t *table, const int32_t *off,
                           const int32_t *pos, int n, int block,
                           const struct rl_attention_shape *shape, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA): kernels/cuda/paged.cu.
 * The device arrays are not read back, so nothing is checked past the
 * arguments' shapes. */
int rl_kv_append_cuda(float *k_cache, float *v_cache, const float *k, const float *v,
                      const int32_t *rows, int n, int row_floats, void *stream);
int rl_attention_paged_cuda(float *out, float *lse, const float *q, const float *k_cache,
                            const float *v_cache, const int32_t *table, const int32_t *off,
                            const int32_t *pos, int n, int block,
                            const struct rl_attention_shape *shape, void *stream);

#ifdef __cplusplus
}
#endif

#endif
