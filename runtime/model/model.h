/* A decoder-only transformer (Llama, Qwen2, Qwen3) on one backend of the op
 * table: its parameters, the forward and backward pass over a batch of packed
 * sequences, and loading from / saving to a Hugging Face directory.
 *
 * Every parameter and every gradient lives in one flat fp32 buffer each, in
 * the order of the parameter table, so the optimizer, gradient zeroing and
 * the global grad norm are single calls over the whole model. A bf16 model
 * computes with a bf16 rounding of the parameters (rl_model_set_precision).
 * defines: struct rl_param, struct rl_model, struct rl_batch, struct rl_acts,
 * rl_model_load, rl_model_new_random, rl_model_weights_bytes,
 * rl_model_copy_weights, rl_model_use_weights, rl_model_save,
 * rl_model_free, rl_model_set_precision, rl_model_round_weights,
 * rl_model_set_invariant, rl_acts_new,
 * rl_acts_new_recompute, rl_acts_free, rl_model_forward, rl_model_logits,
 * rl_model_logprobs, rl_model_backward, rl_model_idle_forward,
 * rl_model_idle_backward, rl_layer_param_is_expert, rl_expert_name */
#ifndef RL_MODEL_MODEL_H
#define RL_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "runtime/model/hf_config.h"

/* Per-layer parameters, in the order transformers registers them (attention,
 * MLP, then the two norms), which is the order of the flat buffers and of
 * saved files, so that shards split where transformers splits them. A model
 * has only those its family and config.json ask for (biases, q/k norms). */
enum rl_layer_param {
	RL_P_Q,
	RL_P_Q_BIAS,
	RL_P_K,
	RL_P_K_BIAS,
	RL_P_V,
	RL_P_V_BIAS,
	RL_P_O,
	RL_P_O_BIAS,
	RL_P_Q_NORM,
	RL_P_K_NORM,
	RL_P_GATE,
	RL_P_GATE_BIAS,
	RL_P_UP,
	RL_P_UP_BIAS,
	RL_P_DOWN,
	RL_P_DOWN_BIAS,
	/* a mixture-of-experts layer's instead of gate/up/down: the router
	 * ("mlp.gate.weight", [experts, hidden]); the experts this rank
	 * holds, each kind a stack [local experts, rows, cols] in the flat
	 * buffer with one rl_param per expert (the first is the stack's);
	 * Qwen2-MoE's shared expert and its sigmoid gate ([1, hidden]) */
	RL_P_ROUTER,
	RL_P_EXPERT_GATE,
	RL_P_EXPERT_UP,
	RL_P_EXPERT_DOWN,
	RL_P_SHARED_GATE,
	RL_P_SHARED_UP,
	RL_P_SHARED_DOWN,
	RL_P_SHARED_EXPERT_GATE,
	RL_P_ATTN_NORM,
	RL_P_MLP_NORM,
	RL_P_PER_LAYER
};

/* One expert's own kinds (gate, up, down), of which a rank holds stacks. */
bool rl_layer_param_is_expert(enum rl_layer_param p);
/* Expert e of layer l's tensor of kind p, by its Hugging Face name
 * ("model.layers.3.mlp.experts.5.gate_proj.weight"), whichever rank
 * holds it. */
void rl_expert_name(char *out, size_t n, int layer, int e, enum rl_layer_param p);

