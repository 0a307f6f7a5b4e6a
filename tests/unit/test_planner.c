/* The auto planner: parameter, memory and time numbers against arithmetic
 * done by hand in the comments (Llama-3-8B's shapes, whose parameter count
 * is published: 8.03e9), the search's choices on known machines as
 * properties, and the GPU table against pci.ids and the data sheets. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tests/unit/published_models.h"
#include "topology/planner.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* The model's named constants (planner_internal.h, planner_time.c),
 * restated for the hand arithmetic: 10% + 2 GiB reserve, 10 us per
 * collective. */
#define RESERVE_FRACTION 0.10
#define RESERVE_BYTES    (2.0 * GIB)
#define LAT              10e-6

/* One DGX H100 node per n_nodes: 8 GPUs in one NVLink domain, 80 GiB,
 * 989.4 TFLOPS bf16, HBM3 at 3.35 TB/s, 450 GB/s NVLink per direction,
 * 8 x 400 Gb/s NICs. */
static struct rl_plan_hw h100(int n_nodes)
{
	struct rl_plan_hw hw = {
	    .n_nodes = n_nodes,
	    .gpus_per_node = 8,
	    .nvlink_domain_size = 8,
	    .gpu_mem_bytes = 80 * GIB,
	    .peak_flops = 989.4e12,
	    .hbm_bytes_per_s = 3350e9,
	    .mfu = 0.4,
	    .nvlink_bytes_per_s = 450e9,
	    .pcie_bytes_per_s = 50e9,
	    .net_bytes_per_s = 400e9,
	};
	return hw;
}

/* NeMo-RL's math recipe sizes: 32 prompts x 16 generations. */
static struct rl_plan_job job8b(void)
{
	struct rl_plan_job job = {
	    .model = llama8b,
	    .samples_per_step = 512,
	    .global_batch = 512,
	    .micro_batch = 1,
	    .generation_batch = 64,
	    .seq_len = 4096,
	    .max_new_tokens = 2048,
	    .param_bytes = 2,
	    .distributed_optimizer = true,
	    .expert = 1,
	    .expert_tensor = 1,
	};
	return job;
}

static struct rl_plan_estimate estimate(const struct rl_plan_hw *hw, const struct rl_plan_job *job,
                                        int tp, int pp, int cp)
{
	struct rl_plan_estimate e;
	int rc = rl_plan_estimate(hw, job, tp, pp, cp, &e);
	cr_assert_eq(rc, 0, "tp=%d pp=%d cp=%d: %s", tp, pp, cp, e.why);
	return e;
}

#define expect_bytes(got, want)                                                                    \
	cr_expect(fabs((got) - (want)) <= 1.0, "%s = %.1f, want %.1f", #got, (double)(got),        \
	          (double)(want))
#define expect_rel(got, want, rel)                                                                 \
	cr_expect(fabs((got) - (want)) <= (rel)*fabs(want), "%s = %.9g, want %.9g", #got,          \
	          (double)(got), (double)(want))

/* ---- memory ------------------------------------------------------------- */

/* Per layer: q 4096*4096 = 16,777,216; k, v 4096*1024 = 4,194,304 each;
 * o 16,777,216; gate/up/down 3*4096*14336 = 176,160,768; two norms 8,192:
 * 218,112,000. 32 layers: 6,979,584,000. Embedding and head 128256*4096 =
 * 525,336,576 each, final norm 4,096: 8,030,261,248 parameters. */
#define P8B 8030261248.0

Test(planner_memory, llama8b_parameters_tp1)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate e = estimate(&hw, &job, 1, 1, 1);

	cr_expect_eq(e.dp, 8);
	expect_bytes(e.weights, P8B * 2); /* bf16: 16,060,522,496 */
	expect_bytes(e.grads, P8B * 4);   /* fp32 main grads: 32,121,044,992 */
	/* 12 B (fp32 master + Adam m, v) sharded over dp = 8: 12,045,391,872 */
	expect_bytes(e.optimizer, P8B * 12 / 8);
}

Test(planner_memory, llama8b_weights_tp2)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate e = estimate(&hw, &job, 2, 1, 1);

	/* Per layer at tp=2: (16,777,216*2 + 4,194,304*2 + 176,160,768) / 2
	 * + 8,192 (norms stay whole) = 109,051,904 + 8,192 = 109,060,096;
	 * x32 = 3,489,923,072. Embedding and head 64,128 rows * 4096 =
	 * 262,668,288 each; final norm 4,096: 4,015,263,744 parameters. */
	expect_bytes(e.weights, 4015263744.0 * 2);
	cr_expect_eq(e.dp, 4);
}

Test(planner_memory, llama8b_tp2_pp2_first_stage)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate e = estimate(&hw, &job, 2, 2, 1);

	/* dp = 8 / 4 = 2. First stage: 16 layers * 109,060,096 +
	 * embedding 262,668,288 = 2,007,629,824. The last stage has the head
	 * and the final norm, 4,096 more, but the first stage keeps pp = 2
	 * micro-batches in flight (512 / (2*1) = 256 of them per update) and
	 * is the worst. */
	cr_expect_eq(e.dp, 2);
	expect_bytes(e.weights, 2007629824.0 * 2);
	/* Activations per token and layer at tp=2 without SP: replicated
	 * 8h = 32,768; split (4*4096 + 4*1024 + 6*14336 + 4*32) / 2 =
	 * 106,624 / 2 = 53,312: 86,080 B. x 4096 tokens x 16 layers x 2
	 * micro-batches = 11,282,677,760 (no logits on the first stage). */
	expect_bytes(e.activations, 86080.0 * 4096 * 16 * 2);
	/* KV: 64 sequences * 4096 * 16 layers * 2 (K, V) * 8/2 heads * 128 *
	 * 2 B = 8,589,934,592 = 8 GiB. */
	expect_bytes(e.kv_cache, 8 * GIB);
	/* Optimizer: 12 B/param over dp*cp = 2. */
	expect_bytes(e.optimizer, 2007629824.0 * 12 / 2);
}

