/* The mixture-of-experts ops (kernels/moe.h) held to references written
 * here rather than to the CPU op itself: the grouped GEMM against triple
 * loops in double over group layouts with empty, one-row and edge groups;
 * its backward against the loops and against finite differences, with the
 * accumulation, the NULL gradients and the untouched weight gradient of an
 * empty group; the combine against its sum and finite differences, with NaN
 * in the rows no slot names and garbage in the outputs it must overwrite;
 * the argument checks; and the fenced table, which must give the CPU
 * table's bits and refuse host memory where an op needs the backend's. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/fenced.h"
#include "kernels/moe.h"
#include "kernels/ops.h"
#include "tests/unit/gradcheck.h"
#include "tests/unit/ops_test_util.h"

/* fp32 rounding is relative to the sum of the magnitudes of the terms, not
 * to a result that cancels; a NaN fails (the comparison is written so) */
static int close_mag(const char *what, const float *got, const double *want, const double *mag,
                     size_t n, double rtol)
{
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (fabs((double)got[i] - want[i]) <= rtol * mag[i])
			continue;
		if (bad++ < 5)
			cr_expect(0, "%s[%zu]: got %.9g, want %.9g (scale %.3g)", what, i,
			          (double)got[i], want[i], mag[i]);
	}
	cr_expect(bad == 0, "%s: %d of %zu off", what, bad, n);
	return bad;
}

static void fill_nan(float *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = NAN;
}

/* a few sampled entries: the losses are bilinear, so the central
 * difference has no truncation error and the defaults' tolerances are
 * loose; what they catch is a wrong index, factor or sign */
static struct gc_opts fd_opts(void)
{
	struct gc_opts o = gc_default_opts();

	o.max_points = 25;
	return o;
}

/* ---- grouped linear ---- */

struct gl_ctx {
	float *y, *x, *w, *r;
	const int32_t *off;
	int groups, in, out, n;
};

static double gl_loss(void *p)
{
	struct gl_ctx *c = p;

	cr_assert_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(c->y), rl_cbuf_f32(c->x),
	                                           rl_cbuf_f32(c->w), c->off, c->groups, c->in,
	                                           c->out, NULL),
	             0);
	return gc_dot(c->y, c->r, (size_t)c->n * c->out);
}

/* y[r, o] = sum_i x[r, i] W_g[o, i] for r in group g; mag gets sum |x w| */
static void gl_ref_forward(double *y, double *mag, const struct gl_ctx *c, const float *w)
{
	for (int g = 0; g < c->groups; g++)
		for (int r = c->off[g]; r < c->off[g + 1]; r++)
			for (int o = 0; o < c->out; o++) {
				const float *wr = w + ((size_t)g * c->out + o) * c->in;
				double s = 0.0, m = 0.0;

				for (int i = 0; i < c->in; i++) {
					double p = (double)c->x[(size_t)r * c->in + i] * wr[i];
					s += p;
					m += fabs(p);
				}
				y[(size_t)r * c->out + o] = s;
				mag[(size_t)r * c->out + o] = m;
			}
}

/* dx[r, i] = sum_o dy[r, o] W_g[o, i] and dW_g[o, i] = sum_r dy[r, o] x[r, i]
 * with dy = R, each with its sum |term| */
static void gl_ref_backward(double *dx, double *dxm, double *dw, double *dwm,
                            const struct gl_ctx *c)
{
	for (int g = 0; g < c->groups; g++)
		for (int r = c->off[g]; r < c->off[g + 1]; r++)
			for (int o = 0; o < c->out; o++) {
				double d = c->r[(size_t)r * c->out + o];
				size_t wo = ((size_t)g * c->out + o) * c->in;

				for (int i = 0; i < c->in; i++) {
					double a = d * c->w[wo + i],
					       b = d * c->x[(size_t)r * c->in + i];

					dx[(size_t)r * c->in + i] += a;
					dxm[(size_t)r * c->in + i] += fabs(a);
					dw[wo + i] += b;
					dwm[wo + i] += fabs(b);
				}
			}
}

/* y starts as NaN with a NaN guard row past n (every row of y is written,
 * no row past n is), and the weights of empty groups are NaN (never read) */