struct rl_param {
	char name[96]; /* the Hugging Face tensor name */
	int ndim;
	int64_t shape[2]; /* what this rank holds */
	int64_t numel;
	int64_t offset; /* into the flat buffers, in floats */
	/* the weight the passes read (backend memory): master itself in
	 * fp32, the view's bf16 rounding of it in bf16 (rl_model.view) */
	float *data;
	float *master; /* flat + offset: what the optimizer updates, checkpoints keep */
	float *grad;   /* flat_grad + offset (backend memory) */
	/* How the whole tensor is cut over the tensor-parallel ranks: along
	 * split_dim (0 rows, 1 columns; -1: every rank holds all of it), rank
	 * r taking rl_split_range(full_shape[split_dim], size, r). */
	int split_dim;
	int64_t full_shape[2];
	/* another rank holds the same values and counts them in the global
	 * gradient norm */
	bool replica;
	/* the gradient is this rank's part of a sum over the tensor-parallel
	 * group (q/k norms, which see only this rank's heads; every norm and
	 * row-parallel bias under sequence parallelism) until
	 * rl_model_reduce_grads */
	bool partial_grad;
	/* the last pipeline stage's copy of a tied embedding: the first
	 * stage holds the original */
	bool tied_copy;
};

/* The collectives tensor parallelism needs, over the ranks that share each
 * layer, handed in by the caller so that the model library does not depend
 * on MPI (runtime/parallel/tp_group.c binds them to a comm). Each call is
 * collective over the group; buffers are backend memory, but for the
 * _host calls' (small values the host computes with); what names the call
 * site for the watchdog. */
struct rl_tp_group {
	void *ctx;
	int rank, size;
	void (*all_reduce)(void *ctx, float *buf, size_t n, const char *what);
	/* recv gets size x n floats, block r from rank r; send may be
	 * recv + rank x n */
	void (*all_gather)(void *ctx, const float *send, float *recv, size_t n, const char *what);
	/* send holds size x n floats; recv (not overlapping) gets the sum of
	 * block rank */
	void (*reduce_scatter)(void *ctx, const float *send, float *recv, size_t n,
	                       const char *what);
	void (*all_reduce_host)(void *ctx, float *buf, size_t n, const char *what);
	void (*all_gather_host)(void *ctx, const float *send, float *recv, size_t n,
	                        const char *what);
};

/* What pipeline parallelism needs from the ranks that hold the other
 * stages of the same model copy: the residual stream handed from stage to
 * stage, and the tied embedding's two copies kept equal. Each call is
 * collective over the pair or group it names; what names the call site. */
struct rl_pp_group {
	void *ctx;
	int rank, size; /* this stage, the stages */
	void (*send)(void *ctx, const float *buf, size_t n, int stage, const char *what);
	void (*recv)(void *ctx, float *buf, size_t n, int stage, const char *what);
	void (*broadcast_host)(void *ctx, float *buf, size_t n, int root, const char *what);
	/* sums over the first and the last stage (Megatron's embedding
	 * group), called with embedding_ctx; NULL on the stages between */
	void *embedding_ctx;
	void (*embedding_all_reduce)(void *ctx, float *buf, size_t n, const char *what);
};

/* What expert parallelism needs from the ranks that split the experts of
 * each mixture-of-experts layer (Megatron's EP group, folded onto the
 * dense ranks): tokens sent to the rank that holds their expert and the
 * results sent back. Collective over the group; the tokens are backend
 * memory, the counts host memory. */
struct rl_ep_group {
	void *ctx;
	int rank, size;
	/* send_counts[r] floats of send (in rank order) to rank r,
	 * recv_counts[r] floats from rank r into recv (host arrays) */
	void (*all_to_all_v)(void *ctx, const float *send, const size_t *send_counts, float *recv,
	                     const size_t *recv_counts, const char *what);
	/* count ints of send to each rank, count from each into recv (host) */
	void (*all_to_all_int)(void *ctx, const int32_t *send, int32_t *recv, size_t count,
	                       const char *what);
	/* the largest v of the group's ranks */
	int (*max_int)(void *ctx, int v, const char *what);
};

/* This rank's cut of the model. Tensor parallelism (Megatron's): q/k/v,
 * gate/up and the vocabulary split by rows (heads, GQA groups kept whole),
 * o/down by columns, the rest whole on every rank. Pipeline parallelism:
 * layers [first_layer, first_layer + n_layers) only; the embedding on the
 * first stage, the final norm and the LM head on the last, which with tied
 * embeddings holds a copy of the embedding. tp.size and pp.size 1: the
 * whole model. */
