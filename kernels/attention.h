/* Causal self-attention with grouped-query heads over packed sequences.
 * Sequence s owns tokens [cu_seqlens[s], cu_seqlens[s+1]); no token attends
 * across a boundary. Query head h reads key/value head h / (n_heads/n_kv_heads).
 * Layouts are token-major, as the projections write them: q and out are
 * [T, n_heads, head_dim], k and v [T, n_kv_heads, head_dim], lse [T, n_heads]
 * (the log-sum-exp of the scaled scores, saved for the backward pass).
 * defines: rl_attention_forward_cpu, rl_attention_backward_cpu,
 * rl_attention_chunks_forward_cpu, rl_attention_chunks_backward_cpu and
 * their _cuda twins */
#ifndef RL_KERNELS_ATTENTION_H
#define RL_KERNELS_ATTENTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rl_attention_shape {
	int n_heads;
	int n_kv_heads; /* divides n_heads */
	int head_dim;
	float scale; /* usually 1/sqrt(head_dim) */
};

typedef int (*rl_attention_forward_fn)(float *out, float *lse, const float *q, const float *k,
                                       const float *v, const int32_t *cu_seqlens, int n_seqs,
                                       const struct rl_attention_shape *shape, void *stream);
/* dq, dk, dv are added to (callers zero them first). */
typedef int (*rl_attention_backward_fn)(float *dq, float *dk, float *dv, const float *dout,
                                        const float *q, const float *k, const float *v,
                                        const float *out, const float *lse,
                                        const int32_t *cu_seqlens, int n_seqs,
                                        const struct rl_attention_shape *shape, void *stream);
/* Query chunks against the keys of their sequence, for context
 * parallelism: chunk i's queries are rows q_start[i] .. q_start[i] + len[i] - 1
 * of q / out / lse; its sequence's keys start at row k_start[i] of k / v;
 * query j of the chunk sits at position offset[i] + j of its sequence and
 * sees key rows k_start[i] .. k_start[i] + offset[i] + j. Chunks do not
 * overlap in query rows; several may share a sequence's keys. The arrays
 * are backend memory (host for the CPU table). */
struct rl_attention_chunks {
	int n;
	const int32_t *q_start, *k_start, *offset, *len;
};

typedef int (*rl_attention_chunks_forward_fn)(float *out, float *lse, const float *q,
                                              const float *k, const float *v,
                                              const struct rl_attention_chunks *chunks,
                                              const struct rl_attention_shape *shape, void *stream);
/* dq (query rows), dk and dv (key rows) are added to. */
typedef int (*rl_attention_chunks_backward_fn)(float *dq, float *dk, float *dv, const float *dout,
                                               const float *q, const float *k, const float *v,
                                               const float *out, const float *lse,
                                               const struct rl_attention_chunks *chunks,
                                               const struct rl_attention_shape *shape,
                                               void *stream);

int rl_attention_forward_cpu(float *out, float *lse, const float *q, const float *k, const float *v,
                             const int32_t *cu_seqlens, int n_seqs,
                             const struct rl_attention_shape *shape, void *stream);
int rl_attention_backward_cpu(float *dq, float *dk, float *dv, const float *dout, const float *q,
                              const float *k, const float *v, const float *out, const float *lse,
                              const int32_t *cu_seqlens, int n_seqs,
                              const struct rl_attention_shape *shape, void *stream);

int rl_attention_chunks_forward_cpu(float *out, float *lse, const float *q, const float *k,
                                    const float *v, const struct rl_attention_chunks *chunks,
                                    const struct rl_attention_shape *shape, void *stream);
int rl_attention_chunks_backward_cpu(float *dq, float *dk, float *dv, const float *dout,
                                     const float *q, const float *k, const float *v,
                                     const float *out, const float *lse,
                                     const struct rl_attention_chunks *chunks,
                                     const struct rl_attention_shape *shape, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). fp32 FlashAttention-
 * style kernels (kernels/cuda/attention*.cu): head_dim at most 256 (-1
 * beyond). cu_seqlens and the chunk arrays are device memory and are not
 * checked (the host never reads them back): a malformed sequence or chunk
 * is skipped instead of refused, and chunks sharing query rows race. The
 * backward passes use no atomics: the same bits on every run. */
int rl_attention_forward_cuda(float *out, float *lse, const float *q, const float *k,
                              const float *v, const int32_t *cu_seqlens, int n_seqs,
                              const struct rl_attention_shape *shape, void *stream);
int rl_attention_backward_cuda(float *dq, float *dk, float *dv, const float *dout, const float *q,
                               const float *k, const float *v, const float *out, const float *lse,
                               const int32_t *cu_seqlens, int n_seqs,
                               const struct rl_attention_shape *shape, void *stream);
int rl_attention_chunks_forward_cuda(float *out, float *lse, const float *q, const float *k,
                                     const float *v, const struct rl_attention_chunks *chunks,
                                     const struct rl_attention_shape *shape, void *stream);
int rl_attention_chunks_backward_cuda(float *dq, float *dk, float *dv, const float *dout,
                                      const float *q, const float *k, const float *v,
                                      const float *out, const float *lse,
                                      const struct rl_attention_chunks *chunks,
                                      const struct rl_attention_shape *shape, void *stream);

#ifdef __cplusplus
}
#endif

#endif
