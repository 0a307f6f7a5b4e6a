/* config.json as transformers 5 reads it for Llama, Qwen2 and Qwen3: the same
 * per-family defaults for absent keys, the rope parameters under either the
 * v4 names (rope_theta, rope_scaling) or the v5 ones (rope_parameters), and
 * a refusal, by name, of everything the engine does not implement rather
 * than a model that silently computes something else. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/json.h"
#include "runtime/model/hf_config.h"

#define SUPPORTED                                                                                  \
	"LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2MoeForCausalLM, "              \
	"Qwen3MoeForCausalLM"

static const struct {
	const char *architecture, *model_type;
	enum rl_arch arch;
} archs[] = {
    {"LlamaForCausalLM", "llama", RL_ARCH_LLAMA},
    {"Qwen2ForCausalLM", "qwen2", RL_ARCH_QWEN2},
    {"Qwen3ForCausalLM", "qwen3", RL_ARCH_QWEN3},
    {"Qwen2MoeForCausalLM", "qwen2_moe", RL_ARCH_QWEN2_MOE},
    {"Qwen3MoeForCausalLM", "qwen3_moe", RL_ARCH_QWEN3_MOE},
};
#define N_ARCHS (int)(sizeof archs / sizeof archs[0])

struct ctx {
	const char *origin;
	json_t *root;
	char *err;
	size_t errlen;
};

static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ctx *c, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(c->err, c->errlen, "%s: ", c->origin);

	if (n < 0 || (size_t)n >= c->errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* An absent key and null are the same for every optional key: transformers
 * then applies the class default. */
static json_t *get(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return json_is_null(v) ? NULL : v;
}

/* path names the key in messages ("rope_parameters.factor"). */
static int to_int(struct ctx *c, const json_t *v, const char *path, int *out)
{
	if (!json_is_integer(v))
		return fail(c, "key %s: expected an integer, got %s", path, rl_json_type_name(v));
	json_int_t x = json_integer_value(v);
	if (x < INT_MIN || x > INT_MAX)
		return fail(c, "key %s: %lld is out of range", path, (long long)x);
	*out = (int)x;
	return 0;
}

static int to_double(struct ctx *c, const json_t *v, const char *path, double *out)
{
	if (!json_is_number(v))
		return fail(c, "key %s: expected a number, got %s", path, rl_json_type_name(v));
	*out = json_number_value(v);
	return 0;
}

static int req_int(struct ctx *c, const char *key, int *out)
{
	json_t *v = get(c->root, key);

	if (!v)
		return fail(c, "key %s: missing", key);
	if (to_int(c, v, key, out))
		return -1;
	if (*out <= 0)
		return fail(c, "key %s: %d, must be positive", key, *out);
	return 0;
}

/* An absent key takes dflt; a present one must be at least min. */
static int opt_int(struct ctx *c, const char *key, int dflt, int min, int *out)
{
	json_t *v = get(c->root, key);

	*out = dflt;
	if (v && to_int(c, v, key, out))
		return -1;
	if (*out < min)
		return fail(c, "key %s: %d, must be %s", key, *out,
		            min == 1 ? "positive" : "non-negative");
	return 0;
}

static int opt_bool(struct ctx *c, const char *key, bool dflt, bool *out)
{
	json_t *v = get(c->root, key);

	*out = dflt;
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return fail(c, "key %s: expected true or false, got %s", key, rl_json_type_name(v));
	*out = json_is_true(v);
	return 0;
}

static int token_id(struct ctx *c, const json_t *v, const char *path, int *out)
{
	if (to_int(c, v, path, out))
		return -1;
	if (*out < 0)
		return fail(c, "key %s: token id %d is negative", path, *out);
	return 0;
}