Test(planner_memory, optimizer_with_and_without_distribution)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();

	job.distributed_optimizer = false;
	struct rl_plan_estimate e = estimate(&hw, &job, 1, 1, 1);
	expect_bytes(e.optimizer, P8B * 12); /* 96,363,134,976: every rank all of it */

	/* Megatron shards over dp * cp: tp=1 cp=2 has dp=4 but still 8
	 * replicas of each parameter. */
	job.distributed_optimizer = true;
	e = estimate(&hw, &job, 1, 1, 2);
	cr_expect_eq(e.dp, 4);
	expect_bytes(e.optimizer, P8B * 12 / 8);

	/* fp32 weights: 4 B weights, 4 B grads, Adam 8 B, no master copy. */
	job.param_bytes = 4;
	job.distributed_optimizer = false;
	e = estimate(&hw, &job, 1, 1, 1);
	expect_bytes(e.weights, P8B * 4);
	expect_bytes(e.grads, P8B * 4);
	expect_bytes(e.optimizer, P8B * 8);
}

Test(planner_memory, kv_cache)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();

	/* 64 * 4096 * 32 layers * 2 * 8 heads * 128 * 2 B = 34,359,738,368 */
	struct rl_plan_estimate e = estimate(&hw, &job, 1, 1, 1);
	expect_bytes(e.kv_cache, 32 * GIB);
	/* tp=8: one KV head per rank, 1/8 of it; CP does not split it. */
	e = estimate(&hw, &job, 8, 1, 1);
	expect_bytes(e.kv_cache, 4 * GIB);
	e = estimate(&hw, &job, 1, 1, 2);
	expect_bytes(e.kv_cache, 32 * GIB);
}

Test(planner_memory, activations_and_total)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();

	/* tp=1: 12h + 4*kv*d + 6I + 4a = 49,152 + 4,096 + 86,016 + 128 =
	 * 139,392 B per token and layer (Korthikanti's 34h would be 139,264);
	 * x 4096 x 32 = 18,270,388,224, plus fp32 logits 4096 * 128256 * 4 =
	 * 2,101,346,304: 20,371,734,528. */
	struct rl_plan_estimate e = estimate(&hw, &job, 1, 1, 1);
	expect_bytes(e.activations, 20371734528.0);
	/* total = (W + G + O + max(A, KV)) * 1.1 + 2 GiB, KV = 32 GiB the larger:
	 * (16,060,522,496 + 32,121,044,992 + 12,045,391,872 + 34,359,738,368)
	 * = 94,586,697,728 -> 106,192,851,148.8 B = 98.9 GiB: no fit in 80. */
	expect_rel(e.total_mem, 94586697728.0 * (1 + RESERVE_FRACTION) + RESERVE_BYTES, 1e-12);
	cr_expect(!e.fits);
	cr_expect(strstr(e.why, "98.9 GiB") && strstr(e.why, "80.0 GiB"), "why: %s", e.why);

	/* tp=2 with SP: everything / 2: 69,696 * 4096 * 32 = 9,135,194,112,
	 * logits 4096 * 64128 * 4 = 1,050,673,152. */
	job.sequence_parallel = true;
	e = estimate(&hw, &job, 2, 1, 1);
	expect_bytes(e.activations, 9135194112.0 + 1050673152.0);

	/* Full recompute at tp=1: 32 layer inputs of 2h * 4096 tokens =
	 * 1,073,741,824, one layer's 139,392 * 4096 = 570,949,632, logits
	 * 2,101,346,304. */
	job.sequence_parallel = false;
	job.activation_checkpointing = true;
	e = estimate(&hw, &job, 1, 1, 1);
	expect_bytes(e.activations, 1073741824.0 + 570949632.0 + 2101346304.0);

	/* cp=2 halves the tokens per rank: 2048 tokens. */
	job.activation_checkpointing = false;
	e = estimate(&hw, &job, 1, 1, 2);
	expect_bytes(e.activations, 20371734528.0 / 2);
}

/* ---- time --------------------------------------------------------------- */

Test(planner_time, compute_and_generation)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate e = estimate(&hw, &job, 1, 1, 1);

	/* Matmul parameters: all but the input embedding, 8,030,261,248 -
	 * 525,336,576 = 7,504,924,672. A forward per token: 2N + 32 layers *
	 * 2 * 4096 * (32*128) causal attention = 15,009,849,344 +
	 * 1,073,741,824 = 16,083,591,168 flops. Train 3 forwards + 2 logprob
	 * passes, 512 * 4096 = 2,097,152 tokens, on 8 GPUs at 0.4 * 989.4e12. */
	double n = 7504924672.0, gpu = 0.4 * 989.4e12;
	double compute = 2097152.0 * 16083591168.0 * 5 / (8 * gpu);
	expect_rel(e.t_compute, compute, 1e-9); /* 53.27 s */

	/* Generation: 8 replicas of 64 sequences, one round of 64. Prompt
	 * 2048, mean context 2048 + 1024 = 3072. A decode step reads 2N =
	 * 15,009,849,344 bytes of weights and 64 * 3072 * 32 * 2 * 1024 * 2 =
	 * 25,769,803,776 of cache, 40,779,653,120 B at 3.35e12 B/s (12.17 ms)
	 * -- slower than its 2N * 64 flops (2.43 ms). 2048 steps. Prefill:
	 * 512 * 2048 tokens of 2N + 32 * 2 * 2048 * 4096 flops. */
	double read = 2 * n + 25769803776.0;
	cr_expect_eq(read, 40779653120.0);
	double step = fmax(read / 3350e9, 2 * n * 64 / gpu);
	double prefill = 512.0 * 2048 * (2 * n + 32.0 * 2 * 2048 * 4096) / (8 * gpu);
	expect_rel(e.t_generation, prefill + 2048 * step, 1e-9);

	cr_expect_eq(e.t_tp_comm, 0);
	cr_expect_eq(e.t_pp_bubble, 0);
	/* Distributed optimizer over 8 on NVLink: reduce-scatter of fp32
	 * grads, 7 shards of 4N/8 bytes, and all-gather of bf16 weights, 7 of
	 * 2N/8, one update per step. */
	double dp = 2 * LAT + 7 * P8B * 4 / 8 / 450e9 + 7 * P8B * 2 / 8 / 450e9;
	expect_rel(e.t_dp_comm, dp, 1e-9); /* 94 ms */
	expect_rel(e.t_step, e.t_generation + e.t_compute + e.t_dp_comm, 1e-12);
}

