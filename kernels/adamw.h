/* AdamW (decoupled weight decay) exactly as torch.optim.AdamW computes it,
 * in fp32 on fp32 master weights.
 * defines: struct rl_adamw_hparams, rl_adamw_step_cpu, rl_adamw_step_cuda */
#ifndef RL_KERNELS_ADAMW_H
#define RL_KERNELS_ADAMW_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rl_adamw_hparams {
	float lr;
	float beta1;
	float beta2;
	float eps;
	float weight_decay;
};

/* One step for n parameters; step counts from 1. As torch does:
 * p *= 1 - lr*wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= (lr / (1 - b1^step)) * m / (sqrt(v) / sqrt(1 - b2^step) + eps). */
typedef int (*rl_adamw_step_fn)(float *param, const float *grad, float *m, float *v, int64_t n,
                                const struct rl_adamw_hparams *hp, int64_t step, void *stream);

int rl_adamw_step_cpu(float *param, const float *grad, float *m, float *v, int64_t n,
                      const struct rl_adamw_hparams *hp, int64_t step, void *stream);

/* Only defined when built --with-cuda (RL_HAVE_CUDA). Device pointers, hp on
 * the host; the CPU op's roundings, see kernels/cuda/adamw.cu. */
int rl_adamw_step_cuda(float *param, const float *grad, float *m, float *v, int64_t n,
                       const struct rl_adamw_hparams *hp, int64_t step, void *stream);

#ifdef __cplusplus
}
#endif

#endif
