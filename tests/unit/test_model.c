/* Model parity: the engine on the CPU backend against what transformers
 * computed on the same files (tests/fixtures/fixture_models.py): logits of a
 * packed batch, the loss, every parameter gradient, ten AdamW steps with
 * grad-norm clipping, and greedy generation through the KV cache.
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

#define TOL 1e-4

struct fixture {
	struct rl_model *model;
	struct rl_st_archive *ref;
	json_t *meta;
	struct rl_batch batch;
	int32_t *ids, *cu, *targets;
	int n_predicted;
};

static void fixture_open(struct fixture *f, const char *name)
{
	char path[4096], err[512];
	const char *src = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	json_error_t jerr;

	memset(f, 0, sizeof *f);
	snprintf(path, sizeof path, "%s/tests/fixtures/models/%s", src, name);
	cr_assert_eq(rl_model_load(&f->model, path, &rl_ops_cpu, err, sizeof err), 0, "%s", err);
	snprintf(path, sizeof path, "%s/tests/fixtures/models/%s.ref.safetensors", src, name);
	cr_assert_eq(rl_st_open(&f->ref, path, err, sizeof err), 0, "%s", err);
	snprintf(path, sizeof path, "%s/tests/fixtures/models/%s.ref.json", src, name);
	f->meta = json_load_file(path, 0, &jerr);
	cr_assert_not_null(f->meta, "%s: %s", path, jerr.text);

	json_t *seqs = json_object_get(f->meta, "sequences");
	size_t n_seqs = json_array_size(seqs), total = 0, i, j;
	json_t *s, *v;

	json_array_foreach(seqs, i, s) total += json_array_size(s);
	f->ids = malloc(total * sizeof *f->ids);
	f->targets = malloc(total * sizeof *f->targets);
	f->cu = malloc((n_seqs + 1) * sizeof *f->cu);
	f->cu[0] = 0;
	json_array_foreach(seqs, i, s)
	{
		size_t len = json_array_size(s);
		json_array_foreach(s, j, v)
		{
			size_t t = (size_t)f->cu[i] + j;
			f->ids[t] = (int32_t)json_integer_value(v);
			f->targets[t] = j + 1 < len
			                    ? (int32_t)json_integer_value(json_array_get(s, j + 1))
			                    : -1;
			f->n_predicted += j + 1 < len;
		}
		f->cu[i + 1] = f->cu[i] + (int32_t)len;
	}
	f->batch = (struct rl_batch){(int)total, (int)n_seqs, f->ids, f->cu, f->targets};
}

static void fixture_close(struct fixture *f)
{
	rl_model_free(f->model);
	rl_st_close(f->ref);
	json_decref(f->meta);
	free(f->ids);
	free(f->cu);
	free(f->targets);
}

static float *ref_tensor(struct fixture *f, const char *name, int64_t numel)
{
	const struct rl_st_tensor *t = rl_st_find(f->ref, name);
	char err[512];

	cr_assert_not_null(t, "reference has no %s", name);
	float *out = malloc((size_t)numel * sizeof *out);
	cr_assert_eq(rl_st_read_f32(f->ref, name, out, t->ndim, t->shape, err, sizeof err), 0, "%s",
	             err);
	return out;
}

static double scaled_error(const float *got, const float *want, int64_t n)
{
	double maxdiff = 0, maxref = 0;

	for (int64_t i = 0; i < n; i++) {
		maxdiff = fmax(maxdiff, fabs((double)got[i] - want[i]));
		maxref = fmax(maxref, fabs((double)want[i]));
	}
	return maxref > 0 ? maxdiff / maxref : maxdiff;
}

/* Mean next-token NLL of the batch; dlogprob for its backward when asked. */
static double batch_loss(struct fixture *f, struct rl_acts *a, float *dlogprob)
{
	char err[512];
	int T = f->batch.n_tokens;
	float *lp = malloc((size_t)T * sizeof *lp);
	double nll = 0;

	cr_assert_eq(rl_model_forward(f->model, a, &f->batch, err, sizeof err), 0, "%s", err);
	/* an odd chunk, so the vocabulary walk has a ragged last step */
	cr_assert_eq(rl_model_logprobs(f->model, a, lp, 1.0f, 97, err, sizeof err), 0, "%s", err);
	for (int t = 0; t < T; t++) {
		nll -= lp[t];
		if (dlogprob)
			dlogprob[t] = f->targets[t] >= 0 ? -1.0f / (float)f->n_predicted : 0.0f;
	}
	free(lp);
	return nll / f->n_predicted;
}

/* Names inline: Criterion copies parameters into the test process, so they
 * must not point into the parent's memory. */
struct model_name {
	char s[32];
};
static struct model_name models[] = {{"llama"}, {"llama-tied-rope3"}, {"qwen2"}, {"qwen3"}};

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
	struct rl_kv_cache *kv = rl_kv_cache_new(m, n, 64, total);
	float *logits = malloc((size_t)n * (size_t)V * sizeof *logits);
	cr_assert_not_null(kv);
	cr_assert_eq(rl_model_decode(m, kv, n, slots, n_new, ids, logits, err, sizeof err), 0, "%s",
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
		cr_assert_eq(
		    rl_model_decode(m, kv, next, slots, n_new, ids, logits, err, sizeof err), 0,
		    "%s", err);
		memcpy(active, slots, (size_t)next * sizeof *active);
		n_active = next;
	}
	for (int g = 0; g < n; g++)
		cr_expect(done[g], "%s: sequence %d did not finish", name, g);
	free(logits);
	rl_kv_cache_free(m, kv);
	fixture_close(&f);
}
