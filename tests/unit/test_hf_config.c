/* config.json: the published configs of Llama 3.2 1B, Llama 3.1 8B,
 * Qwen2.5 0.5B and Qwen3 0.6B (and the same re-saved by transformers 5, see
 * tests/fixtures/fixture_safetensors.py) parse to the numbers on their model
 * cards; transformers' defaults for absent keys; refusals by name. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/model/hf_config.h"

static char err[1024];

static char *fixture(const char *name)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *p = NULL;

	cr_assert_geq(asprintf(&p, "%s/tests/fixtures/hf_configs/%s", top, name), 0);
	return p;
}

#define expect_contains(text, needle)                                                              \
	cr_expect(strstr((text), (needle)) != NULL, "missing \"%s\" in:\n%s", (needle), (text))

static struct rl_model_config load(const char *name)
{
	struct rl_model_config c;
	char *dir = fixture(name);

	cr_assert_eq(rl_model_config_load(&c, dir, err, sizeof err), 0, "%s: %s", name, err);
	free(dir);
	return c;
}

static const char *const VERSIONS[] = {"", "-v5"};

Test(hf_config, llama_3_2_1b)
{
	for (int v = 0; v < 2; v++) {
		char name[64];
		snprintf(name, sizeof name, "llama-3.2-1b%s", VERSIONS[v]);
		struct rl_model_config c = load(name);

		cr_expect_eq(c.arch, RL_ARCH_LLAMA, "%s", name);
		cr_expect_str_eq(c.architecture, "LlamaForCausalLM");
		cr_expect_eq(c.vocab_size, 128256);
		cr_expect_eq(c.hidden_size, 2048);
		cr_expect_eq(c.intermediate_size, 8192);
		cr_expect_eq(c.n_layers, 16);
		cr_expect_eq(c.n_heads, 32);
		cr_expect_eq(c.n_kv_heads, 8);
		cr_expect_eq(c.head_dim, 64);
		cr_expect_eq(c.max_position_embeddings, 131072);
		cr_expect_eq(c.rms_norm_eps, 1e-5);
		cr_expect_eq(c.rope_theta, 500000.0, "%s", name);
		cr_expect_eq(c.rope_scaling.type, RL_ROPE_LLAMA3, "%s", name);
		cr_expect_eq(c.rope_scaling.factor, 32.0);
		cr_expect_eq(c.rope_scaling.low_freq_factor, 1.0);
		cr_expect_eq(c.rope_scaling.high_freq_factor, 4.0);
		cr_expect_eq(c.rope_scaling.original_max_position_embeddings, 8192);
		cr_expect(c.tie_word_embeddings);
		cr_expect(!c.qkv_bias && !c.o_bias && !c.mlp_bias && !c.qk_norm);
		cr_expect_eq(c.bos_token_id, 128000);
		cr_expect_eq(c.n_eos, 1);
		cr_expect_eq(c.eos_token_ids[0], 128001);
		cr_expect_eq(c.torch_dtype, RL_BF16, "%s", name);
	}
}

Test(hf_config, llama_3_1_8b)
{
	for (int v = 0; v < 2; v++) {
		char name[64];
		snprintf(name, sizeof name, "llama-3.1-8b%s", VERSIONS[v]);
		struct rl_model_config c = load(name);

		cr_expect_eq(c.arch, RL_ARCH_LLAMA);
		cr_expect_eq(c.vocab_size, 128256);
		cr_expect_eq(c.hidden_size, 4096);
		cr_expect_eq(c.intermediate_size, 14336);
		cr_expect_eq(c.n_layers, 32);
		cr_expect_eq(c.n_heads, 32);
		cr_expect_eq(c.n_kv_heads, 8);
		cr_expect_eq(c.head_dim, 128, "%s: no head_dim key, 4096 / 32", name);
		cr_expect_eq(c.max_position_embeddings, 131072);
		cr_expect_eq(c.rms_norm_eps, 1e-5);
		cr_expect_eq(c.rope_theta, 500000.0);
		cr_expect_eq(c.rope_scaling.type, RL_ROPE_LLAMA3);
		cr_expect_eq(c.rope_scaling.factor, 8.0);
		cr_expect_eq(c.rope_scaling.low_freq_factor, 1.0);
		cr_expect_eq(c.rope_scaling.high_freq_factor, 4.0);
		cr_expect_eq(c.rope_scaling.original_max_position_embeddings, 8192);
		cr_expect(!c.tie_word_embeddings);
		cr_expect(!c.qkv_bias && !c.o_bias && !c.mlp_bias && !c.qk_norm);
		cr_expect_eq(c.bos_token_id, 128000);
		cr_expect_eq(c.n_eos, 1);
		cr_expect_eq(c.eos_token_ids[0], 128001);
		cr_expect_eq(c.torch_dtype, RL_BF16);
	}
}

Test(hf_config, qwen2_5_0_5b)
{
	for (int v = 0; v < 2; v++) {
		char name[64];
		snprintf(name, sizeof name, "qwen2.5-0.5b%s", VERSIONS[v]);
		struct rl_model_config c = load(name);

		cr_expect_eq(c.arch, RL_ARCH_QWEN2);
		cr_expect_str_eq(c.architecture, "Qwen2ForCausalLM");
		cr_expect_eq(c.vocab_size, 151936);
		cr_expect_eq(c.hidden_size, 896);
		cr_expect_eq(c.intermediate_size, 4864);
		cr_expect_eq(c.n_layers, 24);
		cr_expect_eq(c.n_heads, 14);
		cr_expect_eq(c.n_kv_heads, 2);
		cr_expect_eq(c.head_dim, 64);
		cr_expect_eq(c.max_position_embeddings, 32768);
		cr_expect_eq(c.rms_norm_eps, 1e-6);
		cr_expect_eq(c.rope_theta, 1000000.0, "%s", name);
		cr_expect_eq(c.rope_scaling.type, RL_ROPE_DEFAULT);
		cr_expect(c.tie_word_embeddings);
		cr_expect(c.qkv_bias, "Qwen2 always has q/k/v biases");
		cr_expect(!c.o_bias && !c.mlp_bias && !c.qk_norm);
		cr_expect_eq(c.bos_token_id, 151643);
		cr_expect_eq(c.n_eos, 1);
		cr_expect_eq(c.eos_token_ids[0], 151643);
		cr_expect_eq(c.torch_dtype, RL_BF16);
	}
}

Test(hf_config, qwen3_0_6b)
{
	for (int v = 0; v < 2; v++) {
		char name[64];
		snprintf(name, sizeof name, "qwen3-0.6b%s", VERSIONS[v]);
		struct rl_model_config c = load(name);

		cr_expect_eq(c.arch, RL_ARCH_QWEN3);
		cr_expect_str_eq(c.architecture, "Qwen3ForCausalLM");
		cr_expect_eq(c.vocab_size, 151936);
		cr_expect_eq(c.hidden_size, 1024);
		cr_expect_eq(c.intermediate_size, 3072);
		cr_expect_eq(c.n_layers, 28);
		cr_expect_eq(c.n_heads, 16);
		cr_expect_eq(c.n_kv_heads, 8);
		cr_expect_eq(c.head_dim, 128, "%s: explicit, not 1024 / 16", name);
		cr_expect_eq(c.max_position_embeddings, 40960);
		cr_expect_eq(c.rms_norm_eps, 1e-6);
		cr_expect_eq(c.rope_theta, 1000000.0, "%s: an integer in the file", name);
		cr_expect_eq(c.rope_scaling.type, RL_ROPE_DEFAULT);
		cr_expect(c.tie_word_embeddings);
		cr_expect(c.qk_norm);
		cr_expect(!c.qkv_bias && !c.o_bias && !c.mlp_bias);
		cr_expect_eq(c.bos_token_id, 151643);
		cr_expect_eq(c.n_eos, 1);
		cr_expect_eq(c.eos_token_ids[0], 151645);
		cr_expect_eq(c.torch_dtype, RL_BF16);
	}
}

/* The hub's config.json of Qwen3-30B-A3B (num_experts), and the same as
 * transformers 5 writes it (num_local_experts, rope_parameters). */
