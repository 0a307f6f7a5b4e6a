/* A decoder-only transformer (Llama, Qwen2, Qwen3) on one backend of the op
 * table: its parameters, the forward and backward pass over a batch of packed
 * sequences, and loading from / saving to a Hugging Face directory.
 *
 * Every parameter and every gradient lives in one flat fp32 buffer each, in
 * the order of the parameter table, so the optimizer, gradient zeroing and
 * the global grad norm are single calls over the whole model.
 * defines: struct rl_param, struct rl_model, struct rl_batch, struct rl_acts,
 * rl_model_load, rl_model_new_random, rl_model_swap_weights, rl_model_save,
 * rl_model_free, rl_acts_new, rl_acts_free, rl_model_forward, rl_model_logits,
 * rl_model_logprobs, rl_model_backward */
#ifndef RL_MODEL_MODEL_H
#define RL_MODEL_MODEL_H

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
	RL_P_ATTN_NORM,
	RL_P_MLP_NORM,
	RL_P_PER_LAYER
};

struct rl_param {
	char name[96]; /* the Hugging Face tensor name */
	int ndim;
	int64_t shape[2];
	int64_t numel;
	int64_t offset; /* into the flat buffers, in floats */
	float *data;    /* flat + offset (backend memory) */
	float *grad;    /* flat_grad + offset (backend memory) */
};

struct rl_model {
	struct rl_model_config cfg;
	const struct rl_ops *ops;
	char *dir; /* where it was loaded from: config.json and tokenizer come from here */

	int n_params;
	struct rl_param *params;
	struct rl_param *embed;
	struct rl_param *final_norm;
	struct rl_param *lm_head; /* == embed when the embeddings are tied */
	/* layer[i * RL_P_PER_LAYER + p]; NULL where the model has no such tensor */
	struct rl_param **layer;

	int64_t n_elems;
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
/* Exchanges the weights with *other, a buffer of m->n_elems floats on the
 * same backend, without copying: how the frozen reference policy is run
 * through the same model. */
void rl_model_swap_weights(struct rl_model *m, float **other);

struct rl_acts *rl_acts_new(const struct rl_model *m, int max_tokens);
void rl_acts_free(const struct rl_model *m, struct rl_acts *a);

/* Runs the batch through every layer and the final norm. */
int rl_model_forward(struct rl_model *m, struct rl_acts *a, const struct rl_batch *b, char *err,
                     size_t errlen);
/* After rl_model_forward: the full logits [n_tokens, vocab] into host memory. */
int rl_model_logits(struct rl_model *m, struct rl_acts *a, float *logits_host, char *err,
                    size_t errlen);
/* After rl_model_forward: logprob_host[t] = log p(targets[t] | tokens <= t)
 * with logits scaled by logit_scale, and 0 where targets[t] is -1; the
 * vocabulary is walked in chunks of vocab_chunk. */
int rl_model_logprobs(struct rl_model *m, struct rl_acts *a, float *logprob_host, float logit_scale,
                      int vocab_chunk, char *err, size_t errlen);
/* After rl_model_logprobs: adds to the gradients the backward pass of a loss
 * whose derivative with respect to logprob[t] is dlogprob_host[t]. */
int rl_model_backward(struct rl_model *m, struct rl_acts *a, const float *dlogprob_host, char *err,
                      size_t errlen);
int rl_model_zero_grad(struct rl_model *m);

#endif
