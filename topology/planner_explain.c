/* The planner's words: the few lines rl_plan_auto writes about its choice
 * (memory and time of the winner, what each runner-up lost on), the error
 * when nothing fits (what the leanest layout needs, which switches could
 * close the gap), and one estimate's step time part by part with what each
 * part assumes. Fixed buffers, truncated, never overrun.
 * defines: rl_plan_explain_choice, rl_plan_explain_nofit,
 * rl_plan_explain_step */
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
	static const char *const names[] = {"generation",      "compute",    "tp/cp traffic",
	                                    "pipeline bubble", "dp traffic", "ep traffic"};
	double d[] = {e->t_generation - best->t_generation, e->t_compute - best->t_compute,
	              e->t_tp_comm - best->t_tp_comm,       e->t_pp_bubble - best->t_pp_bubble,
	              e->t_dp_comm - best->t_dp_comm,       e->t_ep_comm - best->t_ep_comm};
	char b1[32], b2[32];
	int worst = 0;

	if (e->t_step <= best->t_step * (1.0 + PLAN_TIE_FRACTION)) {
		put(t, "within %g%%, but %s", PLAN_TIE_FRACTION * 100,
		    e->tp * e->pp * e->cp > best->tp * best->pp * best->cp ? "larger tp*pp*cp"
		    : e->tp > best->tp                                     ? "larger tp"
		                                                           : "larger pp");
		return;
	}
	for (int i = 1; i < 6; i++)
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
	put(t, "  time: generation %s + compute %s + tp/cp %s + pipeline %s + dp %s",
	    secs(b[0], sizeof b[0], best->t_generation), secs(b[1], sizeof b[1], best->t_compute),
	    secs(b[2], sizeof b[2], best->t_tp_comm), secs(b[3], sizeof b[3], best->t_pp_bubble),
	    secs(b[4], sizeof b[4], best->t_dp_comm));
	if (best->t_ep_comm > 0)
		put(t, " + ep %s", secs(b[0], sizeof b[0], best->t_ep_comm));
	put(t, " s\n");
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

/* ---- one estimate, part by part ------------------------------------------ */

/* The link a group spanning span consecutive ranks uses, as
 * "450 GB/s (NVLink)". */
static const char *link_text(char *buf, size_t len, const struct rl_plan_hw *hw, double span)
{
	snprintf(buf, len, "%.0f GB/s (%s)", rl_plan_link_bw(hw, span) / 1e9,
	         rl_plan_link_name(hw, span));
	return buf;
}

static void put_part(struct text *t, const char *name, double s)
{
	put(t, "  %-10s %10.2f s  ", name, s);
}

static void put_generation(struct text *t, const struct rl_plan_hw *hw,
                           const struct rl_plan_estimate *e)
{
	const struct rl_plan_basis *b = &e->basis;

	put_part(t, "generation", e->t_generation);
	put(t,
	    "%.0f replica%s of tp*pp = %d GPU%s, %.0f sequence%s each, %.0f round%s of %.0f at "
	    "once; every answer %.0f tokens (its limit) after a %.0f-token prompt; a decode "
	    "step %.2f ms: each TP rank reads %.2f GB of weights + %.2f GB of KV cache, stage "
	    "after stage, at %.0f GB/s (%s), then TP and pipeline sends; prefill %.2f s at "
	    "%.0f%% MFU\n",
	    b->replicas, b->replicas == 1 ? "" : "s", e->tp * e->pp, e->tp * e->pp == 1 ? "" : "s",
	    b->seqs, b->seqs == 1 ? "" : "s", b->rounds, b->rounds == 1 ? "" : "s", b->batch,
	    b->new_tokens, b->prompt, b->decode_step * 1e3, b->decode_weights / 1e9,
	    b->decode_kv / 1e9, hw->hbm_bytes_per_s / 1e9,
	    b->decode_compute_bound ? "compute-bound: the flops at that MFU take longer"
	                            : "memory-bound",
	    b->prefill, hw->mfu * 100);
}

static void put_compute(struct text *t, const struct rl_plan_hw *hw,
                        const struct rl_plan_estimate *e)
{
	const struct rl_plan_basis *b = &e->basis;

	put_part(t, "compute", e->t_compute);
	put(t,
	    "%.3g tokens x %.0f forwards (train %.0f, policy and reference logprobs 1 each) x "
	    "%.1f GFLOP/token (2 per active parameter + causal attention) at %.0f%% MFU of "
	    "%.0f TFLOPS on %d GPU%s\n",
	    b->tokens, b->forwards, b->forwards - 2, b->flops_per_token / 1e9, hw->mfu * 100,
	    hw->peak_flops / 1e12, hw->n_nodes * hw->gpus_per_node,
	    hw->n_nodes * hw->gpus_per_node == 1 ? "" : "s");
}

