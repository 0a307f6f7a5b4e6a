/* Model parity: the engine on the CPU backend against what transformers
 * computed on the same files (tests/fixtures/fixture_models.py): logits of a
 * packed batch, the loss, every parameter gradient, ten AdamW steps with
 * grad-norm clipping, and greedy generation through the KV cache; for the
 * mixtures of experts (fixture_moe.py) the loss includes the load-balancing
 * loss.
 *
 * Tolerance: for each tensor, the largest absolute difference divided by the
 * largest absolute reference value (so entries near zero are judged on the
 * tensor's scale); 1e-4 unless a check says otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>

#include "runtime/model/kv_cache.h"
#include "runtime/model/model.h"
#include "runtime/model/optimizer.h"
#include "runtime/model/safetensors.h"
#include "tests/unit/model_fixture.h"
#include "tests/unit/decode_host.h"

#define TOL 1e-4

/* Names inline: Criterion copies parameters into the test process, so they
 * must not point into the parent's memory. */
struct model_name {
	char s[32];
};
static struct model_name models[] = {{"llama"}, {"llama-tied-rope3"}, {"qwen2"},
                                     {"qwen3"}, {"qwen3-moe"},        {"qwen2-moe"}};

ParameterizedTestParameters(model, logits_loss_grads)
{
	return cr_make_param_array(struct model_name, models, sizeof models / sizeof *models);
}

ParameterizedTest(struct model_name *param, model, logits_loss_grads)
{
	const char *name = param->s;
	struct fixture f;
	char err[512];

	fixture_open(&f, name);
	struct rl_model *m = f.model;
	int T = f.batch.n_tokens, V = m->cfg.vocab_size;
	struct rl_acts *a = rl_acts_new(m, T);
	cr_assert_not_null(a);

	float *logits = malloc((size_t)T * (size_t)V * sizeof *logits);
	cr_assert_eq(rl_model_forward(m, a, &f.batch, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_model_logits(m, a, logits, err, sizeof err), 0, "%s", err);
	float *want = ref_tensor(&f, "logits", (int64_t)T * V);
	double e = scaled_error(logits, want, (int64_t)T * V);
	cr_expect(e <= TOL, "%s: logits error %.3g", name, e);
	free(want);
	free(logits);

	float *dlp = malloc((size_t)T * sizeof *dlp);
	double loss = batch_loss(&f, a, dlp);
	double want_loss = json_real_value(json_object_get(f.meta, "loss"));
	cr_expect(fabs(loss - want_loss) <= TOL * fabs(want_loss), "%s: loss %.8g, want %.8g", name,
	          loss, want_loss);

	cr_assert_eq(rl_model_zero_grad(m), 0);
	cr_assert_eq(rl_model_backward(m, a, dlp, err, sizeof err), 0, "%s", err);
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];
		char key[128];

		/* tied: transformers reports the shared gradient under the embedding */
		snprintf(key, sizeof key, "grad.%s", p->name);
		float *g = ref_tensor(&f, key, p->numel);
		e = scaled_error(p->grad, g, p->numel);
		cr_expect(e <= TOL, "%s: %s error %.3g", name, key, e);
		free(g);
	}
	free(dlp);
	rl_acts_free(m, a);
	fixture_close(&f);
}

ParameterizedTestParameters(model, adamw_ten_steps)
{
	return cr_make_param_array(struct model_name, models, sizeof models / sizeof *models);
}

ParameterizedTest(struct model_name *param, model, adamw_ten_steps)
{
	const char *name = param->s;
	struct fixture f;
	struct rl_optimizer opt;
	char err[512];

	fixture_open(&f, name);
	struct rl_model *m = f.model;
	json_t *hp = json_object_get(f.meta, "adamw");
	struct rl_adamw_hparams h = {
	    (float)json_real_value(json_object_get(hp, "lr")),
	    (float)json_real_value(json_array_get(json_object_get(hp, "betas"), 0)),
	    (float)json_real_value(json_array_get(json_object_get(hp, "betas"), 1)),
	    (float)json_real_value(json_object_get(hp, "eps")),
	    (float)json_real_value(json_object_get(hp, "weight_decay")),
	};
	double max_norm = json_real_value(json_object_get(hp, "max_grad_norm"));
	json_t *losses = json_object_get(f.meta, "adamw_losses");
	json_t *norms = json_object_get(f.meta, "adamw_grad_norms");
	struct rl_acts *a = rl_acts_new(m, f.batch.n_tokens);
	float *dlp = malloc((size_t)f.batch.n_tokens * sizeof *dlp);

	cr_assert_eq(rl_optimizer_init(&opt, m, &h, err, sizeof err), 0, "%s", err);
	for (size_t step = 0; step < json_array_size(losses); step++) {
		double want = json_real_value(json_array_get(losses, step));
		double want_norm = json_real_value(json_array_get(norms, step));
		double norm;

		cr_assert_eq(rl_model_zero_grad(m), 0);
		double loss = batch_loss(&f, a, dlp);
		cr_assert_eq(rl_model_backward(m, a, dlp, err, sizeof err), 0, "%s", err);
		cr_assert_eq(rl_clip_grad_norm(m, max_norm, &norm), 0);
		cr_expect(fabs(loss - want) <= TOL * fabs(want),
		          "%s: step %zu loss %.8g, want %.8g", name, step, loss, want);
		cr_expect(fabs(norm - want_norm) <= TOL * want_norm,
		          "%s: step %zu grad norm %.8g, want %.8g", name, step, norm, want_norm);
		cr_assert_eq(rl_optimizer_step(&opt, m), 0);
	}
	rl_optimizer_free(&opt);
	free(dlp);
	rl_acts_free(m, a);
	fixture_close(&f);
}

