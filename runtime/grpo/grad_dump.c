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
	float loss32 = (float)loss;
	int rc = -1;

	if (!full || !src) {
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
	if (!rl_trainer_is_main(t)) {
		rc = 0;
		goto out;
	}
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];

		src[i] = (struct rl_st_source){p->name, RL_F32, p->ndim, {0}, full + p->offset};
		memcpy(src[i].shape, p->shape, sizeof p->shape);
	}
	src[m->n_params] = (struct rl_st_source){"loss", RL_F32, 1, {1}, &loss32};
	rc = rl_st_write(t->grad_dump, src, m->n_params + 1, err, errlen);
out:
	if (dev)
		m->ops->release(dev);
	free(full);
	free(src);
	return rc;
}
