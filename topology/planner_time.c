/* The planner's time model: seconds per GRPO step for one layout, split
 * into generation, compute, TP/CP traffic, the pipeline bubble and the
 * gradient reduce.
 *
 * Assumptions, stated once:
 * - Nothing overlaps: communication adds to compute. Megatron can hide
 *   the gradient reduce behind the backward pass; the estimate stays on
 *   the safe side, and the choice depends on differences between layouts.
 * - Decoding reads every weight and the KV cache once per token, so it
 *   runs at the memory bandwidth the data sheet gives (hw->hbm_bytes_per_s)
 *   unless the batch makes it compute-bound.
 * defines: rl_plan_step_time */
#include "topology/planner_internal.h"

#include <math.h>

/* The least a collective or a send costs, whatever its size (kernel launch
 * and NCCL protocol latency): it is what decoding's many small TP
 * all-reduces pay. */
#define PLAN_COLLECTIVE_LATENCY_S 10e-6

/* Bandwidth per GPU inside a group whose ranks span `span` consecutive
 * ranks. The layout puts tp innermost, then cp, dp, pp (tp-cp-ep-dp-pp),
 * and ranks fill a node before the next one, so a group that spans no more
 * than an NVLink domain talks over NVLink, no more than a node over PCIe,
 * and otherwise over the network, whose NICs the node's GPUs share. */
