/* The auto planner: checks the inputs and a layout, estimates one (tp, pp,
 * cp) layout from the memory model (planner_memory.c) and the time model
 * (planner_time.c), and searches all of them for the fastest that fits. A
 * GRPO step here is NeMo-RL's: generate with a KV cache, compute policy and
 * reference logprobs, train with AdamW (global_batch samples per update).
 *
 * Assumptions both models share (each file states its own):
 * - Sequences are as long as seq_len (max_total_sequence_length): prompts
 *   of seq_len - max_new_tokens and every answer at its limit.
 * - A layout is one the model's cut takes (topology/model_fit.h): KV
 *   heads split, never replicated, as Megatron-Core's attention requires.
 * defines: rl_plan_estimate, rl_plan_auto */
#include "topology/planner_internal.h"
#include "topology/model_fit.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_MAX_RUNNERS_UP 3

/* ---- inputs ------------------------------------------------------------ */

/* Fills why (which may be NULL with len 0, as rl_plan_auto's err may) and
 * returns -1. */
static int fail(char *why, size_t len, const char *fmt, ...)
{
	if (!why || len == 0)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -1;
}

static int check_hw(const struct rl_plan_hw *hw, char *why, size_t len)
{
	if (hw->n_nodes < 1 || hw->gpus_per_node < 1)
		return fail(why, len, "hw: n_nodes %d and gpus_per_node %d must be >= 1",
		            hw->n_nodes, hw->gpus_per_node);
	if (hw->nvlink_domain_size < 1)
		return fail(why, len, "hw: nvlink_domain_size %d must be >= 1",
		            hw->nvlink_domain_size);
	if (!(hw->gpu_mem_bytes > 0) || !(hw->peak_flops > 0))
		return fail(why, len, "hw: gpu_mem_bytes and peak_flops must be > 0");
	/* Decoding runs at memory speed: without a bandwidth the generation
	 * estimate would be infinite, and every layout would tie on it. */
	if (!(hw->hbm_bytes_per_s > 0))
		return fail(why, len, "hw: hbm_bytes_per_s must be > 0");
	if (!(hw->mfu > 0 && hw->mfu <= 1))
		return fail(why, len, "hw: mfu %g must be in (0, 1]", hw->mfu);
	if (hw->gpus_per_node > 1 && !(hw->pcie_bytes_per_s > 0) &&
	    !(hw->nvlink_bytes_per_s > 0 && hw->nvlink_domain_size >= hw->gpus_per_node))
		return fail(why, len,
		            "hw: pcie_bytes_per_s must be > 0 (GPUs of a node "
		            "without NVLink between them talk over PCIe)");
	if (hw->n_nodes > 1 && !(hw->net_bytes_per_s > 0))
		return fail(why, len, "hw: net_bytes_per_s must be > 0 with %d nodes", hw->n_nodes);
	return 0;
}

static int check_job(const struct rl_plan_job *job, char *why, size_t len)
{
	const struct rl_plan_model *m = &job->model;

	if (m->n_layers < 1 || m->hidden < 1 || m->intermediate < 1 || m->n_heads < 1 ||
	    m->n_kv_heads < 1 || m->head_dim < 1 || m->vocab < 1)
		return fail(why, len, "model: every size must be >= 1");
	if (m->n_heads % m->n_kv_heads)
		return fail(why, len, "model: n_heads %d is not a multiple of n_kv_heads %d",
		            m->n_heads, m->n_kv_heads);
	if (job->samples_per_step < 1 || job->global_batch < 1 || job->micro_batch < 1 ||
	    job->generation_batch < 1 || job->seq_len < 1)
		return fail(why, len, "job: batch sizes and seq_len must be >= 1");
	if (job->max_new_tokens < 0 || job->max_new_tokens > job->seq_len)
		return fail(why, len, "job: max_new_tokens %lld is not within seq_len %lld",
		            (long long)job->max_new_tokens, (long long)job->seq_len);
	if (job->param_bytes != 2 && job->param_bytes != 4)
		return fail(why, len, "job: param_bytes %d is neither 2 (bf16) nor 4 (fp32)",
		            job->param_bytes);
	if (job->expert < 1 || job->expert_tensor < 1)
		return fail(why, len, "job: expert sizes must be >= 1");
	if (m->n_experts < 0 ||
	    (m->n_experts > 0 && (m->experts_per_token < 1 || m->experts_per_token > m->n_experts ||
	                          m->expert_intermediate < 1 || m->shared_intermediate < 0 ||
	                          m->n_moe_layers < 0 || m->n_moe_layers > m->n_layers)))
		return fail(why, len,
		            "model: experts_per_token %d of %d experts, expert_intermediate %d, "
		            "%d of %d layers MoE: not a mixture of experts",
		            m->experts_per_token, m->n_experts, m->expert_intermediate,
		            m->n_moe_layers, m->n_layers);
	return 0;
}

