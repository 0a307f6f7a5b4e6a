/* The CPU ops (embedding, RMSNorm backward, SwiGLU, vector ops): every
 * backward against finite differences of its forward (gradcheck.h) and
 * against a double-precision formula, every forward against a naive
 * double-precision reference, on several shapes including odd ones and ones
 * large enough to take the threaded paths. Linear and the LM-head logprobs
 * have their own files (test_linear.c, test_logprobs.c). */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/embedding.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"
#include "kernels/vector.h"
#include "tests/unit/gradcheck.h"
#include "tests/unit/ops_test_util.h"

/* ---- embedding ---- */

struct emb_ctx {
	float *out, *table, *r;
	int32_t *ids;
	int n, dim, vocab;
};

static double emb_loss(void *p)
{
	struct emb_ctx *c = p;

	cr_assert_eq(rl_embedding_forward_cpu(rl_buf_f32(c->out), c->ids, rl_cbuf_f32(c->table),
	                                      c->n, c->dim, c->vocab, NULL),
	             0);
	return gc_dot(c->out, c->r, (size_t)c->n * c->dim);
}

static void emb_case(uint32_t *seed, int n, int dim, int vocab)
{
	size_t nt = (size_t)vocab * dim, no = (size_t)n * dim;
	struct emb_ctx c = {.n = n, .dim = dim, .vocab = vocab};

	c.ids = malloc((size_t)n * sizeof(*c.ids));
	cr_assert_not_null(c.ids);
	for (int t = 0; t < n; t++) /* vocab < n for most cases: ids repeat */
		c.ids[t] = (int32_t)(gc_rng(seed) % (uint32_t)vocab);
	c.table = frand(seed, nt, -1, 1);
	c.r = frand(seed, no, -1, 1);
	c.out = falloc(no);

	emb_loss(&c);
	for (int t = 0; t < n; t++)
		cr_expect_arr_eq(c.out + (size_t)t * dim, c.table + (size_t)c.ids[t] * dim,
		                 (size_t)dim * sizeof(float), "row %d is not table row %d", t,
		                 c.ids[t]);

	float *dt = frand(seed, nt, -1, 1), *before = fdup(dt, nt);
	double *want = dalloc(nt);

	cr_assert_eq(rl_embedding_backward_cpu(dt, rl_cbuf_f32(c.r), c.ids, n, dim, NULL), 0);
	gc_sub(dt, before, nt);
	for (int t = 0; t < n; t++)
		for (int j = 0; j < dim; j++)
			want[(size_t)c.ids[t] * dim + j] += c.r[(size_t)t * dim + j];
	close_all("dtable", dt, want, nt, 1e-5, 1e-6);
	gc_check("embedding dtable", c.table, nt, dt, emb_loss, &c, NULL);

	free(c.ids);
	free(c.table);
	free(c.r);
	free(c.out);
	free(dt);
	free(before);
	free(want);
}

Test(embedding, gather_and_scatter)
{
	uint32_t seed = 0x1234567u;

	emb_case(&seed, 1, 1, 1);
	emb_case(&seed, 5, 3, 2);
	emb_case(&seed, 17, 130, 11);
	emb_case(&seed, 300, 300, 37); /* threaded, five column blocks */
}

Test(embedding, bad_ids_leave_their_rows)
{
	const float table[6] = {1, 2, 3, 4, 5, 6};
	const int32_t ids[4] = {2, -2, 3, 0};
	float out[8];

	for (int i = 0; i < 8; i++)
		out[i] = -7;
	cr_expect_eq(
	    rl_embedding_forward_cpu(rl_buf_f32(out), ids, rl_cbuf_f32(table), 4, 2, 3, NULL), -1);
	const float want[8] = {5, 6, -7, -7, -7, -7, 1, 2};
	cr_expect_arr_eq(out, want, sizeof(want));
}

/* -1 marks a token another tensor-parallel rank holds: a zero row, and no
 * gradient anywhere. */
