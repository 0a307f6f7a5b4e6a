/* The planner's time model: seconds per GRPO step for one layout, split
 * into generation, compute, TP/CP traffic, the experts' all-to-alls, the
 * pipeline bubble and the gradient reduce.
 *
 * Assumptions, stated once:
 * - Nothing overlaps: communication adds to compute. Megatron can hide
 *   the gradient reduce behind the backward pass; the estimate stays on
 *   the safe side, and the choice depends on differences between layouts.
 * - Decoding reads every weight a rank holds and the KV cache once per
 *   token, so it runs at the memory bandwidth the data sheet gives
 *   (hw->hbm_bytes_per_s) unless the batch makes it compute-bound.
 * - Experts: a token costs the flops of the experts_per_token experts it
 *   goes to, routing is balanced over the experts, and the dispatch and
 *   combine all-to-alls move each token's hidden state (bf16) to its
 *   experts and back.
 * defines: rl_plan_step_time, rl_plan_link_bw, rl_plan_link_name */
#include "topology/planner_internal.h"

#include <math.h>
#include <string.h>

/* The least a collective or a send costs, whatever its size (kernel launch
 * and NCCL protocol latency): it is what decoding's many small TP
 * all-reduces pay. */
#define PLAN_COLLECTIVE_LATENCY_S 10e-6

/* The link a group whose ranks span `span` consecutive ranks talks over.
 * The layout puts tp innermost, then cp, dp, pp (tp-cp-ep-dp-pp; experts
 * etp-ep-edp-pp), and ranks fill a node before the next one, so a group
 * that spans no more than an NVLink domain talks over NVLink, no more than
 * a node over PCIe, and otherwise over the network, whose NICs the node's
 * GPUs share. */
enum plan_link { PLAN_NVLINK, PLAN_PCIE, PLAN_NET };

static enum plan_link link_of(const struct rl_plan_hw *hw, double span)
{
	if (span <= hw->nvlink_domain_size && hw->nvlink_bytes_per_s > 0)
		return PLAN_NVLINK;
	return span <= hw->gpus_per_node ? PLAN_PCIE : PLAN_NET;
}

double rl_plan_link_bw(const struct rl_plan_hw *hw, double span)
{
	switch (link_of(hw, span)) {
	case PLAN_NVLINK:
		return hw->nvlink_bytes_per_s;
	case PLAN_PCIE:
		return hw->pcie_bytes_per_s;
	default:
		return hw->net_bytes_per_s / hw->gpus_per_node;
	}
}

const char *rl_plan_link_name(const struct rl_plan_hw *hw, double span)
{
	static const char *const names[] = {"NVLink", "PCIe", "network, the node's NICs shared"};
	return names[link_of(hw, span)];
}

/* Ring all-reduce: each rank sends and receives 2(n-1)/n of the buffer. */
static double allreduce_s(int n, double bytes, double bw)
{
	return n > 1 ? PLAN_COLLECTIVE_LATENCY_S + 2.0 * (n - 1) / n * bytes / bw : 0.0;
}

/* Ring all-gather (or reduce-scatter) of n shards: n-1 shards move. */
static double allgather_s(int n, double shard_bytes, double bw)
{
	return n > 1 ? PLAN_COLLECTIVE_LATENCY_S + (n - 1) * shard_bytes / bw : 0.0;
}

/* All-to-all of n ranks: (n-1)/n of what a rank holds leaves it. */
static double alltoall_s(int n, double bytes, double bw)
{
	return n > 1 ? PLAN_COLLECTIVE_LATENCY_S + (n - 1.0) / n * bytes / bw : 0.0;
}

static double p2p_s(double bytes, double bw)
{
	return PLAN_COLLECTIVE_LATENCY_S + bytes / bw;
}

static bool moe(const struct rl_plan_model *m)
{
	return m->n_experts > 0 && m->n_moe_layers > 0;
}