static int parse_arch(struct ctx *c, struct rl_model_config *cfg)
{
	json_t *list = get(c->root, "architectures"), *mt = get(c->root, "model_type");
	const char *name = NULL;
	int i;

	if (mt && !json_is_string(mt))
		return fail(c, "key model_type: expected a string, got %s", rl_json_type_name(mt));
	if (list) {
		if (!json_is_array(list) || !json_array_size(list))
			return fail(c, "key architectures: expected a non-empty list of names");
		if (!json_is_string(json_array_get(list, 0)))
			return fail(c, "key architectures[0]: expected a string, got %s",
			            rl_json_type_name(json_array_get(list, 0)));
		name = json_string_value(json_array_get(list, 0));
		for (i = 0; i < N_ARCHS && strcmp(name, archs[i].architecture); i++)
			;
		if (i == N_ARCHS)
			return fail(
			    c, "architecture %s is not supported (supported: " SUPPORTED ")", name);
		/* transformers builds the model from model_type; both must agree. */
		if (mt && strcmp(json_string_value(mt), archs[i].model_type))
			return fail(c, "model_type %s does not match architecture %s",
			            json_string_value(mt), name);
	} else {
		/* A config saved without a model (config.save_pretrained) has no
		 * architectures; model_type still says which family it is. */
		if (!mt)
			return fail(c, "key architectures: missing, and no model_type either");
		for (i = 0; i < N_ARCHS && strcmp(json_string_value(mt), archs[i].model_type); i++)
			;
		if (i == N_ARCHS)
			return fail(
			    c,
			    "model_type %s is not supported (supported: llama, qwen2, qwen3, "
			    "qwen2_moe, qwen3_moe)",
			    json_string_value(mt));
	}
	cfg->arch = archs[i].arch;
	snprintf(cfg->architecture, sizeof cfg->architecture, "%s", archs[i].architecture);
	return 0;
}

/* transformers reads rope_scaling before rope_parameters, and a rope_theta
 * inside them before the top-level one; "type" is the v4 name of
 * "rope_type". */
static int parse_rope(struct ctx *c, struct rl_model_config *cfg)
{
	json_t *rs = get(c->root, "rope_scaling");
	const char *where = "rope_scaling";
	json_t *theta = get(c->root, "rope_theta"), *v, *type;
	const char *key;
	char path[96];

	if (!rs || (json_is_object(rs) && !json_object_size(rs))) {
		rs = get(c->root, "rope_parameters");
		where = "rope_parameters";
	}
	memset(&cfg->rope_scaling, 0, sizeof cfg->rope_scaling);
	cfg->rope_scaling.type = RL_ROPE_DEFAULT;
	cfg->rope_theta = 10000.0;
	if (rs && !json_is_object(rs))
		return fail(c, "key %s: expected an object, got %s", where, rl_json_type_name(rs));
	json_object_foreach(rs, key, v)
	{
		if (json_is_object(v))
			return fail(c,
			            "key %s.%s: rope parameters per layer type are not supported",
			            where, key);
	}
	if (rs && get(rs, "rope_theta")) {
		theta = get(rs, "rope_theta");
		snprintf(path, sizeof path, "%s.rope_theta", where);
	} else {
		snprintf(path, sizeof path, "rope_theta");
	}
	if (theta && to_double(c, theta, path, &cfg->rope_theta))
		return -1;
	if (!(cfg->rope_theta > 0) || !isfinite(cfg->rope_theta))
		return fail(c, "key %s: %g, must be positive", path, cfg->rope_theta);
	if ((v = get(rs, "partial_rotary_factor"))) {
		double f = 1.0;
		snprintf(path, sizeof path, "%s.partial_rotary_factor", where);
		if (to_double(c, v, path, &f))
			return -1;
		if (f != 1.0)
			return fail(c, "key %s: %g, only full rotary embeddings are supported",
			            path, f);
	}
	type = get(rs, "rope_type") ? get(rs, "rope_type") : get(rs, "type");
	if (!type)
		return 0;
	if (!json_is_string(type))
		return fail(c, "key %s.rope_type: expected a string, got %s", where,
		            rl_json_type_name(type));
	if (!strcmp(json_string_value(type), "default"))
		return 0;
	if (strcmp(json_string_value(type), "llama3"))
		return fail(c, "rope type %s is not supported (supported: default, llama3)",
		            json_string_value(type));

	struct rl_rope_scaling *s = &cfg->rope_scaling;
	static const char *const need[] = {"factor", "low_freq_factor", "high_freq_factor"};
	double *dst[] = {&s->factor, &s->low_freq_factor, &s->high_freq_factor};
	s->type = RL_ROPE_LLAMA3;
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s.%s", where, need[i]);
		if (!(v = get(rs, need[i])))
			return fail(c, "key %s: missing (rope type llama3 needs it)", path);
		if (to_double(c, v, path, dst[i]))
			return -1;
		if (!(*dst[i] > 0) || !isfinite(*dst[i]))
			return fail(c, "key %s: %g, must be positive", path, *dst[i]);
	}
	if (!(s->high_freq_factor > s->low_freq_factor))
		return fail(c,
		            "key %s.high_freq_factor: %g, must be larger than low_freq_factor %g",
		            where, s->high_freq_factor, s->low_freq_factor);
	/* transformers falls back to max_position_embeddings. */
	s->original_max_position_embeddings = cfg->max_position_embeddings;
	if ((v = get(rs, "original_max_position_embeddings"))) {
		snprintf(path, sizeof path, "%s.original_max_position_embeddings", where);
		if (to_int(c, v, path, &s->original_max_position_embeddings))
			return -1;
		if (s->original_max_position_embeddings <= 0)
			return fail(c, "key %s: must be positive", path);
	}
	return 0;
}

