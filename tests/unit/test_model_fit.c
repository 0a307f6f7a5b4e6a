/* The layout rule (topology/model_fit.h) on published model shapes: each
 * rule at the first size that breaks it and the last that keeps it, the
 * numbers worked by hand in the comments, and the message naming the
 * config key, the layout's value and the model's number. */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tests/unit/published_models.h"
#include "topology/model_fit.h"

static struct rl_fit_layout sizes(int tp, int pp, int cp, int ep)
{
	return (struct rl_fit_layout){.tp = tp, .pp = pp, .cp = cp, .ep = ep, .etp = 1};
}

static char err[512];

static int fit(const struct rl_plan_model *m, struct rl_fit_layout l)
{
	err[0] = '\0';
	return rl_model_fit_check(m, &l, "M/config.json", err, sizeof err);
}

Test(model_fit, attention_heads)
{
	struct rl_plan_model m = llama8b;

	m.n_heads = 4, m.n_kv_heads = 4; /* the built-in tiny model's */
	cr_expect_eq(fit(&m, sizes(4, 1, 1, 1)), 0, "%s", err);
	cr_expect_eq(fit(&m, sizes(8, 1, 1, 1)), -1);
	cr_expect_str_eq(err, "policy.parallel.tensor=8 does not divide the model's 4 attention "
	                      "heads (M/config.json)");
	cr_expect_eq(fit(&m, sizes(3, 1, 1, 1)), -1);
}

Test(model_fit, kv_heads_are_split_not_replicated)
{
	/* 32 heads take tp=16, 8 KV heads do not */
	cr_expect_eq(fit(&llama8b, sizes(8, 1, 1, 1)), 0, "%s", err);
	cr_expect_eq(fit(&llama8b, sizes(16, 1, 1, 1)), -1);
	cr_expect(strstr(err, "policy.parallel.tensor=16 does not divide the model's 8 key/value "
	                      "heads (M/config.json)") == err,
	          "%s", err);
	/* Qwen3-30B-A3B's 4 KV heads: tp 4 yes, 8 no */
	cr_expect_eq(fit(&qwen3_30b_a3b, sizes(4, 1, 1, 1)), 0, "%s", err);
	cr_expect_eq(fit(&qwen3_30b_a3b, sizes(8, 1, 1, 1)), -1);
}

Test(model_fit, dense_intermediate_only_where_a_layer_is_dense)
{
	struct rl_plan_model m = llama8b;

	m.intermediate = 14338; /* 2 x 7169, 7169 = 67 x 107 */
	cr_expect_eq(fit(&m, sizes(2, 1, 1, 1)), 0, "%s", err);
	cr_expect_eq(fit(&m, sizes(4, 1, 1, 1)), -1);
	cr_expect(strstr(err, "MLP intermediate size 14338"), "%s", err);
	/* every layer a mixture of experts: the dense size is never cut */
	m = qwen3_30b_a3b;
	m.intermediate = 6145;
	cr_expect_eq(fit(&m, sizes(4, 1, 1, 1)), 0, "%s", err);
	m.n_moe_layers = 47;
	cr_expect_eq(fit(&m, sizes(4, 1, 1, 1)), -1);
}

Test(model_fit, vocabulary_may_split_unevenly)
{
	struct rl_plan_model m = {.n_layers = 2,
	                          .hidden = 8,
	                          .intermediate = 16,
	                          .n_heads = 8,
	                          .n_kv_heads = 8,
	                          .head_dim = 1,
	                          .vocab = 7};

	cr_expect_eq(fit(&m, sizes(2, 1, 1, 1)), 0, "7 rows over 2 ranks: 4 and 3: %s", err);
	cr_expect_eq(fit(&m, sizes(8, 1, 1, 1)), -1);
	cr_expect(strstr(err, "tensor=8 is more than the model's 7 vocabulary entries"), "%s", err);
}

