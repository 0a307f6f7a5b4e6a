#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/grpo/grad_dump.h"
#include "runtime/model/safetensors.h"

int rl_grad_dump_write(struct rl_trainer *t, double loss, char *err, size_t errlen)
{
	const struct rl_model *m = t->model;
	size_t bytes = (size_t)m->n_elems * sizeof(float);
	float *full = malloc(bytes + sizeof(float));
	float *dev = NULL;
	struct rl_st_source *src = calloc((size_t)m->n_params + 1, sizeof *src);
	float **wholes = calloc((size_t)m->n_params, sizeof *wholes);
	float loss32 = (float)loss;
	int rc = -1;

	if (!full || !src || !wholes) {
		snprintf(err, errlen, "out of memory for the gradient dump");
		goto out;
	}
	const float *grad = m->flat_grad;
	if (t->dist) {
		dev = m->ops->alloc(bytes);
		if (!dev || rl_zero_gather_grads(&t->zero, dev, err, errlen))
			goto out;
		grad = dev;
	}
	if (m->ops->to_host(full, grad, bytes, NULL)) {
		snprintf(err, errlen, "copying the gradient to the host failed");
		goto out;
	}
	/* the tensors as the whole model has them, put together from every
	 * tensor-parallel rank's part */
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];
		int64_t numel = p->full_shape[0] * (p->ndim == 2 ? p->full_shape[1] : 1);

		wholes[i] = malloc((size_t)numel * sizeof(float));
		if (!wholes[i]) {
			snprintf(err, errlen, "out of memory for the gradient dump");
			goto out;
		}
		if (rl_model_gather_param(m, i, full + p->offset, wholes[i], err, errlen))
			goto out;
		src[i] = (struct rl_st_source){p->name, RL_F32, p->ndim, {0}, wholes[i]};
		memcpy(src[i].shape, p->full_shape, sizeof p->full_shape);
	}
	if (!rl_trainer_is_main(t)) {
		rc = 0;
		goto out;
	}
	src[m->n_params] = (struct rl_st_source){"loss", RL_F32, 1, {1}, &loss32};
	rc = rl_st_write(t->grad_dump, src, m->n_params + 1, err, errlen);
out:
	if (dev)
		m->ops->release(dev);
	for (int i = 0; wholes && i < m->n_params; i++)
		free(wholes[i]);
	free(wholes);
	free(full);
	free(src);
	return rc;
}
