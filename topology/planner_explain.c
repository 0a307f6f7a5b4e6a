/* The planner's words: the few lines rl_plan_auto writes about its choice
 * (memory and time of the winner, what each runner-up lost on) and the
 * error when nothing fits (what the leanest layout needs, which switches
 * could close the gap). Fixed buffers, truncated, never overrun.
 * defines: rl_plan_explain_choice, rl_plan_explain_nofit */
#include "topology/planner_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* Appends to a fixed buffer, truncating; never writes past len. */
struct text {
	char *buf;
	size_t len, used;
};

static void put(struct text *t, const char *fmt, ...)
{
	if (!t->buf || t->len == 0 || t->used >= t->len - 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		t->used += (size_t)n < t->len - t->used ? (size_t)n : t->len - t->used - 1;
}

static const char *secs(char *buf, size_t len, double t)
{
	snprintf(buf, len, t < 10 ? "%.2f" : t < 1000 ? "%.1f" : "%.0f", t);
	return buf;
}

static void put_layout(struct text *t, const struct rl_plan_estimate *e)
{
	put(t, "tp=%d pp=%d cp=%d dp=%d", e->tp, e->pp, e->cp, e->dp);
}

/* The part of the step time in which a runner-up lost the most. */
static void put_loss(struct text *t, const struct rl_plan_estimate *e,
                     const struct rl_plan_estimate *best)
{
	static const char *const names[] = {"generation", "compute", "tp/cp traffic",
	                                    "pipeline bubble", "dp traffic"};
	double d[] = {e->t_generation - best->t_generation, e->t_compute - best->t_compute,
	              e->t_tp_comm - best->t_tp_comm, e->t_pp_bubble - best->t_pp_bubble,
	              e->t_dp_comm - best->t_dp_comm};
	char b1[32], b2[32];
	int worst = 0;

	if (e->t_step <= best->t_step * (1.0 + PLAN_TIE_FRACTION)) {
		put(t, "within %g%%, but %s", PLAN_TIE_FRACTION * 100,
		    e->tp * e->pp * e->cp > best->tp * best->pp * best->cp ? "larger tp*pp*cp"
		    : e->tp > best->tp                                     ? "larger tp"
		                                                           : "larger pp");
		return;
	}
	for (int i = 1; i < 5; i++)
		if (d[i] > d[worst])
			worst = i;
	put(t, "+%s s, most in %s (+%s s)", secs(b1, sizeof b1, e->t_step - best->t_step),
	    names[worst], secs(b2, sizeof b2, d[worst]));
}

void rl_plan_explain_choice(char *buf, size_t len, const struct rl_plan_hw *hw,
                            const struct rl_plan_estimate *best,
                            const struct rl_plan_estimate *runners, int n_runners, int n_valid,
                            int n_unfit, int n_invalid, const char *first_invalid)
{
	struct text text = {buf, len, 0}, *t = &text;
	char b[5][32];
	double modeled =
	    best->weights + best->grads + best->optimizer + fmax(best->activations, best->kv_cache);

	put(t, "auto: ");
	put_layout(t, best);
	put(t, ": %.1f GiB of %.1f GiB per GPU, est. %s s/step\n", best->total_mem / PLAN_GIB,
	    hw->gpu_mem_bytes / PLAN_GIB, secs(b[0], sizeof b[0], best->t_step));
	put(t,
	    "  memory: weights %.1f + grads %.1f + optimizer %.1f + max(activations+logits "
	    "%.1f, kv cache %.1f) + reserve %.1f GiB\n",
	    best->weights / PLAN_GIB, best->grads / PLAN_GIB, best->optimizer / PLAN_GIB,
	    best->activations / PLAN_GIB, best->kv_cache / PLAN_GIB,
	    (best->total_mem - modeled) / PLAN_GIB);
	put(t, "  time: generation %s + compute %s + tp/cp %s + pipeline %s + dp %s s\n",
	    secs(b[0], sizeof b[0], best->t_generation), secs(b[1], sizeof b[1], best->t_compute),
	    secs(b[2], sizeof b[2], best->t_tp_comm), secs(b[3], sizeof b[3], best->t_pp_bubble),
	    secs(b[4], sizeof b[4], best->t_dp_comm));
	for (int i = 0; i < n_runners; i++) {
		put(t, "  runner-up: ");
		put_layout(t, &runners[i]);
		put(t, ": %s s/step, ", secs(b[0], sizeof b[0], runners[i].t_step));
		put_loss(t, &runners[i], best);
		put(t, "\n");
	}
	put(t, "  %d valid layouts, %d did not fit; %d invalid", n_valid, n_unfit, n_invalid);
	if (n_invalid)
		put(t, " (first: %s)", first_invalid);
	put(t, "\n");
}

/* What would make the leanest layout fit: only switches that are off, and
 * only those that shrink a term that counts. Activations and the KV cache
 * share memory, so shrinking the larger saves at most the difference; a
 * suggestion that cannot close the gap even then is left out. */
void rl_plan_explain_nofit(char *buf, size_t len, const struct rl_plan_hw *hw,
                           const struct rl_plan_job *job, const struct rl_plan_estimate *e)
{
	struct text text = {buf, len, 0}, *t = &text;
	double gap = e->total_mem - hw->gpu_mem_bytes;
	double shared = fabs(e->activations - e->kv_cache) * (1.0 + PLAN_RESERVE_FRACTION);
	bool act = e->activations > e->kv_cache && shared >= gap;
	bool kv = e->kv_cache > e->activations && shared >= gap;

	put(t, "policy.parallel: auto: no layout fits in %d x %d GPUs: the leanest, ", hw->n_nodes,
	    hw->gpus_per_node);
	put_layout(t, e);
	put(t,
	    ", needs %.1f GiB per GPU (weights %.1f, grads %.1f, optimizer %.1f, activations "
	    "%.1f, kv cache %.1f GiB, plus reserve), a GPU has %.1f GiB; would help: more GPUs",
	    e->total_mem / PLAN_GIB, e->weights / PLAN_GIB, e->grads / PLAN_GIB,
	    e->optimizer / PLAN_GIB, e->activations / PLAN_GIB, e->kv_cache / PLAN_GIB,
	    hw->gpu_mem_bytes / PLAN_GIB);
	if (!job->distributed_optimizer && hw->n_nodes * hw->gpus_per_node > 1)
		put(t, ", policy.parallel.distributed_optimizer: true");
	if (act && !job->activation_checkpointing)
		put(t, ", policy.parallel.activation_checkpointing: true");
	if (act && !job->sequence_parallel && hw->gpus_per_node > 1)
		put(t, ", policy.parallel.sequence_parallel: true");
	if (act && job->micro_batch > 1)
		put(t, ", a smaller policy.train_micro_batch_size");
	if (kv && job->generation_batch > 1)
		put(t, ", a smaller policy.generation_batch_size");
}
