/* A bf16 model (rl_model_set_precision) against the fp32 engine, which
 * test_model.c holds to transformers. bf16 means: every pass computes, in
 * fp32, with the parameters rounded to bf16, while the fp32 master weights
 * are what the optimizer updates. So the references here are
 *   - the fp32 model loaded from the same files with its weights rounded on
 *     the host by kernels/dtype.h's rl_f32_to_bf16 (PyTorch's rounding, held
 *     to it by test_safetensors): the same logits, gradients and greedy
 *     decode, bit for bit;
 *   - AdamW (the C reference op) applied by hand to the unrounded master
 *     weights with those gradients: the master after an update, bit for bit;
 *   - transformers' fp32 logits, within a first-order bound of the rounding.
 * The fixtures stored in bf16 (llama-tied-rope3, qwen2) are unchanged by
 * the rounding, so they meet transformers at test_model.c's tolerance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>

#include "kernels/dtype.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/model.h"
#include "runtime/model/optimizer.h"
#include "tests/unit/model_fixture.h"
#include "tests/unit/decode_host.h"

struct model_name {
	char s[32];
};
static struct model_name models[] = {{"llama"}, {"llama-tied-rope3"}, {"qwen2"},
                                     {"qwen3"}, {"qwen3-moe"},        {"qwen2-moe"}};

/* What one pass gives: the logits, the loss and every gradient. */
struct pass {
	float *logits, *grads;
	double loss;
};

static void run_pass(struct fixture *f, struct pass *out)
{
	struct rl_model *m = f->model;
	int T = f->batch.n_tokens, V = m->cfg.vocab_size;
	struct rl_acts *a = rl_acts_new(m, T);
	float *dlp = malloc((size_t)T * sizeof *dlp);
	char err[512];

	cr_assert_not_null(a);
	out->logits = malloc((size_t)T * (size_t)V * sizeof *out->logits);
	out->grads = malloc((size_t)m->n_elems * sizeof *out->grads);
	out->loss = batch_loss(f, a, dlp);
	cr_assert_eq(rl_model_logits(m, a, out->logits, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_model_zero_grad(m), 0);
	cr_assert_eq(rl_model_backward(m, a, dlp, err, sizeof err), 0, "%s", err);
	memcpy(out->grads, m->flat_grad, (size_t)m->n_elems * sizeof *out->grads);
	free(dlp);
	rl_acts_free(m, a);
}

static void pass_free(struct pass *p)
{
	free(p->logits);
	free(p->grads);
}

static void round_host(float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = rl_bf16_to_f32(rl_f32_to_bf16(x[i]));
}

/* The greedy continuation's logits of the fixture's first prompt, through
 * the KV cache: the prefill, then n_steps decode steps. */
static float *decode_logits(struct rl_model *m, struct fixture *f, int n_steps)
{
	json_t *p =
	    json_object_get(json_array_get(json_object_get(f->meta, "greedy"), 0), "prompt");
	int n = (int)json_array_size(p), V = m->cfg.vocab_size, slot = 0;
	int32_t ids[64];
	float *out = malloc((size_t)(n_steps + 1) * (size_t)V * sizeof *out);
	struct rl_kv_cache *kv = rl_kv_cache_new(m, 1, 64, n, 16, 0);
	char err[512];

	cr_assert(n <= 64 && kv && out);
	for (int i = 0; i < n; i++)
		ids[i] = (int32_t)json_integer_value(json_array_get(p, (size_t)i));
	for (int s = 0; s <= n_steps; s++) {
		float *row = out + (size_t)s * (size_t)V;

		cr_assert_eq(decode_host(m, kv, 1, &slot, &n, ids, row, err, sizeof err), 0, "%s",
		             err);
		ids[0] = 0;
		for (int v = 1; v < V; v++)
			if (row[v] > row[ids[0]])
				ids[0] = v;
		n = 1;
	}
	rl_kv_cache_free(m, kv);
	return out;
}

ParameterizedTestParameters(model_bf16, equals_fp32_on_rounded_weights)
{
	return cr_make_param_array(struct model_name, models, sizeof models / sizeof *models);
}

ParameterizedTest(struct model_name *param, model_bf16, equals_fp32_on_rounded_weights)
{
	const char *name = param->s;
	struct fixture ref, bf;
	struct pass want, got;
	char err[512];

	fixture_open(&ref, name);
	fixture_open(&bf, name);
	struct rl_model *r = ref.model, *m = bf.model;
	int64_t n = m->n_elems, LV = (int64_t)ref.batch.n_tokens * m->cfg.vocab_size;
	float *master = malloc((size_t)n * sizeof *master);

	memcpy(master, m->flat, (size_t)n * sizeof *master);
	round_host(r->flat, n);
	cr_assert_eq(rl_model_set_precision(m, RL_BF16, err, sizeof err), 0, "%s", err);
	run_pass(&ref, &want);
	run_pass(&bf, &got);
	cr_expect_arr_eq(got.logits, want.logits, (size_t)LV * sizeof(float), "%s: logits", name);
	cr_expect(got.loss == want.loss, "%s: loss %.17g, want %.17g", name, got.loss, want.loss);
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];

		cr_expect_arr_eq(got.grads + p->offset, want.grads + p->offset,
		                 (size_t)p->numel * sizeof(float), "%s: gradient of %s", name,
		                 p->name);
	}
	/* the passes left the master weights as loaded */
	cr_expect_arr_eq(m->flat, master, (size_t)n * sizeof *master, "%s: master weights", name);

	/* generation reads the same weights */
	int V = m->cfg.vocab_size;
	float *dw = decode_logits(r, &ref, 3), *dg = decode_logits(m, &bf, 3);
	cr_expect_arr_eq(dg, dw, (size_t)4 * (size_t)V * sizeof(float), "%s: decode logits", name);
	free(dw);
	free(dg);
	pass_free(&want);
	pass_free(&got);
	free(master);
	fixture_close(&ref);
	fixture_close(&bf);
}