Test(hf_config, qwen3_30b_a3b)
{
	for (int v = 0; v < 2; v++) {
		char name[64];
		snprintf(name, sizeof name, "qwen3-30b-a3b%s", VERSIONS[v]);
		struct rl_model_config c = load(name);

		cr_expect_eq(c.arch, RL_ARCH_QWEN3_MOE);
		cr_expect_str_eq(c.architecture, "Qwen3MoeForCausalLM");
		cr_expect_eq(c.hidden_size, 2048);
		cr_expect_eq(c.n_layers, 48);
		cr_expect_eq(c.n_heads, 32);
		cr_expect_eq(c.n_kv_heads, 4);
		cr_expect_eq(c.head_dim, 128);
		cr_expect(c.qk_norm);
		cr_expect(!c.qkv_bias && !c.o_bias);
		cr_expect_eq(c.moe.n_experts, 128, "%s", name);
		cr_expect_eq(c.moe.top_k, 8);
		cr_expect_eq(c.moe.intermediate, 768);
		cr_expect_eq(c.moe.shared_intermediate, 0);
		cr_expect(c.moe.norm_topk_prob);
		cr_expect_eq(c.moe.aux_loss_coef, 0.001);
		cr_expect(rl_layer_is_moe(&c, 0) && rl_layer_is_moe(&c, 47));
	}
}