/* Compute. One forward costs 2 flops per active matmul parameter per
 * token plus causal attention, QK^T and AV over on average seq/2 keys:
 * 2 * 2 * (seq/2) * a*d per token and layer. Training is forward +
 * backward (3 forwards; 4 with full recompute), the policy and the
 * reference logprobs one forward each: 6N + 2*2N per token. Spread over
 * every GPU at mfu; the pipeline bubble is added apart. */
static double compute_s(const struct rl_plan_hw *hw, const struct rl_plan_job *job,
                        struct rl_plan_basis *b)
{
	const struct rl_plan_model *m = &job->model;
	double ad = (double)m->n_heads * m->head_dim, seq = (double)job->seq_len;
	int world = hw->n_nodes * hw->gpus_per_node;

	b->tokens = (double)job->samples_per_step * seq;
	b->flops_per_token = 2.0 * rl_plan_matmul_params(m) + m->n_layers * 2.0 * seq * ad;
	b->forwards = (job->activation_checkpointing ? 4.0 : 3.0) + 2.0;
	return b->tokens * b->flops_per_token * b->forwards / (world * hw->peak_flops * hw->mfu);
}

/* Bytes of weights one rank reads per decode step: its share of every
 * stage's dense weights (the stages run in turn) and, of its experts, the
 * share the step's tokens touch. The tokens of one expert-parallel group
 * (those of the ep*etp/tp replicas it spans) pick experts_per_token of
 * n_experts each: an expert is left alone with probability
 * (1 - k/E)^tokens. */
static double decode_weight_bytes(const struct rl_plan_job *job, int tp, double batch)
{
	const struct rl_plan_model *m = &job->model;
	double dense = rl_plan_layer_dense_params(m, tp) * m->n_layers +
	               rl_plan_vocab_params(m, tp) + m->hidden;
	double experts = 0;
	if (moe(m)) {
		double tokens = batch * fmax(1.0, (double)job->expert * job->expert_tensor / tp);
		double touched =
		    1.0 - pow(1.0 - (double)m->experts_per_token / m->n_experts, tokens);
		experts = rl_plan_layer_expert_params(m, job->expert, job->expert_tensor) *
		          m->n_layers * touched;
	}
	return (dense + experts) * job->param_bytes;
}

/* One decode step of a replica: every rank reads its weights and the
 * batch's KV cache (average context: prompt + half the new tokens) from
 * HBM, or is compute-bound when the batch is large, whichever is slower;
 * TP all-reduces twice per layer, the experts' all-to-alls dispatch and
 * combine once each per MoE layer, and the stages pass the batch on. */
static double decode_step_s(const struct rl_plan_hw *hw, const struct rl_plan_job *job, int tp,
                            int pp, struct rl_plan_basis *b)
{
	const struct rl_plan_model *m = &job->model;
	double kvd_rank = (double)m->n_kv_heads / tp * m->head_dim;
	double context = b->prompt + b->new_tokens / 2.0;
	double act_bytes = b->batch * m->hidden * 2.0;

	b->decode_weights = decode_weight_bytes(job, tp, b->batch);
	b->decode_kv = b->batch * context * m->n_layers * 2.0 * kvd_rank * 2.0;
	double read_s = (b->decode_weights + b->decode_kv) / hw->hbm_bytes_per_s;
	double flops_s =
	    2.0 * rl_plan_matmul_params(m) * b->batch / tp / (hw->peak_flops * hw->mfu);
	b->decode_compute_bound = flops_s > read_s;
	double step = fmax(read_s, flops_s);
	step += m->n_layers * 2.0 * allreduce_s(tp, act_bytes, b->tp_bw);
	if (moe(m))
		step +=
		    m->n_moe_layers * 2.0 *
		    alltoall_s(job->expert,
		               act_bytes * m->experts_per_token / (job->sequence_parallel ? tp : 1),
		               b->ep_bw);
	if (pp > 1)
		step += (pp - 1) * p2p_s(act_bytes, b->pp_bw);
	return step;
}

