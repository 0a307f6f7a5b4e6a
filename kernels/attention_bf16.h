/* Causal GQA attention over packed sequences in bf16 on the GPU: the fast
 * path the runtime takes when it trains in bf16 (the fp32 op table's
 * attention stays the reference). FlashAttention-2's tiling: tensor-core
 * products (mma.sync m16n8k16 bf16, fp32 accumulation), the softmax online
 * in fp32, the scores never in device memory.
 *
 * Same semantics and layouts as kernels/attention.h: sequence s owns tokens
 * [cu_seqlens[s], cu_seqlens[s+1]), no token attends across a boundary or to
 * a later token, query head h reads kv head h / (n_heads / n_kv_heads).
 * q, out, dout, dq are [T, n_heads, head_dim], k, v, dk, dv
 * [T, n_kv_heads, head_dim], lse [T, n_heads] (natural log-sum-exp of the
 * scaled scores, fp32). bf16 tensors are passed as their bit patterns
 * (uint16_t, see kernels/dtype.h); every product is accumulated in fp32 and
 * rounded to bf16 once, when stored; P and dS are rounded to bf16 before
 * their products, as in FlashAttention.
 *
 * All pointers are device memory, cu_seqlens included (n_seqs + 1 int32,
 * nondecreasing; not checked: the host never reads it). max_seqlen is the
 * host's bound on the longest sequence and only sizes the grid: a longer
 * sequence is still computed correctly, by blocks that loop, only slower.
 *
 * Outputs are WRITTEN, not added to: out and lse (forward), dq, dk, dv
 * (backward) get every row of every sequence; rows outside all sequences
 * (before cu_seqlens[0]) are not touched.
 *
 * Returns 0, or -1 before any CUDA call on bad arguments: n_seqs < 0,
 * max_seqlen < 0, a NULL pointer, a bad shape (n_heads, n_kv_heads > 0,
 * n_kv_heads dividing n_heads, scale finite), n_seqs * n_heads (or
 * n_kv_heads) above INT_MAX (the grid's x), bf16 tensors not 16-byte
 * aligned (cp.async moves 16 bytes), fp32 ones not 4-byte aligned; and -1
 * when a launch fails. head_dim must be 64 or 128, others return -1 (the
 * caller falls back to the fp32 op table): the kernels are templates over
 * head_dim, which sizes their register arrays and tiles at compile time,
 * so each size is one more set of compiled kernels, and these two cover the
 * Llama and Qwen families. n_seqs == 0 does nothing.
 * No call synchronises; stream is a cudaStream_t (NULL: the legacy
 * default stream).
 *
 * The backward is deterministic: no atomics; dK and dV come from one block
 * per key tile looping over the query tiles and the group's query heads in
 * a fixed order, dQ from a second kernel, one block per query tile looping
 * over the key tiles. Two runs give the same bits.
 *
 * Only defined when built --with-cuda (RL_HAVE_CUDA).
 * defines: rl_attention_forward_bf16_cuda, rl_attention_backward_bf16_cuda,
 * rl_attention_backward_bf16_workspace_size */
#ifndef RL_KERNELS_ATTENTION_BF16_H
#define RL_KERNELS_ATTENTION_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/attention.h"

#ifdef __cplusplus
extern "C" {
#endif

int rl_attention_forward_bf16_cuda(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k,
                                   const uint16_t *v, const int32_t *cu_seqlens, int n_seqs,
                                   int max_seqlen, const struct rl_attention_shape *shape,
                                   void *stream);

/* Bytes of fp32 workspace the backward needs: rowsum(dO * O) for every
 * (token, query head). n_tokens is cu_seqlens[n_seqs] (the rows of q,
 * counted from the q pointer). At least 256, so an allocation of this size
 * is never empty; 0 for a bad shape or n_tokens < 0. */
size_t rl_attention_backward_bf16_workspace_size(int64_t n_tokens,
                                                 const struct rl_attention_shape *shape);

/* From dout and the forward's out and lse, writes dq, dk, dv. workspace
 * (4-byte aligned) holds rl_attention_backward_bf16_workspace_size bytes;
 * its contents on entry do not matter. */
int rl_attention_backward_bf16_cuda(uint16_t *dq, uint16_t *dk, uint16_t *dv, const uint16_t *dout,
                                    const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                    const uint16_t *out, const float *lse,
                                    const int32_t *cu_seqlens, int n_seqs, int max_seqlen,
                                    const struct rl_attention_shape *shape, float *workspace,
                                    void *stream);

#ifdef __cplusplus
}
#endif

#endif
