/* RoPE: inv_freq and rotations against fixtures written by transformers'
 * own rotary code (tests/fixtures/fixture_rope.py), the rotation against a
 * double-precision formula, and the backward against finite differences. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/rope.h"
#include "tests/unit/ops_test_util.h"

/* ---- fixtures: "key v1 v2 ..." lines, '#' starts a comment line ---- */

struct rope_fixture {
	int head_dim, n_tokens, n_heads;
	double theta;
	struct rl_rope_scaling scaling;
	int32_t *pos;
	float *inv_freq, *x, *out;
};

static void read_floats(FILE *f, const char *path, const char *key, float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(fscanf(f, "%f", &v[i]), 1, "%s: %s[%zu] unreadable", path, key, i);
}

static void fixture_load(struct rope_fixture *fx, const char *name)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *path = NULL;
	char key[64], type[32] = "";
	FILE *f;

	memset(fx, 0, sizeof(*fx));
	cr_assert_geq(asprintf(&path, "%s/tests/fixtures/rope/%s.txt", top, name), 0);
	f = fopen(path, "r");
	cr_assert_not_null(f, "cannot open %s (set top_srcdir)", path);
	while (fscanf(f, "%63s", key) == 1) {
		if (key[0] == '#') {
			int c;

			while ((c = fgetc(f)) != EOF && c != '\n')
				;
		} else if (!strcmp(key, "head_dim")) {
			cr_assert_eq(fscanf(f, "%d", &fx->head_dim), 1);
		} else if (!strcmp(key, "theta")) {
			cr_assert_eq(fscanf(f, "%lf", &fx->theta), 1);
		} else if (!strcmp(key, "rope_type")) {
			cr_assert_eq(fscanf(f, "%31s", type), 1);
		} else if (!strcmp(key, "factor")) {
			cr_assert_eq(fscanf(f, "%lf", &fx->scaling.factor), 1);
		} else if (!strcmp(key, "low_freq_factor")) {
			cr_assert_eq(fscanf(f, "%lf", &fx->scaling.low_freq_factor), 1);
		} else if (!strcmp(key, "high_freq_factor")) {
			cr_assert_eq(fscanf(f, "%lf", &fx->scaling.high_freq_factor), 1);
		} else if (!strcmp(key, "original_max_position_embeddings")) {
			cr_assert_eq(fscanf(f, "%d", &fx->scaling.original_max_position_embeddings),
			             1);
		} else if (!strcmp(key, "n_tokens")) {
			cr_assert_eq(fscanf(f, "%d", &fx->n_tokens), 1);
		} else if (!strcmp(key, "n_heads")) {
			cr_assert_eq(fscanf(f, "%d", &fx->n_heads), 1);
		} else if (!strcmp(key, "pos")) {
			fx->pos = calloc((size_t)fx->n_tokens + 1, sizeof(*fx->pos));
			cr_assert_not_null(fx->pos);
			for (int i = 0; i < fx->n_tokens; i++)
				cr_assert_eq(fscanf(f, "%" SCNd32, &fx->pos[i]), 1);
		} else if (!strcmp(key, "inv_freq")) {
			fx->inv_freq = falloc((size_t)fx->head_dim / 2);
			read_floats(f, path, key, fx->inv_freq, (size_t)fx->head_dim / 2);
		} else if (!strcmp(key, "x") || !strcmp(key, "out")) {
			size_t n = (size_t)fx->n_tokens * fx->n_heads * fx->head_dim;
			float **dst = key[0] == 'x' ? &fx->x : &fx->out;

			*dst = falloc(n);
			read_floats(f, path, key, *dst, n);
		} else {
			cr_assert_fail("%s: unknown key %s", path, key);
		}
	}
	fclose(f);
	cr_assert(fx->head_dim > 0 && fx->n_tokens > 0 && fx->n_heads > 0, "%s: sizes", path);
	cr_assert(fx->pos && fx->inv_freq && fx->x && fx->out, "%s: missing arrays", path);
	if (!strcmp(type, "llama3"))
		fx->scaling.type = RL_ROPE_LLAMA3;
	else
		cr_assert_str_eq(type, "default", "%s: rope_type", path);
	free(path);
}

