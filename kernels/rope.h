/* Rotary position embedding in Hugging Face's "rotate half" layout: channel i
 * pairs with channel i + head_dim/2, both rotated by pos * inv_freq[i].
 * defines: struct rl_rope_scaling, rl_rope_inv_freq, rl_rope_forward_cpu,
 * rl_rope_backward_cpu, rl_rope_forward_cuda, rl_rope_backward_cuda */
#ifndef RL_KERNELS_ROPE_H
#define RL_KERNELS_ROPE_H

#include <stdint.h>

#include "kernels/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

enum rl_rope_type { RL_ROPE_DEFAULT, RL_ROPE_LLAMA3 };

/* config.json's rope_scaling; type RL_ROPE_DEFAULT ignores the rest. */
struct rl_rope_scaling {
	enum rl_rope_type type;
	double factor;
	double low_freq_factor;
	double high_freq_factor;
	int original_max_position_embeddings;
};

/* inv_freq[i] = theta^(-2i/head_dim) for i < head_dim/2, then the llama3
 * scaling when asked. Computed in fp32 in the order transformers uses, so the
 * angles agree with PyTorch to the last bit or two. head_dim must be even. */
void rl_rope_inv_freq(float *inv_freq, int head_dim, double theta,
                      const struct rl_rope_scaling *scaling);

/* In place on x [n, n_heads, head_dim]: token t is rotated by angle
 * pos[t] * inv_freq[i]. Packed sequences pass positions that restart at 0.
 * x is fp32 or bf16 (kernels/buf.h): the rotation in fp32, each element
 * rounded once to x's type; -1 for another type. */
typedef int (*rl_rope_forward_fn)(struct rl_buf x, const int32_t *pos, const float *inv_freq, int n,
                                  int n_heads, int head_dim, void *stream);
/* In place on dx: the transpose (inverse) rotation of the forward. */
typedef int (*rl_rope_backward_fn)(struct rl_buf dx, const int32_t *pos, const float *inv_freq,
                                   int n, int n_heads, int head_dim, void *stream);

int rl_rope_forward_cpu(struct rl_buf x, const int32_t *pos, const float *inv_freq, int n,
                        int n_heads, int head_dim, void *stream);
int rl_rope_backward_cpu(struct rl_buf dx, const int32_t *pos, const float *inv_freq, int n,
                         int n_heads, int head_dim, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). pos and inv_freq are
 * device memory too. */
int rl_rope_forward_cuda(struct rl_buf x, const int32_t *pos, const float *inv_freq, int n,
                         int n_heads, int head_dim, void *stream);
int rl_rope_backward_cuda(struct rl_buf dx, const int32_t *pos, const float *inv_freq, int n,
                          int n_heads, int head_dim, void *stream);

#ifdef __cplusplus
}
#endif

#endif
