/* Linear (y = x W^T + b): the forward against a triple loop in double with
 * a tolerance scaled to each element's sum |x w|, the backward against the
 * formulas in double and against finite differences of the forward
 * (gradcheck.h), each gradient also computed alone. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/linear.h"
#include "tests/unit/gradcheck.h"
#include "tests/unit/op_arg_checks.h"
#include "tests/unit/ops_test_util.h"

struct lin_ctx {
	float *y, *x, *w, *b, *r;
	int n, in, out;
};

static double lin_loss(void *p)
{
	struct lin_ctx *c = p;

	cr_assert_eq(rl_linear_forward_cpu(rl_buf_f32(c->y), rl_cbuf_f32(c->x), rl_cbuf_f32(c->w),
	                                   rl_cbuf_f32(c->b), c->n, c->in, c->out, NULL),
	             0);
	return gc_dot(c->y, c->r, (size_t)c->n * c->out);
}

/* y = x W^T (+ b) by the triple loop; mag gets sum |x w| (+ |b|), the scale
 * of fp32's rounding error for each element */
static void lin_ref(double *y, double *mag, const struct lin_ctx *c, const float *bias)
{
	for (int t = 0; t < c->n; t++)
		for (int o = 0; o < c->out; o++) {
			double s = bias ? bias[o] : 0.0, m = bias ? fabs(bias[o]) : 0.0;

			for (int k = 0; k < c->in; k++) {
				double p = (double)c->x[(size_t)t * c->in + k] *
				           c->w[(size_t)o * c->in + k];
				s += p;
				m += fabs(p);
			}
			y[(size_t)t * c->out + o] = s;
			mag[(size_t)t * c->out + o] = m;
		}
}

static void lin_forward_check(struct lin_ctx *c, const float *bias)
{
	size_t ny = (size_t)c->n * c->out;
	double *want = dalloc(ny), *mag = dalloc(ny);
	int bad = 0;

	cr_assert_eq(rl_linear_forward_cpu(rl_buf_f32(c->y), rl_cbuf_f32(c->x), rl_cbuf_f32(c->w),
	                                   rl_cbuf_f32(bias), c->n, c->in, c->out, NULL),
	             0);
	lin_ref(want, mag, c, bias);
	for (size_t i = 0; i < ny; i++)
		if (fabs(c->y[i] - want[i]) > 1e-6 * mag[i] + 1e-30 && bad++ < 5)
			cr_expect(0, "linear y[%zu]: got %.9g, want %.9g", i, (double)c->y[i],
			          want[i]);
	cr_expect(bad == 0, "linear forward (bias %s): %d off", bias ? "yes" : "no", bad);
	free(want);
	free(mag);
}

static void lin_case(uint32_t *seed, int n, int in, int out, int fd)
{
	struct lin_ctx c = {.n = n, .in = in, .out = out};
	size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;

	c.x = frand(seed, nx, -1, 1);
	c.w = frand(seed, nw, -1, 1);
	c.b = frand(seed, (size_t)out, -1, 1);
	c.r = frand(seed, ny, -1, 1);
	c.y = falloc(ny);
	lin_forward_check(&c, NULL);
	lin_forward_check(&c, c.b);

	float *dx = frand(seed, nx, -1, 1), *dw = frand(seed, nw, -1, 1);
	float *db = frand(seed, (size_t)out, -1, 1);
	float *dx0 = fdup(dx, nx), *dw0 = fdup(dw, nw), *db0 = fdup(db, (size_t)out);

	cr_assert_eq(rl_linear_backward_cpu(rl_buf_f32(dx), dw, db, rl_cbuf_f32(c.r),
	                                    rl_cbuf_f32(c.x), rl_cbuf_f32(c.w), n, in, out, NULL),
	             0);
	gc_sub(dx, dx0, nx);
	gc_sub(dw, dw0, nw);
	gc_sub(db, db0, (size_t)out);

	double *dx_ref = dalloc(nx), *dw_ref = dalloc(nw), *db_ref = dalloc((size_t)out);

	for (int t = 0; t < n; t++)
		for (int o = 0; o < out; o++) {
			double g = c.r[(size_t)t * out + o];

			db_ref[o] += g;
			for (int k = 0; k < in; k++) {
				dx_ref[(size_t)t * in + k] += g * c.w[(size_t)o * in + k];
				dw_ref[(size_t)o * in + k] += g * c.x[(size_t)t * in + k];
			}
		}
	/* atol: sums of up to max(n, out) terms of size one */
	close_all("linear dx", dx, dx_ref, nx, 1e-5, 1e-6 * out);
	close_all("linear dw", dw, dw_ref, nw, 1e-5, 1e-6 * n);
	close_all("linear dbias", db, db_ref, (size_t)out, 1e-5, 1e-6 * n);
	if (fd) {
		gc_check("linear dx", c.x, nx, dx, lin_loss, &c, NULL);
		gc_check("linear dw", c.w, nw, dw, lin_loss, &c, NULL);
		gc_check("linear dbias", c.b, (size_t)out, db, lin_loss, &c, NULL);
	}

	/* one gradient at a time gives the same numbers */
	memset(dx0, 0, nx * sizeof(float));
	memset(dw0, 0, nw * sizeof(float));
	memset(db0, 0, (size_t)out * sizeof(float));
	cr_assert_eq(rl_linear_backward_cpu(rl_buf_f32(dx0), NULL, NULL, rl_cbuf_f32(c.r),
	                                    rl_cbuf_f32(c.x), rl_cbuf_f32(c.w), n, in, out, NULL),
	             0);
	cr_assert_eq(rl_linear_backward_cpu(rl_buf_f32(NULL), dw0, NULL, rl_cbuf_f32(c.r),
	                                    rl_cbuf_f32(c.x), rl_cbuf_f32(c.w), n, in, out, NULL),
	             0);
	cr_assert_eq(rl_linear_backward_cpu(rl_buf_f32(NULL), NULL, db0, rl_cbuf_f32(c.r),
	                                    rl_cbuf_f32(NULL), rl_cbuf_f32(NULL), n, in, out, NULL),
	             0);
	close_all("linear dx alone", dx0, dx_ref, nx, 1e-5, 1e-6 * out);
	close_all("linear dw alone", dw0, dw_ref, nw, 1e-5, 1e-6 * n);
	close_all("linear dbias alone", db0, db_ref, (size_t)out, 1e-5, 1e-6 * n);

	free(c.x);
	free(c.w);
	free(c.b);
	free(c.r);
	free(c.y);
	free(dx);
	free(dw);
	free(db);
	free(dx0);
	free(dw0);
	free(db0);
	free(dx_ref);
	free(dw_ref);
	free(db_ref);
}

Test(linear, forward_and_finite_differences)
{
	uint32_t seed = 0x7777u;

	lin_case(&seed, 1, 1, 1, 1);
	lin_case(&seed, 3, 5, 7, 1);
	lin_case(&seed, 17, 33, 9, 1);
	lin_case(&seed, 64, 130, 70, 1);
	lin_case(&seed, 300, 4, 257, 0); /* threaded bias gradient */
}

Test(linear, bad_arguments)
{
	expect_linear_arg_checks(rl_linear_forward_cpu, rl_linear_backward_cpu);
}
