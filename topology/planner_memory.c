/* The planner's memory model: parameters per GPU and the bytes one pipeline
 * stage needs for weights, gradients, optimizer state, activations and the
 * KV cache.
 *
 * Assumptions, stated once:
 * - Colocated: one process per GPU keeps the policy's weights, gradients
 *   and optimizer state resident through every phase (nothing offloaded).
 *   Generation uses the same tp / pp shard of the same weights, so there is
 *   no second copy; the KV cache lives only while generating and the
 *   training activations only while training, so they share memory.
 * - The reference policy's weights wait in host memory and are swapped in
 *   for its logprob pass, as NeMo-RL does: no GPU bytes.
 * - Megatron's accounting for mixed precision (docs: distrib_optimizer.md;
 *   ZeRO, Rajbhandari et al. 2020): bf16 weights (2 B/param), fp32 main
 *   gradients (4 B: Megatron accumulates and all-reduces bf16 grads in fp32),
 *   fp32 master weights + Adam m and v (12 B), i.e. 18 B/param, or
 *   6 + 12/d with the distributed optimizer. fp32 training: 4 + 4 + 8.
 * - Like Megatron, gradients are reduced and the distributed optimizer
 *   shards over the data-parallel group *with* context parallelism:
 *   d = dp * cp ranks hold replicas of the same parameters; an expert's
 *   replicas are the expert data parallel, world / (pp * ep * etp).
 * - Flash attention (our kernels save the log-sum-exp, not the scores), so
 *   Korthikanti's 5as^2b term for the score matrix is absent.
 * defines: rl_plan_stage_memory, rl_plan_layer_dense_params,
 * rl_plan_layer_expert_params, rl_plan_vocab_params, rl_plan_matmul_params */
#include "topology/planner_internal.h"

#include <math.h>

/* ---- parameters --------------------------------------------------------- */

/* q and o (n_heads of head_dim), k and v (n_kv_heads): Megatron's split,
 * whole heads per TP rank. No biases (Llama). */
static double attention_params(const struct rl_plan_model *m)
{
	double h = m->hidden;
	double qd = (double)m->n_heads * m->head_dim, kvd = (double)m->n_kv_heads * m->head_dim;
	return 2.0 * h * qd + 2.0 * h * kvd;
}

/* One MoE layer's MLP part that every token goes through on one TP rank:
 * the router (replicated, as Megatron's TopKRouter) and the shared expert
 * (split like a dense MLP) with its gate vector. */
static double moe_dense_params(const struct rl_plan_model *m, int tp)
{
	double h = m->hidden, shared = 3.0 * h * m->shared_intermediate / tp;
	return h * m->n_experts + (m->shared_intermediate > 0 ? shared + h : 0.0);
}

double rl_plan_layer_dense_params(const struct rl_plan_model *m, int tp)
{
	double h = m->hidden, n_moe = m->n_experts > 0 ? m->n_moe_layers : 0;
	double mlp = ((m->n_layers - n_moe) * 3.0 * h * m->intermediate / tp +
	              n_moe * moe_dense_params(m, tp)) /
	             m->n_layers;
	return attention_params(m) / tp + mlp + 2.0 * h;
}

/* The experts fold as ETP x EP x EDP (layout.h): a rank holds n_experts/ep
 * of them, each split etp ways. */
double rl_plan_layer_expert_params(const struct rl_plan_model *m, int ep, int etp)
{
	if (m->n_experts == 0)
		return 0.0;
	double one = 3.0 * m->hidden * m->expert_intermediate / etp;
	return (double)m->n_moe_layers / m->n_layers * ((double)m->n_experts / ep) * one;
}

/* The embedding and the LM head are vocab-parallel: ceil(vocab / tp) rows
 * each (Megatron pads the vocab to a multiple of tp). */
double rl_plan_vocab_params(const struct rl_plan_model *m, int tp)
{
	return ceil((double)m->vocab / tp) * m->hidden;
}

/* The parameters that multiply a token's activations: every layer's
 * attention and norms, its dense MLP or, in a MoE layer, the router, the
 * shared expert and the experts_per_token experts the token goes to; the
 * LM head and the final norm. The input embedding is a lookup; with tied
 * embeddings the one matrix is the head. */
double rl_plan_matmul_params(const struct rl_plan_model *m)
{
	double active = rl_plan_layer_dense_params(m, 1) * m->n_layers;
	if (m->n_experts > 0)
		active += (double)m->n_moe_layers * m->experts_per_token * 3.0 * m->hidden *
		          m->expert_intermediate;
	return active + rl_plan_vocab_params(m, 1) + m->hidden;
}

/* ---- memory ------------------------------------------------------------- */

/* Activations one layer saves for its backward pass, per token, on one TP
 * rank, in bytes: the per-tensor accounting of Korthikanti et al. 2022
 * ("Reducing Activation Recomputation in Large Transformer Models", sec. 4:
 * 34sbh + 5as^2b per layer for GPT) redone for a Llama layer with flash
 * attention and no dropout, bf16:
 *   replicated on TP ranks: the inputs of the two RMSNorms (2h) and their
 *     outputs, the inputs of QKV and of gate/up (2h): 8h bytes;
 *   split by TP: q, k, v and the attention output that flash attention's
 *     backward reads (2 ad + 2 kv d), gate and up that SwiGLU's backward
 *     reads and its output that down reads (3I), all bf16, plus the fp32
 *     log-sum-exp per head (4a): 4ad + 4 kv d + 6I + 4a bytes.
 *   In a MoE layer the 6I is each of the token's k experts' 6 I_e, the
 *     token's k copies the experts read (2kh) and the shared expert's
 *     6 I_s; balanced routing and sequence parallelism (which Megatron
 *     requires for MoE with TP) spread them over the TP ranks too.
 * For GPT's shapes this is the paper's 34h minus the dropout masks plus the
 * second MLP input of SwiGLU; for Llama-3-8B it is 139,392 B vs 34h =
 * 139,264 B. Sequence parallelism shards the replicated part too (the
 * paper's "sbh/t * 34" with TP + SP). */