struct rl_model_shard {
	struct rl_tp_group tp;
	/* norms and residuals on this rank's rows of the sequence only */
	bool sequence_parallel;
	int n_heads, n_kv_heads, intermediate; /* this rank's */
	int vocab_start, vocab;                /* this rank's rows of embed / lm_head */
	int vocab_max;                         /* the most any rank holds */
	struct rl_pp_group pp;
	int first_layer, n_layers;
	/* context parallelism (the whole model on every rank of cp): each
	 * sequence padded to 2 x cp.size chunks, this rank's queries chunks
	 * cp.rank and 2 x cp.size - 1 - cp.rank (Megatron's balance of the
	 * causal mask), keys and values all-gathered */
	struct rl_tp_group cp;
	/* mixture of experts: this rank holds experts [first_expert,
	 * first_expert + n_experts) of every sparse layer (expert
	 * parallelism over ep; ep.size 1: all of them). tokens: every rank
	 * of this stage that routes tokens of its own (tensor-parallel ranks
	 * each route their share of the rows), over which the router's
	 * load-balancing statistics are summed: the auxiliary loss balances
	 * the whole batch (Qwen3's global-batch balancing). */
	struct rl_ep_group ep;
	int first_expert, n_experts;
	struct rl_tp_group tokens;
};

/* How rl_model_split cuts a model. first_stage_layers and
 * last_stage_layers: Megatron's uneven pipeline (0: the layers divided
 * evenly among the stages). */
struct rl_model_cut {
	struct rl_tp_group tp;
	bool sequence_parallel;
	struct rl_pp_group pp;
	int first_stage_layers, last_stage_layers;
	struct rl_tp_group cp;
	struct rl_ep_group ep;
	struct rl_tp_group tokens; /* see struct rl_model_shard; size 1 or 0: this rank alone */
};

struct rl_model {
	struct rl_model_config cfg; /* the whole model's */
	struct rl_model_shard shard;
	const struct rl_ops *ops;
	/* rl_model_set_invariant: while on, ops is &invariant_ops, the
	 * backend's table with its batch-invariant ops in place of the GEMMs
	 * and the fused logprobs, and the forward's attention is the paged
	 * op's; base_ops is the backend's own table, the one that
	 * says where the model's memory lives (&rl_ops_cpu: host memory)
	 * whichever table the passes use */
	const struct rl_ops *base_ops;
	struct rl_ops invariant_ops;
	bool invariant;
	char *dir; /* where it was loaded from: config.json and tokenizer come from here */

	int n_params;
	struct rl_param *params;
	/* NULL on the stages that do not hold them (pipeline parallelism) */
	struct rl_param *embed;
	struct rl_param *final_norm;
	struct rl_param *lm_head; /* == embed when the embeddings are tied (one stage) */
	/* layer[i * RL_P_PER_LAYER + p]; NULL where the model has no such tensor */
	struct rl_param **layer;

	/* mixture of experts: the routers' weights get no gradient
	 * (NeMo-RL's freeze_moe_router); the gradient still flows through
	 * them into the layers below */
	bool freeze_router;

	/* Collectives in flight over the model's buffers, handed in by the
	 * caller (runtime/parallel/zero.c's overlap; ctx NULL: none). While
	 * last_microbatch is set, the backward pass tells grads_ready, layer
	 * by layer, that every gradient from flat offset lo on is final for
	 * this update; settle waits for the weights in [lo, hi) (hi < 0: to
	 * the end) to have arrived: the forward pass asks for each layer's
	 * before it reads them, and every other reader of the weights
	 * (rl_model_settle) for all of them. */
	struct {
		void *ctx;
		void (*grads_ready)(void *ctx, int64_t lo);
		void (*settle)(void *ctx, int64_t lo, int64_t hi);
		bool last_microbatch;
	} overlap;