static int parse_tokens(struct ctx *c, struct rl_model_config *cfg)
{
	json_t *v = get(c->root, "bos_token_id");
	char path[48];

	cfg->bos_token_id = -1;
	if (v && token_id(c, v, "bos_token_id", &cfg->bos_token_id))
		return -1;
	cfg->n_eos = 0;
	if (!(v = get(c->root, "eos_token_id")))
		return 0;
	if (!json_is_array(v))
		return token_id(c, v, "eos_token_id", &cfg->eos_token_ids[cfg->n_eos++]);
	if (json_array_size(v) > RL_MAX_EOS)
		return fail(c, "key eos_token_id: %zu ids, at most %d supported",
		            json_array_size(v), RL_MAX_EOS);
	for (size_t i = 0; i < json_array_size(v); i++) {
		snprintf(path, sizeof path, "eos_token_id[%zu]", i);
		if (token_id(c, json_array_get(v, i), path, &cfg->eos_token_ids[cfg->n_eos++]))
			return -1;
	}
	return 0;
}

static int parse_dtype(struct ctx *c, struct rl_model_config *cfg)
{
	const char *key = get(c->root, "dtype") ? "dtype" : "torch_dtype";
	json_t *v = get(c->root, key);

	cfg->torch_dtype = RL_F32;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return fail(c, "key %s: expected a string, got %s", key, rl_json_type_name(v));
	const char *s = json_string_value(v);
	if (rl_dtype_from_torch_name(s, &cfg->torch_dtype))
		return fail(c, "key %s: %s is not supported (bfloat16, float16, float32)", key, s);
	return 0;
}

/* Qwen2 / Qwen3 slide only when use_sliding_window is set, sliding_window is a
 * number and some layer is a "sliding_attention" one (listed in layer_types,
 * or from max_window_layers on). A window that covers every position changes
 * nothing and is accepted. */