Test(embedding, id_minus_one_is_a_zero_row)
{
	const float table[6] = {1, 2, 3, 4, 5, 6};
	const int32_t ids[3] = {2, -1, 0};
	const float dout[6] = {10, 20, 30, 40, 50, 60};
	float out[6], dtable[6] = {0};

	for (int i = 0; i < 6; i++)
		out[i] = -7;
	cr_expect_eq(
	    rl_embedding_forward_cpu(rl_buf_f32(out), ids, rl_cbuf_f32(table), 3, 2, 3, NULL), 0);
	const float want[6] = {5, 6, 0, 0, 1, 2};
	cr_expect_arr_eq(out, want, sizeof(want));
	cr_expect_eq(rl_embedding_backward_cpu(dtable, rl_cbuf_f32(dout), ids, 3, 2, NULL), 0);
	const float dwant[6] = {50, 60, 0, 0, 10, 20};
	cr_expect_arr_eq(dtable, dwant, sizeof(dwant));
}

Test(embedding, bad_arguments)
{
	float t[2] = {0}, o[2];
	int32_t id = 0;

	cr_expect_eq(rl_embedding_forward_cpu(rl_buf_f32(NULL), &id, rl_cbuf_f32(t), 1, 2, 1, NULL),
	             -1);
	cr_expect_eq(rl_embedding_forward_cpu(rl_buf_f32(o), NULL, rl_cbuf_f32(t), 1, 2, 1, NULL),
	             -1);
	cr_expect_eq(rl_embedding_forward_cpu(rl_buf_f32(o), &id, rl_cbuf_f32(NULL), 1, 2, 1, NULL),
	             -1);
	cr_expect_eq(rl_embedding_forward_cpu(rl_buf_f32(o), &id, rl_cbuf_f32(t), -1, 2, 1, NULL),
	             -1);
	cr_expect_eq(rl_embedding_forward_cpu(rl_buf_f32(o), &id, rl_cbuf_f32(t), 1, -2, 1, NULL),
	             -1);
	cr_expect_eq(rl_embedding_forward_cpu(rl_buf_f32(o), &id, rl_cbuf_f32(t), 1, 2, 0, NULL),
	             -1);
	cr_expect_eq(rl_embedding_forward_cpu(rl_buf_f32(o), &id, rl_cbuf_f32(t), 0, 2, 1, NULL),
	             0);
	cr_expect_eq(rl_embedding_backward_cpu(NULL, rl_cbuf_f32(o), &id, 1, 2, NULL), -1);
	cr_expect_eq(rl_embedding_backward_cpu(t, rl_cbuf_f32(NULL), &id, 1, 2, NULL), -1);
	cr_expect_eq(rl_embedding_backward_cpu(t, rl_cbuf_f32(o), NULL, 1, 2, NULL), -1);
	cr_expect_eq(rl_embedding_backward_cpu(t, rl_cbuf_f32(o), &id, -1, 2, NULL), -1);
	cr_expect_eq(rl_embedding_backward_cpu(t, rl_cbuf_f32(o), &id, 1, -1, NULL), -1);
}

/* ---- RMSNorm backward ---- */

struct rms_ctx {
	float *y, *x, *w, *r;
	int rows, dim;
	float eps;
};

static double rms_loss(void *p)
{
	struct rms_ctx *c = p;

	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_f32(c->y), NULL, rl_cbuf_f32(c->x),
	                                    rl_cbuf_f32(c->w), c->rows, c->dim, c->eps, NULL),
	             0);
	return gc_dot(c->y, c->r, (size_t)c->rows * c->dim);
}

