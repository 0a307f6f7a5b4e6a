/* AdamW against torch.optim.AdamW: the steps recorded by
 * tests/fixtures/fixture_ops.py, replayed from the same start with the same
 * gradients. PyTorch's sqrt (MKL's) is not always correctly rounded, so a
 * parameter may differ by an ulp of the update, which is several ulps of the
 * parameter once the parameter shrinks: parameters are held to 1e-6 relative.
 * The moments never see a sqrt and are held to MAX_ULPS as well. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/adamw.h"
#include "tests/fixtures/ops/adamw_torch.h"

#define RTOL     1e-6
#define MAX_ULPS 1

/* distance in units in the last place between two floats of one sign */
static int64_t ulps(float a, float b)
{
	int32_t ia, ib;

	memcpy(&ia, &a, sizeof(ia));
	memcpy(&ib, &b, sizeof(ib));
	if (ia < 0)
		ia = INT32_MIN - ia;
	if (ib < 0)
		ib = INT32_MIN - ib;
	return llabs((long long)ia - (long long)ib);
}

static void expect_row(const char *c, const char *what, int step, const float *got,
                       const float *want, int n, int64_t max_ulps, int64_t *worst)
{
	for (int i = 0; i < n; i++) {
		double err = fabs((double)got[i] - (double)want[i]);
		int64_t u = ulps(got[i], want[i]);

		cr_expect(err <= RTOL * fabs((double)want[i]) && u <= max_ulps,
		          "%s step %d %s[%d]: got %a, torch %a (%lld ulps)", c, step, what, i,
		          (double)got[i], (double)want[i], (long long)u);
		if (u > *worst)
			*worst = u;
	}
}

Test(adamw, matches_torch)
{
	size_t ncases = sizeof(adamw_cases) / sizeof(adamw_cases[0]);

	for (size_t k = 0; k < ncases; k++) {
		const struct adamw_case *c = &adamw_cases[k];
		struct rl_adamw_hparams hp = {.lr = c->lr,
		                              .beta1 = c->beta1,
		                              .beta2 = c->beta2,
		                              .eps = c->eps,
		                              .weight_decay = c->weight_decay};
		size_t bytes = (size_t)c->n * sizeof(float);
		float *p = malloc(bytes), *m = calloc((size_t)c->n, sizeof(float));
		float *v = calloc((size_t)c->n, sizeof(float));
		int64_t worst[3] = {0, 0, 0};

		cr_assert(p && m && v);
		memcpy(p, c->p0, bytes);
		for (int s = 0; s < c->steps; s++) {
			size_t off = (size_t)s * c->n;

			cr_assert_eq(
			    rl_adamw_step_cpu(p, c->grad + off, m, v, c->n, &hp, s + 1, NULL), 0);
			expect_row(c->name, "p", s + 1, p, c->p + off, c->n, INT64_MAX, &worst[0]);
			expect_row(c->name, "m", s + 1, m, c->m + off, c->n, MAX_ULPS, &worst[1]);
			expect_row(c->name, "v", s + 1, v, c->v + off, c->n, MAX_ULPS, &worst[2]);
		}
		cr_log_info("%s: worst ulps p %lld, m %lld, v %lld", c->name, (long long)worst[0],
		            (long long)worst[1], (long long)worst[2]);
		free(p);
		free(m);
		free(v);
	}
}

/* The same step over a vector long enough to be threaded must give what
 * the element-by-element step gives: no element depends on another. */
Test(adamw, threaded_matches_small_calls)
{
	const int n = 100003;
	struct rl_adamw_hparams hp = {
	    .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
	float *p[2], *m[2], *v[2], *g = malloc((size_t)n * sizeof(float));
	uint32_t s = 0x600du;

	cr_assert_not_null(g);
	for (int k = 0; k < 2; k++) {
		p[k] = malloc((size_t)n * sizeof(float));
		m[k] = calloc((size_t)n, sizeof(float));
		v[k] = calloc((size_t)n, sizeof(float));
		cr_assert(p[k] && m[k] && v[k]);
	}
	for (int i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 17;
		s ^= s << 5;
		p[0][i] = p[1][i] = (float)(s >> 8) / 16777216.0f - 0.5f;
	}
	for (int step = 1; step <= 3; step++) {
		for (int i = 0; i < n; i++)
			g[i] = p[0][i] * (float)step - 0.25f;
		cr_assert_eq(rl_adamw_step_cpu(p[0], g, m[0], v[0], n, &hp, step, NULL), 0);
		for (int i = 0; i < n; i += 7) {
			int len = n - i < 7 ? n - i : 7;

			cr_assert_eq(rl_adamw_step_cpu(p[1] + i, g + i, m[1] + i, v[1] + i, len,
			                               &hp, step, NULL),
			             0);
		}
	}
	cr_expect_arr_eq(p[0], p[1], (size_t)n * sizeof(float));
	cr_expect_arr_eq(m[0], m[1], (size_t)n * sizeof(float));
	cr_expect_arr_eq(v[0], v[1], (size_t)n * sizeof(float));
	for (int k = 0; k < 2; k++) {
		free(p[k]);
		free(m[k]);
		free(v[k]);
	}
	free(g);
}

Test(adamw, bad_arguments)
{
	float x[2] = {1, 2}, g[2] = {0.5f, -0.5f}, m[2] = {0}, v[2] = {0};
	struct rl_adamw_hparams hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};

	cr_expect_eq(rl_adamw_step_cpu(NULL, g, m, v, 2, &hp, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cpu(x, NULL, m, v, 2, &hp, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cpu(x, g, NULL, v, 2, &hp, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cpu(x, g, m, NULL, 2, &hp, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cpu(x, g, m, v, 2, NULL, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cpu(x, g, m, v, -1, &hp, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cpu(x, g, m, v, 2, &hp, 0, NULL), -1);
	cr_expect_eq(rl_adamw_step_cpu(x, g, m, v, 0, &hp, 1, NULL), 0);
}