static double link_bw(const struct rl_plan_hw *hw, double span)
{
	if (span <= hw->nvlink_domain_size && hw->nvlink_bytes_per_s > 0)
		return hw->nvlink_bytes_per_s;
	if (span <= hw->gpus_per_node)
		return hw->pcie_bytes_per_s;
	return hw->net_bytes_per_s / hw->gpus_per_node;
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

static double p2p_s(double bytes, double bw)
{
	return PLAN_COLLECTIVE_LATENCY_S + bytes / bw;
}

void rl_plan_step_time(const struct rl_plan_hw *hw, const struct rl_plan_job *job, int tp, int pp,
                       int cp, int dp, double stage_params, struct rl_plan_estimate *e)
{
	const struct rl_plan_model *m = &job->model;
	int world = hw->n_nodes * hw->gpus_per_node;
	double n_flops = rl_plan_matmul_params(m);
	double ad = (double)m->n_heads * m->head_dim;
	double kvd_rank = (double)m->n_kv_heads / tp * m->head_dim;
	double seq = (double)job->seq_len, samples = (double)job->samples_per_step;
	double gpu_flops = hw->peak_flops * hw->mfu;
	double hbm = hw->hbm_bytes_per_s;
	bool ckpt = job->activation_checkpointing;

	/* Compute. One forward costs 2 flops per matmul parameter per token
	 * plus causal attention, QK^T and AV over on average seq/2 keys:
	 * 2 * 2 * (seq/2) * a*d per token and layer. Training is forward +
	 * backward (3 forwards; 4 with full recompute), the policy and the
	 * reference logprobs one forward each: 6N + 2*2N per token. Spread
	 * over every GPU at mfu; the pipeline bubble is added below. */
	double fwd_per_token = 2.0 * n_flops + m->n_layers * 2.0 * seq * ad;
	double forwards = (ckpt ? 4.0 : 3.0) + 2.0;
	e->t_compute = samples * seq * fwd_per_token * forwards / (world * gpu_flops);

	/* Generation. A tp x pp group is one generation replica (CP ranks
	 * generate on their own). Prefill is compute at mfu over the prompts.
	 * Each decode step moves one token of a batch through the replica's
	 * stages in turn: every rank reads its weight shard and the batch's KV
	 * cache (average context: prompt + half the new tokens) from HBM, or
	 * is compute-bound when the batch is large, whichever is slower; TP
	 * all-reduces twice per layer and stages pass the batch on. */
	double replicas = (double)world / (tp * pp);
	double seqs = ceil(samples / replicas);
	double rounds = ceil(seqs / job->generation_batch);
	double batch = fmin((double)job->generation_batch, seqs);
	double new_tokens = (double)job->max_new_tokens, prompt = seq - new_tokens;
	double context = prompt + new_tokens / 2.0;
	double read =
	    n_flops * job->param_bytes / tp + batch * context * m->n_layers * 2.0 * kvd_rank * 2.0;
	double decode_step = fmax(read / hbm, 2.0 * n_flops * batch / tp / gpu_flops);
	double act_bytes = batch * m->hidden * 2.0;
	decode_step += m->n_layers * 2.0 * allreduce_s(tp, act_bytes, link_bw(hw, tp));
	if (pp > 1)
		decode_step += (pp - 1) * p2p_s(act_bytes, link_bw(hw, 2.0 * world / pp));
	double prefill = samples * prompt * (2.0 * n_flops + m->n_layers * 2.0 * prompt * ad) /
	                 (world * gpu_flops);
	e->t_generation = prefill + rounds * new_tokens * decode_step;

	/* TP and CP traffic of training and both logprob passes, per
	 * micro-batch and layer of this rank's stage. TP: two all-reduces
	 * per layer forward and two backward (Megatron's f and g; with SP an
	 * all-gather and a reduce-scatter, the same bytes), of the micro-
	 * batch's activations: 4 train (+2 recompute) + 2 * 2 logprobs. CP:
	 * an all-gather of K and V forward, a reduce-scatter of their
	 * gradients backward: 2 train (+1 recompute) + 2 logprobs. */
	double micro_batches = samples / ((double)dp * job->micro_batch);
	double tokens_mb = (double)job->micro_batch * seq / cp;
	double layers = (double)m->n_layers / pp;
	double tp_ops = 8.0 + (ckpt ? 2.0 : 0.0), cp_ops = 4.0 + (ckpt ? 1.0 : 0.0);
	double tp_one = allreduce_s(tp, tokens_mb * m->hidden * 2.0, link_bw(hw, tp));
	double cp_one = allgather_s(cp, tokens_mb * 2.0 * kvd_rank * 2.0, link_bw(hw, tp * cp));
	e->t_tp_comm = micro_batches * layers * (tp_ops * tp_one + cp_ops * cp_one);

	/* Pipeline. 1F1B leaves (pp-1)/m of the pipelined work idle, m the
	 * micro-batches between flushes (Narayanan et al. 2021). Each
	 * micro-batch also crosses a stage boundary 4 times (train forward and
	 * backward, two logprob forwards), each rank sending its 1/tp slice
	 * (Megatron's scatter-gather); the next stage is world/pp ranks away. */
	e->t_pp_bubble = 0;
	if (pp > 1) {
		double m_flush = (double)job->global_batch / ((double)dp * job->micro_batch);
		double send =
		    p2p_s(tokens_mb * m->hidden * 2.0 / tp, link_bw(hw, 2.0 * world / pp));
		e->t_pp_bubble =
		    (pp - 1) / m_flush * (e->t_compute + e->t_tp_comm) + micro_batches * 4.0 * send;
	}

	/* Gradients, once per optimizer update, over the dp*cp replicas (a
	 * group spanning world/pp ranks). fp32 main grads: an all-reduce of
	 * 4 B/param, or with the distributed optimizer a reduce-scatter of
	 * them and an all-gather of the updated weights (4 + param_bytes). */
	int replicas_dp = dp * cp;
	double bw_dp = link_bw(hw, (double)world / pp);
	double one_update;
	if (job->distributed_optimizer)
		one_update =
		    allgather_s(replicas_dp, stage_params * 4.0 / replicas_dp, bw_dp) +
		    allgather_s(replicas_dp, stage_params * job->param_bytes / replicas_dp, bw_dp);
	else
		one_update = allreduce_s(replicas_dp, stage_params * 4.0, bw_dp);
	e->t_dp_comm = samples / job->global_batch * one_update;

	e->t_step = e->t_generation + e->t_compute + e->t_tp_comm + e->t_pp_bubble + e->t_dp_comm;
}
