/* The auto planner behind `policy.parallel: auto`: a memory model per GPU
 * and a simple time model, searched over tensor / pipeline / context sizes
 * (data parallel takes the rest of the world) for the layout that fits and
 * has the smallest estimated step time. Pure arithmetic on the numbers
 * below: no hwloc, no files, so every node computes the same answer.
 * defines: struct rl_gpu_spec, struct rl_plan_hw, struct rl_plan_model,
 * struct rl_plan_job, struct rl_plan_basis, struct rl_plan_estimate,
 * rl_gpu_spec_lookup, rl_plan_hw_from_topo, rl_plan_estimate, rl_plan_auto,
 * rl_plan_explain_step */
#ifndef RL_PLANNER_H
#define RL_PLANNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A known GPU: what hwloc cannot tell (memory and its bandwidth, peak, link speed). */
struct rl_gpu_spec {
	const char *name;
	unsigned device_id; /* PCI device id, vendor 0x10de */
	double mem_bytes;
	double bf16_flops;         /* dense peak */
	double hbm_bytes_per_s;    /* device memory bandwidth (GDDR on L40S and RTX cards) */
	double nvlink_bytes_per_s; /* per GPU, one direction; 0 for PCIe-only cards */
};

/* By PCI device id, else by a substring of hwloc's GPUModel; NULL when
 * unknown. */
const struct rl_gpu_spec *rl_gpu_spec_lookup(unsigned device_id, const char *model);

struct rl_plan_hw {
	int n_nodes;
	int gpus_per_node;      /* = tasks per node: one task per GPU */
	int nvlink_domain_size; /* GPUs per NVLink domain on a node; 1 without NVLink */
	double gpu_mem_bytes;
	double peak_flops;         /* per GPU */
	double hbm_bytes_per_s;    /* per GPU */
	double mfu;                /* the fraction of peak the compute estimate assumes */
	double nvlink_bytes_per_s; /* per GPU, inside a domain */
	double pcie_bytes_per_s;   /* per GPU, between GPUs of a node without NVLink */
	double net_bytes_per_s;    /* per node, between nodes (all its NICs) */
};

struct rl_topo;
/* What the planner assumes about a node's GPUs and links, from its
 * topology (topology.h, as discovery filled it). Returns 0, or -1 with err
 * when the GPU is not in the table (the planner cannot guess its memory). */
int rl_plan_hw_from_topo(const struct rl_topo *topo, int n_nodes, int tasks_per_node,
                         struct rl_plan_hw *hw, char *err, size_t errlen);

struct rl_plan_model {
	int n_layers;
	int hidden;
	int intermediate;
	int n_heads;
	int n_kv_heads;
	int head_dim;
	int vocab;
	bool tied_embeddings;
	/* A mixture of experts: n_moe_layers of the n_layers have, in place
	 * of the dense MLP, a router (hidden x n_experts) sending each token
	 * to experts_per_token of n_experts SwiGLU experts of
	 * expert_intermediate, and a shared expert of shared_intermediate
	 * that every token goes through (0: none). n_experts 0: dense. */
	int n_experts;
	int experts_per_token;
	int expert_intermediate;
	int shared_intermediate;
	int n_moe_layers;
};

struct rl_plan_job {
	struct rl_plan_model model;
	int64_t samples_per_step; /* num_prompts_per_step x num_generations_per_prompt */
	int64_t global_batch;     /* samples per optimizer update */
	int64_t micro_batch;      /* samples per forward/backward */
	int64_t generation_batch; /* sequences generated at once (KV cache) */
	int64_t seq_len;          /* max_total_sequence_length */
	int64_t max_new_tokens;
	int param_bytes; /* 2 for bf16 weights, 4 for fp32 */
	bool distributed_optimizer;
	bool activation_checkpointing;
	bool sequence_parallel;
	int expert; /* fixed by the config, not searched */
	int expert_tensor;
};

/* The numbers behind an estimate's times, for rl_plan_explain_step. */
struct rl_plan_basis {
	double tokens;          /* trained per step: samples x seq_len */
	double flops_per_token; /* one forward, by the active parameters */
	double forwards;        /* per token: train (3, 4 with recompute) + 2 logprob passes */
	double replicas;        /* generation replicas (tp x pp GPUs each) */
	double seqs;            /* sequences one replica generates */
	double batch;           /* of them at once */
	double rounds;          /* batches one after the other */
	double prompt;          /* tokens before the answer */
	double new_tokens;      /* every answer's length */
	double decode_weights;  /* bytes of weights a rank reads per decode step */
	double decode_kv;       /* bytes of KV cache a rank reads per decode step */
	double decode_step;     /* seconds per decode step, communication included */
	bool decode_compute_bound;
	double prefill;            /* seconds */
	double micro_batches;      /* per data-parallel rank per step */
	double flush;              /* micro-batches between pipeline flushes */
	double a2a_bytes;          /* one all-to-all of one micro-batch, per rank */
	double dense_grad_params;  /* per GPU, reduced over dp x cp */
	double expert_grad_params; /* per GPU, reduced over the expert data parallel */
	double updates;            /* optimizer updates per step */
	/* bytes/s per GPU on each group's link; the experts' data parallel
	 * spans the ranks dp does */
	double tp_bw, ep_bw, pp_bw, dp_bw;
};

struct rl_plan_estimate {
	int tp, pp, cp, dp;
	/* bytes per GPU */
	double weights, grads, optimizer, activations, kv_cache, total_mem;
	/* seconds per GRPO step */
	double t_generation, t_compute, t_tp_comm, t_ep_comm, t_pp_bubble, t_dp_comm, t_step;
	struct rl_plan_basis basis;
	bool fits;
	char why[160]; /* why it does not fit, or is not allowed */
};

/* Estimates one layout. Returns 0, or -1 (with why filled) when hw or job
 * holds an impossible number (no HBM bandwidth, a batch of 0, ...) or the
 * sizes are not a valid layout for this model and world (heads not
 * divisible by tp, layers by pp, world by tp pp cp, ...). */
int rl_plan_estimate(const struct rl_plan_hw *hw, const struct rl_plan_job *job, int tp, int pp,
                     int cp, struct rl_plan_estimate *out);

/* Searches every valid (tp, pp, cp) and picks the fitting one with the
 * smallest t_step (ties: smaller tp * pp * cp, then smaller tp). Writes a
 * few lines explaining the choice and the runners-up into explain. Returns
 * 0, or -1 with err saying what the smallest layout needs against what a
 * GPU has when nothing fits; *best then holds that leanest attempt (it is
 * zeroed when the inputs are bad or no layout is valid). */
int rl_plan_auto(const struct rl_plan_hw *hw, const struct rl_plan_job *job,
                 struct rl_plan_estimate *best, char *explain, size_t explain_len, char *err,
                 size_t errlen);

/* One estimate's step time part by part, each part on a line of its own
 * with what it assumes (rates, sizes, counts), the total, and its memory
 * per GPU; e is a filled estimate of hw and job. The part lines are
 * "  NAME  SECONDS s  ASSUMPTIONS" with NAME one of generation, compute,
 * tp-comm, ep-comm, pp-bubble, dp-comm, refit, then "  total  SECONDS s".
 * Truncates to len. */
void rl_plan_explain_step(char *buf, size_t len, const struct rl_plan_hw *hw,
                          const struct rl_plan_job *job, const struct rl_plan_estimate *e);

#endif