static int check_sliding(struct ctx *c, const struct rl_model_config *cfg)
{
	json_t *types = get(c->root, "layer_types"), *win = get(c->root, "sliding_window");
	bool use, sliding = false;
	int window, first;

	if (types) {
		if (!json_is_array(types))
			return fail(c, "key layer_types: expected a list, got %s",
			            rl_json_type_name(types));
		if (json_array_size(types) != (size_t)cfg->n_layers)
			return fail(c, "key layer_types: %zu entries for %d layers",
			            json_array_size(types), cfg->n_layers);
		for (size_t i = 0; i < json_array_size(types); i++) {
			const char *t = json_string_value(json_array_get(types, i));
			if (!t || (strcmp(t, "full_attention") && strcmp(t, "sliding_attention")))
				return fail(c, "key layer_types[%zu]: %s is not supported", i,
				            t ? t : "not a string");
			sliding |= !strcmp(t, "sliding_attention");
		}
	}
	if (cfg->arch == RL_ARCH_LLAMA)
		return 0;
	if (opt_bool(c, "use_sliding_window", false, &use))
		return -1;
	if (!use || !win)
		return 0;
	if (to_int(c, win, "sliding_window", &window))
		return -1;
	if (!types) {
		if (opt_int(c, "max_window_layers", 28, 0, &first))
			return -1;
		sliding = first < cfg->n_layers;
	}
	if (sliding && window < cfg->max_position_embeddings)
		return fail(
		    c,
		    "use_sliding_window with sliding_window %d < max_position_embeddings %d "
		    "is not supported",
		    window, cfg->max_position_embeddings);
	return 0;
}

/* The class defaults of transformers 5 for an absent num_key_value_heads. */
static int default_kv_heads(enum rl_arch arch)
{
	switch (arch) {
	case RL_ARCH_QWEN3_MOE:
		return 4;
	case RL_ARCH_QWEN2_MOE:
		return 16;
	default:
		return 32;
	}
}

static bool is_moe_arch(enum rl_arch arch)
{
	return arch == RL_ARCH_QWEN2_MOE || arch == RL_ARCH_QWEN3_MOE;
}

bool rl_layer_is_moe(const struct rl_model_config *cfg, int l)
{
	const struct rl_moe_config *e = &cfg->moe;

	if (e->n_experts <= 0 || (l + 1) % e->sparse_step)
		return false;
	for (int i = 0; i < e->n_mlp_only; i++)
		if (e->mlp_only[i] == l)
			return false;
	return true;
}

static int parse_mlp_only(struct ctx *c, struct rl_moe_config *e, int n_layers)
{
	json_t *list = get(c->root, "mlp_only_layers");

	if (!list)
		return 0;
	if (!json_is_array(list))
		return fail(c, "key mlp_only_layers: expected a list, got %s",
		            rl_json_type_name(list));
	if (json_array_size(list) > RL_MAX_MLP_ONLY)
		return fail(c, "key mlp_only_layers: %zu entries, at most %d are supported",
		            json_array_size(list), RL_MAX_MLP_ONLY);
	for (size_t i = 0; i < json_array_size(list); i++) {
		char path[48];
		int l;

		snprintf(path, sizeof path, "mlp_only_layers[%zu]", i);
		if (to_int(c, json_array_get(list, i), path, &l))
			return -1;
		if (l < 0 || l >= n_layers)
			return fail(c, "key %s: layer %d, the model has %d", path, l, n_layers);
		e->mlp_only[e->n_mlp_only++] = l;
	}
	return 0;
}

/* Qwen3MoeConfig calls num_experts num_local_experts when it writes
 * config.json; the hub's files say num_experts. Either, or both alike. */
static int parse_n_experts(struct ctx *c, int dflt, int *out)
{
	json_t *a = get(c->root, "num_experts"), *b = get(c->root, "num_local_experts");
	int x, y;

	if (a && b) {
		if (to_int(c, a, "num_experts", &x) || to_int(c, b, "num_local_experts", &y))
			return -1;
		if (x != y)
			return fail(c, "num_experts %d and num_local_experts %d disagree", x, y);
		*out = x;
		return x >= 1 ? 0 : fail(c, "key num_experts: %d, must be at least 1", x);
	}
	return opt_int(c, b ? "num_local_experts" : "num_experts", dflt, 1, out);
}