static void gl_forward_check(const struct gl_ctx *c)
{
	size_t ny = (size_t)c->n * c->out, nw = (size_t)c->groups * c->out * c->in;
	float *y = falloc(ny + c->out), *w = fdup(c->w, nw), *guard = falloc(c->out);
	double *want = dalloc(ny), *mag = dalloc(ny);

	fill_nan(y, ny + c->out);
	fill_nan(guard, c->out);
	for (int g = 0; g < c->groups; g++)
		if (c->off[g] == c->off[g + 1])
			fill_nan(w + (size_t)g * c->out * c->in, (size_t)c->out * c->in);
	cr_assert_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(y), rl_cbuf_f32(c->x), rl_cbuf_f32(w),
	                                           c->off, c->groups, c->in, c->out, NULL),
	             0);
	gl_ref_forward(want, mag, c, w);
	/* in <= 130 products summed in fp32: well under 16 ulp of sum |x w| */
	close_mag("grouped y", y, want, mag, ny, 1e-6);
	cr_expect(!memcmp(y + ny, guard, c->out * sizeof(float)), "grouped y: row past n written");
	free(y);
	free(w);
	free(guard);
	free(want);
	free(mag);
}

static void gl_backward_check(uint32_t *seed, struct gl_ctx *c, int fd)
{
	size_t nx = (size_t)c->n * c->in, nw = (size_t)c->groups * c->out * c->in;
	/* prefilled (they are added into), with a guard row past n in dx */
	float *dx = frand(seed, nx + c->in, -1, 1), *dw = frand(seed, nw, -1, 1);
	float *dx0 = fdup(dx, nx + c->in), *dw0 = fdup(dw, nw);
	float *gx = falloc(nx + c->in), *gw = falloc(nw);
	double *rx = dalloc(nx), *rxm = dalloc(nx), *rw = dalloc(nw), *rwm = dalloc(nw);
	double *ax = dalloc(nx), *axm = dalloc(nx), *aw = dalloc(nw), *awm = dalloc(nw);

	cr_assert_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(dx), dw, rl_cbuf_f32(c->r),
	                                            rl_cbuf_f32(c->x), rl_cbuf_f32(c->w), c->off,
	                                            c->groups, c->in, c->out, NULL),
	             0);
	gl_ref_backward(rx, rxm, rw, rwm, c);
	for (size_t i = 0; i < nx; i++) {
		ax[i] = dx0[i] + rx[i];
		axm[i] = fabs(dx0[i]) + rxm[i];
	}
	for (size_t i = 0; i < nw; i++) {
		aw[i] = dw0[i] + rw[i];
		awm[i] = fabs(dw0[i]) + rwm[i];
	}
	/* sums of max(out, rows) <= 300 products plus the prior value */
	close_mag("grouped dx (accumulated)", dx, ax, axm, nx, 2e-6);
	close_mag("grouped dw (accumulated)", dw, aw, awm, nw, 2e-6);
	cr_expect(!memcmp(dx + nx, dx0 + nx, c->in * sizeof(float)),
	          "grouped dx: row past n written");
	for (int g = 0; g < c->groups; g++) {
		size_t o = (size_t)g * c->out * c->in;

		if (c->off[g] == c->off[g + 1])
			cr_expect(!memcmp(dw + o, dw0 + o, (size_t)c->out * c->in * sizeof(float)),
			          "grouped dw: empty group %d of %d changed", g, c->groups);
	}

	/* one gradient at a time, the input it does not need NULL */
	cr_assert_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(gx), NULL, rl_cbuf_f32(c->r),
	                                            rl_cbuf_f32(NULL), rl_cbuf_f32(c->w), c->off,
	                                            c->groups, c->in, c->out, NULL),
	             0);
	cr_assert_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(NULL), gw, rl_cbuf_f32(c->r),
	                                            rl_cbuf_f32(c->x), rl_cbuf_f32(NULL), c->off,
	                                            c->groups, c->in, c->out, NULL),
	             0);
	close_mag("grouped dx alone", gx, rx, rxm, nx, 2e-6);
	close_mag("grouped dw alone", gw, rw, rwm, nw, 2e-6);
	if (fd && c->n > 0) {
		struct gc_opts o = fd_opts();

		gc_check("grouped dx", c->x, nx, gx, gl_loss, c, &o);
		gc_check("grouped dw", c->w, nw, gw, gl_loss, c, &o);
	}
	free(dx);
	free(dw);
	free(dx0);
	free(dw0);
	free(gx);
	free(gw);
	free(rx);
	free(rxm);
	free(rw);
	free(rwm);
	free(ax);
	free(axm);
	free(aw);
	free(awm);
}

