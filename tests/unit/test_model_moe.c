/* The mixture-of-experts pieces test_model.c's parity does not single out,
 * against the same transformers fixtures (tests/fixtures/fixture_moe.py):
 * the experts each token is routed to and their weights, the gradient
 * without the load-balancing loss, a frozen router, and the whole pass on
 * the fenced backend (host and backend memory kept apart) giving the cpu
 * backend's bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <jansson.h>

#include "kernels/fenced.h"
#include "runtime/model/acts.h"
#include "runtime/model/model.h"
#include "tests/unit/model_fixture.h"

#define TOL 1e-4

struct model_name {
	char s[32];
};
static struct model_name models[] = {{"qwen3-moe"}, {"qwen2-moe"}};

ParameterizedTestParameters(model_moe, routing)
{
	return cr_make_param_array(struct model_name, models, sizeof models / sizeof *models);
}

/* The first sequence's rows: the chosen experts in order of probability and
 * the weights applied, per sparse layer. */
ParameterizedTest(struct model_name *param, model_moe, routing)
{
	struct fixture f;
	char err[512];
	size_t i;
	json_t *layer;

	fixture_open(&f, param->s);
	struct rl_model *m = f.model;
	struct rl_acts *a = rl_acts_new(m, f.batch.n_tokens);
	int k = m->cfg.moe.top_k, checked = 0;

	cr_assert_eq(rl_model_forward(m, a, &f.batch, err, sizeof err), 0, "%s", err);
	json_array_foreach(json_object_get(f.meta, "routing_seq0"), i, layer)
	{
		int l = (int)json_integer_value(json_object_get(layer, "layer"));
		json_t *experts = json_object_get(layer, "experts");
		json_t *weights = json_object_get(layer, "weights");
		const struct rl_moe_acts *s = a->layers[l].moe;

		cr_assert_not_null(s, "%s: layer %d is not sparse here", param->s, l);
		cr_assert_eq(s->first, 0);
		for (int t = 0; t < (int)json_array_size(experts); t++)
			for (int j = 0; j < k; j++) {
				json_t *e =
				    json_array_get(json_array_get(experts, (size_t)t), (size_t)j);
				json_t *w =
				    json_array_get(json_array_get(weights, (size_t)t), (size_t)j);
				cr_expect_eq(s->choice[t * k + j], json_integer_value(e),
				             "%s: layer %d token %d choice %d", param->s, l, t, j);
				cr_expect(fabs(s->weight_h[t * k + j] - json_real_value(w)) <= 1e-5,
				          "%s: layer %d token %d weight %d: %g, want %g", param->s,
				          l, t, j, s->weight_h[t * k + j], json_real_value(w));
				checked++;
			}
	}
	cr_expect(checked > 0);
	rl_acts_free(m, a);
	fixture_close(&f);
}

/* The gradient of the loss alone and of the loss with the load-balancing
 * loss, after a forward and backward with a coefficient set. */
static void grads_with(struct fixture *f, float coef, bool freeze)
{
	char err[512];
	struct rl_model *m = f->model;
	struct rl_acts *a = rl_acts_new(m, f->batch.n_tokens);
	float *dlp = malloc((size_t)f->batch.n_tokens * sizeof *dlp);

	rl_acts_set_aux_loss_coef(a, coef);
	m->freeze_router = freeze;
	cr_assert_eq(rl_model_zero_grad(m), 0);
	batch_loss(f, a, dlp);
	cr_assert_eq(rl_model_backward(m, a, dlp, err, sizeof err), 0, "%s", err);
	m->freeze_router = false;
	free(dlp);
	rl_acts_free(m, a);
}

ParameterizedTestParameters(model_moe, grads_without_aux_and_frozen_router)
{
	return cr_make_param_array(struct model_name, models, sizeof models / sizeof *models);
}

