/* AdamW and grad-norm clipping over the flat buffers: one op call each, so a
 * backend's kernel sees the whole model at once. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/model/optimizer.h"
#include "kernels/memory_use.h"

int rl_optimizer_init(struct rl_optimizer *o, const struct rl_model *m,
                      const struct rl_adamw_hparams *hp, char *err, size_t errlen)
{
	size_t bytes = (size_t)m->n_elems * sizeof(float);

	memset(o, 0, sizeof *o);
	o->ops = m->ops;
	o->hp = *hp;
	o->n = m->n_elems;
	o->m = rl_ops_alloc(m->ops, RL_MEM_OPTIMIZER, bytes);
	o->v = rl_ops_alloc(m->ops, RL_MEM_OPTIMIZER, bytes);
	if (!o->m || !o->v || m->ops->zero(o->m, bytes, NULL) || m->ops->zero(o->v, bytes, NULL)) {
		snprintf(err, errlen, "cannot allocate %zu bytes of optimizer state", 2 * bytes);
		rl_optimizer_free(o);
		return -1;
	}
	return 0;
}

void rl_optimizer_free(struct rl_optimizer *o)
{
	if (o->ops) {
		rl_ops_release(o->ops, o->m);
		rl_ops_release(o->ops, o->v);
	}
	o->m = o->v = NULL;
}

/* The op leaves the total in backend memory (on a GPU, where the partial
 * sums are); one double comes back. */
static int sum_squares(const struct rl_ops *ops, const float *x, int64_t n, double *out)
{
	double *total = rl_ops_alloc(ops, RL_MEM_ACTIVATIONS, sizeof *total);
	int rc = !total || ops->zero(total, sizeof *total, NULL) ||
	                 ops->sum_squares(total, x, n, NULL) ||
	                 ops->to_host(out, total, sizeof *out, NULL)
	             ? -1
	             : 0;

	if (total)
		rl_ops_release(ops, total);
	return rc;
}

int rl_clip_grad_norm(struct rl_model *m, double max_norm, double *norm)
{
	double ss = 0.0;

	if (sum_squares(m->ops, m->flat_grad, m->n_elems, &ss))
		return -1;
	*norm = sqrt(ss);
	if (max_norm <= 0)
		return 0;
	/* torch computes the coefficient in fp32 from the fp32 norm */
	float coef = (float)max_norm / ((float)*norm + 1e-6f);
	if (coef < 1.0f)
		return m->ops->scale(m->flat_grad, m->n_elems, coef, NULL);
	return 0;
}

int rl_optimizer_step(struct rl_optimizer *o, struct rl_model *m)
{
	o->step++;
	return o->ops->adamw_step(m->flat, m->flat_grad, o->m, o->v, o->n, &o->hp, o->step, NULL);
}