static void gl_case(uint32_t *seed, const int32_t *off, int groups, int in, int out, int fd)
{
	struct gl_ctx c = {.off = off, .groups = groups, .in = in, .out = out, .n = off[groups]};
	size_t nx = (size_t)c.n * in, ny = (size_t)c.n * out, nw = (size_t)groups * out * in;

	c.x = frand(seed, nx, -1, 1);
	c.w = frand(seed, nw, -1, 1);
	c.r = frand(seed, ny, -1, 1);
	c.y = falloc(ny);
	gl_forward_check(&c);
	gl_backward_check(seed, &c, fd);
	free(c.x);
	free(c.w);
	free(c.r);
	free(c.y);
}

struct gl_layout {
	int groups;
	int32_t off[8];
};

static const struct gl_layout gl_layouts[] = {
    {1, {0, 7}},                   /* one group */
    {6, {0, 3, 5, 9, 10, 17, 21}}, /* many */
    {5, {0, 4, 4, 4, 9, 12}},      /* empty groups inside */
    {3, {0, 0, 5, 8}},             /* first empty */
    {3, {0, 3, 6, 6}},             /* last empty */
    {5, {0, 1, 2, 3, 4, 5}},       /* one row each */
    {6, {0, 0, 2, 2, 3, 3, 3}},    /* first, inner and last empty */
    {2, {0, 0, 0}},                /* no rows at all */
    {7, {0, 1, 1, 40, 41, 41, 100, 101}},
};

Test(moe, grouped_layouts_against_loops_and_finite_differences)
{
	static const int dims[][2] = {{1, 1}, {3, 5}, {5, 7}, {17, 9}, {67, 33}};
	uint32_t seed = 0x5eed0e01u;

	for (size_t l = 0; l < sizeof(gl_layouts) / sizeof(gl_layouts[0]); l++)
		for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++)
			gl_case(&seed, gl_layouts[l].off, gl_layouts[l].groups, dims[d][0],
			        dims[d][1], 1);
}

/* rows enough for OpenBLAS's blocked and threaded paths, in a random layout */
Test(moe, grouped_large_random_layout)
{
	uint32_t seed = 0x0badcafeu;
	int32_t off[10] = {0};

	for (int g = 0; g < 9; g++)
		off[g + 1] = off[g] + (g == 4 ? 0 : (int32_t)(gc_rng(&seed) % 160));
	gl_case(&seed, off, 9, 130, 70, 0);
	off[9] = off[8] + 301;
	gl_case(&seed, off, 9, 33, 129, 0);
}

/* ---- combine ---- */

struct cb_ctx {
	float *out, *y, *w, *r;
	int32_t *slot;
	int nt, k, dim, ns;
};

static double cb_loss(void *p)
{
	struct cb_ctx *c = p;

	cr_assert_eq(rl_moe_combine_forward_cpu(rl_buf_f32(c->out), rl_cbuf_f32(c->y), c->slot,
	                                        c->w, c->nt, c->k, c->dim, c->ns, NULL),
	             0);
	return gc_dot(c->out, c->r, (size_t)c->nt * c->dim);
}

/* Distinct slots drawn from a shuffle of [0, ns): about one in four of
 * tokens 1.. is -1, token 0 is all -1 when there are others, and ns leaves
 * rows that no slot names. */