static void rms_case(uint32_t *seed, int rows, int dim, float eps)
{
	size_t n = (size_t)rows * dim;
	struct rms_ctx c = {.rows = rows, .dim = dim, .eps = eps};
	float *rstd = falloc((size_t)rows);

	c.x = frand(seed, n, -2, 2);
	c.w = frand(seed, (size_t)dim, -1.5f, 1.5f);
	c.r = frand(seed, n, -1, 1);
	c.y = falloc(n);
	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_f32(c.y), rstd, rl_cbuf_f32(c.x),
	                                    rl_cbuf_f32(c.w), rows, dim, eps, NULL),
	             0);

	float *dx = frand(seed, n, -1, 1), *dw = frand(seed, (size_t)dim, -1, 1);
	float *dx0 = fdup(dx, n), *dw0 = fdup(dw, (size_t)dim);

	cr_assert_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(dx), dw, rl_cbuf_f32(c.r), rl_cbuf_f32(c.x),
	                                     rl_cbuf_f32(c.w), rstd, rows, dim, NULL),
	             0);
	gc_sub(dx, dx0, n);
	gc_sub(dw, dw0, (size_t)dim);

	/* the formula in double, from an rstd of its own */
	double *dx_ref = dalloc(n), *dw_ref = dalloc((size_t)dim);

	for (int r = 0; r < rows; r++) {
		const float *xr = c.x + (size_t)r * dim, *gr = c.r + (size_t)r * dim;
		double ss = 0.0, dot = 0.0;

		for (int i = 0; i < dim; i++)
			ss += (double)xr[i] * xr[i];
		double s = 1.0 / sqrt(ss / dim + (double)eps);
		for (int i = 0; i < dim; i++)
			dot += (double)gr[i] * c.w[i] * xr[i] * s;
		for (int i = 0; i < dim; i++) {
			double xh = xr[i] * s;

			dx_ref[(size_t)r * dim + i] = s * (gr[i] * (double)c.w[i] - xh * dot / dim);
			dw_ref[i] += gr[i] * xh;
		}
	}
	close_all("rmsnorm dx", dx, dx_ref, n, 1e-4, 1e-5 * absmax(dx_ref, n));
	close_all("rmsnorm dweight", dw, dw_ref, (size_t)dim, 1e-4,
	          1e-5 * absmax(dw_ref, (size_t)dim));
	gc_check("rmsnorm dx", c.x, n, dx, rms_loss, &c, NULL);
	gc_check("rmsnorm dweight", c.w, (size_t)dim, dw, rms_loss, &c, NULL);

	/* dweight == NULL: the same dx, bit for bit */
	memset(dx, 0, n * sizeof(*dx));
	memset(dx0, 0, n * sizeof(*dx));
	cr_assert_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(dx), dw, rl_cbuf_f32(c.r), rl_cbuf_f32(c.x),
	                                     rl_cbuf_f32(c.w), rstd, rows, dim, NULL),
	             0);
	cr_assert_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(dx0), NULL, rl_cbuf_f32(c.r),
	                                     rl_cbuf_f32(c.x), rl_cbuf_f32(c.w), rstd, rows, dim,
	                                     NULL),
	             0);
	cr_expect_arr_eq(dx, dx0, n * sizeof(*dx), "dx differs with dweight == NULL");

	free(rstd);
	free(c.x);
	free(c.w);
	free(c.r);
	free(c.y);
	free(dx);
	free(dw);
	free(dx0);
	free(dw0);
	free(dx_ref);
	free(dw_ref);
}

Test(rmsnorm_backward, finite_differences)
{
	uint32_t seed = 0xabcdef1u;

	rms_case(&seed, 3, 1, 1.0f); /* dim 1: only eps keeps dx from vanishing */
	rms_case(&seed, 1, 7, 1e-5f);
	rms_case(&seed, 5, 64, 1e-6f);
	rms_case(&seed, 2, 1000, 1e-5f);
	rms_case(&seed, 300, 128, 1e-6f); /* two row blocks */
	rms_case(&seed, 70, 1001, 1e-5f); /* four row blocks, threaded */
}

Test(rmsnorm_backward, bad_arguments)
{
	float v[4] = {1, 2, 3, 4}, g[4];

	cr_expect_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(NULL), g, rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                     rl_cbuf_f32(v), v, 1, 4, NULL),
	             -1);
	cr_expect_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(NULL), rl_cbuf_f32(v),
	                                     rl_cbuf_f32(v), v, 1, 4, NULL),
	             -1);
	cr_expect_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(NULL),
	                                     rl_cbuf_f32(v), v, 1, 4, NULL),
	             -1);
	cr_expect_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                     rl_cbuf_f32(NULL), v, 1, 4, NULL),
	             -1);
	cr_expect_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                     rl_cbuf_f32(v), NULL, 1, 4, NULL),
	             -1);
	cr_expect_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                     rl_cbuf_f32(v), v, -1, 4, NULL),
	             -1);
	cr_expect_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                     rl_cbuf_f32(v), v, 1, 0, NULL),
	             -1);
	cr_expect_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                     rl_cbuf_f32(v), v, 0, 4, NULL),
	             0);
}