/* The class defaults of transformers 5 where a key is absent. */
static int parse_moe(struct ctx *c, struct rl_model_config *cfg)
{
	struct rl_moe_config *e = &cfg->moe;
	bool qwen2 = cfg->arch == RL_ARCH_QWEN2_MOE;
	json_t *v;

	memset(e, 0, sizeof *e);
	if (!is_moe_arch(cfg->arch))
		return 0;
	if (parse_n_experts(c, qwen2 ? 60 : 128, &e->n_experts) ||
	    opt_int(c, "num_experts_per_tok", qwen2 ? 4 : 8, 1, &e->top_k) ||
	    opt_int(c, "moe_intermediate_size", qwen2 ? 1408 : 768, 1, &e->intermediate) ||
	    opt_int(c, "decoder_sparse_step", 1, 1, &e->sparse_step) ||
	    opt_bool(c, "norm_topk_prob", false, &e->norm_topk_prob) ||
	    parse_mlp_only(c, e, cfg->n_layers))
		return -1;
	if (qwen2 &&
	    opt_int(c, "shared_expert_intermediate_size", 5632, 0, &e->shared_intermediate))
		return -1;
	e->aux_loss_coef = 0.001;
	if ((v = get(c->root, "router_aux_loss_coef")) &&
	    to_double(c, v, "router_aux_loss_coef", &e->aux_loss_coef))
		return -1;
	if (!(e->aux_loss_coef >= 0) || !isfinite(e->aux_loss_coef))
		return fail(c, "key router_aux_loss_coef: %g, must be at least 0",
		            e->aux_loss_coef);
	if (e->top_k > e->n_experts)
		return fail(c, "num_experts_per_tok %d is more than the %d experts", e->top_k,
		            e->n_experts);
	return 0;
}

/* The largest model a config.json may describe: 2^44 parameters (DeepSeek-V3
 * has 2^39.3) in at most 2^24 tensors. Below these, every element count and
 * byte count the model's tables derive from the sizes fits in 64 bits (and
 * the tensor count in an int), whatever a hostile file says. */
#define MAX_PARAMS  (INT64_C(1) << 44)
#define MAX_TENSORS (INT64_C(1) << 24)

/* An upper bound on the parameter count, or -1 when it passes MAX_PARAMS.
 * Called once num_attention_heads * head_dim is known to fit an int. */
static int64_t param_bound(const struct rl_model_config *cfg)
{
	int64_t d = cfg->hidden_size, hd = cfg->head_dim, v = cfg->vocab_size;
	int64_t q = (int64_t)cfg->n_heads * hd, kv = (int64_t)cfg->n_kv_heads * hd;
	int64_t experts = cfg->moe.n_experts, inter = cfg->intermediate_size;
	int64_t attn, dense, sparse, embed, layer, total;
	bool over = false;

	/* every sum of a few sizes fits; the products are checked */
	over |= __builtin_mul_overflow(2 * q + 2 * kv, d, &attn); /* q, k, v, o */
	over |=
	    __builtin_mul_overflow(3 * inter + 3 * (int64_t)cfg->moe.shared_intermediate + experts,
	                           d, &dense); /* the MLP, the shared expert, the router */
	over |= __builtin_mul_overflow(3 * (int64_t)cfg->moe.intermediate, d, &sparse);
	over |= __builtin_mul_overflow(sparse, experts, &sparse);
	over |= __builtin_mul_overflow(2 * v, d, &embed); /* the embedding and the head */
	over |= __builtin_add_overflow(attn, dense, &layer);
	over |= __builtin_add_overflow(layer, sparse, &layer);
	over |= __builtin_add_overflow(layer, q + 2 * kv + 2 * hd + 6 * d + 2 * inter, &layer);
	over |= __builtin_mul_overflow(layer, (int64_t)cfg->n_layers, &total);
	over |= __builtin_add_overflow(total, embed, &total);
	over |= __builtin_add_overflow(total, d, &total); /* the final norm */
	return over || total > MAX_PARAMS ? -1 : total;
}