static void fixture_free(struct rope_fixture *fx)
{
	free(fx->pos);
	free(fx->inv_freq);
	free(fx->x);
	free(fx->out);
}

static const char *const fixture_names[] = {"default_d64_t1e4", "llama3_d128_t5e5",
                                            "default_d16_t1e6"};
#define N_FIXTURES (sizeof(fixture_names) / sizeof(fixture_names[0]))

/* Distance in units in the last place between two finite floats of one sign. */
static long ulps(float a, float b)
{
	int32_t ia, ib;

	memcpy(&ia, &a, sizeof(ia));
	memcpy(&ib, &b, sizeof(ib));
	return labs((long)ia - (long)ib);
}

Test(rope, inv_freq_matches_transformers)
{
	for (size_t k = 0; k < N_FIXTURES; k++) {
		struct rope_fixture fx;
		long worst = 0;

		fixture_load(&fx, fixture_names[k]);
		int half = fx.head_dim / 2;
		float *got = falloc((size_t)half);

		rl_rope_inv_freq(got, fx.head_dim, fx.theta, &fx.scaling);
		for (int i = 0; i < half; i++) {
			expect_close(fixture_names[k], (size_t)i, got[i], fx.inv_freq[i], 1e-6, 0);
			if (ulps(got[i], fx.inv_freq[i]) > worst)
				worst = ulps(got[i], fx.inv_freq[i]);
		}
		/* torch's vectorized pow may round differently from libm's powf */
		cr_expect_leq(worst, 2, "%s: inv_freq is %ld ulps from transformers",
		              fixture_names[k], worst);
		free(got);
		fixture_free(&fx);
	}
}

Test(rope, llama3_scaling_changes_only_low_frequencies)
{
	/* The fixture's llama3 config against its unscaled frequencies: the
	 * three bands of the llama3 rule must all occur, or the test above
	 * would not exercise the smoothing branch. */
	struct rope_fixture fx;
	struct rl_rope_scaling none = {.type = RL_ROPE_DEFAULT};
	int kept = 0, divided = 0, smoothed = 0;

	fixture_load(&fx, "llama3_d128_t5e5");
	int half = fx.head_dim / 2;
	float *plain = falloc((size_t)half);

	rl_rope_inv_freq(plain, fx.head_dim, fx.theta, &none);
	for (int i = 0; i < half; i++) {
		double r = (double)plain[i] / fx.inv_freq[i];

		if (fabs(r - 1.0) < 1e-6)
			kept++;
		else if (fabs(r - fx.scaling.factor) < 1e-5 * fx.scaling.factor)
			divided++;
		else
			smoothed++;
	}
	cr_expect(kept > 0 && divided > 0 && smoothed > 0, "bands %d %d %d", kept, divided,
	          smoothed);
	free(plain);
	fixture_free(&fx);
}

Test(rope, rotation_matches_transformers)
{
	for (size_t k = 0; k < N_FIXTURES; k++) {
		struct rope_fixture fx;

		fixture_load(&fx, fixture_names[k]);
		size_t n = (size_t)fx.n_tokens * fx.n_heads * fx.head_dim;
		float *inv = falloc((size_t)fx.head_dim / 2);
		float *y = falloc(n);

		/* with our own frequencies: what the model will run */
		rl_rope_inv_freq(inv, fx.head_dim, fx.theta, &fx.scaling);
		memcpy(y, fx.x, n * sizeof(*y));
		cr_assert_eq(rl_rope_forward_cpu(rl_buf_f32(y), fx.pos, inv, fx.n_tokens,
		                                 fx.n_heads, fx.head_dim, NULL),
		             0);
		for (size_t i = 0; i < n; i++)
			expect_close(fixture_names[k], i, y[i], fx.out[i], 1e-5, 1e-5);
		free(inv);
		free(y);
		fixture_free(&fx);
	}
}