static void cb_slots(uint32_t *s, int32_t *slot, int nt, int k, int ns)
{
	int32_t *perm = malloc((size_t)ns * sizeof(*perm));

	cr_assert_not_null(perm);
	for (int i = 0; i < ns; i++)
		perm[i] = i;
	for (int i = ns - 1; i > 0; i--) {
		int j = (int)(gc_rng(s) % (uint32_t)(i + 1));
		int32_t t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (int i = 0; i < nt * k; i++)
		slot[i] = (i >= k && gc_rng(s) % 4 == 0) || (nt > 1 && i < k) ? -1 : perm[i];
	free(perm);
}

static int cb_named(const struct cb_ctx *c, int row)
{
	for (int i = 0; i < c->nt * c->k; i++)
		if (c->slot[i] == row)
			return 1;
	return 0;
}

/* out is garbage before (written, not added to), with a guard row past
 * n_tokens; then again with NaN in every row of y no slot names and in the
 * weights of -1 slots, which must give the same bits */
static void cb_forward_check(const struct cb_ctx *c)
{
	size_t no = (size_t)c->nt * c->dim;
	float *out = falloc(no + c->dim), *guard, *y = fdup(c->y, (size_t)c->ns * c->dim);
	float *w = fdup(c->w, (size_t)c->nt * c->k), *out2 = falloc(no + c->dim);
	double *want = dalloc(no), *mag = dalloc(no);

	for (size_t i = 0; i < no + c->dim; i++)
		out[i] = out2[i] = i % 2 ? NAN : 1e30f;
	guard = fdup(out + no, c->dim);
	cr_assert_eq(rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(c->y), c->slot, c->w,
	                                        c->nt, c->k, c->dim, c->ns, NULL),
	             0);
	for (int t = 0; t < c->nt; t++)
		for (int j = 0; j < c->k; j++) {
			int i = t * c->k + j, s = c->slot[i];

			if (s < 0)
				continue;
			for (int d = 0; d < c->dim; d++) {
				double p = (double)c->w[i] * c->y[(size_t)s * c->dim + d];

				want[(size_t)t * c->dim + d] += p;
				mag[(size_t)t * c->dim + d] += fabs(p);
			}
		}
	/* at most k = 4 fp32 products and sums: a few ulp of sum |w y|; a token
	 * with only -1 slots must be exactly 0 */
	close_mag("combine out", out, want, mag, no, 1e-6);
	cr_expect(!memcmp(out + no, guard, c->dim * sizeof(float)),
	          "combine out: row past n_tokens written");

	for (int row = 0; row < c->ns; row++)
		if (!cb_named(c, row))
			fill_nan(y + (size_t)row * c->dim, c->dim);
	for (int i = 0; i < c->nt * c->k; i++)
		if (c->slot[i] < 0)
			w[i] = NAN;
	cr_assert_eq(rl_moe_combine_forward_cpu(rl_buf_f32(out2), rl_cbuf_f32(y), c->slot, w, c->nt,
	                                        c->k, c->dim, c->ns, NULL),
	             0);
	cr_expect(!memcmp(out2, out, no * sizeof(float)),
	          "combine out: NaN from an unnamed row of y or a -1 slot's weight leaked (k %d)",
	          c->k);
	free(out);
	free(out2);
	free(guard);
	free(y);
	free(w);
	free(want);
	free(mag);
}

static void cb_backward_check(uint32_t *seed, struct cb_ctx *c)
{
	size_t nyv = (size_t)c->ns * c->dim, ni = (size_t)c->nt * c->k;
	float *dy = frand(seed, nyv, -1, 1), *dy0 = fdup(dy, nyv), *dwt = falloc(ni);
	float *dwt2 = falloc(ni), *gy = falloc(nyv);
	double *want = dalloc(nyv), *mag = dalloc(nyv), *dwant = dalloc(ni), *dmag = dalloc(ni);

	fill_nan(dwt, ni);
	fill_nan(dwt2, ni);
	cr_assert_eq(rl_moe_combine_backward_cpu(rl_buf_f32(dy), dwt, rl_cbuf_f32(c->r),
	                                         rl_cbuf_f32(c->y), c->slot, c->w, c->nt, c->k,
	                                         c->dim, NULL),
	             0);
	for (size_t i = 0; i < nyv; i++) {
		want[i] = dy0[i];
		mag[i] = fabs(dy0[i]);
	}
	for (size_t i = 0; i < ni; i++) {
		int s = c->slot[i];
		const float *g = c->r + (i / c->k) * c->dim;

		if (s < 0)
			continue;
		for (int d = 0; d < c->dim; d++) {
			double a = (double)c->w[i] * g[d],
			       b = (double)g[d] * c->y[(size_t)s * c->dim + d];

			want[(size_t)s * c->dim + d] += a;
			mag[(size_t)s * c->dim + d] += fabs(a);
			dwant[i] += b;
			dmag[i] += fabs(b);
		}
	}
	/* dy: one product and one sum; dweight: a dot of dim <= 127 terms */
	close_mag("combine dy (accumulated)", dy, want, mag, nyv, 1e-6);
	close_mag("combine dweight", dwt, dwant, dmag, ni, 2e-6);
	for (size_t i = 0; i < ni; i++)
		if (c->slot[i] < 0)
			cr_expect(dwt[i] == 0.0f, "combine dweight[%zu]: slot -1 gave %g", i,
			          (double)dwt[i]);
	for (int row = 0; row < c->ns; row++)
		if (!cb_named(c, row))
			cr_expect(!memcmp(dy + (size_t)row * c->dim, dy0 + (size_t)row * c->dim,
			                  c->dim * sizeof(float)),
			          "combine dy: unnamed row %d changed", row);

	/* dy NULL: the same dweight; then dy alone from zero for the check */
	cr_assert_eq(rl_moe_combine_backward_cpu(rl_buf_f32(NULL), dwt2, rl_cbuf_f32(c->r),
	                                         rl_cbuf_f32(c->y), c->slot, c->w, c->nt, c->k,
	                                         c->dim, NULL),
	             0);
	cr_expect(!memcmp(dwt2, dwt, ni * sizeof(float)), "combine dweight differs with dy NULL");
	cr_assert_eq(rl_moe_combine_backward_cpu(rl_buf_f32(gy), dwt2, rl_cbuf_f32(c->r),
	                                         rl_cbuf_f32(c->y), c->slot, c->w, c->nt, c->k,
	                                         c->dim, NULL),
	             0);

	struct gc_opts o = fd_opts();

	gc_check("combine dy", c->y, nyv, gy, cb_loss, c, &o);
	gc_check("combine dweight", c->w, ni, dwt2, cb_loss, c, &o);
	free(dy);
	free(dy0);
	free(dwt);
	free(dwt2);
	free(gy);
	free(want);
	free(mag);
	free(dwant);
	free(dmag);
}

