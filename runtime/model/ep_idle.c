/* A rank's part in the other ranks' passes under expert parallelism. Each
 * sparse layer's dispatch and combine are collectives over the ep group,
 * whose ranks hold different micro-batches (different data-parallel
 * shares); a rank with fewer of them runs the rest as idle passes: the
 * sparse layers with no rows of its own, serving the tokens the other
 * ranks route to its experts, in the forward and then the backward
 * order. Its experts' gradients thereby get those tokens' terms. */
#include <stdio.h>

#include "runtime/model/acts.h"
#include "runtime/model/model.h"
#include "runtime/model/moe.h"

static bool has_experts(const struct rl_model *m, const struct rl_acts *a, int l)
{
	return rl_layer_is_moe(&m->cfg, l) && a->layers[l].moe;
}

/* 1: an idle pass has work to do, 0: none without expert parallelism,
 * -1: not implemented (err). */
static int applies(const struct rl_model *m, char *err, size_t errlen)
{
	if (m->shard.ep.size <= 1)
		return 0;
	if (m->shard.pp.size > 1) {
		snprintf(err, errlen,
		         "an idle pass under expert and pipeline parallelism together is not "
		         "implemented");
		return -1;
	}
	return 1;
}

int rl_model_idle_forward(struct rl_model *m, struct rl_acts *a, char *err, size_t errlen)
{
	int go = applies(m, err, errlen);

	if (go <= 0)
		return go;
	/* no rows: any buffer of hidden_size floats stands for them */
	float *none = a->x_final;
	for (int l = m->shard.first_layer; l < m->shard.first_layer + m->shard.n_layers; l++)
		if (has_experts(m, a, l) &&
		    rl_moe_forward(m, l, a->layers[l].moe, none, 0, NULL, none, true, err, errlen))
			return -1;
	return 0;
}

int rl_model_idle_backward(struct rl_model *m, struct rl_acts *a, char *err, size_t errlen)
{
	int go = applies(m, err, errlen);

	if (go <= 0)
		return go;
	float *none = a->x_final;
	for (int l = m->shard.first_layer + m->shard.n_layers - 1; l >= m->shard.first_layer; l--)
		if (has_experts(m, a, l) && rl_moe_backward(m, l, a->layers[l].moe, none, none,
		                                            none, a->aux_coef, err, errlen))
			return -1;
	return 0;
}
