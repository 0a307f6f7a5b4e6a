/* Token embedding: a row gather forward, a scatter-add backward.
 * defines: rl_embedding_forward_cpu, rl_embedding_backward_cpu, rl_embedding_forward_cuda,
 * rl_embedding_backward_cuda, rl_embedding_check_cuda */
#ifndef RL_KERNELS_EMBEDDING_H
#define RL_KERNELS_EMBEDDING_H

#include <stdint.h>

#include "kernels/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[t, :] = table[ids[t], :] for t < n; table is vocab x dim. An id of -1
 * gives a row of zeros: with a vocabulary split over tensor-parallel ranks,
 * the ranks that do not hold a token contribute nothing to the sum. Returns
 * -1 on bad arguments or an id outside [-1, vocab), writing nothing for that
 * row. out is the table's type (fp32 or bf16): a row is copied, bits and
 * all. */
typedef int (*rl_embedding_forward_fn)(struct rl_buf out, const int32_t *ids, struct rl_cbuf table,
                                       int n, int dim, int vocab, void *stream);
/* dtable[ids[t], :] += dout[t, :], skipping ids of -1; ids are trusted
 * (checked by the forward). dtable is fp32 (main_grad); dout fp32 or bf16,
 * its values added exactly widened. */
typedef int (*rl_embedding_backward_fn)(float *dtable, struct rl_cbuf dout, const int32_t *ids,
                                        int n, int dim, void *stream);

int rl_embedding_forward_cpu(struct rl_buf out, const int32_t *ids, struct rl_cbuf table, int n,
                             int dim, int vocab, void *stream);
int rl_embedding_backward_cpu(float *dtable, struct rl_cbuf dout, const int32_t *ids, int n,
                              int dim, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). */

/* The ids are device memory, so the op cannot see a bad one without waiting
 * for the device. It does not wait: it returns -1 only on bad arguments or a
 * launch error, zero-fills the row of an id outside [-1, vocab) and raises a
 * flag on the device, which rl_embedding_check_cuda() reads. */
int rl_embedding_forward_cuda(struct rl_buf out, const int32_t *ids, struct rl_cbuf table, int n,
                              int dim, int vocab, void *stream);
/* Deterministic and bit for bit the CPU op: the tokens are stably sorted by
 * id (CUB radix sort, 12 n bytes of scratch plus CUB's), then each id's rows
 * are added to its dtable row in token order. Returns -1 when the scratch
 * cannot be had. */
int rl_embedding_backward_cuda(float *dtable, struct rl_cbuf dout, const int32_t *ids, int n,
                               int dim, void *stream);
/* Waits for stream, then returns -1 if an embedding forward on this device
 * saw an id outside [-1, vocab) since the last check (clearing the flag), or
 * a CUDA call failed; 0 otherwise. One flag per device for the process:
 * forwards on other streams must be ordered before the check by the caller. */
int rl_embedding_check_cuda(void *stream);

#ifdef __cplusplus
}
#endif

#endif