static int check_sizes(struct ctx *c, const struct rl_model_config *cfg)
{
	if (cfg->n_heads % cfg->n_kv_heads)
		return fail(
		    c, "num_attention_heads %d is not a multiple of num_key_value_heads %d%s",
		    cfg->n_heads, cfg->n_kv_heads,
		    get(c->root, "num_key_value_heads") ? "" : " (the default when absent)");
	if (cfg->head_dim % 2)
		return fail(c, "head_dim %d is odd; rotary embeddings need it even", cfg->head_dim);
	if ((long long)cfg->n_heads * cfg->head_dim > INT_MAX)
		return fail(c, "num_attention_heads * head_dim is out of range");
	if (param_bound(cfg) < 0)
		return fail(c,
		            "vocab_size %d, hidden_size %d, intermediate_size %d, "
		            "num_hidden_layers %d and the expert sizes make more than 2^44 "
		            "parameters; no model is that large",
		            cfg->vocab_size, cfg->hidden_size, cfg->intermediate_size,
		            cfg->n_layers);
	/* the layers' parameters bound layers * experts: this cannot overflow */
	if ((int64_t)cfg->n_layers * (40 + 3 * (int64_t)cfg->moe.n_experts) > MAX_TENSORS)
		return fail(c, "num_hidden_layers %d with %d experts make more than 2^24 tensors",
		            cfg->n_layers, cfg->moe.n_experts);
	if (!(cfg->rms_norm_eps > 0) || !isfinite(cfg->rms_norm_eps))
		return fail(c, "key rms_norm_eps: %g, must be positive", cfg->rms_norm_eps);
	json_t *act = get(c->root, "hidden_act");
	if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu")))
		return fail(c, "key hidden_act: %s is not supported (silu)",
		            json_is_string(act) ? json_string_value(act) : rl_json_type_name(act));
	if (get(c->root, "quantization_config"))
		return fail(c, "quantization_config: quantized checkpoints are not supported");
	return 0;
}

static int parse(struct ctx *c, struct rl_model_config *cfg)
{
	bool qwen = false, attention_bias;
	json_t *v;

	memset(cfg, 0, sizeof *cfg);
	if (!json_is_object(c->root))
		return fail(c, "expected a JSON object, got %s", rl_json_type_name(c->root));
	if (parse_arch(c, cfg))
		return -1;
	qwen = cfg->arch != RL_ARCH_LLAMA;
	if (req_int(c, "vocab_size", &cfg->vocab_size) ||
	    req_int(c, "hidden_size", &cfg->hidden_size) ||
	    req_int(c, "intermediate_size", &cfg->intermediate_size) ||
	    req_int(c, "num_hidden_layers", &cfg->n_layers) ||
	    req_int(c, "num_attention_heads", &cfg->n_heads))
		return -1;
	/* The class defaults of transformers 5 for absent keys: Qwen2Config and
	 * Qwen3Config default num_key_value_heads to 32 (null: the head count),
	 * Qwen3Config head_dim to 128; max_position_embeddings 2048 / 32768. */
	v = json_object_get(c->root, "num_key_value_heads");
	if (opt_int(c, "num_key_value_heads",
	            qwen && !v ? default_kv_heads(cfg->arch) : cfg->n_heads, 1, &cfg->n_kv_heads))
		return -1;
	v = json_object_get(c->root, "head_dim");
	bool derived = !get(c->root, "head_dim") && !(cfg->arch == RL_ARCH_QWEN3 && !v);
	/* Llama checks this even with an explicit head_dim. */
	if ((derived || cfg->arch == RL_ARCH_LLAMA) && cfg->hidden_size % cfg->n_heads)
		return fail(c, "hidden_size %d is not a multiple of num_attention_heads %d",
		            cfg->hidden_size, cfg->n_heads);
	if (opt_int(c, "head_dim",
	            cfg->arch == RL_ARCH_QWEN3 && !v ? 128 : cfg->hidden_size / cfg->n_heads, 1,
	            &cfg->head_dim) ||
	    opt_int(c, "max_position_embeddings", qwen ? 32768 : 2048, 1,
	            &cfg->max_position_embeddings))
		return -1;
	cfg->rms_norm_eps = 1e-6;
	if ((v = get(c->root, "rms_norm_eps")) &&
	    to_double(c, v, "rms_norm_eps", &cfg->rms_norm_eps))
		return -1;
	if (parse_rope(c, cfg) ||
	    opt_bool(c, "tie_word_embeddings", false, &cfg->tie_word_embeddings))
		return -1;
	switch (cfg->arch) {
	case RL_ARCH_QWEN2_MOE:
		if (opt_bool(c, "qkv_bias", true, &cfg->qkv_bias))
			return -1;
		break;
	case RL_ARCH_QWEN3_MOE: /* below */
		break;
	case RL_ARCH_LLAMA:
		if (opt_bool(c, "attention_bias", false, &attention_bias) ||
		    opt_bool(c, "mlp_bias", false, &cfg->mlp_bias))
			return -1;
		cfg->qkv_bias = cfg->o_bias = attention_bias;
		break;
	case RL_ARCH_QWEN2:
		/* Hard-wired in Qwen2Attention; attention_bias is not read. */
		cfg->qkv_bias = true;
		break;
	case RL_ARCH_QWEN3:
		if (opt_bool(c, "attention_bias", false, &attention_bias))
			return -1;
		cfg->qkv_bias = cfg->o_bias = attention_bias;
		cfg->qk_norm = true;
		break;
	}
	if (cfg->arch == RL_ARCH_QWEN3_MOE) {
		if (opt_bool(c, "attention_bias", false, &attention_bias))
			return -1;
		cfg->qkv_bias = cfg->o_bias = attention_bias;
		cfg->qk_norm = true;
	}
	if (parse_moe(c, cfg))
		return -1;
	if (parse_tokens(c, cfg) || parse_dtype(c, cfg) || check_sizes(c, cfg) ||
	    check_sliding(c, cfg))
		return -1;
	return 0;
}