Test(planner_time, tp_traffic_follows_the_link)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();

	/* tp=2, dp=4: 512 / 4 = 128 micro-batches of 4096 tokens, 32 layers,
	 * 8 all-reduces each (train 2 fwd + 2 bwd, logprobs 2 x 2 fwd) of
	 * 4096 * 4096 * 2 = 33,554,432 B; a ring of 2 moves 2*1/2 of it. */
	double bytes = 4096.0 * 4096 * 2, n_ops = 128.0 * 32 * 8;
	struct rl_plan_estimate e = estimate(&hw, &job, 2, 1, 1);
	expect_rel(e.t_tp_comm, n_ops * (LAT + bytes / 450e9), 1e-9);

	/* A PCIe machine (no NVLink) pays PCIe. */
	hw.nvlink_bytes_per_s = 0;
	hw.nvlink_domain_size = 1;
	e = estimate(&hw, &job, 2, 1, 1);
	expect_rel(e.t_tp_comm, n_ops * (LAT + bytes / 50e9), 1e-9);

	/* NVLink pairs: tp=2 stays on NVLink, tp=4 leaves its pair for PCIe
	 * (dp=2: 256 micro-batches; ring of 4 moves 2*3/4 of the buffer). */
	hw.nvlink_bytes_per_s = 450e9;
	hw.nvlink_domain_size = 2;
	e = estimate(&hw, &job, 2, 1, 1);
	expect_rel(e.t_tp_comm, n_ops * (LAT + bytes / 450e9), 1e-9);
	e = estimate(&hw, &job, 4, 1, 1);
	expect_rel(e.t_tp_comm, 256.0 * 32 * 8 * (LAT + 1.5 * bytes / 50e9), 1e-9);
}

Test(planner_time, dp_across_nodes_uses_the_network)
{
	struct rl_plan_hw hw = h100(2);
	struct rl_plan_job job = job8b();

	/* tp=8 on each node, dp=2 between the nodes: each GPU gets 1/8 of the
	 * node's 400 GB/s. Without the distributed optimizer, a ring
	 * all-reduce of the fp32 grads: 2*1/2 * 4 B * params at tp=8. Params
	 * at tp=8: layer (33,554,432 + 8,388,608 + 176,160,768) / 8 + 8,192 =
	 * 27,271,168, x32 = 872,677,376, + 2 * 16,032 * 4096 = 131,334,144,
	 * + 4,096 = 1,004,015,616. */
	job.distributed_optimizer = false;
	struct rl_plan_estimate e = estimate(&hw, &job, 8, 1, 1);
	cr_expect_eq(e.dp, 2);
	expect_rel(e.t_dp_comm, LAT + 1004015616.0 * 4 / (400e9 / 8), 1e-9);

	/* tp=2: a DP group of 8 spans both nodes too. */
	e = estimate(&hw, &job, 2, 1, 1);
	expect_rel(e.t_dp_comm, LAT + 2.0 * 7 / 8 * 4015263744.0 * 4 / (400e9 / 8), 1e-9);
}

Test(planner_time, pipeline_bubble)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();

	/* tp=1 pp=2 dp=4: m = 512 / 4 = 128 micro-batches per flush; the
	 * bubble is (2-1)/128 of compute (+ TP traffic, none here), plus 4
	 * sends per micro-batch of 4096 * 4096 * 2 B to the next stage, 4
	 * ranks away, inside the NVLink domain. */
	struct rl_plan_estimate e = estimate(&hw, &job, 1, 2, 1);
	double send = LAT + 4096.0 * 4096 * 2 / 450e9;
	expect_rel(e.t_pp_bubble, e.t_compute / 128 + 128 * 4 * send, 1e-9);
}

/* ---- mixtures of experts ------------------------------------------------ */

/* NeMo-RL's Qwen3-30B-A3B run: 8 nodes, tp=2 with SP, ep=8, etp=1, 64
 * prompts x 32 samples of 4096 tokens, 512 per update. */
static struct rl_plan_job job30b(void)
{
	struct rl_plan_job job = job8b();
	job.model = qwen3_30b_a3b;
	job.samples_per_step = 2048;
	job.generation_batch = 2048;
	job.max_new_tokens = 4096;
	job.sequence_parallel = true;
	job.expert = 8;
	return job;
}

/* Per layer: q 2048*4096 = 8,388,608, k and v 2048*512 = 1,048,576 each, o
 * 8,388,608: attention 18,874,368; router 2048*128 = 262,144; norms 4,096;
 * experts 128 * 3*2048*768 = 128 * 4,718,592 = 603,979,776: 623,120,384.
 * x48 = 29,909,778,432, + embedding and head 2 * 151936*2048 =
 * 622,329,856, + final norm 2,048: 30,532,110,336, the published "30.5B".
 * Active per token: the same but 8 experts (37,748,736) for 128: a layer
 * 56,889,344, x48 = 2,730,688,512, + head 311,164,928 + norm 2,048 =
 * 3,041,855,488 matmul parameters (with the embedding 3.35e9: "3.3B
 * activated"). */
#define A30B 3041855488.0

Test(planner_moe, parameters_and_memory_by_expert_parallel)
{
	struct rl_plan_hw hw = h100(8);
	struct rl_plan_job job = job30b();
	struct rl_plan_estimate e = estimate(&hw, &job, 2, 1, 1);

	cr_expect_eq(e.dp, 32);
	/* A rank at tp=2 ep=8: per layer attention 18,874,368 / 2 = 9,437,184,
	 * router and norms whole, 262,144 + 4,096: 9,703,424; its 128/8 = 16
	 * experts 75,497,472. x48: dense 465,764,352, experts 3,623,878,656;
	 * embedding and head 75,968 rows * 2048 = 155,582,464 each; norm
	 * 2,048: dense 776,931,328, all 4,400,809,984. */
	double dense = 776931328.0, experts = 3623878656.0;
	expect_bytes(e.weights, (dense + experts) * 2);
	expect_bytes(e.grads, (dense + experts) * 4);
	/* The distributed optimizer shards the dense part over dp*cp = 32 and
	 * the experts over the expert data parallel, 64 / (8*1) = 8. */
	expect_bytes(e.optimizer, dense * 12 / 32 + experts * 12 / 8);
	/* Activations per token and layer, tp=2 with SP: 8h = 16,384 / 2; split
	 * 4ad 16,384 + 4 kv d 2,048 + experts 6*8*768 = 36,864 + their inputs
	 * 2*8*2048 = 32,768 + lse 4*32 = 128 = 88,192, / 2 = 44,096: 52,288.
	 * x 4096 tokens x 48 layers = 10,280,239,104, + logits 4096 * 75,968
	 * * 4 = 1,244,659,712. */
	expect_bytes(e.activations, 10280239104.0 + 1244659712.0);
	/* KV: a tp=2 replica generates 2048 / 32 = 64 sequences, however large
	 * generation_batch: 64 * 4096 * 48 * 2 * (4/2 heads * 128) * 2 B =
	 * 12 GiB. */
	expect_bytes(e.kv_cache, 12 * GIB);
}