ParameterizedTest(struct model_name *param, model_moe, grads_without_aux_and_frozen_router)
{
	struct fixture f;

	fixture_open(&f, param->s);
	struct rl_model *m = f.model;

	grads_with(&f, 0.0f, false);
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];
		char key[128];

		snprintf(key, sizeof key, "grad_ce.%s", p->name);
		float *g = ref_tensor(&f, key, p->numel);
		double e = scaled_error(p->grad, g, p->numel);
		cr_expect(e <= TOL, "%s: %s error %.3g", param->s, key, e);
		free(g);
	}
	/* frozen: no router gradient, every other one as with a free router */
	grads_with(&f, (float)m->cfg.moe.aux_loss_coef, true);
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];
		bool router = strstr(p->name, ".mlp.gate.weight") != NULL;
		char key[128];

		snprintf(key, sizeof key, "grad.%s", p->name);
		float *g = ref_tensor(&f, key, p->numel);
		double e = scaled_error(p->grad, g, p->numel), most = 0;
		for (int64_t j = 0; j < p->numel; j++)
			most = fmax(most, fabs(p->grad[j]));
		if (router)
			cr_expect_eq(most, 0.0, "%s: frozen %s has a gradient", param->s, p->name);
		else
			cr_expect(e <= TOL, "%s: frozen router: %s error %.3g", param->s, key, e);
		free(g);
	}
	fixture_close(&f);
}

/* The fenced backend faults on any host access to backend memory and
 * refuses host arrays where an op needs backend memory: the routing,
 * dispatch and combine must keep the two apart, and give the same bits. */
Test(model_moe, fenced_backend_same_bits)
{
	struct fixture f;
	struct rl_model *fenced;
	char err[512], path[4096];
	const char *src = getenv("top_srcdir") ? getenv("top_srcdir") : ".";

	fixture_open(&f, "qwen2-moe");
	snprintf(path, sizeof path, "%s/tests/fixtures/models/qwen2-moe", src);
	cr_assert_eq(rl_model_load(&fenced, path, &rl_ops_fenced, err, sizeof err), 0, "%s", err);
	int T = f.batch.n_tokens;
	struct rl_acts *a = rl_acts_new(f.model, T), *b = rl_acts_new(fenced, T);
	float *lp = malloc((size_t)T * sizeof *lp), *lpf = malloc((size_t)T * sizeof *lpf);
	float *dlp = malloc((size_t)T * sizeof *dlp);

	for (int t = 0; t < T; t++)
		dlp[t] = f.targets[t] >= 0 ? -1.0f / (float)(t + 3) : 0.0f;
	cr_assert_eq(rl_model_forward(f.model, a, &f.batch, err, sizeof err) ||
	                 rl_model_logprobs(f.model, a, lp, 1.0f, 97, err, sizeof err) ||
	                 rl_model_zero_grad(f.model) ||
	                 rl_model_backward(f.model, a, dlp, err, sizeof err),
	             0, "cpu: %s", err);
	cr_assert_eq(rl_model_forward(fenced, b, &f.batch, err, sizeof err) ||
	                 rl_model_logprobs(fenced, b, lpf, 1.0f, 97, err, sizeof err) ||
	                 rl_model_zero_grad(fenced) ||
	                 rl_model_backward(fenced, b, dlp, err, sizeof err),
	             0, "fenced: %s", err);
	cr_expect_eq(memcmp(lp, lpf, (size_t)T * sizeof *lp), 0, "log-probs differ");
	cr_expect_eq(rl_acts_aux_loss(f.model, a), rl_acts_aux_loss(fenced, b));
	size_t bytes = (size_t)fenced->n_elems * sizeof(float);
	float *grad = malloc(bytes);
	cr_assert_eq(fenced->ops->to_host(grad, fenced->flat_grad, bytes, NULL), 0);
	cr_expect_eq(memcmp(grad, f.model->flat_grad, bytes), 0, "gradients differ");
	free(grad);
	free(lp);
	free(lpf);
	free(dlp);
	rl_acts_free(f.model, a);
	rl_acts_free(fenced, b);
	rl_model_free(fenced);
	fixture_close(&f);
}