int rl_model_config_from_json(struct rl_model_config *cfg, const char *json, size_t len,
                              const char *origin, char *err, size_t errlen)
{
	json_error_t jerr;
	struct ctx c = {.origin = origin, .err = err, .errlen = errlen};

	c.root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!c.root) {
		snprintf(err, errlen, "%s: line %d: %s", origin, jerr.line, jerr.text);
		return -1;
	}
	int rc = parse(&c, cfg);
	json_decref(c.root);
	return rc;
}

int rl_model_config_load(struct rl_model_config *cfg, const char *dir, char *err, size_t errlen)
{
	char *path = NULL, *text = NULL;
	FILE *f = NULL;
	long size;
	int rc = -1;

	if (asprintf(&path, "%s/config.json", dir) < 0) {
		snprintf(err, errlen, "%s: out of memory", dir);
		return -1;
	}
	if (!(f = fopen(path, "rb"))) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
	} else if (fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
	} else if (size > (16 << 20)) {
		snprintf(err, errlen, "%s: larger than 16 MiB", path);
	} else if (!(text = malloc((size_t)size + 1))) {
		snprintf(err, errlen, "%s: out of memory", path);
	} else if (fread(text, 1, (size_t)size, f) != (size_t)size) {
		snprintf(err, errlen, "%s: short read", path);
	} else {
		rc = rl_model_config_from_json(cfg, text, (size_t)size, path, err, errlen);
	}
	if (f)
		fclose(f);
	free(text);
	free(path);
	return rc;
}

void rl_model_config_shape(const struct rl_model_config *mc, struct rl_plan_model *out)
{
	*out = (struct rl_plan_model){
	    .n_layers = mc->n_layers,
	    .hidden = mc->hidden_size,
	    .intermediate = mc->intermediate_size,
	    .n_heads = mc->n_heads,
	    .n_kv_heads = mc->n_kv_heads,
	    .head_dim = mc->head_dim,
	    .vocab = mc->vocab_size,
	    .tied_embeddings = mc->tie_word_embeddings,
	    .n_experts = mc->moe.n_experts,
	    .experts_per_token = mc->moe.top_k,
	    .expert_intermediate = mc->moe.intermediate,
	    .shared_intermediate = mc->moe.shared_intermediate,
	};
	for (int l = 0; mc->moe.n_experts > 0 && l < mc->n_layers; l++)
		out->n_moe_layers += rl_layer_is_moe(mc, l);
}