	/* policy.precision. RL_BF16: every pass reads the weights rounded to
	 * bf16 (view, refreshed from flat by rl_model_round_weights before
	 * each pass), while flat keeps the fp32 master weights the optimizer
	 * updates, so that updates smaller than a bf16 step are not lost;
	 * gradients are fp32 (flat_grad). Activations are fp32. */
	enum rl_dtype precision;
	float *view; /* RL_BF16: n_elems floats; NULL in fp32 */
	/* rl_model_use_weights' weights, which the passes read instead of
	 * the master's (the view is made from them in bf16); NULL: the own */
	const void *other;

	int64_t n_elems;
	/* under expert parallelism, the experts' tensors are the flat
	 * buffers' [expert_start, n_elems), after every dense tensor; without,
	 * expert_start is n_elems */
	int64_t expert_start;
	float *flat;
	float *flat_grad;
	float *inv_freq; /* head_dim / 2 rotary frequencies (backend memory) */
};

/* Packed sequences on the host: sequence s is tokens [cu_seqlens[s],
 * cu_seqlens[s + 1]). targets[t] is the token whose log-probability row t
 * predicts, or -1 where there is none (the last token of each sequence). */
struct rl_batch {
	int n_tokens;
	int n_seqs;
	const int32_t *ids;
	const int32_t *cu_seqlens; /* n_seqs + 1 */
	const int32_t *targets;    /* may be NULL for forward-only use */
};

/* What the forward pass keeps for the backward pass, sized for up to
 * max_tokens tokens; opaque apart from the final hidden states. */
struct rl_acts;

int rl_model_load(struct rl_model **out, const char *dir, const struct rl_ops *ops, char *err,
                  size_t errlen);
/* Writes DIR/config.json (the source's, unchanged), the weights in the dtype
 * config.json names, and copies the tokenizer and generation files, so that
 * transformers' from_pretrained(DIR) loads it. */
int rl_model_save(const struct rl_model *m, const char *dir, size_t max_shard_bytes, char *err,
                  size_t errlen);
/* A new model of shape cfg with random weights, as transformers initialises
 * one: every matrix ~ N(0, init_std^2), norm weights 1, biases 0, drawn from
 * seed (the same seed gives the same weights on every machine). name stands
 * for the directory in messages. */
int rl_model_new_random(struct rl_model **out, const struct rl_model_config *cfg, const char *name,
                        const struct rl_ops *ops, uint64_t seed, double init_std, char *err,
                        size_t errlen);
void rl_model_free(struct rl_model *m);
/* Computes from now on with weights of the given precision (RL_F32 or
 * RL_BF16; see rl_model.precision). After rl_model_split, which builds an
 * fp32 model. 0, or -1 with err (out of memory, a dtype other than these). */
int rl_model_set_precision(struct rl_model *m, enum rl_dtype precision, char *err, size_t errlen);
/* RL_BF16: the view made again from the master weights (or from
 * rl_model_use_weights' bf16 ones), which the optimizer, a resume or a
 * refit may have changed. The
 * passes call it themselves (forward, idle forward, a cache's first decode,
 * decode drain); nothing in fp32. */
int rl_model_round_weights(struct rl_model *m, char *err, size_t errlen);
/* Batch-invariant passes on (policy.generation.batch_invariant) or off:
 * while on, a token's logits and logprob have the same bits whatever else
 * is in its batch, so generation (runtime/generate) and the logprob pass
 * agree exactly; off, the backend's fastest GEMMs. Every layout is
 * covered: the experts' grouped GEMMs, context parallelism (the gathered
 * keys read through the paged op), tensor parallelism (generation folds
 * each rank's slice of the vocabulary and combines them as the logprob
 * pass does, rl_model_decode_logprobs_tp) as long as the collectives add
 * the same values in the same order in decode and in the pass: always
 * with two ranks, not with sequence parallelism over more (decode
 * all-reduces, the pass reduce-scatters). Returns the previous setting. */