ParameterizedTestParameters(model_bf16, near_transformers_fp32)
{
	return cr_make_param_array(struct model_name, models, sizeof models / sizeof *models);
}

/* Rounding perturbs each weight by at most u = 2^-9 of itself. To first
 * order a product of k matrices on the path from the embedding to a logit
 * moves by at most k u of its size, and the norms, softmax and SiLU
 * between them are 1-Lipschitz at these scales: per layer q, k, v and o,
 * then gate, up and down (k = 7 per layer), plus the embedding and the LM
 * head. The bound is that, relative to the largest logit, with the
 * fixtures' fp32 reference from transformers (which already agrees with
 * the fp32 engine to 1e-4). A fixture whose weights are fp32 on disk must
 * move at all (its weights were rounded); one stored in bf16 must not.
 * A mixture of experts is not continuous in its weights: a token whose
 * router scores its k-th and (k+1)-th experts within the rounding's reach
 * goes to another expert, and its row of logits moves by any amount. Such
 * near ties are rare with the fixtures' random routers: at most one row in
 * sixteen may break the bound there (qwen3-moe has one of 52). */
ParameterizedTest(struct model_name *param, model_bf16, near_transformers_fp32)
{
	const char *name = param->s;
	struct fixture f;
	struct pass got;
	char err[512];

	fixture_open(&f, name);
	struct rl_model *m = f.model;
	int64_t LV = (int64_t)f.batch.n_tokens * m->cfg.vocab_size;
	bool stored_bf16 = m->cfg.torch_dtype == RL_BF16;

	cr_assert_eq(rl_model_set_precision(m, RL_BF16, err, sizeof err), 0, "%s", err);
	run_pass(&f, &got);
	float *want = ref_tensor(&f, "logits", LV);
	double e = scaled_error(got.logits, want, LV);
	double bound = stored_bf16 ? 1e-4 : (2.0 + 7.0 * m->cfg.n_layers) * 0x1p-9;
	int T = f.batch.n_tokens, V = m->cfg.vocab_size, over = 0, moe = 0;
	double scale = 0;
	for (int64_t i = 0; i < LV; i++)
		scale = fmax(scale, fabs((double)want[i]));
	for (int t = 0; t < T; t++) {
		const float *g = got.logits + (size_t)t * (size_t)V,
		            *w = want + (size_t)t * (size_t)V;
		double row = 0;

		for (int v = 0; v < V; v++)
			row = fmax(row, fabs((double)g[v] - w[v]));
		over += row > bound * scale;
	}
	for (int l = 0; l < m->cfg.n_layers; l++)
		moe |= rl_layer_is_moe(&m->cfg, l);
	cr_expect(over <= (moe ? T / 16 : 0),
	          "%s: %d of %d rows of bf16 logits beyond %.3g of transformers' fp32 (largest "
	          "%.3g)",
	          name, over, T, bound, e);
	if (!stored_bf16)
		cr_expect(e > 1e-6, "%s: rounding the fp32 weights changed nothing (%.3g)", name,
		          e);
	double want_loss = json_real_value(json_object_get(f.meta, "loss"));
	if (!moe)
		cr_expect(fabs(got.loss - want_loss) <= bound * fabs(want_loss),
		          "%s: loss %.8g, want %.8g", name, got.loss, want_loss);
	free(want);
	pass_free(&got);
	fixture_close(&f);
}