static int check_layout(const struct rl_plan_hw *hw, const struct rl_plan_job *job, int tp, int pp,
                        int cp, char *why, size_t len)
{
	const struct rl_plan_model *m = &job->model;
	int world = hw->n_nodes * hw->gpus_per_node;

	if (tp < 1 || pp < 1 || cp < 1)
		return fail(why, len, "tp=%d pp=%d cp=%d: sizes must be >= 1", tp, pp, cp);
	if (world % tp || (world / tp) % pp || (world / tp / pp) % cp)
		return fail(why, len, "world %d is not divisible by tp*pp*cp = %d", world,
		            tp * pp * cp);
	/* what the model's cut takes: the rule every other caller uses */
	struct rl_fit_layout fit = {.tp = tp,
	                            .pp = pp,
	                            .cp = cp,
	                            .ep = job->expert,
	                            .etp = job->expert_tensor,
	                            .sequence_parallel = job->sequence_parallel};
	if (rl_model_fit_check(m, &fit, "the model", why, len))
		return -1;
	/* Causal CP balances work by giving each rank chunk i and 2cp-1-i. */
	if (cp > 1 && job->seq_len % (2 * cp))
		return fail(why, len, "seq_len %lld is not divisible by 2*cp = %d",
		            (long long)job->seq_len, 2 * cp);
	int dp = world / (tp * pp * cp);
	if (job->global_batch % ((int64_t)dp * job->micro_batch))
		return fail(why, len, "global_batch %lld is not divisible by dp*micro_batch = %lld",
		            (long long)job->global_batch, (long long)dp * job->micro_batch);
	/* Experts fold onto the same ranks as ETP x EP x EDP per stage. */
	if ((world / pp) % (job->expert * job->expert_tensor))
		return fail(why, len, "world/pp = %d is not divisible by expert*expert_tensor = %d",
		            world / pp, job->expert * job->expert_tensor);
	return 0;
}

int rl_plan_estimate(const struct rl_plan_hw *hw, const struct rl_plan_job *job, int tp, int pp,
                     int cp, struct rl_plan_estimate *out)
{
	memset(out, 0, sizeof *out);
	out->tp = tp;
	out->pp = pp;
	out->cp = cp;
	if (check_hw(hw, out->why, sizeof out->why) || check_job(job, out->why, sizeof out->why) ||
	    check_layout(hw, job, tp, pp, cp, out->why, sizeof out->why))
		return -1;
	int world = hw->n_nodes * hw->gpus_per_node;
	int dp = world / (tp * pp * cp);
	out->dp = dp;

	/* The worst stage: the first holds the most micro-batches in flight,
	 * the last the logits (one and the same when pp = 1). */
	struct rl_plan_stage_mem first, last;
	rl_plan_stage_memory(job, tp, pp, cp, dp, true, pp == 1, &first);
	rl_plan_stage_memory(job, tp, pp, cp, dp, pp == 1, true, &last);
	const struct rl_plan_stage_mem *w = last.total > first.total ? &last : &first;
	out->weights = w->weights;
	out->grads = w->grads;
	out->optimizer = w->optimizer;
	out->activations = w->activations;
	out->kv_cache = w->kv_cache;
	out->total_mem = w->total;
	out->fits = w->total <= hw->gpu_mem_bytes;
	if (!out->fits)
		snprintf(out->why, sizeof out->why, "needs %.1f GiB per GPU, a GPU has %.1f GiB",
		         w->total / PLAN_GIB, hw->gpu_mem_bytes / PLAN_GIB);

	rl_plan_step_time(hw, job, tp, pp, cp, dp, last.params > first.params ? &last : &first,
	                  out);
	return 0;
}

/* ---- search ------------------------------------------------------------- */

/* The header's order among ties: smaller tp*pp*cp, then smaller tp; then
 * smaller pp so the choice never depends on the search order. */