static void cb_case(uint32_t *seed, int nt, int k, int dim)
{
	struct cb_ctx c = {.nt = nt, .k = k, .dim = dim, .ns = nt * k + 3};
	size_t ni = (size_t)nt * k;

	c.slot = malloc((ni ? ni : 1) * sizeof(*c.slot));
	cr_assert_not_null(c.slot);
	cb_slots(seed, c.slot, nt, k, c.ns);
	c.y = frand(seed, (size_t)c.ns * dim, -1, 1);
	c.w = frand(seed, ni, 0.05f, 1);
	c.r = frand(seed, (size_t)nt * dim, -1, 1);
	c.out = falloc((size_t)nt * dim);
	cb_forward_check(&c);
	cb_backward_check(seed, &c);
	free(c.slot);
	free(c.y);
	free(c.w);
	free(c.r);
	free(c.out);
}

Test(moe, combine_against_loops_and_finite_differences)
{
	static const int cases[][3] = {{1, 1, 1},  {5, 1, 7}, {6, 2, 5},   {9, 2, 64},
	                               {9, 4, 33}, {3, 4, 1}, {17, 4, 127}};
	uint32_t seed = 0xc0ffee11u;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		cb_case(&seed, cases[i][0], cases[i][1], cases[i][2]);
}

Test(moe, combine_no_tokens_and_no_slots)
{
	float out[3] = {7, 7, 7}, w[2] = {0.5f, 0.5f}, dw[2] = {NAN, NAN}, y[3] = {1, 2, 3};
	int32_t none[2] = {-1, -1};

	/* no tokens: nothing written */
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), none, w, 0, 2, 3, 1, NULL),
	    0);
	cr_expect(out[0] == 7 && out[1] == 7 && out[2] == 7);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(out), dw, rl_cbuf_f32(y),
	                                         rl_cbuf_f32(y), none, w, 0, 2, 3, NULL),
	             0);
	cr_expect(isnan(dw[0]) && isnan(dw[1]));
	/* a rank whose experts got no rows: every slot -1, out all zero */
	cr_expect_eq(rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(NULL), none, w, 1, 2,
	                                        3, 0, NULL),
	             0);
	cr_expect(out[0] == 0 && out[1] == 0 && out[2] == 0);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(NULL), dw, rl_cbuf_f32(y),
	                                         rl_cbuf_f32(y), none, w, 1, 2, 3, NULL),
	             0);
	cr_expect(dw[0] == 0 && dw[1] == 0);
}

/* ---- argument checks ---- */

Test(moe, grouped_bad_arguments)
{
	float v[8] = {0}, g[8] = {0};
	int32_t ok[3] = {0, 1, 2}, first[3] = {1, 1, 2}, down[3] = {0, 2, 1}, neg[3] = {0, -1, 2};

	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(NULL), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                           ok, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(NULL), rl_cbuf_f32(v),
	                                           ok, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(NULL),
	                                           ok, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                           NULL, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                           ok, 0, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                           ok, -1, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                           ok, 2, 0, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                           ok, 2, 2, -2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                           first, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                           down, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                           neg, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                                           ok, 2, 2, 2, NULL),
	             0);

	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(NULL),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 2, 2, 2,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), NULL, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(NULL), ok, 2, 2, 2,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(NULL), g, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(NULL), rl_cbuf_f32(v), ok, 2, 2, 2,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(v), NULL, 2, 2, 2,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 0, 2, 2,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(v), ok, -3, 2, 2,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 2, 0, 2,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 2, 2, 0,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(v), first, 2, 2, 2,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(v), down, 2, 2, 2,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(v), neg, 2, 2, 2,
	                                            NULL),
	             -1);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(g), g, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 2, 2, 2,
	                                            NULL),
	             0);
	cr_expect_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(NULL), NULL, rl_cbuf_f32(v),
	                                            rl_cbuf_f32(NULL), rl_cbuf_f32(NULL), ok, 2, 2,
	                                            2, NULL),
	             0);
}