Test(planner_moe, compute_counts_the_active_experts)
{
	struct rl_plan_hw hw = h100(8);
	struct rl_plan_job job = job30b();
	struct rl_plan_estimate e = estimate(&hw, &job, 2, 1, 1);

	/* A forward per token: 2 * 3,041,855,488 + 48 layers * 2 * 4096 *
	 * (32*128) = 6,083,710,976 + 1,610,612,736 = 7,694,323,712 flops; 5
	 * forwards of 2048 * 4096 tokens on 64 GPUs at 0.4 * 989.4e12. A dense
	 * count of all 30.5e9 parameters would be ten times as much. */
	double per_token = 2 * A30B + 48.0 * 2 * 4096 * 4096;
	cr_expect_eq(per_token, 7694323712.0);
	expect_rel(e.t_compute, 2048.0 * 4096 * per_token * 5 / (64 * 0.4 * 989.4e12), 1e-9);
}

Test(planner_moe, all_to_all_and_gradients)
{
	struct rl_plan_hw hw = h100(8);
	struct rl_plan_job job = job30b();
	struct rl_plan_estimate e = estimate(&hw, &job, 2, 1, 1);

	/* 2048 / 32 = 64 micro-batches per rank; with SP a rank holds 4096 / 2
	 * = 2048 of a micro-batch's tokens and sends each to 8 experts: 2048 *
	 * 8 * 2048 * 2 B = 67,108,864 B, of which 7/8 leave it, over NVLink (the
	 * 8 ranks of an EP group are one node's). 8 all-to-alls per MoE layer
	 * (dispatch and combine, forward and backward, twice in the logprob
	 * passes), 48 layers. */
	double a2a = LAT + 7.0 / 8 * 67108864.0 / 450e9;
	expect_rel(e.t_ep_comm, 64.0 * 48 * 8 * a2a, 1e-9);

	/* 2048 / 512 = 4 updates. Dense gradients over dp*cp = 32, experts over
	 * 8; both groups span the 64 ranks, so each GPU gets 400e9 / 8 of the
	 * network: reduce-scatter of 4 B and all-gather of 2 B per parameter,
	 * n-1 shards of 1/n. */
	double dense = 776931328.0, experts = 3623878656.0, net = 400e9 / 8;
	double d = 2 * LAT + 31 * dense * 4 / 32 / net + 31 * dense * 2 / 32 / net;
	double x = 2 * LAT + 7 * experts * 4 / 8 / net + 7 * experts * 2 / 8 / net;
	expect_rel(e.t_dp_comm, 4 * (d + x), 1e-9);
	expect_rel(e.t_step,
	           e.t_generation + e.t_compute + e.t_tp_comm + e.t_ep_comm + e.t_pp_bubble +
	               e.t_dp_comm,
	           1e-12);
}

Test(planner_moe, decode_reads_the_experts_its_tokens_touch)
{
	struct rl_plan_hw hw = h100(8);
	struct rl_plan_job job = job30b();

	/* One sequence at a time, answers of 2048 after 2048-token prompts. An
	 * EP group of 8 ranks holds 8/2 = 4 tp=2 replicas: 4 tokens a step,
	 * each picking 8 of 128 experts, so an expert is left alone with
	 * probability (120/128)^4 = (15/16)^4 = 50,625/65,536. A rank reads its
	 * dense weights (465,764,352 + head 155,582,464 + norm 2,048 =
	 * 621,348,864) and 14,911/65,536 of its experts' 3,623,878,656, bf16;
	 * and the KV cache of its one sequence, mean context 2048 + 1024 =
	 * 3072: 3072 * 48 * 2 * 256 * 2 = 150,994,944 B. */
	job.generation_batch = 1;
	job.max_new_tokens = 2048;
	struct rl_plan_estimate e = estimate(&hw, &job, 2, 1, 1);
	expect_rel(e.basis.decode_weights, (621348864.0 + 3623878656.0 * 14911 / 65536) * 2, 1e-9);
	expect_bytes(e.basis.decode_kv, 150994944.0);
	cr_expect_eq(e.basis.rounds, 64); /* 64 sequences one after the other */

	/* A batch of 64: 256 tokens leave an expert alone with probability
	 * (15/16)^256 < 1e-7: every expert is read. */
	job.generation_batch = 64;
	e = estimate(&hw, &job, 2, 1, 1);
	expect_rel(e.basis.decode_weights, (621348864.0 + 3623878656.0) * 2, 1e-6);
}

Test(planner_moe, experts_must_divide)
{
	struct rl_plan_hw hw = h100(8);
	struct rl_plan_job job = job30b();
	struct rl_plan_estimate e;

	job.model.n_experts = 60; /* Qwen1.5-MoE's 60 over ep=8 */
	job.model.experts_per_token = 4;
	cr_expect_eq(rl_plan_estimate(&hw, &job, 2, 1, 1, &e), -1);
	cr_expect(strstr(e.why, "expert=8") && strstr(e.why, "60 experts"), "why: %s", e.why);
	job.model.experts_per_token = 61;
	cr_expect_eq(rl_plan_estimate(&hw, &job, 2, 1, 1, &e), -1);
	cr_expect(strstr(e.why, "experts_per_token 61") != NULL, "why: %s", e.why);
}