static void expect_load_fails(const char *name, const char *msg)
{
	struct rl_model_config c;
	char *dir = fixture(name), want[2048];

	cr_expect_eq(rl_model_config_load(&c, dir, err, sizeof err), -1, "%s loaded", name);
	snprintf(want, sizeof want, "%s/config.json: %s", dir, msg);
	cr_expect_str_eq(err, want);
	free(dir);
}

Test(hf_config, bad_files)
{
	expect_load_fails("bad-mistral", "architecture MistralForCausalLM is not supported "
	                                 "(supported: LlamaForCausalLM, Qwen2ForCausalLM, "
	                                 "Qwen3ForCausalLM, Qwen2MoeForCausalLM, "
	                                 "Qwen3MoeForCausalLM)");
	expect_load_fails("bad-missing-hidden", "key hidden_size: missing");
	expect_load_fails("bad-wrong-type",
	                  "key num_attention_heads: expected an integer, got a string");
	expect_load_fails("no-such-model", "No such file or directory");
}

/* ---- inline configs ---- */

static int parse(struct rl_model_config *c, const char *json)
{
	return rl_model_config_from_json(c, json, strlen(json), "t/config.json", err, sizeof err);
}

static void expect_fails(const char *json, const char *msg)
{
	struct rl_model_config c;
	char want[1024];

	cr_expect_eq(parse(&c, json), -1, "accepted: %s", json);
	snprintf(want, sizeof want, "t/config.json: %s", msg);
	cr_expect_str_eq(err, want, "for %s", json);
}

#define SIZES                                                                                      \
	"\"vocab_size\": 100, \"hidden_size\": 64, \"intermediate_size\": 96, "                    \
	"\"num_hidden_layers\": 2, \"num_attention_heads\": 4"
#define LLAMA "{\"architectures\": [\"LlamaForCausalLM\"], " SIZES
#define QWEN2 "{\"architectures\": [\"Qwen2ForCausalLM\"], " SIZES
#define QWEN3 "{\"architectures\": [\"Qwen3ForCausalLM\"], " SIZES

