/* Token embedding: a row gather forward, a scatter-add backward.
 * defines: rl_embedding_forward_cpu, rl_embedding_backward_cpu */
#ifndef RL_KERNELS_EMBEDDING_H
#define RL_KERNELS_EMBEDDING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* out[t, :] = table[ids[t], :] for t < n; table is vocab x dim. An id of -1
 * gives a row of zeros: with a vocabulary split over tensor-parallel ranks,
 * the ranks that do not hold a token contribute nothing to the sum. Returns
 * -1 on bad arguments or an id outside [-1, vocab), writing nothing for that
 * row. */
typedef int (*rl_embedding_forward_fn)(float *out, const int32_t *ids, const float *table, int n,
                                       int dim, int vocab, void *stream);
/* dtable[ids[t], :] += dout[t, :], skipping ids of -1; ids are trusted
 * (checked by the forward). */
typedef int (*rl_embedding_backward_fn)(float *dtable, const float *dout, const int32_t *ids,
                                        int n, int dim, void *stream);

int rl_embedding_forward_cpu(float *out, const int32_t *ids, const float *table, int n, int dim,
                             int vocab, void *stream);
int rl_embedding_backward_cpu(float *dtable, const float *dout, const int32_t *ids, int n, int dim,
                              void *stream);

#ifdef __cplusplus
}
#endif

#endif
