#define _GNU_SOURCE
/* The step's plan: sizes (the config's or the auto planner's), the layout,
 * and the one-line summary every task gets as RL_PLAN. */
#include <stdio.h>
#include <string.h>

#include "runtime/plan/job.h"
#include "topology/model_fit.h"

static void summarize(struct rl_job_plan *plan)
{
	char sizes[160];
	const struct rl_job_spec *s = &plan->spec;

	rl_layout_describe(&plan->layout, sizes, sizeof sizes);
	char generation[64] = "";

	if (s->generation_ranks > 0)
		snprintf(generation, sizeof generation, " generation=%d gtp=%d",
		         s->generation_ranks, s->generation_tp);
	snprintf(plan->summary, sizeof plan->summary,
	         "world=%d nodes=%d tasks_per_node=%d %s sp=%d order=%s devices=%s%s%s", s->world,
	         s->n_nodes, s->tasks_per_node, sizes, s->sequence_parallel ? 1 : 0,
	         RL_LAYOUT_ORDER, s->use_gpus ? "gpu" : "cpu", s->autoplan ? " auto" : "",
	         generation);
}

static int check_counts(const struct rl_job_spec *s, char *err, size_t errlen)
{
	if (s->world < 1 || s->n_nodes < 1 || s->tasks_per_node < 1 || s->n_nodes > s->world ||
	    (long)s->tasks_per_node * s->n_nodes < s->world) {
		snprintf(err, errlen,
		         "a step of %d tasks on %d nodes with at most %d per node is not possible",
		         s->world, s->n_nodes, s->tasks_per_node);
		return -1;
	}
	if (s->generation_ranks < 0 || s->generation_ranks >= s->world) {
		snprintf(err, errlen,
		         "policy.generation.colocated.resources: %d generation tasks leave none of "
		         "the step's %d to train",
		         s->generation_ranks, s->world);
		return -1;
	}
	if (s->generation_ranks > 0 &&
	    (s->generation_tp < 1 || s->generation_ranks % s->generation_tp)) {
		snprintf(err, errlen,
		         "policy.generation.tensor_parallel_size: %d does not divide the %d "
		         "generation tasks",
		         s->generation_tp, s->generation_ranks);
		return -1;
	}
	return 0;
}

/* The model takes the layout: the training ranks' sizes, and the
 * generation ranks' tensor parallelism (their model is cut the same way). */
static int check_model(const struct rl_job_plan *plan, char *err, size_t errlen)
{
	const struct rl_job_spec *s = &plan->spec;
	const struct rl_layout *l = &plan->layout;

	if (!s->have_model)
		return 0;
	struct rl_fit_layout train = {
	    .tp = l->size[RL_AXIS_TP],
	    .pp = l->size[RL_AXIS_PP],
	    .cp = l->size[RL_AXIS_CP],
	    .ep = s->ep,
	    .etp = s->etp,
	    .sequence_parallel = s->sequence_parallel,
	    .first_stage_layers = s->first_stage_layers,
	    .last_stage_layers = s->last_stage_layers,
	};
	if (rl_model_fit_check(&s->job.model, &train, s->model_src, err, errlen))
		return -1;
	if (s->generation_ranks == 0)
		return 0;
	struct rl_fit_layout gen = {.tp = s->generation_tp,
	                            .pp = 1,
	                            .cp = 1,
	                            .ep = 1,
	                            .etp = 1,
	                            .tp_key = "policy.generation.tensor_parallel_size"};
	return rl_model_fit_check(&s->job.model, &gen, s->model_src, err, errlen);
}

bool rl_job_generation_rank(const struct rl_job_plan *plan, int rank)
{
	return rank >= plan->layout.world && rank < plan->spec.world;
}

bool rl_job_task_axis(const struct rl_job_plan *plan, int rank, enum rl_axis a, int *axis_rank,
                      int *axis_size)
{
	if (!rl_job_generation_rank(plan, rank)) {
		struct rl_coords c;

		rl_layout_coords(&plan->layout, rank, &c);
		rl_layout_axis(&plan->layout, &c, a, axis_rank, axis_size);
		return false;
	}
	/* tensor-parallel peers adjacent, as in the training grid; every
	 * other axis 0 of 1 */
	int tp = plan->spec.generation_tp > 0 ? plan->spec.generation_tp : 1;
	int mine = rank - plan->layout.world;

	*axis_rank = a == RL_AXIS_TP ? mine % tp : a == RL_AXIS_DP ? mine / tp : 0;
	*axis_size = a == RL_AXIS_TP ? tp : a == RL_AXIS_DP ? plan->spec.generation_ranks / tp : 1;
	return true;
}

int rl_job_plan_make(const struct rl_job_spec *spec, const struct rl_topo *topo,
                     struct rl_job_plan *plan, char *err, size_t errlen)
{
	memset(plan, 0, sizeof *plan);
	plan->spec = *spec;
	if (check_counts(spec, err, errlen) != 0)
		return -1;
	int tp = spec->tp, pp = spec->pp, cp = spec->cp;
	char hw_err[256] = "";

	if (spec->use_gpus && topo)
		plan->have_hw = rl_plan_hw_from_topo(topo, spec->n_nodes, spec->tasks_per_node,
		                                     &plan->hw, hw_err, sizeof hw_err) == 0;
	int train_world = spec->world - spec->generation_ranks;

	if (spec->autoplan && spec->generation_ranks > 0) {
		snprintf(err, errlen,
		         "policy.parallel: auto with non-colocated generation is not implemented "
		         "yet; give the training sizes");
		return -1;
	}
	if (spec->autoplan) {
		if (!spec->use_gpus) {
			tp = pp = cp = 1;
			snprintf(
			    plan->explain, sizeof plan->explain,
			    "auto: the CPU backend runs data parallel only: tp=1 pp=1 cp=1 dp=%d\n",
			    spec->world);
		} else if (!spec->have_model) {
			snprintf(err, errlen,
			         "policy.parallel: auto needs the model's config.json");
			return -1;
		} else if (!plan->have_hw) {
			snprintf(err, errlen, "policy.parallel: auto: %s",
			         *hw_err ? hw_err : "no topology to plan on");
			return -1;
		} else {
			struct rl_plan_estimate best;
			char why[512];
			if (rl_plan_auto(&plan->hw, &spec->job, &best, plan->explain,
			                 sizeof plan->explain, why, sizeof why) != 0) {
				snprintf(err, errlen, "policy.parallel: auto: %s", why);
				return -1;
			}
			tp = best.tp, pp = best.pp, cp = best.cp;
			plan->estimate = best;
			plan->have_estimate = true;
		}
		plan->spec.tp = tp, plan->spec.pp = pp, plan->spec.cp = cp;
	}
	char lerr[256];
	if (rl_layout_init(&plan->layout, train_world, tp, pp, cp, spec->ep, spec->etp, lerr,
	                   sizeof lerr) != 0) {
		if (spec->generation_ranks > 0)
			snprintf(err, errlen,
			         "policy.parallel: the %d tasks left to train after %d for "
			         "generation: %s",
			         train_world, spec->generation_ranks, lerr);
		else
			snprintf(err, errlen, "policy.parallel: %s", lerr);
		return -1;
	}
	plan->layout.sequence_parallel = spec->sequence_parallel;
	if (check_model(plan, err, errlen))
		return -1;
	if (!plan->have_estimate && plan->have_hw && spec->have_model)
		plan->have_estimate =
		    rl_plan_estimate(&plan->hw, &spec->job, tp, pp, cp, &plan->estimate) == 0;
	summarize(plan);
	return 0;
}