/* What transformers 5's config classes fill in for absent keys. */
Test(hf_config, defaults_per_family)
{
	struct rl_model_config c;

	cr_assert_eq(parse(&c, LLAMA "}"), 0, "%s", err);
	cr_expect_eq(c.n_kv_heads, 4);
	cr_expect_eq(c.head_dim, 16);
	cr_expect_eq(c.max_position_embeddings, 2048);
	cr_expect_eq(c.rms_norm_eps, 1e-6);
	cr_expect_eq(c.rope_theta, 10000.0);
	cr_expect_eq(c.rope_scaling.type, RL_ROPE_DEFAULT);
	cr_expect(!c.tie_word_embeddings && !c.qkv_bias && !c.o_bias && !c.mlp_bias && !c.qk_norm);
	cr_expect_eq(c.bos_token_id, -1);
	cr_expect_eq(c.n_eos, 0);
	cr_expect_eq(c.torch_dtype, RL_F32);

	/* Qwen2Config / Qwen3Config default num_key_value_heads to 32 and
	 * Qwen3Config head_dim to 128; null means "the head count". */
	cr_assert_eq(parse(&c, "{\"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": 100, "
	                       "\"hidden_size\": 64, \"intermediate_size\": 96, "
	                       "\"num_hidden_layers\": 2, \"num_attention_heads\": 32}"),
	             0, "%s", err);
	cr_expect_eq(c.n_kv_heads, 32);
	cr_expect_eq(c.head_dim, 128);
	cr_expect_eq(c.max_position_embeddings, 32768);
	cr_expect(c.qk_norm && !c.qkv_bias && !c.o_bias && !c.tie_word_embeddings);
	cr_assert_eq(parse(&c, QWEN3 ", \"num_key_value_heads\": null, \"head_dim\": null}"), 0,
	             "%s", err);
	cr_expect_eq(c.n_kv_heads, 4);
	cr_expect_eq(c.head_dim, 16);
	expect_fails(QWEN2 "}", "num_attention_heads 4 is not a multiple of num_key_value_heads 32 "
	                        "(the default when absent)");

	/* Biases: attention_bias reaches q, k, v and o in Llama and Qwen3 only. */
	cr_assert_eq(parse(&c, LLAMA ", \"attention_bias\": true, \"mlp_bias\": true}"), 0);
	cr_expect(c.qkv_bias && c.o_bias && c.mlp_bias);
	cr_assert_eq(parse(&c, QWEN3 ", \"num_key_value_heads\": 2, \"attention_bias\": true, "
	                             "\"mlp_bias\": true}"),
	             0, "%s", err);
	cr_expect(c.qkv_bias && c.o_bias && !c.mlp_bias);
	cr_assert_eq(parse(&c, QWEN2 ", \"num_key_value_heads\": 2, \"attention_bias\": false}"), 0,
	             "%s", err);
	cr_expect(c.qkv_bias && !c.o_bias && !c.mlp_bias && !c.qk_norm);

	/* No architectures (config.save_pretrained without a model). */
	cr_assert_eq(
	    parse(&c, "{\"model_type\": \"qwen2\", \"num_key_value_heads\": 2, " SIZES "}"), 0,
	    "%s", err);
	cr_expect_eq(c.arch, RL_ARCH_QWEN2);
	cr_expect_str_eq(c.architecture, "Qwen2ForCausalLM");
}