Test(moe, combine_bad_arguments)
{
	float y[6] = {0}, w[4] = {1, 1, 1, 1}, out[4], dw[4], dout[4] = {0};
	int32_t ok[4] = {0, 1, -1, 2}, low[4] = {0, -2, 1, 2}, high[4] = {0, 1, 3, -1};
	int32_t huge[4] = {0, INT32_MAX, 1, 2}, lowest[4] = {INT32_MIN, 0, 1, 2};

	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(NULL), rl_cbuf_f32(y), ok, w, 2, 2, 2, 3, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(NULL), ok, w, 2, 2, 2, 3, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), NULL, w, 2, 2, 2, 3, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), ok, NULL, 2, 2, 2, 3, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), ok, w, -1, 2, 2, 3, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), ok, w, 2, 0, 2, 3, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), ok, w, 2, -2, 2, 3, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), ok, w, 2, 2, 0, 3, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), low, w, 2, 2, 2, 3, NULL),
	    -1);
	cr_expect_eq(rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), lowest, w, 2, 2, 2,
	                                        3, NULL),
	             -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), high, w, 2, 2, 2, 3, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), huge, w, 2, 2, 2, 3, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), ok, w, 2, 2, 2, 2, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), ok, w, 2, 2, 2, 3, NULL),
	    0);

	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), NULL, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), ok, w, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), dw, rl_cbuf_f32(NULL),
	                                         rl_cbuf_f32(y), ok, w, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), dw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(NULL), ok, w, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), dw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), NULL, w, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), dw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), ok, NULL, 2, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), dw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), ok, w, -1, 2, 2, NULL),
	             -1);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), dw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), ok, w, 2, 0, 2, NULL),
	             -1);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), dw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), ok, w, 2, -1, 2, NULL),
	             -1);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), dw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), ok, w, 2, 2, 0, NULL),
	             -1);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), dw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), ok, w, 2, 2, 2, NULL),
	             0);
	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(NULL), dw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), ok, w, 2, 2, 2, NULL),
	             0);
}

/* The backward has no n_slots to check against, but "the cpu ops check
 * every slot against [-1, n_slots)" still covers the lower bound: a slot
 * the forward refuses must not be taken for -1 here. */
Test(moe, combine_backward_refuses_slot_below_minus_one)
{
	float y[6] = {0}, w[4] = {1, 1, 1, 1}, dw[4], dout[4] = {0};
	int32_t low[4] = {0, -2, 1, 2};

	cr_expect_eq(rl_moe_combine_backward_cpu(rl_buf_f32(y), dw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), low, w, 2, 2, 2, NULL),
	             -1, "slot -2 taken by the combine backward");
}

/* ---- the fenced table ---- */

static const struct rl_ops *F = &rl_ops_fenced;

static size_t fbytes(size_t n)
{
	return n * sizeof(float);
}

static void *dev_put(const void *h, size_t bytes)
{
	void *d = F->alloc(bytes);

	cr_assert_not_null(d);
	cr_assert_eq(F->from_host(d, h, bytes, NULL), 0);
	return d;
}

static void dev_get_cmp(const char *what, const void *d, const void *want, size_t bytes)
{
	void *h = malloc(bytes);

	cr_assert_not_null(h);
	cr_assert_eq(F->to_host(h, d, bytes, NULL), 0);
	cr_expect(!memcmp(h, want, bytes), "fenced %s differs from the cpu table's bits", what);
	free(h);
}