/* ---- the seed's 70B: pipeline 4 over nodes -------------------------------- */

Test(planner_time, llama70b_tp4_pp4_on_eight_nodes)
{
	struct rl_plan_hw hw = h100(8);
	struct rl_plan_job job = job8b();

	job.model = llama70b;
	job.samples_per_step = 2048;
	job.generation_batch = 2048;
	job.max_new_tokens = 4096;
	struct rl_plan_estimate e = estimate(&hw, &job, 4, 4, 1);
	cr_expect_eq(e.dp, 4);

	/* Compute: a forward per token is 2 * 69,503,033,344 matmul parameters
	 * (80 layers of 855,654,400, head 1,050,673,152, norm 8,192) + 80 * 2 *
	 * 4096 * 8192 = 144,374,775,808 flops. TP: 2048 / 4 = 512 micro-batches,
	 * 80/4 = 20 layers, 8 all-reduces of 4096 * 8192 * 2 B, a ring of 4
	 * moving 2*3/4 of it over NVLink. */
	double compute = 2048.0 * 4096 * 144374775808.0 * 5 / (64 * 0.4 * 989.4e12);
	double tp = 512.0 * 20 * 8 * (LAT + 1.5 * 4096.0 * 8192 * 2 / 450e9);
	expect_rel(e.t_compute, compute, 1e-9);
	expect_rel(e.t_tp_comm, tp, 1e-9);
	/* 1F1B: 512 / 4 = 128 micro-batches per update, so 3/128 of the
	 * pipelined work idles; 4 sends per micro-batch of 4096 * 8192 * 2 / 4
	 * B to the next stage, 64/4 = 16 ranks on, another node: 400e9 / 8
	 * each. */
	double send = LAT + 4096.0 * 8192 * 2 / 4 / (400e9 / 8);
	expect_rel(e.t_pp_bubble, 3.0 / 128 * (compute + tp) + 512 * 4 * send, 1e-9);
	cr_expect_eq(e.basis.flush, 128);

	/* Generation: 64 / 16 = 4 replicas of 512 sequences, all at once. A
	 * decode step goes through the 4 stages in turn, so a TP rank reads a
	 * quarter of every layer: (67,108,864 * 2 + 8,388,608 * 2 +
	 * 704,643,072) / 4 + 16,384 (norms whole) = 213,925,888 per layer, x80
	 * = 17,114,071,040, + head 32,064 * 8192 = 262,668,288, + norm 8,192:
	 * 17,376,747,520 parameters, bf16. */
	cr_expect_eq(e.basis.replicas, 4);
	cr_expect_eq(e.basis.batch, 512);
	expect_bytes(e.basis.decode_weights, 17376747520.0 * 2);
	/* KV: 512 sequences of mean context 2048, 80 layers, 2 of 8 KV heads. */
	expect_bytes(e.basis.decode_kv, 512.0 * 2048 * 80 * 2 * 256 * 2);
}

/* ---- the explanation of one estimate ------------------------------------ */

Test(planner_explain, parts_add_up_to_the_total)
{
	static const char *const parts[] = {"generation", "compute", "tp-comm", "ep-comm",
	                                    "pp-bubble",  "dp-comm", "refit"};
	struct rl_plan_hw hw = h100(8);
	struct rl_plan_job job = job30b();
	struct rl_plan_estimate e = estimate(&hw, &job, 2, 1, 1);
	char text[4096];
	double sum = 0, total = -1;

	rl_plan_explain_step(text, sizeof text, &hw, &job, &e);
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		char key[32];
		snprintf(key, sizeof key, "\n  %s ", parts[i]);
		const char *at = strstr(text, key);
		cr_assert_not_null(at, "no %s line:\n%s", parts[i], text);
		sum += atof(at + strlen(key));
	}
	const char *at = strstr(text, "\n  total ");
	cr_assert_not_null(at, "%s", text);
	total = atof(at + 9);
	/* two decimals each: the parts' sum is within 7 * 0.005 of the total */
	cr_expect(fabs(sum - total) <= 0.035, "parts %.2f, total %.2f:\n%s", sum, total, text);
	cr_expect(fabs(total - e.t_step) <= 0.005, "%s", text);
	cr_expect(strstr(text, "over ep=8 at 450 GB/s (NVLink)") != NULL, "%s", text);
	cr_expect(strstr(text, "memory per GPU: ") != NULL, "%s", text);
	cr_expect(strstr(text, "DOES NOT FIT") == NULL, "%s", text);

	/* truncated, never overrun */
	char small[24];
	memset(small, 'x', sizeof small);
	rl_plan_explain_step(small, sizeof small, &hw, &job, &e);
	cr_expect_eq(strlen(small), sizeof small - 1);
}

/* ---- validity ----------------------------------------------------------- */

Test(planner_valid, invalid_layouts_say_why)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate e;

	job.model.n_heads = 12; /* 12 heads, 4 KV heads */
	job.model.n_kv_heads = 4;
	cr_expect_eq(rl_plan_estimate(&hw, &job, 8, 1, 1, &e), -1);
	cr_expect(strstr(e.why, "tensor=8") && strstr(e.why, "12 attention heads"), "why: %s",
	          e.why);
	cr_expect(!e.fits);
	job.model.n_heads = 32;
	cr_expect_eq(rl_plan_estimate(&hw, &job, 8, 1, 1, &e), -1);
	cr_expect(strstr(e.why, "4 key/value heads"), "why: %s", e.why);

	job = job8b();
	job.model.n_layers = 30;
	cr_expect_eq(rl_plan_estimate(&hw, &job, 1, 4, 1, &e), -1);
	cr_expect(strstr(e.why, "30 layers") && strstr(e.why, "pipeline=4"), "why: %s", e.why);

	job = job8b();
	job.seq_len = 4100; /* not a multiple of 2*cp = 8 */
	cr_expect_eq(rl_plan_estimate(&hw, &job, 1, 1, 4, &e), -1);
	cr_expect(strstr(e.why, "2*cp"), "why: %s", e.why);

	job = job8b();
	job.global_batch = 12; /* dp * micro_batch = 8 */
	cr_expect_eq(rl_plan_estimate(&hw, &job, 1, 1, 1, &e), -1);
	cr_expect(strstr(e.why, "global_batch 12"), "why: %s", e.why);

	job = job8b();
	cr_expect_eq(rl_plan_estimate(&hw, &job, 3, 1, 1, &e), -1);
	cr_expect(strstr(e.why, "world 8"), "why: %s", e.why);

	job.expert = 16; /* world / pp = 8 cannot hold 16 experts ranks */
	cr_expect_eq(rl_plan_estimate(&hw, &job, 1, 1, 1, &e), -1);
	cr_expect(strstr(e.why, "expert"), "why: %s", e.why);

	job = job8b();
	hw.mfu = 0;
	cr_expect_eq(rl_plan_estimate(&hw, &job, 1, 1, 1, &e), -1);
	cr_expect(strstr(e.why, "mfu"), "why: %s", e.why);
}

