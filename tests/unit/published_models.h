/* The shapes of published models (their config.json), as the planner and
 * the layout rule take them: the tests of both read the same numbers. */
#ifndef RL_TESTS_PUBLISHED_MODELS_H
#define RL_TESTS_PUBLISHED_MODELS_H

#include <stdbool.h>

#include "topology/planner.h"

/* Llama-3-8B: 32 layers, hidden 4096, intermediate 14336, 32 heads, 8 KV
 * heads of 128, vocab 128256, untied. */
static const struct rl_plan_model llama8b = {
    .n_layers = 32,
    .hidden = 4096,
    .intermediate = 14336,
    .n_heads = 32,
    .n_kv_heads = 8,
    .head_dim = 128,
    .vocab = 128256,
};
/* Llama-3-70B: 80 layers, hidden 8192, intermediate 28672, 64 heads, 8 KV. */
static const struct rl_plan_model llama70b = {
    .n_layers = 80,
    .hidden = 8192,
    .intermediate = 28672,
    .n_heads = 64,
    .n_kv_heads = 8,
    .head_dim = 128,
    .vocab = 128256,
};
/* Llama-3.2-1B: 16 layers, hidden 2048, intermediate 8192, 32 heads of 64,
 * 8 KV heads, tied embeddings. */
static const struct rl_plan_model llama1b = {
    .n_layers = 16,
    .hidden = 2048,
    .intermediate = 8192,
    .n_heads = 32,
    .n_kv_heads = 8,
    .head_dim = 64,
    .vocab = 128256,
    .tied_embeddings = true,
};
/* Qwen3-30B-A3B (its config.json): 48 layers, hidden 2048, 32 heads and 4
 * KV heads of 128, vocab 151936, untied; every layer a mixture of 128
 * experts of 768, 8 per token, no shared expert (intermediate_size 6144 is
 * unused: no dense layer). */
static const struct rl_plan_model qwen3_30b_a3b = {
    .n_layers = 48,
    .hidden = 2048,
    .intermediate = 6144,
    .n_heads = 32,
    .n_kv_heads = 4,
    .head_dim = 128,
    .vocab = 151936,
    .n_experts = 128,
    .experts_per_token = 8,
    .expert_intermediate = 768,
    .n_moe_layers = 48,
};

#endif
