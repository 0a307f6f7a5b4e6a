/* The one rule of what layout a model can take: see model_fit.h. The cut
 * (runtime/model/split.c) holds it to the letter: each check here is one
 * thing it cannot do. */
#include <stdarg.h>
#include <stdio.h>

#include "topology/model_fit.h"

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static const char *plural(int n)
{
	return n == 1 ? "" : "s";
}

static int check_tensor(const struct rl_plan_model *m, int tp, const char *key, const char *model,
                        char *err, size_t errlen)
{
	if (tp <= 1)
		return 0;
	if (m->n_heads % tp)
		return fail(err, errlen,
		            "%s=%d does not divide the model's %d attention head%s (%s)", key, tp,
		            m->n_heads, plural(m->n_heads), model);
	if (m->n_kv_heads % tp)
		return fail(err, errlen,
		            "%s=%d does not divide the model's %d key/value head%s (%s): each "
		            "rank holds whole key/value heads, they are not replicated",
		            key, tp, m->n_kv_heads, plural(m->n_kv_heads), model);
	bool dense = m->n_experts == 0 || m->n_moe_layers < m->n_layers;
	if (dense && m->intermediate % tp)
		return fail(err, errlen,
		            "%s=%d does not divide the model's MLP intermediate size %d (%s)", key,
		            tp, m->intermediate, model);
	if (m->vocab < tp)
		return fail(err, errlen,
		            "%s=%d is more than the model's %d vocabulary entr%s (%s): each rank "
		            "holds at least one",
		            key, tp, m->vocab, m->vocab == 1 ? "y" : "ies", model);
	return 0;
}

/* Megatron's stages: the first and the last may be given their own count,
 * the layers left are divided evenly among the stages between. */
static int check_pipeline(const struct rl_plan_model *m, const struct rl_fit_layout *l,
                          const char *model, char *err, size_t errlen)
{
	int p = l->pp, first = l->first_stage_layers, last = l->last_stage_layers;
	int left = m->n_layers, between = p;

	if (p <= 1)
		return 0;
	if (first > 0)
		left -= first, between--;
	if (last > 0)
		left -= last, between--;
	if (left < 0 || (between == 0 && left != 0) ||
	    (between > 0 && (left <= 0 || left % between)))
		return fail(err, errlen,
		            "policy.parallel.pipeline=%d: the model's %d layer%s (%s) %s not split "
		            "into %d stages%s; set num_layers_in_first_pipeline_stage and "
		            "num_layers_in_last_pipeline_stage so that the stages between get the "
		            "same number, at least one",
		            p, m->n_layers, plural(m->n_layers), model,
		            m->n_layers == 1 ? "does" : "do", p,
		            first || last ? " as the first and the last are set" : "");
	return 0;
}

static int check_experts(const struct rl_plan_model *m, const struct rl_fit_layout *l,
                         const char *model, char *err, size_t errlen)
{
	if (l->ep > 1 && m->n_experts == 0)
		return fail(err, errlen,
		            "policy.parallel.expert=%d, but the model (%s) has no experts", l->ep,
		            model);
	if (l->ep > 1 && m->n_experts % l->ep)
		return fail(
		    err, errlen,
		    "policy.parallel.expert=%d does not divide the model's %d expert%s (%s)", l->ep,
		    m->n_experts, plural(m->n_experts), model);
	if (l->etp > 1 && m->n_experts > 0 && m->expert_intermediate % l->etp)
		return fail(err, errlen,
		            "policy.parallel.expert_tensor=%d does not divide the model's expert "
		            "intermediate size %d (%s)",
		            l->etp, m->expert_intermediate, model);
	return 0;
}

static int check_context(const struct rl_plan_model *m, const struct rl_fit_layout *l,
                         const char *model, char *err, size_t errlen)
{
	if (l->cp <= 1)
		return 0;
	if (l->pp > 1 || (l->sequence_parallel && l->tp > 1))
		return fail(err, errlen,
		            "policy.parallel.context=%d: context parallelism together with %s is "
		            "not implemented yet",
		            l->cp, l->pp > 1 ? "pipeline parallelism" : "sequence parallelism");
	if (m->n_experts > 0)
		return fail(err, errlen,
		            "policy.parallel.context=%d: context parallelism with a mixture of "
		            "experts (%s) is not implemented yet",
		            l->cp, model);
	return 0;
}

int rl_model_fit_check(const struct rl_plan_model *m, const struct rl_fit_layout *l,
                       const char *model, char *err, size_t errlen)
{
	const char *key = l->tp_key ? l->tp_key : "policy.parallel.tensor";

	if (l->tp < 1 || l->pp < 1 || l->cp < 1 || l->ep < 1 || l->etp < 1)
		return fail(err, errlen, "policy.parallel: sizes must be at least 1");
	return check_tensor(m, l->tp, key, model, err, errlen) ||
	               check_context(m, l, model, err, errlen) ||
	               check_pipeline(m, l, model, err, errlen) ||
	               check_experts(m, l, model, err, errlen)
	           ? -1
	           : 0;
}
