/* A Hugging Face model directory's config.json, read into the numbers the
 * engine needs. Only decoder-only Llama / Qwen2 / Qwen3 and the Qwen2-MoE /
 * Qwen3-MoE mixtures of experts are accepted; any other architecture is
 * refused by name.
 * defines: enum rl_arch, struct rl_model_config, rl_model_config_load,
 * rl_model_config_from_json, struct rl_moe_config, rl_layer_is_moe,
 * rl_model_config_shape */
#ifndef RL_MODEL_HF_CONFIG_H
#define RL_MODEL_HF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/dtype.h"
#include "kernels/rope.h"
#include "topology/planner.h"

enum rl_arch { RL_ARCH_LLAMA, RL_ARCH_QWEN2, RL_ARCH_QWEN3, RL_ARCH_QWEN2_MOE, RL_ARCH_QWEN3_MOE };

#define RL_MAX_EOS      8
#define RL_MAX_MLP_ONLY 64

/* The mixture-of-experts layers (Qwen2-MoE, Qwen3-MoE): layer l is sparse
 * when it is not in mlp_only and (l + 1) is a multiple of sparse_step, as
 * transformers decides; the other layers have the dense MLP of
 * intermediate_size. n_experts 0: a dense model. */
struct rl_moe_config {
	int n_experts;    /* num_experts (num_local_experts) */
	int top_k;        /* num_experts_per_tok */
	int intermediate; /* moe_intermediate_size */
	/* shared_expert_intermediate_size: Qwen2-MoE's shared expert, an MLP
	 * every token goes through, scaled by sigmoid(shared_expert_gate);
	 * 0: none */
	int shared_intermediate;
	bool norm_topk_prob;  /* the k weights renormalised to sum to 1 */
	double aux_loss_coef; /* router_aux_loss_coef */
	int sparse_step;      /* decoder_sparse_step */
	int n_mlp_only;
	int mlp_only[RL_MAX_MLP_ONLY];
};

struct rl_model_config {
	enum rl_arch arch;
	char architecture[64]; /* as written: "LlamaForCausalLM", ... */
	int vocab_size;
	int hidden_size;
	int intermediate_size;
	int n_layers;
	int n_heads;
	int n_kv_heads; /* num_key_value_heads; absent: n_heads (Llama), 32 (Qwen2/3, as
	                   transformers) */
	int head_dim; /* "head_dim"; absent: hidden_size / n_heads, 128 for Qwen3 (as transformers)
	               */
	int max_position_embeddings;
	double rms_norm_eps;
	double rope_theta;
	struct rl_rope_scaling rope_scaling;
	bool tie_word_embeddings;
	bool qkv_bias;    /* Qwen2 always; Llama / Qwen3 when attention_bias */
	bool o_bias;      /* Llama / Qwen3 when attention_bias */
	bool mlp_bias;    /* Llama when mlp_bias */
	bool qk_norm;     /* Qwen3 */
	int bos_token_id; /* -1 when absent */
	int eos_token_ids[RL_MAX_EOS];
	int n_eos;
	enum rl_dtype torch_dtype; /* the dtype weights are saved in */
	struct rl_moe_config moe;
};

/* Whether layer l is a mixture of experts. */
bool rl_layer_is_moe(const struct rl_model_config *cfg, int l);

/* Reads DIR/config.json. On failure returns -1 with a message naming the
 * file and the key in err. */
int rl_model_config_load(struct rl_model_config *cfg, const char *dir, char *err, size_t errlen);
/* The same from JSON text; origin names it in messages. */
int rl_model_config_from_json(struct rl_model_config *cfg, const char *json, size_t len,
                              const char *origin, char *err, size_t errlen);
/* The sizes the planner and the layout rule (topology/model_fit.h) see. */
void rl_model_config_shape(const struct rl_model_config *cfg, struct rl_plan_model *out);

#endif