bool rl_model_set_invariant(struct rl_model *m, bool on);
/* Another set of weights for the passes, such as the frozen reference
 * policy, held in the model's precision (bf16: 2 bytes a weight) and run
 * through the same model. rl_model_weights_bytes: the size of such a copy;
 * rl_model_copy_weights: the weights the passes read now (bf16: the master
 * rounded) into dst, that many bytes of backend memory;
 * rl_model_use_weights: from now on the passes read w, such a copy, in
 * place of the model's own (NULL: its own again). The master weights are
 * left alone. 0, or -1 with err. */
size_t rl_model_weights_bytes(const struct rl_model *m);
/* Waits for the weights in flat [lo, hi) (hi < 0: all) that collectives in
 * flight still write (rl_model.overlap); a no-op without any. Every reader
 * of the weights outside the forward pass calls it first. */
void rl_model_settle(const struct rl_model *m, int64_t lo, int64_t hi);
/* The flat offsets of layer l's tensors, the experts under expert
 * parallelism aside: [*lo, *hi). */
void rl_model_layer_span(const struct rl_model *m, int l, int64_t *lo, int64_t *hi);
int rl_model_copy_weights(const struct rl_model *m, void *dst, char *err, size_t errlen);
int rl_model_use_weights(struct rl_model *m, const void *w, char *err, size_t errlen);
/* All m->n_elems weights in host memory: m->flat itself on the CPU backend,
 * else a copy (NULL when it cannot be made). Hand it back with
 * rl_model_host_weights_release. */
const float *rl_model_host_weights(const struct rl_model *m);
void rl_model_host_weights_release(const struct rl_model *m, const float *host);

struct rl_acts *rl_acts_new(const struct rl_model *m, int max_tokens);
/* The same with activation checkpointing (Megatron's full recompute of
 * each layer, NeMo-RL's policy.activation_checkpointing): the forward pass
 * keeps each layer's input only, and the backward pass runs each layer's
 * forward again before its backward, so the activations of one layer are
 * held instead of all of them, for a second forward pass's time. The
 * gradients are the same bits. */
struct rl_acts *rl_acts_new_recompute(const struct rl_model *m, int max_tokens);
void rl_acts_free(const struct rl_model *m, struct rl_acts *a);

/* Runs the batch through every layer and the final norm. Under pipeline
 * parallelism, through this stage's layers: a stage after the first reads
 * its input from rl_acts_stage_input, where the caller put what the stage
 * before sent; a stage before the last leaves its output in
 * rl_acts_stage_output for the caller to send on. */
int rl_model_forward(struct rl_model *m, struct rl_acts *a, const struct rl_batch *b, char *err,
                     size_t errlen);
/* Pipeline parallelism: whether this rank holds the first / the last
 * stage, and what the stages hand each other for a batch of n_tokens
 * (floats of the residual stream, this rank's rows of it). */
bool rl_model_first_stage(const struct rl_model *m);
bool rl_model_last_stage(const struct rl_model *m);
size_t rl_model_stage_floats(const struct rl_model *m, int n_tokens);
float *rl_acts_stage_input(struct rl_acts *a);
float *rl_acts_stage_output(struct rl_acts *a);
/* The gradient handed between stages: a stage before the last finds in it
 * the gradient of its output (the caller put it there), and after
 * rl_model_backward a stage after the first holds in it the gradient of
 * its input, to send back. */
float *rl_acts_stage_grad(struct rl_acts *a);
/* After rl_model_forward: the full logits [n_tokens, vocab] into host memory. */
int rl_model_logits(struct rl_model *m, struct rl_acts *a, float *logits_host, char *err,
                    size_t errlen);