/* ---- SwiGLU ---- */

struct swiglu_ctx {
	float *h, *g, *u, *r;
	int64_t n;
};

static double swiglu_loss(void *p)
{
	struct swiglu_ctx *c = p;

	cr_assert_eq(rl_swiglu_forward_cpu(rl_buf_f32(c->h), rl_cbuf_f32(c->g), rl_cbuf_f32(c->u),
	                                   c->n, NULL),
	             0);
	return gc_dot(c->h, c->r, (size_t)c->n);
}

static double silu_ref(double g)
{
	return g / (1.0 + exp(-g));
}

static void swiglu_case(uint32_t *seed, int64_t n, int fd)
{
	size_t sn = (size_t)n;
	struct swiglu_ctx c = {.n = n};

	c.g = frand(seed, sn, -6, 6);
	c.u = frand(seed, sn, -2, 2);
	c.r = frand(seed, sn, -1, 1);
	c.h = falloc(sn);
	swiglu_loss(&c);

	double *want = dalloc(sn), *dg_ref = dalloc(sn), *du_ref = dalloc(sn);

	for (size_t i = 0; i < sn; i++) {
		double g = c.g[i], s = 1.0 / (1.0 + exp(-g));

		want[i] = silu_ref(g) * c.u[i];
		du_ref[i] = c.r[i] * silu_ref(g);
		dg_ref[i] = c.r[i] * (double)c.u[i] * (s + g * s * (1.0 - s));
	}
	close_all("swiglu h", c.h, want, sn, 1e-6, 1e-7);

	float *dg = frand(seed, sn, -1, 1), *du = frand(seed, sn, -1, 1);
	float *dg0 = fdup(dg, sn), *du0 = fdup(du, sn);

	cr_assert_eq(rl_swiglu_backward_cpu(rl_buf_f32(dg), rl_buf_f32(du), rl_cbuf_f32(c.r),
	                                    rl_cbuf_f32(c.g), rl_cbuf_f32(c.u), n, NULL),
	             0);
	gc_sub(dg, dg0, sn);
	gc_sub(du, du0, sn);
	close_all("swiglu dgate", dg, dg_ref, sn, 1e-5, 1e-6);
	close_all("swiglu dup", du, du_ref, sn, 1e-5, 1e-6);
	if (fd) {
		gc_check("swiglu dgate", c.g, sn, dg, swiglu_loss, &c, NULL);
		gc_check("swiglu dup", c.u, sn, du, swiglu_loss, &c, NULL);
	}
	free(c.g);
	free(c.u);
	free(c.r);
	free(c.h);
	free(want);
	free(dg_ref);
	free(du_ref);
	free(dg);
	free(du);
	free(dg0);
	free(du0);
}

Test(swiglu, finite_differences)
{
	uint32_t seed = 0x5eed5u;

	swiglu_case(&seed, 1, 1);
	swiglu_case(&seed, 7, 1);
	swiglu_case(&seed, 1000, 1);
	swiglu_case(&seed, 40001, 0); /* threaded: the formula only */
}