Test(hf_config, tokens_and_dtype)
{
	struct rl_model_config c;

	cr_assert_eq(parse(&c, LLAMA ", \"bos_token_id\": 7, \"eos_token_id\": [1, 2, 3]}"), 0);
	cr_expect_eq(c.bos_token_id, 7);
	cr_expect_eq(c.n_eos, 3);
	cr_expect(c.eos_token_ids[0] == 1 && c.eos_token_ids[1] == 2 && c.eos_token_ids[2] == 3);
	cr_assert_eq(parse(&c, LLAMA ", \"bos_token_id\": null, \"eos_token_id\": null}"), 0);
	cr_expect_eq(c.bos_token_id, -1);
	cr_expect_eq(c.n_eos, 0);
	expect_fails(LLAMA ", \"eos_token_id\": [1,2,3,4,5,6,7,8,9]}",
	             "key eos_token_id: 9 ids, at most 8 supported");
	expect_fails(LLAMA ", \"eos_token_id\": [1, \"2\"]}",
	             "key eos_token_id[1]: expected an integer, got a string");
	expect_fails(LLAMA ", \"bos_token_id\": -1}", "key bos_token_id: token id -1 is negative");

	cr_assert_eq(parse(&c, LLAMA ", \"torch_dtype\": \"float16\"}"), 0);
	cr_expect_eq(c.torch_dtype, RL_F16);
	cr_assert_eq(parse(&c, LLAMA ", \"dtype\": \"float32\", \"torch_dtype\": \"bfloat16\"}"),
	             0);
	cr_expect_eq(c.torch_dtype, RL_F32, "dtype (transformers 5) wins over torch_dtype");
	cr_assert_eq(parse(&c, LLAMA ", \"dtype\": \"bfloat16\"}"), 0);
	cr_expect_eq(c.torch_dtype, RL_BF16);
	expect_fails(LLAMA ", \"torch_dtype\": \"float64\"}",
	             "key torch_dtype: float64 is not supported (bfloat16, float16, float32)");
}

Test(hf_config, rope_variants)
{
	struct rl_model_config c;

	/* transformers 5: everything inside rope_parameters. */
	cr_assert_eq(parse(&c, LLAMA ", \"max_position_embeddings\": 4096, \"rope_parameters\": "
	                             "{\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, "
	                             "\"factor\": 8.0, \"low_freq_factor\": 1.0, "
	                             "\"high_freq_factor\": 4.0}}"),
	             0, "%s", err);
	cr_expect_eq(c.rope_theta, 500000.0);
	cr_expect_eq(c.rope_scaling.type, RL_ROPE_LLAMA3);
	cr_expect_eq(c.rope_scaling.original_max_position_embeddings, 4096,
	             "absent: max_position_embeddings, as transformers does");
	/* The v4 "type" key, and rope_scaling before rope_parameters. */
	cr_assert_eq(parse(&c, LLAMA ", \"rope_theta\": 1e6, \"rope_scaling\": {\"type\": "
	                             "\"llama3\", \"factor\": 2, \"low_freq_factor\": 1, "
	                             "\"high_freq_factor\": 2, "
	                             "\"original_max_position_embeddings\": 1024}, "
	                             "\"rope_parameters\": {\"rope_type\": \"default\"}}"),
	             0, "%s", err);
	cr_expect_eq(c.rope_theta, 1e6);
	cr_expect_eq(c.rope_scaling.type, RL_ROPE_LLAMA3);
	cr_expect_eq(c.rope_scaling.factor, 2.0);
	cr_expect_eq(c.rope_scaling.original_max_position_embeddings, 1024);
	/* A rope_theta inside the parameters beats the top-level one. */
	cr_assert_eq(parse(&c, LLAMA ", \"rope_theta\": 5.0, \"rope_parameters\": "
	                             "{\"rope_type\": \"default\", \"rope_theta\": 1234}}"),
	             0, "%s", err);
	cr_expect_eq(c.rope_theta, 1234.0);
	cr_expect_eq(c.rope_scaling.type, RL_ROPE_DEFAULT);
	cr_assert_eq(parse(&c, LLAMA ", \"rope_theta\": 5.0, \"rope_scaling\": null}"), 0);
	cr_expect_eq(c.rope_theta, 5.0);

	expect_fails(LLAMA ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}}",
	             "rope type linear is not supported (supported: default, llama3)");
	expect_fails(LLAMA ", \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2.0}}",
	             "rope type dynamic is not supported (supported: default, llama3)");
	expect_fails(LLAMA ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}",
	             "rope type yarn is not supported (supported: default, llama3)");
	expect_fails(LLAMA ", \"rope_parameters\": {\"rope_type\": \"llama3\", "
	                   "\"low_freq_factor\": 1, \"high_freq_factor\": 4}}",
	             "key rope_parameters.factor: missing (rope type llama3 needs it)");
	expect_fails(LLAMA ", \"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8, "
	                   "\"low_freq_factor\": 4, \"high_freq_factor\": 4}}",
	             "key rope_parameters.high_freq_factor: 4, must be larger than "
	             "low_freq_factor 4");
	expect_fails(LLAMA ", \"rope_parameters\": {\"rope_type\": \"default\", "
	                   "\"partial_rotary_factor\": 0.5}}",
	             "key rope_parameters.partial_rotary_factor: 0.5, only full rotary "
	             "embeddings are supported");
	expect_fails(LLAMA ", \"rope_parameters\": {\"full_attention\": {\"rope_type\": "
	                   "\"default\"}}}",
	             "key rope_parameters.full_attention: rope parameters per layer type are not "
	             "supported");
	expect_fails(LLAMA ", \"rope_theta\": -1}", "key rope_theta: -1, must be positive");
	expect_fails(LLAMA ", \"rope_scaling\": \"llama3\"}",
	             "key rope_scaling: expected an object, got a string");
}