/* One AdamW update of a bf16 model changes its fp32 master weights as the
 * C reference op does with the gradient taken at the rounded weights;
 * updates below half a bf16 step are kept in the master (lr 1e-5 against
 * weights of ~0.02, whose bf16 step is ~1e-4), and the next pass reads the
 * new master rounded. */
Test(model_bf16, adamw_updates_the_fp32_master)
{
	struct fixture f;
	struct rl_optimizer opt;
	struct pass p1;
	char err[512];
	struct rl_adamw_hparams hp = {1e-5f, 0.9f, 0.999f, 1e-8f, 0.01f};

	fixture_open(&f, "llama");
	struct rl_model *m = f.model;
	int64_t n = m->n_elems;
	float *master = malloc((size_t)n * sizeof *master), *mom = calloc((size_t)n, sizeof *mom);
	float *vel = calloc((size_t)n, sizeof *vel), *view = malloc((size_t)n * sizeof *view);
	float *old = malloc((size_t)n * sizeof *old);

	cr_assert_eq(rl_model_set_precision(m, RL_BF16, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_optimizer_init(&opt, m, &hp, err, sizeof err), 0, "%s", err);
	memcpy(master, m->flat, (size_t)n * sizeof *master);
	memcpy(old, m->flat, (size_t)n * sizeof *old);
	memcpy(view, m->view, (size_t)n * sizeof *view);
	run_pass(&f, &p1);
	cr_assert_eq(rl_adamw_step_cpu(master, p1.grads, mom, vel, n, &hp, 1, NULL), 0);
	cr_assert_eq(rl_optimizer_step(&opt, m), 0);
	cr_expect_arr_eq(m->flat, master, (size_t)n * sizeof *master, "master after the update");

	int64_t moved = 0, view_moved = 0, stale = 0;
	for (int64_t i = 0; i < n; i++)
		moved +=
		    m->flat[i] != old[i] && rl_bf16_to_f32(rl_f32_to_bf16(m->flat[i])) == view[i];
	round_host(master, n);
	struct pass p2;
	run_pass(&f, &p2);
	for (int64_t i = 0; i < n; i++) {
		view_moved += m->view[i] != view[i];
		stale += m->view[i] != master[i];
	}
	cr_expect(moved > n / 2,
	          "only %lld of %lld master weights kept an update below a bf16 step",
	          (long long)moved, (long long)n);
	cr_expect(view_moved > 0, "no rounded weight moved");
	cr_expect_eq(stale, 0, "%lld weights of the pass are not the new master rounded",
	             (long long)stale);
	pass_free(&p1);
	pass_free(&p2);
	rl_optimizer_free(&opt);
	free(master);
	free(mom);
	free(vel);
	free(view);
	free(old);
	fixture_close(&f);
}

/* The reference policy is a bf16 copy of the weights (2 bytes each) that
 * the passes read in place of the model's own: the pass after
 * rl_model_use_weights reads them, and after going back the model's own
 * weights, even when the master changed meanwhile. */
Test(model_bf16, other_weights_in_bf16)
{
	struct fixture f;
	struct pass a, b, c, d;
	char err[512];

	fixture_open(&f, "qwen3");
	struct rl_model *m = f.model;
	int64_t n = m->n_elems, LV = (int64_t)f.batch.n_tokens * m->cfg.vocab_size;
	size_t bytes = (size_t)LV * sizeof(float);

	cr_assert_eq(rl_model_set_precision(m, RL_BF16, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_model_weights_bytes(m), (size_t)n * 2);
	uint16_t *ref = malloc((size_t)n * 2);
	cr_assert_eq(rl_model_copy_weights(m, ref, err, sizeof err), 0, "%s", err);
	for (int64_t i = 0; i < n; i++)
		cr_assert_eq(ref[i], rl_f32_to_bf16(m->flat[i]), "weight %lld", (long long)i);
	run_pass(&f, &a);
	for (int64_t i = 0; i < n; i++)
		m->flat[i] *= 0.75f;
	run_pass(&f, &b);
	cr_assert_eq(rl_model_use_weights(m, ref, err, sizeof err), 0, "%s", err);
	run_pass(&f, &c);
	cr_assert_eq(rl_model_use_weights(m, NULL, err, sizeof err), 0, "%s", err);
	run_pass(&f, &d);
	cr_expect(memcmp(a.logits, b.logits, bytes) != 0, "the changed master was not read");
	cr_expect_arr_eq(c.logits, a.logits, bytes, "the copy does not give the first logits");
	cr_expect_arr_eq(d.logits, b.logits, bytes, "going back does not read the own weights");
	pass_free(&a);
	pass_free(&b);
	pass_free(&c);
	pass_free(&d);
	free(ref);
	fixture_close(&f);
}

/* The same in fp32: a copy of 4 bytes a weight, read as it is. */
Test(model_bf16, other_weights_in_fp32)
{
	struct fixture f;
	struct pass a, c, d;
	char err[512];

	fixture_open(&f, "llama");
	struct rl_model *m = f.model;
	int64_t n = m->n_elems, LV = (int64_t)f.batch.n_tokens * m->cfg.vocab_size;
	size_t bytes = (size_t)LV * sizeof(float);

	cr_assert_eq(rl_model_weights_bytes(m), (size_t)n * 4);
	float *ref = malloc((size_t)n * 4);
	cr_assert_eq(rl_model_copy_weights(m, ref, err, sizeof err), 0, "%s", err);
	cr_expect_arr_eq(ref, m->flat, (size_t)n * 4);
	run_pass(&f, &a);
	for (int64_t i = 0; i < n; i++)
		m->flat[i] *= 0.75f;
	cr_assert_eq(rl_model_use_weights(m, ref, err, sizeof err), 0, "%s", err);
	run_pass(&f, &c);
	cr_assert_eq(rl_model_use_weights(m, NULL, err, sizeof err), 0, "%s", err);
	run_pass(&f, &d);
	cr_expect_arr_eq(c.logits, a.logits, bytes, "the copy does not give the first logits");
	cr_expect(memcmp(d.logits, a.logits, bytes) != 0,
	          "going back does not read the own weights");
	pass_free(&a);
	pass_free(&c);
	pass_free(&d);
	free(ref);
	fixture_close(&f);
}

Test(model_bf16, refuses_float16)
{
	struct fixture f;
	char err[512] = "";

	fixture_open(&f, "llama");
	cr_expect_eq(rl_model_set_precision(f.model, RL_F16, err, sizeof err), -1);
	cr_expect(strstr(err, "F16") != NULL, "%s", err);
	cr_expect_eq(f.model->precision, RL_F32);
	fixture_close(&f);
}

/* The held-out style: a model the test makes, larger than the fixtures
 * (Qwen3 with q/k norms, GQA 8/2, 4 layers, hidden 256), random weights of
 * transformers' scale, vectors drawn away from 1 and 0. The same three
 * checks as above against the fp32 engine: bf16 is fp32 on the rounded
 * weights to the bit, within the first-order bound of fp32, and not equal
 * to it. */
Test(model_bf16, a_random_qwen3)
{
	static const char json[] =
	    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", "
	    "\"vocab_size\": 1000, \"hidden_size\": 256, \"intermediate_size\": 704, "
	    "\"num_hidden_layers\": 4, \"num_attention_heads\": 8, \"num_key_value_heads\": 2, "
	    "\"head_dim\": 32, \"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-6, "
	    "\"rope_theta\": 1000000.0, \"tie_word_embeddings\": false, \"bos_token_id\": 0, "
	    "\"eos_token_id\": 1, \"torch_dtype\": \"float32\"}";
	static const int32_t cu[] = {0, 37, 40, 101};
	struct rl_model_config cfg;
	struct rl_model *m[3];
	char err[512];
	int32_t ids[101];
	uint32_t seed = 0xb16b16u;

	cr_assert_eq(
	    rl_model_config_from_json(&cfg, json, sizeof json - 1, "test", err, sizeof err), 0,
	    "%s", err);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(rl_model_new_random(&m[i], &cfg, "random", &rl_ops_cpu, 11, 0.02, err,
		                                 sizeof err),
		             0, "%s", err);
		uint32_t s = 0x5eedu;
		for (int k = 0; k < m[i]->n_params; k++) {
			struct rl_param *p = &m[i]->params[k];

			for (int64_t j = 0; p->ndim == 1 && j < p->numel; j++) {
				s = s * 1664525u + 1013904223u;
				p->master[j] += 0.3f * ((float)(s >> 8) / 16777216.0f - 0.5f);
			}
		}
	}
	round_host(m[0]->flat, m[0]->n_elems);
	cr_assert_eq(rl_model_set_precision(m[1], RL_BF16, err, sizeof err), 0, "%s", err);
	for (int t = 0; t < 101; t++) {
		seed = seed * 1664525u + 1013904223u;
		ids[t] = (int32_t)(seed >> 8) % cfg.vocab_size;
	}
	struct rl_batch b = {101, 3, ids, cu, NULL};
	int64_t LV = 101 * (int64_t)cfg.vocab_size;
	float *logits[3];
	for (int i = 0; i < 3; i++) {
		struct rl_acts *a = rl_acts_new(m[i], 101);

		logits[i] = malloc((size_t)LV * sizeof(float));
		cr_assert_eq(rl_model_forward(m[i], a, &b, err, sizeof err), 0, "%s", err);
		cr_assert_eq(rl_model_logits(m[i], a, logits[i], err, sizeof err), 0, "%s", err);
		rl_acts_free(m[i], a);
	}
	cr_expect_arr_eq(logits[1], logits[0], (size_t)LV * sizeof(float),
	                 "bf16 is not fp32 on the rounded weights");
	double e = scaled_error(logits[1], logits[2], LV), bound = (2.0 + 7.0 * 4) * 0x1p-9;
	cr_expect(e <= bound && e > 1e-6, "bf16 logits %.3g from fp32 (bound %.3g)", e, bound);
	for (int i = 0; i < 3; i++) {
		free(logits[i]);
		rl_model_free(m[i]);
	}
}