Test(swiglu, extreme_gates)
{
	enum { N = 14 };
	const float g[N] = {-1e4f, -200, -100, -88, -87, -80, -50, -20, 0, 20, 50, 88, 100, 1e4f};
	float u[N], h[N], dg[N] = {0}, du[N] = {0}, dh[N];
	double want[N], dg_want[N];

	for (int i = 0; i < N; i++) {
		u[i] = 1.5f;
		dh[i] = 1.0f;
		double s = 1.0 / (1.0 + exp(-(double)g[i]));
		want[i] = g[i] * s * 1.5;
		dg_want[i] = 1.5 * (s + g[i] * s * (1.0 - s));
	}
	cr_assert_eq(rl_swiglu_forward_cpu(rl_buf_f32(h), rl_cbuf_f32(g), rl_cbuf_f32(u), N, NULL),
	             0);
	cr_assert_eq(rl_swiglu_backward_cpu(rl_buf_f32(dg), rl_buf_f32(du), rl_cbuf_f32(dh),
	                                    rl_cbuf_f32(g), rl_cbuf_f32(u), N, NULL),
	             0);
	for (int i = 0; i < N; i++)
		cr_expect(isfinite(h[i]) && isfinite(dg[i]) && isfinite(du[i]), "g = %g", g[i]);
	/* relative accuracy down to g = -87 (silu ~ 1e-36); below, zero */
	close_all("extreme h", h, want, N, 1e-6, 1e-35);
	close_all("extreme dgate", dg, dg_want, N, 1e-5, 1e-35);

	/* NaN stays NaN */
	float gn = NAN, un = 1.0f, hn = 0, dgn = 0, dun = 0, dhn = 1.0f;
	cr_assert_eq(
	    rl_swiglu_forward_cpu(rl_buf_f32(&hn), rl_cbuf_f32(&gn), rl_cbuf_f32(&un), 1, NULL), 0);
	cr_assert_eq(rl_swiglu_backward_cpu(rl_buf_f32(&dgn), rl_buf_f32(&dun), rl_cbuf_f32(&dhn),
	                                    rl_cbuf_f32(&gn), rl_cbuf_f32(&un), 1, NULL),
	             0);
	cr_expect(isnan(hn) && isnan(dgn) && isnan(dun), "NaN gate: h %g dgate %g dup %g",
	          (double)hn, (double)dgn, (double)dun);
}

Test(swiglu, bad_arguments)
{
	float v[2] = {1, 2}, o[2];

	cr_expect_eq(
	    rl_swiglu_forward_cpu(rl_buf_f32(NULL), rl_cbuf_f32(v), rl_cbuf_f32(v), 2, NULL), -1);
	cr_expect_eq(
	    rl_swiglu_forward_cpu(rl_buf_f32(o), rl_cbuf_f32(NULL), rl_cbuf_f32(v), 2, NULL), -1);
	cr_expect_eq(
	    rl_swiglu_forward_cpu(rl_buf_f32(o), rl_cbuf_f32(v), rl_cbuf_f32(NULL), 2, NULL), -1);
	cr_expect_eq(rl_swiglu_forward_cpu(rl_buf_f32(o), rl_cbuf_f32(v), rl_cbuf_f32(v), -1, NULL),
	             -1);
	cr_expect_eq(rl_swiglu_backward_cpu(rl_buf_f32(NULL), rl_buf_f32(o), rl_cbuf_f32(v),
	                                    rl_cbuf_f32(v), rl_cbuf_f32(v), 2, NULL),
	             -1);
	cr_expect_eq(rl_swiglu_backward_cpu(rl_buf_f32(o), rl_buf_f32(NULL), rl_cbuf_f32(v),
	                                    rl_cbuf_f32(v), rl_cbuf_f32(v), 2, NULL),
	             -1);
	cr_expect_eq(rl_swiglu_backward_cpu(rl_buf_f32(o), rl_buf_f32(o), rl_cbuf_f32(NULL),
	                                    rl_cbuf_f32(v), rl_cbuf_f32(v), 2, NULL),
	             -1);
	cr_expect_eq(rl_swiglu_backward_cpu(rl_buf_f32(o), rl_buf_f32(o), rl_cbuf_f32(v),
	                                    rl_cbuf_f32(NULL), rl_cbuf_f32(v), 2, NULL),
	             -1);
	cr_expect_eq(rl_swiglu_backward_cpu(rl_buf_f32(o), rl_buf_f32(o), rl_cbuf_f32(v),
	                                    rl_cbuf_f32(v), rl_cbuf_f32(NULL), 2, NULL),
	             -1);
	cr_expect_eq(rl_swiglu_backward_cpu(rl_buf_f32(o), rl_buf_f32(o), rl_cbuf_f32(v),
	                                    rl_cbuf_f32(v), rl_cbuf_f32(v), -2, NULL),
	             -1);
}

/* ---- vector ops ---- */