Test(planner_valid, hbm_bandwidth_is_required)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate e, best;
	char explain[256], err[256];

	/* A hw filled by hand that forgot the bandwidth: decoding would take
	 * forever, so it is an input error, not an estimate. */
	hw.hbm_bytes_per_s = 0;
	cr_expect_eq(rl_plan_estimate(&hw, &job, 1, 1, 1, &e), -1);
	cr_expect(strstr(e.why, "hbm_bytes_per_s") != NULL, "why: %s", e.why);
	cr_expect_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), -1);
	cr_expect(strstr(err, "policy.parallel: auto: hw: hbm_bytes_per_s") == err, "err: %s", err);
	cr_expect_eq(explain[0], '\0');
	cr_expect_eq(best.tp, 0);
	hw.hbm_bytes_per_s = NAN;
	cr_expect_eq(rl_plan_estimate(&hw, &job, 1, 1, 1, &e), -1);

	/* A faster memory makes the same layout's generation, and only it,
	 * shorter. */
	hw.hbm_bytes_per_s = 3350e9;
	struct rl_plan_estimate slow = estimate(&hw, &job, 1, 1, 1);
	hw.hbm_bytes_per_s = 4800e9;
	e = estimate(&hw, &job, 1, 1, 1);
	cr_expect(e.t_generation < slow.t_generation);
	cr_expect_eq(e.t_compute, slow.t_compute);
	cr_expect_eq(e.total_mem, slow.total_mem);
}

/* ---- search ------------------------------------------------------------- */

/* The choice is the fastest fitting layout up to the 1% tie band: check
 * against every layout the test enumerates itself. */
static void expect_optimal(const struct rl_plan_hw *hw, const struct rl_plan_job *job,
                           const struct rl_plan_estimate *best)
{
	int world = hw->n_nodes * hw->gpus_per_node;
	for (int tp = 1; tp <= hw->gpus_per_node; tp++)
		for (int pp = 1; pp <= world; pp++)
			for (int cp = 1; cp <= world; cp++) {
				struct rl_plan_estimate e;
				if (hw->gpus_per_node % tp || world % (tp * pp * cp) ||
				    rl_plan_estimate(hw, job, tp, pp, cp, &e) || !e.fits)
					continue;
				cr_expect(best->t_step <= e.t_step * 1.01,
				          "tp=%d pp=%d cp=%d: %g s beats the choice's %g s", tp, pp,
				          cp, e.t_step, best->t_step);
			}
}

Test(planner_auto, llama8b_on_one_h100_node)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate best;
	char explain[2048], err[512];

	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), 0,
	             "%s", err);
	cr_expect(best.fits);
	cr_expect(best.total_mem <= 80 * GIB);
	cr_expect_eq(best.tp * best.pp * best.cp * best.dp, 8);
	cr_expect(best.tp <= hw.nvlink_domain_size);
	expect_optimal(&hw, &job, &best);

	/* The explanation: the choice first, then memory, time, runners-up. */
	char head[96];
	snprintf(head, sizeof head, "auto: tp=%d pp=%d cp=%d dp=%d: ", best.tp, best.pp, best.cp,
	         best.dp);
	cr_expect(strncmp(explain, head, strlen(head)) == 0, "explain:\n%s", explain);
	cr_expect(strstr(explain, "GiB of 80.0 GiB per GPU, est. ") != NULL, "%s", explain);
	cr_expect(strstr(explain, "s/step\n  memory: weights ") != NULL, "%s", explain);
	int runners = 0;
	for (const char *p = explain; (p = strstr(p, "runner-up:")); p++)
		runners++;
	cr_expect(runners >= 1 && runners <= 3, "%d runners-up:\n%s", runners, explain);
	cr_expect(strstr(explain, "did not fit") != NULL, "%s", explain);
}

Test(planner_auto, llama70b_on_one_node_does_not_fit)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate best;
	char explain[1024], err[1024];

	job.model = llama70b;
	job.activation_checkpointing = true;
	/* 70,553,706,496 parameters (80 layers of 855,654,400, 2 * 1,050,673,152
	 * vocab matrices, 8,192). On 8 GPUs a rank holds at least N/(tp*pp)
	 * parameters at 6 B plus 12 B over the dp*cp = 8/(tp*pp) others:
	 * 6N/k + 1.5N, least at k = 8: 2.25 N = 158,745,839,616 B, with the
	 * reserve 176,768,107,226 B = 164.6 GiB > 80 GiB. */
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), -1);
	cr_expect(strstr(err, "a GPU has 80.0 GiB") != NULL, "err: %s", err);
	const char *needs = strstr(err, "needs ");
	cr_assert_not_null(needs, "err: %s", err);
	double gib = atof(needs + 6);
	cr_expect(gib >= 164.6 && gib < 250, "needs %.1f GiB: %s", gib, err);
	cr_expect(strstr(err, "more GPUs") != NULL, "err: %s", err);
	/* both switches are on: not suggested */
	cr_expect(strstr(err, "distributed_optimizer") == NULL, "err: %s", err);
	cr_expect(strstr(err, "activation_checkpointing") == NULL, "err: %s", err);
	cr_expect(best.total_mem > 80 * GIB && best.tp * best.pp == 8);
}

