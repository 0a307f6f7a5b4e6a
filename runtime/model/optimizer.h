/* AdamW over a model's flat parameter buffer, with torch's global grad-norm
 * clipping. The moments are fp32 and live on the model's backend.
 * defines: struct rl_optimizer, rl_optimizer_init, rl_optimizer_free,
 * rl_clip_grad_norm, rl_optimizer_step */
#ifndef RL_MODEL_OPTIMIZER_H
#define RL_MODEL_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/adamw.h"
#include "runtime/model/model.h"

struct rl_optimizer {
	const struct rl_ops *ops;
	struct rl_adamw_hparams hp;
	int64_t n;
	int64_t step; /* steps taken so far */
	float *m, *v;
};

int rl_optimizer_init(struct rl_optimizer *o, const struct rl_model *m,
                      const struct rl_adamw_hparams *hp, char *err, size_t errlen);
void rl_optimizer_free(struct rl_optimizer *o);

/* As torch.nn.utils.clip_grad_norm_: the global L2 norm of every gradient
 * into *norm, then, when it exceeds max_norm (> 0), every gradient scaled by
 * max_norm / (norm + 1e-6). max_norm <= 0 only measures. */
int rl_clip_grad_norm(struct rl_model *m, double max_norm, double *norm);

int rl_optimizer_step(struct rl_optimizer *o, struct rl_model *m);

#endif