static int simpler(const struct rl_plan_estimate *a, const struct rl_plan_estimate *b)
{
	int pa = a->tp * a->pp * a->cp, pb = b->tp * b->pp * b->cp;
	if (pa != pb)
		return pa < pb;
	if (a->tp != b->tp)
		return a->tp < b->tp;
	return a->pp < b->pp;
}

static int cmp_time(const void *pa, const void *pb)
{
	const struct rl_plan_estimate *a = pa, *b = pb;
	if (a->t_step != b->t_step)
		return a->t_step < b->t_step ? -1 : 1;
	return simpler(a, b) ? -1 : simpler(b, a) ? 1 : 0;
}

int rl_plan_auto(const struct rl_plan_hw *hw, const struct rl_plan_job *job,
                 struct rl_plan_estimate *best, char *explain, size_t explain_len, char *err,
                 size_t errlen)
{
	struct rl_plan_estimate probe;
	char why[sizeof probe.why];

	memset(best, 0, sizeof *best);
	if (explain && explain_len)
		explain[0] = '\0';
	if (err && errlen)
		err[0] = '\0';
	if (check_hw(hw, why, sizeof why) || check_job(job, why, sizeof why))
		return fail(err, errlen, "policy.parallel: auto: %s", why);

	/* Every tp inside a node (TP across nodes never pays), every pp and
	 * cp dividing what is left; dp takes the rest. */
	int world = hw->n_nodes * hw->gpus_per_node, n = 0, n_invalid = 0, n_unfit = 0;
	struct rl_plan_estimate *all = NULL;
	size_t cap = 0;
	char first_invalid[sizeof probe.why + 48] = "";

	for (int tp = 1; tp <= hw->gpus_per_node; tp++) {
		if (hw->gpus_per_node % tp)
			continue;
		for (int pp = 1; pp <= world / tp; pp++) {
			if ((world / tp) % pp)
				continue;
			for (int cp = 1; cp <= world / (tp * pp); cp++) {
				if ((world / (tp * pp)) % cp)
					continue;
				if (rl_plan_estimate(hw, job, tp, pp, cp, &probe)) {
					if (n_invalid++ == 0)
						snprintf(first_invalid, sizeof first_invalid,
						         "tp=%d pp=%d cp=%d: %s", tp, pp, cp,
						         probe.why);
					continue;
				}
				if ((size_t)n == cap) {
					size_t ncap = cap ? 2 * cap : 64;
					void *p = realloc(all, ncap * sizeof *all);
					if (!p) {
						free(all);
						return fail(err, errlen,
						            "policy.parallel: auto: out of memory");
					}
					all = p;
					cap = ncap;
				}
				all[n++] = probe;
			}
		}
	}
	if (n == 0) {
		free(all);
		return fail(err, errlen,
		            "policy.parallel: auto: no valid layout for %d GPUs (%d tried; %s)",
		            world, n_invalid, first_invalid);
	}

	/* Fitting layouts first, fastest first. */
	int n_fit = 0;
	for (int i = 0; i < n; i++)
		if (all[i].fits) {
			struct rl_plan_estimate tmp = all[n_fit];
			all[n_fit++] = all[i];
			all[i] = tmp;
		}
	n_unfit = n - n_fit;
	if (n_fit == 0) {
		const struct rl_plan_estimate *small = &all[0];
		for (int i = 1; i < n; i++)
			if (all[i].total_mem < small->total_mem)
				small = &all[i];
		*best = *small;
		rl_plan_explain_nofit(err, errlen, hw, job, small);
		free(all);
		return -1;
	}
	qsort(all, (size_t)n_fit, sizeof *all, cmp_time);

	/* Among those within the tie band of the fastest, the simplest. */
	int pick = 0;
	for (int i = 1; i < n_fit && all[i].t_step <= all[0].t_step * (1.0 + PLAN_TIE_FRACTION);
	     i++)
		if (simpler(&all[i], &all[pick]))
			pick = i;
	*best = all[pick];

	struct rl_plan_estimate runners[PLAN_MAX_RUNNERS_UP];
	int n_runners = 0;
	for (int i = 0; i < n_fit && n_runners < PLAN_MAX_RUNNERS_UP; i++)
		if (i != pick)
			runners[n_runners++] = all[i];
	rl_plan_explain_choice(explain, explain_len, hw, best, runners, n_runners, n, n_unfit,
	                       n_invalid, first_invalid);
	free(all);
	return 0;
}
