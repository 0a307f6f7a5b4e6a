/* A rank's part in the other ranks' passes under expert parallelism. Each
 * sparse layer's dispatch and combine are collectives over the ep group,
 * whose ranks hold different micro-batches (different data-parallel
 * shares) and decode different prompts; a rank with fewer of them runs
 * the rest as idle passes: the sparse layers with no rows of its own,
 * serving the tokens the other ranks route to its experts, in the forward
 * and then the backward order (its experts' gradients thereby get those
 * tokens' terms), or, done decoding, until no rank of ep decodes. */
#include <stdio.h>

#include "kernels/memory_use.h"
#include "runtime/model/acts.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/model.h"
#include "runtime/model/moe.h"

static bool has_experts(const struct rl_model *m, const struct rl_acts *a, int l)
{
	return rl_layer_is_moe(&m->cfg, l) && a->layers[l].moe;
}

/* An idle pass has work to do only under expert parallelism; under
 * pipeline parallelism each stage's ep group serves its own layers'
 * experts. */
static bool applies(const struct rl_model *m)
{
	return m->shard.ep.size > 1;
}

/* Each sparse layer of this stage with no rows of its own: moe, the
 * layer's scratch (a's, or one for all of them without a); none, any
 * buffer of hidden_size floats, stands for the rows. train: as a training
 * forward, which the backward pass can follow. */
static int experts_forward(struct rl_model *m, struct rl_acts *a, struct rl_moe_acts *moe,
                           float *none, bool train, char *err, size_t errlen)
{
	for (int l = m->shard.first_layer; l < m->shard.first_layer + m->shard.n_layers; l++)
		if (rl_layer_is_moe(&m->cfg, l) && (!a || a->layers[l].moe) &&
		    rl_moe_forward(m, l, a ? a->layers[l].moe : moe, none, 0, NULL, none, train,
		                   err, errlen))
			return -1;
	return 0;
}

int rl_model_idle_forward(struct rl_model *m, struct rl_acts *a, char *err, size_t errlen)
{
	if (!applies(m))
		return 0;
	/* the first pass of an update may be idle: the weights it reads are
	 * the optimizer's latest */
	if (rl_model_round_weights(m, err, errlen))
		return -1;
	return experts_forward(m, a, NULL, a->x_final, true, err, errlen);
}

int rl_model_idle_backward(struct rl_model *m, struct rl_acts *a, char *err, size_t errlen)
{
	if (!applies(m))
		return 0;
	float *none = a->x_final;
	for (int l = m->shard.first_layer + m->shard.n_layers - 1; l >= m->shard.first_layer; l--) {
		if (!has_experts(m, a, l))
			continue;
		/* checkpointed, the others run each layer's forward again
		 * before its backward, exchanges included */
		if (a->recompute &&
		    rl_moe_forward(m, l, a->layers[l].moe, none, 0, NULL, none, true, err, errlen))
			return -1;
		if (rl_moe_backward(m, l, a->layers[l].moe, none, none, none, a->aux_coef, err,
		                    errlen))
			return -1;
	}
	return 0;
}

int rl_model_decode_drain(struct rl_model *m, char *err, size_t errlen)
{
	const struct rl_ep_group *ep = &m->shard.ep;
	struct rl_moe_acts moe = {0};
	int rc = 0;

	if (!applies(m))
		return 0;
	/* a rank with no prompts of its own comes here first */
	if (rl_model_round_weights(m, err, errlen))
		return -1;
	float *none =
	    rl_ops_alloc(m->ops, RL_MEM_ACTIVATIONS, (size_t)m->cfg.hidden_size * sizeof(float));
	if (!none) {
		/* the others wait in the next exchange until the watchdog stops
		 * the run */
		snprintf(err, errlen, "decode: out of memory");
		return -1;
	}
	while (rc == 0 && ep->max_int(ep->ctx, 0, "decode: a rank of ep decodes"))
		rc = experts_forward(m, NULL, &moe, none, false, err, errlen);
	rl_moe_acts_free(m->ops, &moe);
	rl_ops_release(m->ops, none);
	return rc;
}