Test(hf_config, sanity_checks)
{
	struct rl_model_config c;

	expect_fails("{\"architectures\": [\"MistralForCausalLM\"], " SIZES "}",
	             "architecture MistralForCausalLM is not supported (supported: "
	             "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2MoeForCausalLM, "
	             "Qwen3MoeForCausalLM)");
	expect_fails("{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"qwen2\", " SIZES
	             "}",
	             "model_type qwen2 does not match architecture LlamaForCausalLM");
	expect_fails(
	    "{\"model_type\": \"gemma\", " SIZES "}",
	    "model_type gemma is not supported (supported: llama, qwen2, qwen3, qwen2_moe, "
	    "qwen3_moe)");
	expect_fails("{" SIZES "}", "key architectures: missing, and no model_type either");
	expect_fails("{\"architectures\": [], " SIZES "}",
	             "key architectures: expected a non-empty list of names");
	expect_fails(LLAMA ", \"num_key_value_heads\": 3}",
	             "num_attention_heads 4 is not a multiple of num_key_value_heads 3");
	expect_fails(LLAMA ", \"head_dim\": 15}",
	             "head_dim 15 is odd; rotary embeddings need it even");
	expect_fails("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, "
	             "\"hidden_size\": 66, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
	             "\"num_attention_heads\": 4}",
	             "hidden_size 66 is not a multiple of num_attention_heads 4");
	/* Qwen3 with an explicit head_dim needs no such divisibility. */
	cr_expect_eq(parse(&c, "{\"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": 100, "
	                       "\"hidden_size\": 66, \"intermediate_size\": 96, "
	                       "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
	                       "\"num_key_value_heads\": 2, \"head_dim\": 32}"),
	             0, "%s", err);
	expect_fails("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, "
	             "\"hidden_size\": -64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
	             "\"num_attention_heads\": 4}",
	             "key hidden_size: -64, must be positive");
	expect_fails("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100.5, "
	             "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
	             "\"num_attention_heads\": 4}",
	             "key vocab_size: expected an integer, got a number with a fraction");
	expect_fails("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, "
	             "\"hidden_size\": 64, \"intermediate_size\": 96, "
	             "\"num_hidden_layers\": 99999999999, \"num_attention_heads\": 4}",
	             "key num_hidden_layers: 99999999999 is out of range");
	expect_fails(LLAMA ", \"tie_word_embeddings\": \"yes\"}",
	             "key tie_word_embeddings: expected true or false, got a string");
	expect_fails(LLAMA ", \"rms_norm_eps\": 0}", "key rms_norm_eps: 0, must be positive");
	expect_fails(LLAMA ", \"hidden_act\": \"gelu\"}",
	             "key hidden_act: gelu is not supported (silu)");
	expect_fails(LLAMA ", \"quantization_config\": {\"quant_method\": \"gptq\"}}",
	             "quantization_config: quantized checkpoints are not supported");
	expect_fails("[1]", "expected a JSON object, got an array");
	expect_fails(LLAMA ", \"vocab_size\": 5}",
	             "line 1: duplicate object key near '\"vocab_size\"'");

	struct rl_model_config d;
	cr_expect_eq(parse(&d, "{\"architectures\": [\"LlamaForCausalLM\"],"), -1);
	expect_contains(err, "t/config.json: line 1:");
}