ParameterizedTestParameters(model, greedy_through_kv_cache)
{
	return cr_make_param_array(struct model_name, models, sizeof models / sizeof *models);
}

/* Both prompts decode side by side in one cache: a prefill of the two
 * prompts together, then one token per sequence per step. */
ParameterizedTest(struct model_name *param, model, greedy_through_kv_cache)
{
	const char *name = param->s;
	struct fixture f;
	char err[512];

	fixture_open(&f, name);
	struct rl_model *m = f.model;
	json_t *gens = json_object_get(f.meta, "greedy");
	int n = (int)json_array_size(gens), V = m->cfg.vocab_size;
	int max_new = (int)json_integer_value(json_object_get(f.meta, "max_new_tokens"));
	int slots[8], n_new[8], done[8] = {0}, produced[8] = {0};
	int32_t ids[512];
	int total = 0;

	cr_assert(n <= 8);
	for (int g = 0; g < n; g++) {
		json_t *p = json_object_get(json_array_get(gens, g), "prompt");
		slots[g] = g;
		n_new[g] = (int)json_array_size(p);
		for (int i = 0; i < n_new[g]; i++)
			ids[total++] = (int32_t)json_integer_value(json_array_get(p, (size_t)i));
	}
	struct rl_kv_cache *kv = rl_kv_cache_new(m, n, 64, total, 16, 0);
	float *logits = malloc((size_t)n * (size_t)V * sizeof *logits);
	cr_assert_not_null(kv);
	cr_assert_eq(decode_host(m, kv, n, slots, n_new, ids, logits, err, sizeof err), 0, "%s",
	             err);
	/* rows of logits belong to the sequences in active[], in order */
	int active[8], n_active = n;
	for (int g = 0; g < n; g++)
		active[g] = g;
	while (n_active > 0) {
		int next = 0;

		for (int r = 0; r < n_active; r++) {
			int g = active[r];
			const float *row = logits + (size_t)r * (size_t)V;
			json_t *want = json_object_get(json_array_get(gens, g), "output");
			int32_t tok = 0;

			for (int v = 1; v < V; v++)
				if (row[v] > row[tok])
					tok = v;
			cr_assert_lt((size_t)produced[g], json_array_size(want),
			             "%s: sequence %d runs past its reference", name, g);
			int32_t w =
			    (int32_t)json_integer_value(json_array_get(want, (size_t)produced[g]));
			cr_assert_eq(tok, w, "%s: sequence %d token %d: got %d, want %d", name, g,
			             produced[g], tok, w);
			produced[g]++;
			if (tok == m->cfg.eos_token_ids[0] || produced[g] == max_new) {
				cr_expect_eq((size_t)produced[g], json_array_size(want));
				done[g] = 1;
				continue;
			}
			slots[next] = g;
			n_new[next] = 1;
			ids[next++] = tok;
		}
		if (!next)
			break;
		cr_assert_eq(decode_host(m, kv, next, slots, n_new, ids, logits, err, sizeof err),
		             0, "%s", err);
		memcpy(active, slots, (size_t)next * sizeof *active);
		n_active = next;
	}
	for (int g = 0; g < n; g++)
		cr_expect(done[g], "%s: sequence %d did not finish", name, g);
	free(logits);
	rl_kv_cache_free(m, kv);
	fixture_close(&f);
}

ParameterizedTestParameters(model, recompute_gives_the_same_bits)
{
	return cr_make_param_array(struct model_name, models, sizeof models / sizeof *models);
}

/* Activation checkpointing (rl_acts_new_recompute) runs each layer's
 * forward again in the backward pass: with the same ops on the same
 * inputs, the loss and every gradient are the same bits as with every
 * activation kept, in fp32 and in bf16, twice in a row (the shared
 * buffers hold nothing a second micro-batch could see). */
ParameterizedTest(struct model_name *param, model, recompute_gives_the_same_bits)
{
	const char *name = param->s;
	struct fixture f;
	char err[512];

	fixture_open(&f, name);
	struct rl_model *m = f.model;
	int T = f.batch.n_tokens;
	size_t gbytes = (size_t)m->n_elems * sizeof(float);
	float *dlp = malloc((size_t)T * sizeof *dlp), *want = malloc(gbytes);
	double want_loss = 0;

	for (int bf16 = 0; bf16 < 2; bf16++) {
		cr_assert_eq(rl_model_set_precision(m, bf16 ? RL_BF16 : RL_F32, err, sizeof err), 0,
		             "%s", err);
		for (int recompute = 0; recompute < 2; recompute++) {
			struct rl_acts *a =
			    recompute ? rl_acts_new_recompute(m, T) : rl_acts_new(m, T);
			cr_assert_not_null(a);
			for (int round = 0; round < 2; round++) {
				double loss = batch_loss(&f, a, dlp);
				cr_assert_eq(rl_model_zero_grad(m), 0);
				cr_assert_eq(rl_model_backward(m, a, dlp, err, sizeof err), 0, "%s",
				             err);
				if (!recompute && round == 0) {
					memcpy(want, m->flat_grad, gbytes);
					want_loss = loss;
					continue;
				}
				cr_expect(loss == want_loss, "%s: loss %.17g, want %.17g", name,
				          loss, want_loss);
				cr_expect_arr_eq(m->flat_grad, want, gbytes,
				                 "%s %s: recompute %d round %d: gradients differ",
				                 name, bf16 ? "bf16" : "fp32", recompute, round);
			}
			rl_acts_free(m, a);
		}
	}
	free(dlp);
	free(want);
	fixture_close(&f);
}