Test(rope, table_quarter_turns)
{
	/* head_dim 4, theta 10000: inv_freq = {1, 1/100}. Token 0 at position 0
	 * stays put; token 1 at position 1 turns pair (0, 2) by 1 rad and pair
	 * (1, 3) by 0.01 rad. */
	const struct rl_rope_scaling none = {.type = RL_ROPE_DEFAULT};
	const int32_t pos[2] = {0, 1};
	float inv[2];
	float x[8] = {1, 2, 0, -1, 1, 2, 0, -1};
	const double want[8] = {1,
	                        2,
	                        0,
	                        -1,
	                        0.54030230586813977,
	                        2 * 0.99995000041666526 + 0.0099998333341666645,
	                        0.8414709848078965,
	                        -0.99995000041666526 + 2 * 0.0099998333341666645};

	rl_rope_inv_freq(inv, 4, 10000.0, &none);
	expect_close("inv_freq", 0, inv[0], 1.0, 0, 0);
	expect_close("inv_freq", 1, inv[1], 0.01, 1e-7, 0);
	cr_assert_eq(rl_rope_forward_cpu(rl_buf_f32(x), pos, inv, 2, 1, 4, NULL), 0);
	for (size_t i = 0; i < 8; i++)
		expect_close("y", i, x[i], want[i], 1e-6, 1e-7);
}

/* The rotation in double, with the angle the kernels use (a float product). */
static void rope_ref(double *y, const double *x, const int32_t *pos, const float *inv, int n,
                     int n_heads, int head_dim)
{
	int half = head_dim / 2;

	for (int t = 0; t < n; t++)
		for (int h = 0; h < n_heads; h++) {
			const double *xr = x + ((size_t)t * n_heads + h) * head_dim;
			double *yr = y + ((size_t)t * n_heads + h) * head_dim;

			for (int i = 0; i < half; i++) {
				double a = (double)((float)pos[t] * inv[i]);
				double c = cos(a), s = sin(a);

				yr[i] = xr[i] * c - xr[i + half] * s;
				yr[i + half] = xr[i + half] * c + xr[i] * s;
			}
		}
}

Test(rope, random_shapes_match_double_formula)
{
	/* 300 and 512 cross the kernel's chunk of frequencies */
	static const int dims[] = {2, 8, 64, 128, 300, 512};
	const struct rl_rope_scaling none = {.type = RL_ROPE_DEFAULT};
	uint32_t seed = 0x1234567u;

	for (size_t k = 0; k < sizeof(dims) / sizeof(dims[0]); k++) {
		int d = dims[k], n = 1 + (int)(gc_rng(&seed) % 9), heads = 1 + (int)(k % 3);
		size_t len = (size_t)n * heads * d;
		float *x = frand(&seed, len, -2.0f, 2.0f), *inv = falloc((size_t)d / 2);
		int32_t *pos = calloc((size_t)n, sizeof(*pos));
		double *xd = widen(x, len), *want = malloc(len * sizeof(*want));

		cr_assert(pos && want);
		for (int t = 0; t < n; t++)
			pos[t] = (int32_t)(gc_rng(&seed) % 5000);
		rl_rope_inv_freq(inv, d, 10000.0, &none);
		rope_ref(want, xd, pos, inv, n, heads, d);
		cr_assert_eq(rl_rope_forward_cpu(rl_buf_f32(x), pos, inv, n, heads, d, NULL), 0);
		for (size_t i = 0; i < len; i++)
			expect_close("y", i, x[i], want[i], 1e-5, 1e-5);
		free(x);
		free(inv);
		free(pos);
		free(xd);
		free(want);
	}
}