Test(moe, fenced_grouped_matches_cpu_bits)
{
	static const int32_t off[5] = {0, 5, 5, 6, 19};
	const int groups = 4, in = 13, out = 11, n = 19;
	size_t nx = (size_t)n * in, ny = (size_t)n * out, nw = (size_t)groups * out * in;
	uint32_t seed = 0xfe0cedu;
	float *x = frand(&seed, nx, -1, 1), *w = frand(&seed, nw, -1, 1);
	float *r = frand(&seed, ny, -1, 1), *dx = frand(&seed, nx, -1, 1);
	float *dw = frand(&seed, nw, -1, 1), *y = falloc(ny);
	float *x_d = dev_put(x, fbytes(nx)), *w_d = dev_put(w, fbytes(nw)),
	      *r_d = dev_put(r, fbytes(ny));
	float *dx_d = dev_put(dx, fbytes(nx)), *dw_d = dev_put(dw, fbytes(nw)),
	      *y_d = F->alloc(fbytes(ny));
	int32_t *off_d = dev_put(off, sizeof(off));

	cr_assert_not_null(y_d);
	cr_assert_eq(rl_ops_cpu.grouped_linear_forward(rl_buf_f32(y), rl_cbuf_f32(x),
	                                               rl_cbuf_f32(w), off, groups, in, out, NULL),
	             0);
	cr_assert_eq(rl_ops_cpu.grouped_linear_backward(rl_buf_f32(dx), dw, rl_cbuf_f32(r),
	                                                rl_cbuf_f32(x), rl_cbuf_f32(w), off, groups,
	                                                in, out, NULL),
	             0);
	cr_assert_eq(F->grouped_linear_forward(rl_buf_f32(y_d), rl_cbuf_f32(x_d), rl_cbuf_f32(w_d),
	                                       off, groups, in, out, NULL),
	             0);
	cr_assert_eq(F->grouped_linear_backward(rl_buf_f32(dx_d), dw_d, rl_cbuf_f32(r_d),
	                                        rl_cbuf_f32(x_d), rl_cbuf_f32(w_d), off, groups, in,
	                                        out, NULL),
	             0);
	dev_get_cmp("grouped y", y_d, y, fbytes(ny));
	dev_get_cmp("grouped dx", dx_d, dx, fbytes(nx));
	dev_get_cmp("grouped dw", dw_d, dw, fbytes(nw));

	/* host memory where the backend's is needed, and offsets the wrong way */
	cr_expect_eq(F->grouped_linear_forward(rl_buf_f32(y), rl_cbuf_f32(x_d), rl_cbuf_f32(w_d),
	                                       off, groups, in, out, NULL),
	             -1);
	cr_expect_eq(F->grouped_linear_forward(rl_buf_f32(y_d), rl_cbuf_f32(x), rl_cbuf_f32(w_d),
	                                       off, groups, in, out, NULL),
	             -1);
	cr_expect_eq(F->grouped_linear_forward(rl_buf_f32(y_d), rl_cbuf_f32(x_d), rl_cbuf_f32(w),
	                                       off, groups, in, out, NULL),
	             -1);
	cr_expect_eq(F->grouped_linear_forward(rl_buf_f32(y_d), rl_cbuf_f32(x_d), rl_cbuf_f32(w_d),
	                                       off_d, groups, in, out, NULL),
	             -1);
	cr_expect_eq(F->grouped_linear_backward(rl_buf_f32(dx), dw_d, rl_cbuf_f32(r_d),
	                                        rl_cbuf_f32(x_d), rl_cbuf_f32(w_d), off, groups, in,
	                                        out, NULL),
	             -1);
	cr_expect_eq(F->grouped_linear_backward(rl_buf_f32(dx_d), dw, rl_cbuf_f32(r_d),
	                                        rl_cbuf_f32(x_d), rl_cbuf_f32(w_d), off, groups, in,
	                                        out, NULL),
	             -1);
	cr_expect_eq(F->grouped_linear_backward(rl_buf_f32(dx_d), dw_d, rl_cbuf_f32(r),
	                                        rl_cbuf_f32(x_d), rl_cbuf_f32(w_d), off, groups, in,
	                                        out, NULL),
	             -1);
	cr_expect_eq(F->grouped_linear_backward(rl_buf_f32(dx_d), dw_d, rl_cbuf_f32(r_d),
	                                        rl_cbuf_f32(x_d), rl_cbuf_f32(w_d), off_d, groups,
	                                        in, out, NULL),
	             -1);
	/* the refusals wrote nothing */
	dev_get_cmp("grouped dx after refusals", dx_d, dx, fbytes(nx));
	dev_get_cmp("grouped dw after refusals", dw_d, dw, fbytes(nw));

	F->release(x_d);
	F->release(w_d);
	F->release(r_d);
	F->release(dx_d);
	F->release(dw_d);
	F->release(y_d);
	F->release(off_d);
	free(x);
	free(w);
	free(r);
	free(dx);
	free(dw);
	free(y);
}