Test(planner_auto, llama70b_on_four_nodes)
{
	struct rl_plan_hw hw = h100(4);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate best;
	char explain[2048], err[1024];

	job.model = llama70b;
	job.activation_checkpointing = true;
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), 0,
	             "%s", err);
	cr_expect(best.fits);
	cr_expect_eq(best.tp * best.pp * best.cp * best.dp, 32);
	cr_expect(best.tp <= 8);
	/* 2.25 N over 8 GPUs did not fit; at least 16 share the weights. */
	cr_expect(best.tp * best.pp >= 16, "%s", explain);
	expect_optimal(&hw, &job, &best);
}

Test(planner_auto, small_model_prefers_pure_data_parallel)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate best;
	char explain[2048], err[512];

	/* 1.24e9 parameters fit one GPU whole: TP only adds traffic. */
	job.model = llama1b;
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), 0,
	             "%s", err);
	cr_expect_eq(best.tp, 1, "%s", explain);
	cr_expect_eq(best.pp, 1, "%s", explain);
	expect_optimal(&hw, &job, &best);
}

Test(planner_auto, pcie_workstation_keeps_tp1)
{
	/* 4 x RTX A6000 without bridges: 48 GiB, 154.8 TFLOPS, 768 GB/s
	 * GDDR6, PCIe 4.0. */
	struct rl_plan_hw hw = {
	    .n_nodes = 1,
	    .gpus_per_node = 4,
	    .nvlink_domain_size = 1,
	    .gpu_mem_bytes = 48 * GIB,
	    .peak_flops = 154.8e12,
	    .hbm_bytes_per_s = 768e9,
	    .mfu = 0.4,
	    .pcie_bytes_per_s = 25e9,
	};
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate best, e;
	char explain[2048], err[512];

	job.model = llama1b;
	job.samples_per_step = job.global_batch = 64;
	job.generation_batch = 16;
	job.seq_len = 2048;
	job.max_new_tokens = 1024;
	cr_assert_eq(rl_plan_estimate(&hw, &job, 1, 1, 1, &e), 0, "%s", e.why);
	cr_assert(e.fits);
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), 0,
	             "%s", err);
	cr_expect_eq(best.tp, 1, "%s", explain);
	expect_optimal(&hw, &job, &best);
}

Test(planner_auto, nothing_fits_says_what_would_help)
{
	/* Two RTX 4090s (24 GiB, 1,008 GB/s) for an 8B model with both
	 * switches off. */
	struct rl_plan_hw hw = {
	    .n_nodes = 1,
	    .gpus_per_node = 2,
	    .nvlink_domain_size = 1,
	    .gpu_mem_bytes = 24 * GIB,
	    .peak_flops = 165.2e12,
	    .hbm_bytes_per_s = 1008e9,
	    .mfu = 0.4,
	    .pcie_bytes_per_s = 25e9,
	};
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate best;
	char explain[1024], err[1024];

	job.global_batch = job.samples_per_step = 64;
	job.distributed_optimizer = false;
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), -1);
	cr_expect(strncmp(err, "policy.parallel: auto: no layout fits", 37) == 0, "err: %s", err);
	cr_expect(strstr(err, "a GPU has 24.0 GiB") != NULL, "err: %s", err);
	cr_expect(strstr(err, "distributed_optimizer: true") != NULL, "err: %s", err);
	cr_expect_eq(explain[0], '\0');

	job.distributed_optimizer = true;
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), -1);
	cr_expect(strstr(err, "distributed_optimizer") == NULL, "err: %s", err);
}

Test(planner_auto, activation_bound_suggests_recompute)
{
	/* Llama-1B on one A100 40GB, 8 sequences of 8192 per micro-batch: the
	 * state is 18 B * 1.24e9 = 22 GB, the activations five times that.
	 * Recompute could close the gap (state and a small KV cache fit), so
	 * it is suggested; a smaller state could not come from the
	 * distributed optimizer on one GPU, nor SP without TP. */
	struct rl_plan_hw hw = {
	    .n_nodes = 1,
	    .gpus_per_node = 1,
	    .nvlink_domain_size = 1,
	    .gpu_mem_bytes = 40 * GIB,
	    .peak_flops = 312e12,
	    .hbm_bytes_per_s = 1555e9,
	    .mfu = 0.4,
	};
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate best;
	char explain[1024], err[1024];

	job.model = llama1b;
	job.global_batch = job.samples_per_step = 64;
	job.micro_batch = 8;
	job.generation_batch = 1;
	job.seq_len = 8192;
	job.distributed_optimizer = false;
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), -1);
	cr_expect(best.activations > best.kv_cache);
	cr_expect(strstr(err, "activation_checkpointing: true") != NULL, "err: %s", err);
	cr_expect(strstr(err, "train_micro_batch_size") != NULL, "err: %s", err);
	cr_expect(strstr(err, "distributed_optimizer") == NULL, "err: %s", err);
	cr_expect(strstr(err, "sequence_parallel") == NULL, "err: %s", err);
}

Test(planner_auto, no_valid_layout)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate best;
	char explain[256], err[512];

	hw.gpus_per_node = 2;
	hw.nvlink_domain_size = 2;
	/* tp=2: 33 heads; pp=2: 33 layers; cp=2: seq 4094 % 4; dp=2: batch 3 */
	job.model.n_heads = job.model.n_kv_heads = 33;
	job.model.n_layers = 33;
	job.seq_len = 4094;
	job.global_batch = job.samples_per_step = 3;
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), -1);
	cr_expect(strstr(err, "no valid layout for 2 GPUs") != NULL, "err: %s", err);
	cr_expect(strstr(err, "global_batch 3") != NULL, "err: %s", err);
}

