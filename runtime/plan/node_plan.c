#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/plan/node_plan.h"
#include "runtime/plan/spec.h"

int rl_node_tasks_max(int world, int n_nodes)
{
	return n_nodes > 0 ? (world + n_nodes - 1) / n_nodes : world;
}

void rl_node_block(int world, int n_nodes, int node, int *first_rank, int *n_local)
{
	int per = rl_node_tasks_max(world, n_nodes);

	*first_rank = node * per;
	*n_local = world - *first_rank < per ? world - *first_rank : per;
}

int rl_node_plan_make(const struct rl_node_inputs *in, struct rl_node_plan *out, char *err,
                      size_t errlen)
{
	struct rl_job_spec spec;
	char why[1024];
	const struct rl_job_spec *js = &out->job.spec;

	memset(out, 0, sizeof *out);
	out->node_id = in->node_id;
	out->first_rank = in->first_rank;
	out->topo = in->topo;
	if (in->config_path && !(out->config_path = strdup(in->config_path))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (in->job)
		out->job = *in->job;
	else if (rl_job_spec_from_config(in->cfg, in->world, in->n_nodes,
	                                 rl_node_tasks_max(in->world, in->n_nodes), in->topo,
	                                 in->hub, &spec, err, errlen) != 0 ||
	         rl_job_plan_make(&spec, in->topo, &out->job, err, errlen) != 0)
		goto fail;
	if (in->first_rank < 0 || in->n_local < 1 || in->first_rank + in->n_local > in->world) {
		snprintf(err, errlen, "node %d: tasks %d..%d are not in a step of %d", in->node_id,
		         in->first_rank, in->first_rank + in->n_local - 1, in->world);
		goto fail;
	}
	if (rl_step_gpus_parse(in->topo, in->slurm_step_gpus, in->cuda_visible_devices, &out->gpus,
	                       why, sizeof why) != 0) {
		/* only a job that uses GPUs cares which ones it was given */
		if (js->use_gpus) {
			snprintf(err, errlen, "%s", why);
			goto fail;
		}
		out->gpus.n = -1;
	}
	const int *allowed = out->gpus.n >= 0 ? out->gpus.gpu : NULL;
	int n_allowed = out->gpus.n >= 0 ? out->gpus.n : 0;
	if (js->use_gpus && out->gpus.n == 0) {
		snprintf(err, errlen,
		         "policy.backend is %s and node %d has GPUs, but Slurm gave this step none "
		         "(ask with --gpus-per-node, or set policy.backend=cpu)",
		         in->cfg->policy.backend, in->node_id);
		goto fail;
	}
	/* every task gets a place, the generation ranks' after the training
	 * layout's */
	struct rl_layout tasks = out->job.layout;
	tasks.world = js->world;
	if (rl_place_node(in->topo, &tasks, in->first_rank, in->n_local, js->use_gpus, allowed,
	                  n_allowed, &out->node, why, sizeof why) != 0) {
		snprintf(err, errlen, "node %d (%s): %s", in->node_id, in->topo->source, why);
		goto fail;
	}
	return 0;
fail:
	rl_node_plan_free(out);
	return -1;
}

int rl_node_plan_task_env(const struct rl_node_plan *p, int local_rank, struct rl_env *env)
{
	return rl_job_task_env(&p->job, p->topo, &p->node, &p->gpus, p->node_id, p->first_rank,
	                       local_rank, p->config_path, env);
}

void rl_node_plan_free(struct rl_node_plan *p)
{
	rl_step_gpus_free(&p->gpus);
	rl_node_placement_free(&p->node);
	free(p->config_path);
	memset(p, 0, sizeof *p);
}