Test(moe, fenced_combine_matches_cpu_bits)
{
	const int nt = 7, k = 2, dim = 9, ns = nt * k + 3;
	size_t ni = (size_t)nt * k, nyv = (size_t)ns * dim, no = (size_t)nt * dim;
	uint32_t seed = 0xc0b1dedu;
	int32_t slot[14];
	float *y, *w, *r, *dy, *out = falloc(no), *dwt = falloc(ni);

	cb_slots(&seed, slot, nt, k, ns);
	y = frand(&seed, nyv, -1, 1);
	w = frand(&seed, ni, 0, 1);
	r = frand(&seed, no, -1, 1);
	dy = frand(&seed, nyv, -1, 1);

	float *y_d = dev_put(y, fbytes(nyv)), *w_d = dev_put(w, fbytes(ni)),
	      *r_d = dev_put(r, fbytes(no));
	float *dy_d = dev_put(dy, fbytes(nyv)), *out_d = F->alloc(fbytes(no)),
	      *dwt_d = F->alloc(fbytes(ni));
	int32_t *slot_d = dev_put(slot, sizeof(slot));

	cr_assert(out_d && dwt_d);
	cr_assert_eq(rl_ops_cpu.moe_combine_forward(rl_buf_f32(out), rl_cbuf_f32(y), slot, w, nt, k,
	                                            dim, ns, NULL),
	             0);
	cr_assert_eq(rl_ops_cpu.moe_combine_backward(rl_buf_f32(dy), dwt, rl_cbuf_f32(r),
	                                             rl_cbuf_f32(y), slot, w, nt, k, dim, NULL),
	             0);
	cr_assert_eq(F->moe_combine_forward(rl_buf_f32(out_d), rl_cbuf_f32(y_d), slot_d, w_d, nt, k,
	                                    dim, ns, NULL),
	             0);
	cr_assert_eq(F->moe_combine_backward(rl_buf_f32(dy_d), dwt_d, rl_cbuf_f32(r_d),
	                                     rl_cbuf_f32(y_d), slot_d, w_d, nt, k, dim, NULL),
	             0);
	dev_get_cmp("combine out", out_d, out, fbytes(no));
	dev_get_cmp("combine dy", dy_d, dy, fbytes(nyv));
	dev_get_cmp("combine dweight", dwt_d, dwt, fbytes(ni));

	cr_expect_eq(F->moe_combine_forward(rl_buf_f32(out), rl_cbuf_f32(y_d), slot_d, w_d, nt, k,
	                                    dim, ns, NULL),
	             -1);
	cr_expect_eq(F->moe_combine_forward(rl_buf_f32(out_d), rl_cbuf_f32(y), slot_d, w_d, nt, k,
	                                    dim, ns, NULL),
	             -1);
	cr_expect_eq(F->moe_combine_forward(rl_buf_f32(out_d), rl_cbuf_f32(y_d), slot, w_d, nt, k,
	                                    dim, ns, NULL),
	             -1);
	cr_expect_eq(F->moe_combine_forward(rl_buf_f32(out_d), rl_cbuf_f32(y_d), slot_d, w, nt, k,
	                                    dim, ns, NULL),
	             -1);
	cr_expect_eq(F->moe_combine_backward(rl_buf_f32(dy), dwt_d, rl_cbuf_f32(r_d),
	                                     rl_cbuf_f32(y_d), slot_d, w_d, nt, k, dim, NULL),
	             -1);
	cr_expect_eq(F->moe_combine_backward(rl_buf_f32(dy_d), dwt, rl_cbuf_f32(r_d),
	                                     rl_cbuf_f32(y_d), slot_d, w_d, nt, k, dim, NULL),
	             -1);
	cr_expect_eq(F->moe_combine_backward(rl_buf_f32(dy_d), dwt_d, rl_cbuf_f32(r),
	                                     rl_cbuf_f32(y_d), slot_d, w_d, nt, k, dim, NULL),
	             -1);
	cr_expect_eq(F->moe_combine_backward(rl_buf_f32(dy_d), dwt_d, rl_cbuf_f32(r_d),
	                                     rl_cbuf_f32(y), slot_d, w_d, nt, k, dim, NULL),
	             -1);
	cr_expect_eq(F->moe_combine_backward(rl_buf_f32(dy_d), dwt_d, rl_cbuf_f32(r_d),
	                                     rl_cbuf_f32(y_d), slot, w_d, nt, k, dim, NULL),
	             -1);
	cr_expect_eq(F->moe_combine_backward(rl_buf_f32(dy_d), dwt_d, rl_cbuf_f32(r_d),
	                                     rl_cbuf_f32(y_d), slot_d, w, nt, k, dim, NULL),
	             -1);
	dev_get_cmp("combine dy after refusals", dy_d, dy, fbytes(nyv));

	F->release(y_d);
	F->release(w_d);
	F->release(r_d);
	F->release(dy_d);
	F->release(out_d);
	F->release(dwt_d);
	F->release(slot_d);
	free(y);
	free(w);
	free(r);
	free(dy);
	free(out);
	free(dwt);
}