Test(model_fit, pipeline_stages)
{
	struct rl_plan_model m = llama8b;
	struct rl_fit_layout l = sizes(1, 5, 1, 1);

	/* 32 layers: 4 stages of 8, but not 5 even ones */
	cr_expect_eq(fit(&m, sizes(1, 4, 1, 1)), 0, "%s", err);
	cr_expect_eq(fit(&m, l), -1);
	cr_expect(strstr(err, "policy.parallel.pipeline=5: the model's 32 layers (M/config.json) "
	                      "do not split into 5 stages;") == err,
	          "%s", err);
	/* 5 stages with a first of 4 and a last of 4: 24 over the 3 between */
	l.first_stage_layers = 4, l.last_stage_layers = 4;
	cr_expect_eq(fit(&m, l), 0, "%s", err);
	/* a first of 5: 23 over 3 does not divide */
	l.first_stage_layers = 5;
	cr_expect_eq(fit(&m, l), -1);
	cr_expect(strstr(err, "as the first and the last are set"), "%s", err);
	/* more stages than layers */
	m.n_layers = 2;
	cr_expect_eq(fit(&m, sizes(1, 4, 1, 1)), -1);
	/* 2 stages, both given: they must add up to the layers */
	l = sizes(1, 2, 1, 1);
	l.first_stage_layers = 1, l.last_stage_layers = 1;
	cr_expect_eq(fit(&m, l), 0, "%s", err);
	l.last_stage_layers = 2;
	cr_expect_eq(fit(&m, l), -1);
}

Test(model_fit, experts)
{
	cr_expect_eq(fit(&qwen3_30b_a3b, sizes(1, 1, 1, 8)), 0, "%s", err);
	cr_expect_eq(fit(&qwen3_30b_a3b, sizes(1, 1, 1, 3)), -1);
	cr_expect_str_eq(err, "policy.parallel.expert=3 does not divide the model's 128 experts "
	                      "(M/config.json)");
	cr_expect_eq(fit(&llama8b, sizes(1, 1, 1, 2)), -1);
	cr_expect(strstr(err, "expert=2, but the model (M/config.json) has no experts"), "%s", err);
	/* expert tensor parallelism cuts the experts' 768 */
	struct rl_fit_layout l = sizes(1, 1, 1, 1);
	l.etp = 256;
	cr_expect_eq(fit(&qwen3_30b_a3b, l), 0, "%s", err);
	l.etp = 512;
	cr_expect_eq(fit(&qwen3_30b_a3b, l), -1);
	cr_expect(strstr(err, "expert_tensor=512 does not divide the model's expert intermediate "
	                      "size 768"),
	          "%s", err);
}

Test(model_fit, context_parallelism_not_yet_with)
{
	struct rl_fit_layout l = sizes(2, 1, 2, 1);

	cr_expect_eq(fit(&llama8b, l), 0, "%s", err);
	l.sequence_parallel = true;
	cr_expect_eq(fit(&llama8b, l), -1);
	cr_expect(strstr(err, "together with sequence parallelism is not implemented"), "%s", err);
	cr_expect_eq(fit(&llama8b, sizes(1, 2, 2, 1)), -1);
	cr_expect(strstr(err, "together with pipeline parallelism is not implemented"), "%s", err);
	cr_expect_eq(fit(&qwen3_30b_a3b, sizes(1, 1, 2, 1)), -1);
	cr_expect(strstr(err, "with a mixture of experts (M/config.json) is not implemented"), "%s",
	          err);
}

Test(model_fit, generation_ranks_name_their_key)
{
	struct rl_plan_model m = llama8b;
	struct rl_fit_layout l = sizes(3, 1, 1, 1);

	l.tp_key = "policy.generation.tensor_parallel_size";
	cr_expect_eq(fit(&m, l), -1);
	cr_expect(strstr(err, "policy.generation.tensor_parallel_size=3 does not divide the "
	                      "model's 32 attention heads") == err,
	          "%s", err);
}