/* Generation. A tp x pp group is one generation replica (CP ranks
 * generate on their own); its sequences run generation_batch at a time,
 * each batch max_new_tokens decode steps. Prefill is compute at mfu over
 * the prompts. */
static double generation_s(const struct rl_plan_hw *hw, const struct rl_plan_job *job, int tp,
                           int pp, struct rl_plan_basis *b)
{
	const struct rl_plan_model *m = &job->model;
	int world = hw->n_nodes * hw->gpus_per_node;
	double ad = (double)m->n_heads * m->head_dim, samples = (double)job->samples_per_step;

	b->replicas = (double)world / (tp * pp);
	b->seqs = ceil(samples / b->replicas);
	b->rounds = ceil(b->seqs / job->generation_batch);
	b->batch = fmin((double)job->generation_batch, b->seqs);
	b->new_tokens = (double)job->max_new_tokens;
	b->prompt = (double)job->seq_len - b->new_tokens;
	b->decode_step = decode_step_s(hw, job, tp, pp, b);
	b->prefill = samples * b->prompt *
	             (2.0 * rl_plan_matmul_params(m) + m->n_layers * 2.0 * b->prompt * ad) /
	             (world * hw->peak_flops * hw->mfu);
	return b->prefill + b->rounds * b->new_tokens * b->decode_step;
}

/* TP and CP traffic of training and both logprob passes, per micro-batch
 * and layer of this rank's stage. TP: two all-reduces per layer forward
 * and two backward (Megatron's f and g; with SP an all-gather and a
 * reduce-scatter, the same bytes), of the micro-batch's activations: 4
 * train (+2 recompute) + 2 * 2 logprobs. CP: an all-gather of K and V
 * forward, a reduce-scatter of their gradients backward: 2 train (+1
 * recompute) + 2 logprobs. */
static double tp_cp_s(const struct rl_plan_hw *hw, const struct rl_plan_job *job, int tp, int pp,
                      int cp, struct rl_plan_basis *b)
{
	const struct rl_plan_model *m = &job->model;
	bool ckpt = job->activation_checkpointing;
	double kvd_rank = (double)m->n_kv_heads / tp * m->head_dim;
	double tokens_mb = (double)job->micro_batch * job->seq_len / cp;
	double tp_ops = 8.0 + (ckpt ? 2.0 : 0.0), cp_ops = 4.0 + (ckpt ? 1.0 : 0.0);
	double tp_one = allreduce_s(tp, tokens_mb * m->hidden * 2.0, b->tp_bw);
	double cp_one =
	    allgather_s(cp, tokens_mb * 2.0 * kvd_rank * 2.0, rl_plan_link_bw(hw, tp * cp));
	return b->micro_batches * m->n_layers / pp * (tp_ops * tp_one + cp_ops * cp_one);
}

/* The experts' all-to-alls in training and both logprob passes: per MoE
 * layer a dispatch and a combine forward and again backward, as many as
 * TP's all-reduces (8, +2 with recompute). A rank sends its tokens (its
 * 1/tp of the micro-batch with SP) experts_per_token times. */
static double ep_s(const struct rl_plan_job *job, int tp, int pp, int cp, struct rl_plan_basis *b)
{
	const struct rl_plan_model *m = &job->model;
	if (!moe(m))
		return 0.0;
	double tokens =
	    (double)job->micro_batch * job->seq_len / cp / (job->sequence_parallel ? tp : 1);
	double ops = 8.0 + (job->activation_checkpointing ? 2.0 : 0.0);
	b->a2a_bytes = tokens * m->experts_per_token * m->hidden * 2.0;
	return b->micro_batches * (double)m->n_moe_layers / pp * ops *
	       alltoall_s(job->expert, b->a2a_bytes, b->ep_bw);
}