/* After rl_model_forward: logprob_host[t] = log p(targets[t] | tokens <= t)
 * with logits scaled by logit_scale, and 0 where targets[t] is -1; the
 * vocabulary is walked in chunks of vocab_chunk. */
int rl_model_logprobs(struct rl_model *m, struct rl_acts *a, float *logprob_host, float logit_scale,
                      int vocab_chunk, char *err, size_t errlen);
/* After rl_model_logprobs: adds to the gradients the backward pass of a loss
 * whose derivative with respect to logprob[t] is dlogprob_host[t]. On a
 * stage before the last (dlogprob_host NULL), of the output gradient in
 * rl_acts_stage_grad. */
int rl_model_backward(struct rl_model *m, struct rl_acts *a, const float *dlogprob_host, char *err,
                      size_t errlen);
int rl_model_zero_grad(struct rl_model *m);
/* Expert parallelism (ep_idle.c): a micro-batch this rank does not have
 * while other ranks of its ep group run theirs: each sparse layer with no
 * rows of its own, serving the others' tokens routed to its experts (whose
 * gradients get their terms). A rank with fewer micro-batches than the
 * group's most runs the difference as idle forward passes, each followed
 * by its idle backward pass when training, in step with the others'
 * passes. a: acts of the model, for the backward to find the forward's
 * routing. Nothing without expert parallelism. */
int rl_model_idle_forward(struct rl_model *m, struct rl_acts *a, char *err, size_t errlen);
int rl_model_idle_backward(struct rl_model *m, struct rl_acts *a, char *err, size_t errlen);
/* Mixture of experts: the coefficient the load-balancing loss enters the
 * backward pass with (config.json's router_aux_loss_coef unless set; 0
 * turns it off); and after rl_model_forward, the loss itself, coefficient
 * included, summed over this stage's sparse layers. */
void rl_acts_set_aux_loss_coef(struct rl_acts *a, float coef);
double rl_acts_aux_loss(const struct rl_model *m, const struct rl_acts *a);

/* split.c: tensor and pipeline parallelism. */
/* Rows [*start, *start + *len) of total that rank r of size takes: the first
 * total % size ranks one more. */
void rl_split_range(int64_t total, int size, int r, int64_t *start, int64_t *len);
/* Replaces *m (the whole model) by this rank's cut of it; *m is left
 * alone on failure (heads, kv heads or the MLP not divisible by the
 * tensor-parallel group, layers that do not split into the stages). */
int rl_model_split(struct rl_model **m, const struct rl_model_cut *cut, char *err, size_t errlen);
/* This rank's cut of the model in dir, read from its files part by part:
 * only the bytes of the rows or columns the rank holds are read, one
 * tensor at a time, so the host memory it takes is about the cut's, never
 * the whole model's. The same model as rl_model_load then rl_model_split. */
int rl_model_load_cut(struct rl_model **out, const char *dir, const struct rl_ops *ops,
                      const struct rl_model_cut *cut, char *err, size_t errlen);
/* After the last backward pass of an update: sums the partial gradients
 * (rl_param.partial_grad) over the tensor-parallel group, and the tied
 * embedding's over its two stages. Collective. What is left to sum is
 * the data-parallel ranks' (dp x cp) share, except for the experts under
 * expert parallelism: their holder has the sum over every token of the
 * ep group, and the rest is over the expert-data-parallel group (the
 * expert grid's "dp"). */
int rl_model_reduce_grads(struct rl_model *m, char *err, size_t errlen);
/* Parameter i of the whole model into full_host (full_shape), from every
 * rank's local_host (this rank's values of it, host memory). Collective. */
int rl_model_gather_param(const struct rl_model *m, int i, const float *local_host,
                          float *full_host, char *err, size_t errlen);
/* The other way, with no communication: this rank's cut of parameter i
 * (its backend memory) from the whole tensor full_host (full_shape). */
int rl_model_scatter_param(struct rl_model *m, int i, const float *full_host, char *err,
                           size_t errlen);

#endif