Test(planner_auto, ties_go_to_the_smaller_layout_then_smaller_tp)
{
	/* Two GPUs. At mfu 1e-9 compute and generation dominate by orders of
	 * magnitude, and both are the same for tp=2 and cp=2: compute is
	 * flops / world; generation at tp=2 is one replica of 4 rounds of 16
	 * at half the step time, at cp=2 two replicas of 2 rounds each. Their
	 * communication differs by far less than 1%: a tie. tp=1 cp=1 must not
	 * fit so that the tie between the two decides. */
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate best, e11, e12, e21;
	char explain[2048], err[512];

	hw.gpus_per_node = 2;
	hw.nvlink_domain_size = 2;
	hw.mfu = 1e-9;
	job.model = llama1b;
	job.samples_per_step = job.global_batch = 64;
	job.generation_batch = 16;
	job.micro_batch = 8;
	hw.gpu_mem_bytes = 1e15;
	e11 = estimate(&hw, &job, 1, 1, 1);
	e12 = estimate(&hw, &job, 1, 1, 2);
	e21 = estimate(&hw, &job, 2, 1, 1);
	hw.gpu_mem_bytes = fmax(e12.total_mem, e21.total_mem);
	cr_assert(e11.total_mem > hw.gpu_mem_bytes, "tp=1 cp=1 would fit: no test");
	expect_rel(e12.t_step, e21.t_step, 1e-6);

	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), 0,
	             "%s", err);
	cr_expect(best.tp == 1 && best.cp == 2 && best.pp == 1, "%s", explain);
	cr_expect(strstr(explain, "within 1%, but larger tp\n") != NULL, "%s", explain);

	/* With memory for tp=1 cp=1, the smaller product wins the tie. */
	hw.gpu_mem_bytes = e11.total_mem;
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), 0,
	             "%s", err);
	cr_expect(best.tp == 1 && best.cp == 1 && best.pp == 1, "%s", explain);
	cr_expect(strstr(explain, "larger tp*pp*cp") != NULL, "%s", explain);
}

Test(planner_auto, explanation_is_truncated_safely)
{
	struct rl_plan_hw hw = h100(1);
	struct rl_plan_job job = job8b();
	struct rl_plan_estimate best;
	char explain[17], err[8];

	memset(explain, 'x', sizeof explain);
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, explain, sizeof explain, err, sizeof err), 0);
	cr_expect_eq(strlen(explain), sizeof explain - 1);
	cr_expect(strncmp(explain, "auto: tp=", 9) == 0);
	cr_assert_eq(rl_plan_auto(&hw, &job, &best, NULL, 0, NULL, 0), 0);
}

/* ---- GPU table ---------------------------------------------------------- */

Test(gpu_table, every_listed_device_id)
{
	/* pci.ids 2023.04.10 and NVIDIA's open-gpu-kernel-modules table */
	/* Memory bandwidth in GB/s as the data sheets print it: V100 900,
	 * A100 40GB 1,555, A100 SXM4 80GB 2,039, A100 PCIe 80GB 1,935, H100
	 * SXM 3.35 TB/s, PCIe 2 TB/s, NVL 3,938, H200 4.8 TB/s, L40S 864, RTX
	 * A6000 768, RTX 4090 1,008. */
	static const struct {
		unsigned id;
		double mem_gib, tflops, nvlink_gbps, hbm_gbps;
	} want[] = {
	    {0x1db1, 16, 125, 150, 900},     {0x1df5, 16, 125, 150, 900},
	    {0x1db5, 32, 125, 150, 900},     {0x1db8, 32, 125, 150, 900},
	    {0x20b0, 40, 312, 300, 1555},    {0x20b2, 80, 312, 300, 2039},
	    {0x20f1, 40, 312, 300, 1555},    {0x20b1, 40, 312, 300, 1555},
	    {0x20b5, 80, 312, 300, 1935},    {0x2330, 80, 989.4, 450, 3350},
	    {0x2331, 80, 756.5, 300, 2000},  {0x2321, 94, 835.5, 300, 3938},
	    {0x2335, 141, 989.4, 450, 4800}, {0x233b, 141, 835.5, 450, 4800},
	    {0x26b9, 48, 362.05, 0, 864},    {0x2230, 48, 154.8, 56.25, 768},
	    {0x2684, 24, 165.2, 0, 1008},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		const struct rl_gpu_spec *s = rl_gpu_spec_lookup(want[i].id, NULL);
		cr_assert_not_null(s, "0x%04x missing", want[i].id);
		cr_expect_eq(s->device_id, want[i].id);
		expect_rel(s->mem_bytes, want[i].mem_gib * GIB, 1e-12);
		expect_rel(s->bf16_flops, want[i].tflops * 1e12, 1e-12);
		expect_rel(s->nvlink_bytes_per_s, want[i].nvlink_gbps * 1e9, 1e-12);
		expect_rel(s->hbm_bytes_per_s, want[i].hbm_gbps * 1e9, 1e-12);
	}
}

Test(gpu_table, by_model_name)
{
	const struct rl_gpu_spec *s;

	/* GPUModel of the DGX-2H in hwloc's nvidiaDGX2.xml */
	s = rl_gpu_spec_lookup(0, "Tesla V100-SXM3-32GB-H");
	cr_assert_not_null(s);
	cr_expect_eq(s->device_id, 0x1db8);
	/* NVML's names; the longest match wins */
	cr_expect_eq(rl_gpu_spec_lookup(0, "NVIDIA H100 80GB HBM3")->device_id, 0x2330);
	cr_expect_eq(rl_gpu_spec_lookup(0, "NVIDIA H100 NVL")->device_id, 0x2321);
	cr_expect_eq(rl_gpu_spec_lookup(0, "NVIDIA H100 PCIe")->device_id, 0x2331);
	cr_expect_eq(rl_gpu_spec_lookup(0, "NVIDIA H200")->device_id, 0x2335);
	cr_expect_eq(rl_gpu_spec_lookup(0, "NVIDIA H200 NVL")->device_id, 0x233b);
	cr_expect_eq(rl_gpu_spec_lookup(0, "NVIDIA L40S")->device_id, 0x26b9);
	cr_expect_eq(rl_gpu_spec_lookup(0, "NVIDIA GeForce RTX 4090")->device_id, 0x2684);
	/* case-insensitive, and pci.ids' spelling */
	cr_expect_eq(rl_gpu_spec_lookup(0, "nvidia a100-pcie-40gb")->device_id, 0x20f1);
	cr_expect_eq(rl_gpu_spec_lookup(0, "GA100 [A100 SXM4 80GB]")->device_id, 0x20b2);
	/* the device id comes first */
	cr_expect_eq(rl_gpu_spec_lookup(0x2330, "NVIDIA L40S")->device_id, 0x2330);
	/* unknown */
	cr_expect_null(rl_gpu_spec_lookup(0, "Tesla K40m"));
	cr_expect_null(rl_gpu_spec_lookup(0x1234, NULL));
}