/* Pipeline. 1F1B leaves (pp-1)/m of the pipelined work idle, m the
 * micro-batches between flushes (Narayanan et al. 2021). Each micro-batch
 * also crosses a stage boundary 4 times (train forward and backward, two
 * logprob forwards), each rank sending its 1/tp slice (Megatron's
 * scatter-gather); the next stage is world/pp ranks away. */
static double bubble_s(const struct rl_plan_job *job, int tp, int pp, int cp, int dp,
                       double pipelined, struct rl_plan_basis *b)
{
	b->flush = (double)job->global_batch / ((double)dp * job->micro_batch);
	if (pp == 1)
		return 0.0;
	double tokens_mb = (double)job->micro_batch * job->seq_len / cp;
	double send = p2p_s(tokens_mb * job->model.hidden * 2.0 / tp, b->pp_bw);
	return (pp - 1) / b->flush * pipelined + b->micro_batches * 4.0 * send;
}

/* One group's gradients: fp32 main grads, an all-reduce of 4 B/param, or
 * with the distributed optimizer a reduce-scatter of them and an
 * all-gather of the updated weights (4 + param_bytes). */
static double grad_sync_s(const struct rl_plan_job *job, int n, double params, double bw)
{
	if (params <= 0)
		return 0.0;
	if (job->distributed_optimizer)
		return allgather_s(n, params * 4.0 / n, bw) +
		       allgather_s(n, params * job->param_bytes / n, bw);
	return allreduce_s(n, params * 4.0, bw);
}

/* Gradients, once per optimizer update: the dense ones over the dp*cp
 * replicas, the experts' over world/(pp*ep*etp); both groups span world/pp
 * ranks. */
static double dp_s(const struct rl_plan_job *job, int tp, int cp, int dp,
                   const struct rl_plan_stage_mem *s, struct rl_plan_basis *b)
{
	int edp = dp * cp * tp / (job->expert * job->expert_tensor);
	b->dense_grad_params = s->params - s->expert_params;
	b->expert_grad_params = s->expert_params;
	b->updates = (double)job->samples_per_step / job->global_batch;
	return b->updates * (grad_sync_s(job, dp * cp, b->dense_grad_params, b->dp_bw) +
	                     grad_sync_s(job, edp, b->expert_grad_params, b->dp_bw));
}

void rl_plan_step_time(const struct rl_plan_hw *hw, const struct rl_plan_job *job, int tp, int pp,
                       int cp, int dp, const struct rl_plan_stage_mem *s,
                       struct rl_plan_estimate *e)
{
	struct rl_plan_basis *b = &e->basis;
	int world = hw->n_nodes * hw->gpus_per_node;

	memset(b, 0, sizeof *b);
	b->tp_bw = rl_plan_link_bw(hw, tp);
	b->ep_bw = rl_plan_link_bw(hw, (double)job->expert * job->expert_tensor);
	b->pp_bw = rl_plan_link_bw(hw, 2.0 * world / pp);
	b->dp_bw = rl_plan_link_bw(hw, (double)world / pp);
	b->micro_batches = (double)job->samples_per_step / ((double)dp * job->micro_batch);

	e->t_compute = compute_s(hw, job, b);
	e->t_generation = generation_s(hw, job, tp, pp, b);
	e->t_tp_comm = tp_cp_s(hw, job, tp, pp, cp, b);
	e->t_ep_comm = ep_s(job, tp, pp, cp, b);
	e->t_pp_bubble =
	    bubble_s(job, tp, pp, cp, dp, e->t_compute + e->t_tp_comm + e->t_ep_comm, b);
	e->t_dp_comm = dp_s(job, tp, cp, dp, s, b);
	e->t_step = e->t_generation + e->t_compute + e->t_tp_comm + e->t_ep_comm + e->t_pp_bubble +
	            e->t_dp_comm;
}
