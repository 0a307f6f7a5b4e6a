#define _GNU_SOURCE
/* A model of the run read for this rank: its files (or a built-in one),
 * cut as the layout says, in the run's precision, with its tokenizer and
 * the hash of its weights as loaded. The policy's (setup.c) and on-policy
 * distillation's teacher (distill.c) are loaded alike. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/model/builtin.h"
#include "runtime/model/hub.h"
#include "runtime/model/safetensors.h"
#include "runtime/parallel/ep_group.h"
#include "runtime/parallel/pp_group.h"
#include "runtime/parallel/tp_group.h"
#include "runtime/train/load_model.h"

/* The reference policy is the weights as loaded; a resume checks that
 * they are still what the checkpoint's run started from. A built-in
 * model, made whole on every rank: its weights as they are. */
static int reference_hash(struct rl_model *m, uint64_t *hash, char *err, size_t errlen)
{
	const float *host = rl_model_host_weights(m);

	if (!host) {
		snprintf(err, errlen, "the %s backend cannot copy the weights to host memory",
		         m->ops->name);
		return -1;
	}
	*hash = XXH3_64bits(host, (size_t)m->n_elems * sizeof(float));
	rl_model_host_weights_release(m, host);
	return 0;
}

/* A model read from files, which no rank holds whole: the hash of each
 * tensor's bytes in the files (the same weights as loaded, in any
 * layout), each rank hashing its share of the tensors, then the hash of
 * the list. */
static int reference_hash_files(struct rl_trainer *t, const char *dir, uint64_t *hash, char *err,
                                size_t errlen)
{
	struct rl_comm *world = t->dist ? t->dist->g[RL_G_WORLD] : NULL;
	int me = world ? rl_comm_rank(world) : 0, size = world ? rl_comm_size(world) : 1;
	struct rl_st_archive *st;

	if (rl_st_open_dir(&st, dir, err, errlen))
		return -1;
	int n = rl_st_count(st);
	/* each hash as two non-negative halves: the others' zeros lose a max */
	int64_t *half = calloc((size_t)(2 * n + 1), sizeof *half);
	if (!half) {
		rl_st_close(st);
		snprintf(err, errlen, "out of memory hashing %s", dir);
		return -1;
	}
	for (int i = me; i < n; i += size) {
		const struct rl_st_tensor *x = rl_st_at(st, i);
		uint64_t h =
		    XXH3_64bits_withSeed(x->data, x->nbytes, XXH3_64bits(x->name, strlen(x->name)));

		half[2 * i] = (int64_t)(h >> 32);
		half[2 * i + 1] = (int64_t)(h & 0xffffffffu);
	}
	rl_st_close(st);
	half[2 * n] = n;
	if (world)
		rl_comm_all_reduce(world, half, (size_t)(2 * n + 1), RL_COMM_I64, RL_COMM_MAX,
		                   "reference weights hash");
	*hash = XXH3_64bits(half, (size_t)(2 * n + 1) * sizeof *half);
	free(half);
	return 0;
}

/* The model's files and the tokenizer's: a hub name (ORG/NAME) is found
 * in the local Hugging Face cache, a directory is taken as it is. key and
 * tok_key name the config keys in messages; *hash is the weights' as
 * loaded (the reference's, or the teacher's). */
