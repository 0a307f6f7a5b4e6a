#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/model/builtin_files.h"
#include "runtime/model/hf_config.h"
#include "runtime/plan/spec.h"

int rl_plan_model_load(const char *model_name, const struct rl_hub_env *hub,
                       struct rl_plan_model *out, char *src, size_t srclen, char *err,
                       size_t errlen)
{
	struct rl_model_config mc;
	char why[1024];
	int rc;

	if (rl_builtin_is(model_name)) {
		struct rl_builtin_files b;
		snprintf(src, srclen, "%s", model_name);
		rc = rl_builtin_files(model_name, &b, err, errlen);
		if (rc == 0)
			rc = rl_model_config_from_json(&mc, b.config, b.config_len, model_name, err,
			                               errlen);
		if (rc != 0)
			return -1;
	} else {
		char *dir = rl_hub_resolve(model_name, "policy.model_name", hub, err, errlen);
		if (!dir)
			return -1;
		snprintf(src, srclen, "%s/config.json", dir);
		rc = rl_model_config_load(&mc, dir, why, sizeof why);
		free(dir);
		if (rc != 0) {
			snprintf(err, errlen, "policy.model_name: %s", why);
			return -1;
		}
	}
	rl_model_config_shape(&mc, out);
	return 0;
}

bool rl_plan_uses_gpus(const struct rl_config *cfg, const struct rl_topo *topo)
{
	const char *backend = cfg->policy.backend;

	return strcmp(backend, "cuda") == 0 ||
	       (strcmp(backend, "auto") == 0 && topo && topo->n_gpus > 0);
}

void rl_plan_step_shape(const struct rl_config *cfg, const struct rl_topo *topo, long *n_nodes,
                        long *tasks_per_node)
{
	const struct rl_cfg_cluster *c = &cfg->cluster;

	if (*n_nodes <= 0)
		*n_nodes = c->num_nodes > 0 ? c->num_nodes : 1;
	if (*tasks_per_node <= 0)
		*tasks_per_node = c->gpus_per_node > 0                                   ? c->gpus_per_node
		                  : rl_plan_uses_gpus(cfg, topo) && topo && topo->n_gpus > 0 ? topo->n_gpus
		                                                                       : 1;
}

int rl_job_spec_from_config(const struct rl_config *cfg, int world, int n_nodes, int tasks_per_node,
                            const struct rl_topo *topo, const struct rl_hub_env *hub,
                            struct rl_job_spec *spec, char *err, size_t errlen)
{
	const struct rl_cfg_policy *p = &cfg->policy;
	const struct rl_cfg_parallel *par = &p->parallel;

	memset(spec, 0, sizeof *spec);
	spec->world = world;
	spec->n_nodes = n_nodes;
	spec->tasks_per_node = tasks_per_node;
	spec->use_gpus = rl_plan_uses_gpus(cfg, topo);
	spec->autoplan = par->autoplan;
	spec->tp = par->autoplan ? 1 : (int)par->tensor;
	spec->pp = par->autoplan ? 1 : (int)par->pipeline;
	spec->cp = par->autoplan ? 1 : (int)par->context;
	spec->ep = par->autoplan ? 1 : (int)par->expert;
	spec->etp = par->autoplan ? 1 : (int)par->expert_tensor;
	spec->sequence_parallel = par->sequence_parallel;
	spec->first_stage_layers = par->num_layers_in_first_pipeline_stage.set
	                               ? (int)par->num_layers_in_first_pipeline_stage.value
	                               : 0;
	spec->last_stage_layers = par->num_layers_in_last_pipeline_stage.set
	                              ? (int)par->num_layers_in_last_pipeline_stage.value
	                              : 0;
	if (!p->generation.colocated.enabled) {
		/* NeMo-RL's resources: num_nodes whole nodes (null: a share of
		 * one), gpus_per_node tasks on each (null: all of a node's) */
		const struct rl_opt_int *nodes = &p->generation.colocated.num_nodes,
		                        *per_node = &p->generation.colocated.gpus_per_node;

		int64_t n_nodes_gen = nodes->set ? nodes->value : 1;
		int64_t per = per_node->set ? per_node->value : tasks_per_node;

		/* more than the step has is refused by the plan, by name */
		spec->generation_ranks =
		    n_nodes_gen > world || per > world || n_nodes_gen * per > world
		        ? world
		        : (int)(n_nodes_gen * per);
		spec->generation_tp = (int)p->generation.tensor_parallel_size;
	}

	struct rl_plan_job *j = &spec->job;
	j->samples_per_step = cfg->grpo.num_prompts_per_step * cfg->grpo.num_generations_per_prompt;
	j->global_batch = p->train_global_batch_size;
	j->micro_batch = p->train_micro_batch_size;
	j->generation_batch = p->generation_batch_size;
	j->seq_len = p->max_total_sequence_length;
	j->max_new_tokens = p->generation.max_new_tokens.set ? p->generation.max_new_tokens.value
	                                                     : p->max_total_sequence_length;
	j->param_bytes = strcmp(p->precision, "float32") == 0 ? 4 : 2;
	j->distributed_optimizer = par->distributed_optimizer;
	j->activation_checkpointing = par->activation_checkpointing;
	j->sequence_parallel = par->sequence_parallel;
	j->expert = spec->ep;
	j->expert_tensor = spec->etp;

	if (rl_plan_model_load(p->model_name, hub, &j->model, spec->model_src,
	                       sizeof spec->model_src, spec->model_error,
	                       sizeof spec->model_error) == 0) {
		spec->have_model = true;
		return 0;
	}
	if (spec->autoplan && spec->use_gpus) {
		snprintf(err, errlen, "policy.parallel: auto needs the model's shape: %s",
		         spec->model_error);
		return -1;
	}
	return 0;
}