Test(rope, backward_matches_finite_differences)
{
	/* L(x) = sum(rope(x) * R) in double; dL/dx by central differences
	 * against the kernel's backward applied to R. Positions restart, as
	 * in packed sequences. */
	enum { N = 5, H = 3, D = 16 };
	const struct rl_rope_scaling none = {.type = RL_ROPE_DEFAULT};
	const int32_t pos[N] = {0, 1, 2, 0, 700};
	const size_t len = (size_t)N * H * D;
	uint32_t seed = 0xfeedu;
	float inv[D / 2];
	float *x = frand(&seed, len, -1.0f, 1.0f), *r = frand(&seed, len, -1.0f, 1.0f);
	float *dx = falloc(len);
	double *xd = widen(x, len), *y = malloc(len * sizeof(*y));
	const double h = 1e-4;

	cr_assert_not_null(y);
	rl_rope_inv_freq(inv, D, 10000.0, &none);
	memcpy(dx, r, len * sizeof(*dx));
	cr_assert_eq(rl_rope_backward_cpu(rl_buf_f32(dx), pos, inv, N, H, D, NULL), 0);
	for (size_t i = 0; i < len; i++) {
		double lp = 0, lm = 0, keep = xd[i];

		xd[i] = keep + h;
		rope_ref(y, xd, pos, inv, N, H, D);
		for (size_t j = 0; j < len; j++)
			lp += y[j] * r[j];
		xd[i] = keep - h;
		rope_ref(y, xd, pos, inv, N, H, D);
		for (size_t j = 0; j < len; j++)
			lm += y[j] * r[j];
		xd[i] = keep;
		expect_close("dx", i, dx[i], (lp - lm) / (2 * h), 1e-5, 1e-6);
	}
	free(x);
	free(r);
	free(dx);
	free(xd);
	free(y);
}

Test(rope, backward_undoes_forward)
{
	enum { N = 4, H = 2, D = 64 };
	const struct rl_rope_scaling l3 = {RL_ROPE_LLAMA3, 8.0, 1.0, 4.0, 8192};
	const int32_t pos[N] = {3, 100, 8000, 65535};
	const size_t len = (size_t)N * H * D;
	uint32_t seed = 0xabcdefu;
	float inv[D / 2];
	float *x = frand(&seed, len, -3.0f, 3.0f), *y = falloc(len);

	rl_rope_inv_freq(inv, D, 500000.0, &l3);
	memcpy(y, x, len * sizeof(*y));
	cr_assert_eq(rl_rope_forward_cpu(rl_buf_f32(y), pos, inv, N, H, D, NULL), 0);
	cr_assert_eq(rl_rope_backward_cpu(rl_buf_f32(y), pos, inv, N, H, D, NULL), 0);
	for (size_t i = 0; i < len; i++)
		expect_close("x", i, y[i], x[i], 0, 3e-6);
	free(x);
	free(y);
}

Test(rope, rejects_bad_arguments)
{
	float x[4] = {0}, inv[2] = {1, 1};
	const int32_t pos[1] = {0};

	cr_expect_eq(rl_rope_forward_cpu(rl_buf_f32(x), pos, inv, 1, 1, 3, NULL), -1,
	             "odd head_dim");
	cr_expect_eq(rl_rope_forward_cpu(rl_buf_f32(x), pos, inv, -1, 1, 4, NULL), -1,
	             "negative n");
	cr_expect_eq(rl_rope_forward_cpu(rl_buf_f32(x), pos, inv, 1, 0, 4, NULL), -1, "no heads");
	cr_expect_eq(rl_rope_backward_cpu(rl_buf_f32(NULL), pos, inv, 1, 1, 4, NULL), -1,
	             "NULL dx");
	cr_expect_eq(rl_rope_forward_cpu(rl_buf_f32(NULL), NULL, NULL, 0, 1, 4, NULL), 0,
	             "nothing to do");
}