/* Sizes from the file are bounded before the model's tables are sized from
 * them: products that pass 2^44 parameters or 2^24 tensors (or int64) are
 * refused; the largest real dense model is not. */
Test(hf_config, sizes_bounded)
{
	struct rl_model_config c;

	/* the embedding alone: 2 * (2^31 - 1) * (2^31 - 8) ~ 2^63 */
	expect_fails("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 2147483647, "
	             "\"hidden_size\": 2147483640, \"intermediate_size\": 96, "
	             "\"num_hidden_layers\": 2, \"num_attention_heads\": 4}",
	             "vocab_size 2147483647, hidden_size 2147483640, intermediate_size 96, "
	             "num_hidden_layers 2 and the expert sizes make more than 2^44 parameters; no "
	             "model is that large");
	/* 2^31 - 1 small layers of 35616 parameters each: 2^46 */
	expect_fails("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, "
	             "\"hidden_size\": 64, \"intermediate_size\": 96, "
	             "\"num_hidden_layers\": 2147483647, \"num_attention_heads\": 4}",
	             "vocab_size 100, hidden_size 64, intermediate_size 96, num_hidden_layers "
	             "2147483647 and the expert sizes make more than 2^44 parameters; no model "
	             "is that large");
	/* experts: 3 * (2^31 - 1) * 64 * (2^31 - 1) passes int64 */
	expect_fails("{\"architectures\": [\"Qwen3MoeForCausalLM\"], " SIZES
	             ", \"num_experts\": 2147483647, \"num_experts_per_tok\": 1, "
	             "\"moe_intermediate_size\": 2147483647}",
	             "vocab_size 100, hidden_size 64, intermediate_size 96, num_hidden_layers 2 "
	             "and the expert sizes make more than 2^44 parameters; no model is that "
	             "large");
	/* 10^6 layers of 8 wide: few parameters, 4 * 10^7 tensors */
	expect_fails("{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 100, "
	             "\"hidden_size\": 8, \"intermediate_size\": 8, "
	             "\"num_hidden_layers\": 1000000, \"num_attention_heads\": 4}",
	             "num_hidden_layers 1000000 with 0 experts make more than 2^24 tensors");
	/* Llama 3.1 405B's published config.json sizes */
	cr_expect_eq(parse(&c, "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": "
	                       "128256, \"hidden_size\": 16384, \"intermediate_size\": 53248, "
	                       "\"num_hidden_layers\": 126, \"num_attention_heads\": 128, "
	                       "\"num_key_value_heads\": 8}"),
	             0, "%s", err);
}