static double act_bytes_per_token_layer(const struct rl_plan_job *job, int tp)
{
	const struct rl_plan_model *m = &job->model;
	double h = m->hidden, ad = (double)m->n_heads * m->head_dim;
	double kvd = (double)m->n_kv_heads * m->head_dim;
	double n_moe = m->n_experts > 0 ? m->n_moe_layers : 0;
	double moe = 6.0 * m->experts_per_token * m->expert_intermediate +
	             2.0 * m->experts_per_token * h + 6.0 * m->shared_intermediate;
	double mlp = ((m->n_layers - n_moe) * 6.0 * m->intermediate + n_moe * moe) / m->n_layers;
	double split = 4.0 * ad + 4.0 * kvd + mlp + 4.0 * m->n_heads;
	double replicated = 8.0 * h;

	if (job->sequence_parallel)
		replicated /= tp;
	return replicated + split / tp;
}

void rl_plan_stage_memory(const struct rl_plan_job *job, int tp, int pp, int cp, int dp, bool first,
                          bool last, struct rl_plan_stage_mem *s)
{
	const struct rl_plan_model *m = &job->model;
	double layers = (double)m->n_layers / pp;
	double tokens = (double)job->micro_batch * job->seq_len / cp; /* one micro-batch */
	double micro_batches = (double)job->global_batch / ((double)dp * job->micro_batch);

	/* Parameters: this stage's layers, the embedding on the first stage,
	 * the final norm and LM head on the last. With tied embeddings and
	 * pp > 1 Megatron keeps a copy of the embedding on the last stage as
	 * its head, so the count is the same. MoE layers are spread evenly
	 * over the stages. */
	s->expert_params = layers * rl_plan_layer_expert_params(m, job->expert, job->expert_tensor);
	s->params = layers * rl_plan_layer_dense_params(m, tp) + s->expert_params;
	if (first)
		s->params += rl_plan_vocab_params(m, tp);
	if (last && (!m->tied_embeddings || !first))
		s->params += rl_plan_vocab_params(m, tp);
	if (last)
		s->params += m->hidden;

	s->weights = s->params * job->param_bytes;
	s->grads = s->params * 4.0; /* fp32 main grads, also for bf16 weights */
	/* Adam m and v in fp32 (8 B), plus fp32 master weights (4 B) when the
	 * weights are bf16; the distributed optimizer shards them (ZeRO-1)
	 * over the replicas of these parameters: dp*cp of the dense ones,
	 * world/(pp*ep*etp) = dp*cp*tp/(ep*etp) of the experts. */
	double per_param = job->param_bytes == 2 ? 12.0 : 8.0;
	double edp = (double)dp * cp * tp / ((double)job->expert * job->expert_tensor);
	s->optimizer = s->params * per_param;
	if (job->distributed_optimizer)
		s->optimizer = (s->params - s->expert_params) * per_param / ((double)dp * cp) +
		               s->expert_params * per_param / edp;

	/* 1F1B: stage i keeps pp - i micro-batches in flight, the first stage
	 * pp of them (Korthikanti sec. 4.2.3), never more than there are. */
	double in_flight = first ? fmin(pp, micro_batches) : 1.0;
	double per_layer = act_bytes_per_token_layer(job, tp) * tokens;
	if (job->activation_checkpointing) {
		/* Full recompute keeps each layer's input (2sbh, sharded by
		 * SP), and one layer's activations while it is recomputed. */
		double input = 2.0 * m->hidden * tokens / (job->sequence_parallel ? tp : 1);
		s->activations = in_flight * layers * input + per_layer;
	} else {
		s->activations = in_flight * layers * per_layer;
	}
	/* The fp32 logits of one micro-batch, vocab-parallel, while the loss
	 * and its gradient are computed (in place, as Megatron's
	 * vocab-parallel cross entropy does). */
	if (last)
		s->activations += tokens * ceil((double)m->vocab / tp) * 4.0;

	/* KV cache: generation_batch sequences of seq_len tokens, K and V for
	 * this stage's layers and this rank's KV heads, bf16; never more
	 * sequences than the replica generates (the engine's slots are that
	 * many at most). Generation has no CP: every CP rank generates its own
	 * sequences, so a tp x pp replica's share is samples / (dp*cp). */
	double share = ceil((double)job->samples_per_step / ((double)dp * cp));
	s->kv_cache = fmin((double)job->generation_batch, share) * job->seq_len * layers * 2.0 *
	              ((double)m->n_kv_heads / tp) * m->head_dim * 2.0;

	double modeled = s->weights + s->grads + s->optimizer + fmax(s->activations, s->kv_cache);
	s->total = modeled * (1.0 + PLAN_RESERVE_FRACTION) + PLAN_RESERVE_BYTES;
}
