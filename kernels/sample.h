/* Drawing the next tokens on the backend, so that only token ids (and, from
 * rl_logits_logprobs_fn, their logprobs) come back to the host: vLLM's
 * sampling parameters and order (temperature, top-k, top-p, one draw), the
 * draw's number from Philox keyed by (seed, stream, position) (philox.h).
 *
 * A row's token, in exact terms (the CPU op is the reference):
 *   greedy (temperature < RL_SAMPLE_GREEDY_EPS): the argmax, ties to the
 *     lowest id.
 *   otherwise z_i = logits_i / temperature in fp32 and e_i = exp(z_i - max z)
 *     (fp32); the ranking is z descending, then id ascending; top-k keeps
 *     the first top_k of it (0 or -1, or >= vocab: off); top-p then keeps
 *     the smallest prefix of what is left whose mass reaches top_p times
 *     its mass (sums in double; at least one token); u =
 *     rl_philox_uniform(seed, stream, position); the token is the first
 *     kept one, walking the ranking (id order when nothing was cut), whose
 *     running mass exceeds u times the kept mass.
 * A row with a non-finite logit, or one that overflows once divided by the
 * temperature, gets token -1: the caller checks the ids it reads back
 * anyway, and a GPU cannot say which row failed without a sync.
 * defines: RL_SAMPLE_GREEDY_EPS, struct rl_sample_params, rl_sample_fn,
 * rl_sample_row_work_bytes, rl_sample_row_cpu, rl_sample_support_cpu, rl_sample_cpu,
 * rl_sample_cuda */
#ifndef RL_KERNELS_SAMPLE_H
#define RL_KERNELS_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* vLLM's _SAMPLING_EPS: dividing by a tinier temperature only overflows */
#define RL_SAMPLE_GREEDY_EPS 1e-5f

/* Host memory; one set for every row of a call. */
struct rl_sample_params {
	float temperature; /* >= 0 */
	int top_k;         /* >= -1 */
	float top_p;       /* in (0, 1] */
	uint64_t seed;
};

/* tokens [n] (backend memory) from rows logits + r * ld (backend memory,
 * the first vocab entries of each, vocab <= ld); counters (backend memory)
 * holds each row's (stream, position) as two int64. Returns -1 for bad
 * arguments only. */
typedef int (*rl_sample_fn)(int32_t *tokens, const float *logits, int n, int vocab, int ld,
                            const struct rl_sample_params *p, const int64_t *counters,
                            void *stream);

/* Scratch for rl_sample_row_cpu: 2 * vocab floats and vocab int32. */
size_t rl_sample_row_work_bytes(int vocab);

/* One row on the host with a given u in [0, 1), the rule above. Returns 0;
 * 1 when logits[*token] is not finite; 2 when logits[*token] overflows at
 * the temperature; -1 for parameters out of range or a NULL argument.
 * *logprob (may be NULL) gets log p(token) under the temperature-scaled
 * full softmax (the unscaled one when greedy), its normalizer summed in
 * double. work: rl_sample_row_work_bytes(vocab) bytes, malloc-aligned;
 * may be NULL when greedy. */
int rl_sample_row_cpu(const float *logits, int vocab, float temperature, int top_k, float top_p,
                      double u, int32_t *token, float *logprob, void *work);

/* The set rl_sample_row_cpu draws from, in the order it walks it (ids has
 * room for vocab): the argmax alone when greedy, every id in id order when
 * nothing is cut, the kept ones in ranking order otherwise. Same codes. */
int rl_sample_support_cpu(const float *logits, int vocab, float temperature, int top_k, float top_p,
                          int32_t *ids, int *n, void *work);

int rl_sample_cpu(int32_t *tokens, const float *logits, int n, int vocab, int ld,
                  const struct rl_sample_params *p, const int64_t *counters, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA): kernels/cuda/sample.cu,
 * one thread block per row, no host synchronisation (capturable in a CUDA
 * graph). Its sums run in another order than the CPU's, so a draw whose u
 * falls within rounding of a boundary between two tokens may pick the
 * neighbour; everything else is the CPU's token. */
int rl_sample_cuda(int32_t *tokens, const float *logits, int n, int vocab, int ld,
                   const struct rl_sample_params *p, const int64_t *counters, void *stream);

#ifdef __cplusplus
}
#endif

#endif