Test(hf_config, sliding_window)
{
	struct rl_model_config c;
#define Q2 QWEN2 ", \"num_key_value_heads\": 2, \"max_position_embeddings\": 4096"

	/* What Qwen2.5 ships: off. */
	cr_expect_eq(parse(&c, Q2 ", \"use_sliding_window\": false, \"sliding_window\": 1024, "
	                          "\"max_window_layers\": 0}"),
	             0, "%s", err);
	/* On, but from layer 28 of 2: no layer slides. */
	cr_expect_eq(parse(&c, Q2 ", \"use_sliding_window\": true, \"sliding_window\": 1024}"), 0,
	             "%s", err);
	/* On, but the window covers every position. */
	cr_expect_eq(parse(&c, Q2 ", \"use_sliding_window\": true, \"sliding_window\": 4096, "
	                          "\"max_window_layers\": 0}"),
	             0, "%s", err);
	expect_fails(
	    Q2 ", \"use_sliding_window\": true, \"sliding_window\": 1024, "
	       "\"max_window_layers\": 1}",
	    "use_sliding_window with sliding_window 1024 < max_position_embeddings 4096 is "
	    "not supported");
	expect_fails(
	    Q2 ", \"use_sliding_window\": true, \"sliding_window\": 1024, "
	       "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
	    "use_sliding_window with sliding_window 1024 < max_position_embeddings 4096 is "
	    "not supported");
	cr_expect_eq(parse(&c, Q2 ", \"use_sliding_window\": false, \"sliding_window\": 1024, "
	                          "\"layer_types\": [\"full_attention\", \"sliding_attention\"]}"),
	             0, "%s", err);
	expect_fails(Q2 ", \"layer_types\": [\"full_attention\"]}",
	             "key layer_types: 1 entries for 2 layers");
	expect_fails(Q2 ", \"layer_types\": [\"full_attention\", \"chunked_attention\"]}",
	             "key layer_types[1]: chunked_attention is not supported");
#undef Q2
}

/* Qwen2-MoE's class defaults where keys are absent, decoder_sparse_step
 * and mlp_only_layers, and the keys that must agree. */
Test(hf_config, moe_layers_and_defaults)
{
	struct rl_model_config c;
	const char *base = "{\"architectures\": [\"Qwen2MoeForCausalLM\"], \"vocab_size\": 100, "
	                   "\"hidden_size\": 64, \"intermediate_size\": 96, "
	                   "\"num_hidden_layers\": 6, \"num_attention_heads\": 16";
	char json[512];

	snprintf(json, sizeof json, "%s, \"decoder_sparse_step\": 2, \"mlp_only_layers\": [3]}",
	         base);
	cr_assert_eq(parse(&c, json), 0, "%s", err);
	cr_expect_eq(c.arch, RL_ARCH_QWEN2_MOE);
	cr_expect(c.qkv_bias);
	cr_expect_eq(c.n_kv_heads, 16);
	cr_expect_eq(c.moe.n_experts, 60);
	cr_expect_eq(c.moe.top_k, 4);
	cr_expect_eq(c.moe.intermediate, 1408);
	cr_expect_eq(c.moe.shared_intermediate, 5632);
	cr_expect(!c.moe.norm_topk_prob);
	/* sparse when (l + 1) % 2 == 0 and l is not 3 */
	bool want[6] = {false, true, false, false, false, true};
	for (int l = 0; l < 6; l++)
		cr_expect_eq(rl_layer_is_moe(&c, l), want[l], "layer %d", l);

	snprintf(json, sizeof json, "%s, \"num_experts\": 8, \"num_local_experts\": 4}", base);
	expect_fails(json, "num_experts 8 and num_local_experts 4 disagree");
	snprintf(json, sizeof json, "%s, \"num_experts\": 4, \"num_experts_per_tok\": 5}", base);
	expect_fails(json, "num_experts_per_tok 5 is more than the 4 experts");
	snprintf(json, sizeof json, "%s, \"mlp_only_layers\": [6]}", base);
	expect_fails(json, "key mlp_only_layers[0]: layer 6, the model has 6");
	snprintf(json, sizeof json, "%s, \"router_aux_loss_coef\": -1}", base);
	expect_fails(json, "key router_aux_loss_coef: -1, must be at least 0");
	/* a dense family has no experts, whatever keys it carries */
	snprintf(json, sizeof json,
	         "{\"architectures\": [\"Qwen3ForCausalLM\"], \"vocab_size\": 100, "
	         "\"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
	         "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"num_experts\": 8}");
	cr_assert_eq(parse(&c, json), 0, "%s", err);
	cr_expect_eq(c.moe.n_experts, 0);
	cr_expect(!rl_layer_is_moe(&c, 1));
}