static int load_model_and_tokenizer(struct rl_trainer *t, const struct rl_ops *ops,
                                    const struct rl_model_cut *cut, const char *name,
                                    const char *key, const char *tok_name, const char *tok_key,
                                    struct rl_model **model, struct rl_tokenizer **tok,
                                    uint64_t *hash, char *err, size_t errlen)
{
	char *model_dir = NULL, *tok_dir = NULL;
	int rc = -1;

	if (!tok_name)
		tok_name = name;
	if (!(model_dir = rl_hub_resolve(name, key, NULL, err, errlen)) ||
	    !(tok_dir = rl_hub_resolve(tok_name, strcmp(tok_name, name) == 0 ? key : tok_key, NULL,
	                               err, errlen)))
		goto out;
	if (rl_builtin_is(model_dir)) {
		/* every rank builds the whole model, then keeps its cut of it */
		if (rl_builtin_model_new(model_dir, (uint64_t)t->cfg->grpo.seed, ops, model, err,
		                         errlen) ||
		    reference_hash(*model, hash, err, errlen) ||
		    (t->dist && rl_model_split(model, cut, err, errlen)))
			goto out;
	} else {
		/* each rank reads its cut only */
		if (reference_hash_files(t, model_dir, hash, err, errlen))
			goto out;
		if (t->dist ? rl_model_load_cut(model, model_dir, ops, cut, err, errlen)
		            : rl_model_load(model, model_dir, ops, err, errlen))
			goto out;
	}
	rc = rl_builtin_is(tok_dir) ? rl_builtin_tokenizer(tok_dir, tok, err, errlen)
	                            : rl_tokenizer_load(tok, tok_dir, err, errlen);
out:
	free(model_dir);
	free(tok_dir);
	return rc;
}

/* This rank's cut of a model under the run's layout (whole in one
 * process). */
static struct rl_model_cut layout_cut(const struct rl_trainer *t)
{
	struct rl_model_cut cut = {0};

	if (!t->dist)
		return cut;
	const struct rl_cfg_parallel *par = &t->cfg->policy.parallel;

	cut = (struct rl_model_cut){
	    .sequence_parallel = par->sequence_parallel,
	    .first_stage_layers = par->num_layers_in_first_pipeline_stage.set
	                              ? (int)par->num_layers_in_first_pipeline_stage.value
	                              : 0,
	    .last_stage_layers = par->num_layers_in_last_pipeline_stage.set
	                             ? (int)par->num_layers_in_last_pipeline_stage.value
	                             : 0,
	};
	rl_tp_group_bind(&cut.tp, t->dist->g[RL_G_TP]);
	rl_pp_group_bind(&cut.pp, t->dist->g[RL_G_PP], t->dist->g[RL_G_EMBEDDING]);
	rl_tp_group_bind(&cut.cp, t->dist->g[RL_G_CP]);
	rl_ep_group_bind(&cut.ep, t->dist->g[RL_G_EP]);
	/* the routers' load statistics over the ranks that share a
	 * micro-batch: data-parallel ranks may run different numbers of
	 * them */
	rl_tp_group_bind(&cut.tokens, t->dist->g[RL_G_TP]);
	return cut;
}

/* policy.precision, after the cut: each rank rounds only its own part */
static int run_precision(struct rl_trainer *t, struct rl_model *m, char *err, size_t errlen)
{
	enum rl_dtype precision;

	if (rl_dtype_from_torch_name(t->cfg->policy.precision, &precision)) {
		snprintf(err, errlen, "policy.precision: %s is not a dtype",
		         t->cfg->policy.precision);
		return -1;
	}
	return rl_model_set_precision(m, precision, err, errlen);
}

int rl_trainer_load_model(struct rl_trainer *t, const struct rl_ops *ops, const char *name,
                          const char *key, const char *tok_name, const char *tok_key,
                          struct rl_model **model, struct rl_tokenizer **tok, uint64_t *hash,
                          char *err, size_t errlen)
{
	struct rl_model_cut cut = layout_cut(t);

	return load_model_and_tokenizer(t, ops, &cut, name, key, tok_name, tok_key, model, tok,
	                                hash, err, errlen) ||
	               run_precision(t, *model, err, errlen)
	           ? -1
	           : 0;
}

int rl_trainer_acts_new(const struct rl_trainer *t, struct rl_model *m, struct rl_acts ***acts,
                        int *n)
{
	int want = t->pp ? rl_comm_size(t->pp) - rl_comm_rank(t->pp) : 1;
	bool recompute = t->cfg->policy.parallel.activation_checkpointing;

	*n = 0;
	if (!(*acts = calloc((size_t)want, sizeof **acts)))
		return -1;
	for (; *n < want; ++*n)
		if (!((*acts)[*n] = recompute ? rl_acts_new_recompute(m, t->max_mb_tokens)
		                              : rl_acts_new(m, t->max_mb_tokens)))
			return -1;
	return 0;
}