static void vec_case(uint32_t *seed, int64_t n)
{
	size_t sn = (size_t)n;
	float *x = frand(seed, sn, -3, 3), *y = frand(seed, sn, -3, 3);
	double *want = dalloc(sn);
	long double ss = 0.0L; /* the reference's own error stays far below 1e-12 */

	for (size_t i = 0; i < sn; i++)
		want[i] = (double)y[i] + x[i];
	cr_assert_eq(rl_add_cpu(rl_buf_f32(y), rl_cbuf_f32(x), n, NULL), 0);
	close_all("add", y, want, sn, 6e-8, 0); /* one rounding: half an ulp */
	for (size_t i = 0; i < sn; i++)
		want[i] = (double)x[i] * -0.75;
	cr_assert_eq(rl_scale_cpu(x, n, -0.75f, NULL), 0);
	close_all("scale", x, want, sn, 6e-8, 0);

	double out = 5.0; /* it adds to what is there */

	for (size_t i = 0; i < sn; i++)
		ss += (long double)x[i] * x[i];
	cr_assert_eq(rl_sum_squares_cpu(&out, x, n, NULL), 0);
	double want_ss = (double)(5.0L + ss);
	cr_expect(fabs(out - want_ss) <= 1e-12 * want_ss, "n %lld: %.17g vs %.17g", (long long)n,
	          out, want_ss);
	free(x);
	free(y);
	free(want);
}

Test(vector, add_scale_sum_squares)
{
	uint32_t seed = 0x31415u;
	static const int64_t sizes[] = {0, 1, 7, 1000, 70001, 100000, 9000001};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		vec_case(&seed, sizes[i]);
}

Test(vector, bad_arguments)
{
	float v[2] = {1, 2};
	double out = 0;

	cr_expect_eq(rl_add_cpu(rl_buf_f32(NULL), rl_cbuf_f32(v), 2, NULL), -1);
	cr_expect_eq(rl_add_cpu(rl_buf_f32(v), rl_cbuf_f32(NULL), 2, NULL), -1);
	cr_expect_eq(rl_add_cpu(rl_buf_f32(v), rl_cbuf_f32(v), -1, NULL), -1);
	cr_expect_eq(rl_scale_cpu(NULL, 2, 1, NULL), -1);
	cr_expect_eq(rl_scale_cpu(v, -1, 1, NULL), -1);
	cr_expect_eq(rl_sum_squares_cpu(NULL, v, 2, NULL), -1);
	cr_expect_eq(rl_sum_squares_cpu(&out, NULL, 2, NULL), -1);
	cr_expect_eq(rl_sum_squares_cpu(&out, v, -1, NULL), -1);
}

/* ---- determinism: the same bits whatever the thread count ---- */

Test(determinism, thread_count_does_not_change_reductions)
{
#ifndef _OPENMP
	cr_skip_test("built without OpenMP");
#else
	uint32_t seed = 0x2718u;
	int rows = 300, dim = 1001;
	size_t n = (size_t)rows * dim;
	float *x = frand(&seed, n, -2, 2), *w = frand(&seed, (size_t)dim, -1, 1);
	float *dy = frand(&seed, n, -1, 1), *rstd = falloc((size_t)rows), *y = falloc(n);
	float *dx[2] = {falloc(n), falloc(n)}, *dw[2] = {falloc(dim), falloc(dim)};
	double ss[2] = {0, 0};
	int saved = omp_get_max_threads();

	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_f32(y), rstd, rl_cbuf_f32(x), rl_cbuf_f32(w),
	                                    rows, dim, 1e-5f, NULL),
	             0);
	for (int k = 0; k < 2; k++) {
		omp_set_num_threads(k ? 3 : 1);
		memset(dx[k], 0, n * sizeof(float));
		memset(dw[k], 0, (size_t)dim * sizeof(float));
		cr_assert_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(dx[k]), dw[k], rl_cbuf_f32(dy),
		                                     rl_cbuf_f32(x), rl_cbuf_f32(w), rstd, rows,
		                                     dim, NULL),
		             0);
		cr_assert_eq(rl_sum_squares_cpu(&ss[k], dy, (int64_t)n, NULL), 0);
	}
	omp_set_num_threads(saved);
	cr_expect_arr_eq(dx[0], dx[1], n * sizeof(float));
	cr_expect_arr_eq(dw[0], dw[1], (size_t)dim * sizeof(float));
	cr_expect(ss[0] == ss[1], "sum of squares %.17g vs %.17g", ss[0], ss[1]);
	free(x);
	free(w);
	free(dy);
	free(rstd);
	free(y);
	free(dx[0]);
	free(dx[1]);
	free(dw[0]);
	free(dw[1]);
#endif
}