static void put_comm(struct text *t, const struct rl_plan_hw *hw, const struct rl_plan_job *job,
                     const struct rl_plan_estimate *e)
{
	const struct rl_plan_basis *b = &e->basis;
	const struct rl_plan_model *m = &job->model;
	int world = hw->n_nodes * hw->gpus_per_node;
	char l[96];

	put_part(t, "tp-comm", e->t_tp_comm);
	if (e->tp * e->cp == 1)
		put(t, "tp=1 cp=1: none\n");
	else
		put(t,
		    "%.0f micro-batches x %d layers x 8 all-reduces (2 per layer forward and "
		    "backward, twice 2 in the logprob passes) of %.1f MB over tp=%d at %s%s\n",
		    b->micro_batches, m->n_layers / e->pp,
		    (double)job->micro_batch * job->seq_len / e->cp * m->hidden * 2 / 1e6, e->tp,
		    link_text(l, sizeof l, hw, e->tp),
		    e->cp > 1 ? "; CP's K and V all-gathers too" : "");
	put_part(t, "ep-comm", e->t_ep_comm);
	if (e->t_ep_comm == 0)
		put(t, "%s\n", m->n_experts ? "ep=1: none" : "dense model: none");
	else
		put(t,
		    "%.0f micro-batches x %d MoE layers x 8 all-to-alls (dispatch and combine, "
		    "forward and backward, and in the logprob passes) of %.1f MB per GPU (its "
		    "tokens x %d experts each) over ep=%d at %s; routing balanced\n",
		    b->micro_batches, m->n_moe_layers / e->pp, b->a2a_bytes / 1e6,
		    m->experts_per_token, job->expert,
		    link_text(l, sizeof l, hw, (double)job->expert * job->expert_tensor));
	put_part(t, "pp-bubble", e->t_pp_bubble);
	if (e->pp == 1)
		put(t, "pp=1: none\n");
	else
		put(t,
		    "1F1B: (pp-1)/m = %d/%.0f of compute and traffic idle (m micro-batches per "
		    "optimizer update), + 4 sends per micro-batch to the next stage at %s\n",
		    e->pp - 1, b->flush, link_text(l, sizeof l, hw, 2.0 * world / e->pp));
}

static void put_dp(struct text *t, const struct rl_plan_hw *hw, const struct rl_plan_job *job,
                   const struct rl_plan_estimate *e)
{
	const struct rl_plan_basis *b = &e->basis;
	int edp = e->dp * e->cp * e->tp / (job->expert * job->expert_tensor);
	char l[96];

	put_part(t, "dp-comm", e->t_dp_comm);
	put(t, "%.0f update%s x %s of %.3g parameters per GPU over dp*cp = %d", b->updates,
	    b->updates == 1 ? "" : "s",
	    job->distributed_optimizer
	        ? "(reduce-scatter of fp32 grads + all-gather of the new weights)"
	        : "all-reduce of fp32 grads",
	    b->dense_grad_params, e->dp * e->cp);
	if (b->expert_grad_params > 0)
		put(t, " and %.3g expert parameters over %d", b->expert_grad_params, edp);
	put(t, " at %s; not overlapped with the backward pass\n",
	    link_text(l, sizeof l, hw, (double)hw->n_nodes * hw->gpus_per_node / e->pp));
}

static void put_memory(struct text *t, const struct rl_plan_hw *hw, const struct rl_plan_job *job,
                       const struct rl_plan_estimate *e)
{
	double modeled = e->weights + e->grads + e->optimizer + fmax(e->activations, e->kv_cache);

	put(t,
	    "  memory per GPU: %.1f GiB of %.1f GiB%s: weights %.1f (%s) + grads %.1f (fp32) + "
	    "optimizer %.1f (%sAdam m and v%s) + max(activations and logits %.1f, KV cache "
	    "%.1f) + reserve %.1f (%.0f%% + %.0f GiB)\n",
	    e->total_mem / PLAN_GIB, hw->gpu_mem_bytes / PLAN_GIB, e->fits ? "" : ", DOES NOT FIT",
	    e->weights / PLAN_GIB, job->param_bytes == 2 ? "bf16" : "fp32", e->grads / PLAN_GIB,
	    e->optimizer / PLAN_GIB, job->param_bytes == 2 ? "fp32 master, " : "",
	    job->distributed_optimizer ? ", sharded over the data parallel" : "",
	    e->activations / PLAN_GIB, e->kv_cache / PLAN_GIB, (e->total_mem - modeled) / PLAN_GIB,
	    PLAN_RESERVE_FRACTION * 100, PLAN_RESERVE_BYTES / PLAN_GIB);
}

void rl_plan_explain_step(char *buf, size_t len, const struct rl_plan_hw *hw,
                          const struct rl_plan_job *job, const struct rl_plan_estimate *e)
{
	struct text text = {buf, len, 0}, *t = &text;

	if (buf && len)
		buf[0] = '\0';
	put(t,
	    "step time (explain): tp=%d pp=%d cp=%d ep=%d dp=%d on %d x %d GPUs, %lld samples "
	    "of %lld tokens per step, nothing overlapped:\n",
	    e->tp, e->pp, e->cp, job->expert, e->dp, hw->n_nodes, hw->gpus_per_node,
	    (long long)job->samples_per_step, (long long)job->seq_len);
	put_generation(t, hw, e);
	put_compute(t, hw, e);
	put_comm(t, hw, job, e);
	put_dp(t, hw, job, e);
	put_part(t, "refit", 0.0);
	put(t, "colocated: generation runs on the weights it trains, nothing moves\n");
	put(t, "  %-10s %10.2f s\n", "total", e->t_step);
	put_memory(t, hw, job, e);
}
