/* The linear ops on bf16 buffers (real 2-byte storage): the forward, the
 * backward and the batch-invariant forward against sums in double of the
 * same bf16 values, within the bound linear_bf16_ref.h derives; the
 * invariant forward also exactly against its fp32 twin, and row by row
 * against the batch; the fenced table bit for bit against the CPU one, and
 * its size checks catching a bf16 buffer read as fp32. */
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
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "tests/unit/linear_bf16_ref.h"
#include "tests/unit/ops_test_util.h"

/* fwd on the case's bf16 x, W (and the bias) into y of type yt */
static void check_forward(rl_linear_forward_fn fwd, const char *name, const struct lin16_case *c,
                          enum rl_dtype yt, int with_bias)
{
	void *y = malloc((size_t)c->n * c->out * rl_dtype_size(yt));
	struct rl_buf yb = {y, yt};

	cr_assert_not_null(y);
	cr_assert_eq(fwd(yb, rl_cbuf_bf16(c->x), rl_cbuf_bf16(c->w),
	                 rl_cbuf_bf16(with_bias ? c->b : NULL), c->n, c->in, c->out, NULL),
	             0, "%s", name);
	int bad = lin16_forward_bad(name, c, rl_cbuf_of(yb), with_bias, 1.0);

	cr_expect(bad == 0, "%s n %d in %d out %d bias %d -> %s: %d off", name, c->n, c->in, c->out,
	          with_bias, rl_dtype_name(yt), bad);
	free(y);
}

static void check_backward(const struct lin16_case *c, uint32_t *seed)
{
	size_t nx = (size_t)c->n * c->in, nw = (size_t)c->out * c->in;
	float *dx0, *dw = frand(seed, nw, -1, 1), *db = frand(seed, (size_t)c->out, -1, 1);
	uint16_t *dx = lin16_bits(seed, nx, -1, 1, &dx0);
	float *dw0 = fdup(dw, nw), *db0 = fdup(db, (size_t)c->out);

	cr_assert_eq(rl_linear_backward_cpu(rl_buf_bf16(dx), dw, db, rl_cbuf_bf16(c->dy),
	                                    rl_cbuf_bf16(c->x), rl_cbuf_bf16(c->w), c->n, c->in,
	                                    c->out, NULL),
	             0);
	int bad = lin16_backward_bad(c, dx0, dx, dw0, dw, db0, db, 1.0);

	cr_expect(bad == 0, "backward n %d in %d out %d: %d off", c->n, c->in, c->out, bad);
	free(dx);
	free(dx0);
	free(dw);
	free(db);
	free(dw0);
	free(db0);
}

static const int shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 9}, {64, 130, 70}, {5, 2000, 700}};

Test(linear_bf16, forward_and_backward_against_double)
{
	uint32_t seed = 0xbf16u;

	for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
		struct lin16_case c;

		lin16_make(&c, &seed, shapes[s][0], shapes[s][1], shapes[s][2]);
		for (int bias = 0; bias <= 1; bias++) {
			check_forward(rl_linear_forward_cpu, "forward", &c, RL_BF16, bias);
			check_forward(rl_linear_forward_invariant_cpu, "invariant", &c, RL_BF16,
			              bias);
		}
		check_forward(rl_linear_forward_cpu, "forward", &c, RL_F32, 0);
		check_forward(rl_linear_forward_invariant_cpu, "invariant", &c, RL_F32, 0);
		check_backward(&c, &seed);
		lin16_free(&c);
	}
}

/* The invariant forward on bf16 is its fp32 order over the widened values:
 * the fp32 op on the same values gives the same sums, to the bit, and a bf16
 * y is each of them rounded. And a row's outputs do not depend on its batch:
 * alone, or at another place in a smaller batch, the same bits. */
Test(linear_bf16, invariant_is_the_fp32_order_in_any_batch)
{
	uint32_t seed = 0x1234u;
	struct lin16_case c;
	int n = 37, in = 70, out = 130;

	lin16_make(&c, &seed, n, in, out);

	size_t ny = (size_t)n * out;
	float *y32 = falloc(ny), *yf = falloc(ny);
	uint16_t *yh = malloc(ny * sizeof *yh), *one = malloc((size_t)out * sizeof *one);

	cr_assert(yh && one);
	cr_assert_eq(rl_linear_forward_invariant_cpu(rl_buf_f32(y32), rl_cbuf_f32(c.xf),
	                                             rl_cbuf_f32(c.wf), rl_cbuf_f32(c.bf), n, in,
	                                             out, NULL),
	             0);
	cr_assert_eq(rl_linear_forward_invariant_cpu(rl_buf_bf16(yh), rl_cbuf_bf16(c.x),
	                                             rl_cbuf_bf16(c.w), rl_cbuf_bf16(c.b), n, in,
	                                             out, NULL),
	             0);
	cr_assert_eq(rl_linear_forward_invariant_cpu(rl_buf_f32(yf), rl_cbuf_bf16(c.x),
	                                             rl_cbuf_bf16(c.w), rl_cbuf_f32(NULL), n, in,
	                                             out, NULL),
	             0);
	for (size_t i = 0; i < ny; i++)
		cr_expect_eq(yh[i], rl_f32_to_bf16(y32[i]),
		             "y[%zu]: %#x, the fp32 order rounds to %#x", i, yh[i],
		             rl_f32_to_bf16(y32[i]));
	cr_assert_eq(rl_linear_forward_invariant_cpu(rl_buf_f32(y32), rl_cbuf_f32(c.xf),
	                                             rl_cbuf_f32(c.wf), rl_cbuf_f32(NULL), n, in,
	                                             out, NULL),
	             0);
	cr_expect_arr_eq(yf, y32, ny * sizeof *yf, "bf16 in, fp32 out: the fp32 op's bits");
	for (int t = 0; t < n; t += 5) {
		cr_assert_eq(rl_linear_forward_invariant_cpu(
		                 rl_buf_bf16(one), rl_cbuf_bf16(c.x + (size_t)t * in),
		                 rl_cbuf_bf16(c.w), rl_cbuf_bf16(c.b), 1, in, out, NULL),
		             0);
		cr_expect_arr_eq(one, yh + (size_t)t * out, (size_t)out * sizeof *one,
		                 "row %d alone differs from the batch", t);
	}
	free(y32);
	free(yf);
	free(yh);
	free(one);
	lin16_free(&c);
}

/* n bf16 values onto the fenced backend */
static uint16_t *fenced_upload(const uint16_t *h, size_t n)
{
	uint16_t *d = rl_ops_fenced.alloc(n * sizeof *d);

	cr_assert_not_null(d);
	cr_assert_eq(rl_ops_fenced.from_host(d, h, n * sizeof *d, NULL), 0);
	return d;
}

Test(linear_bf16, fenced_equals_cpu_and_checks_sizes)
{
	const struct rl_ops *F = &rl_ops_fenced;
	uint32_t seed = 77;
	struct lin16_case c;
	int n = 9, in = 40, out = 24;

	lin16_make(&c, &seed, n, in, out);

	size_t nx = (size_t)n * in, ny = (size_t)n * out, nw = (size_t)out * in;
	uint16_t *x = fenced_upload(c.x, nx), *w = fenced_upload(c.w, nw);
	uint16_t *b = fenced_upload(c.b, (size_t)out), *dy = fenced_upload(c.dy, ny);
	uint16_t *y = F->alloc(ny * 2), *dx = F->alloc(nx * 2);
	float *dw = F->alloc(nw * 4);
	uint16_t *hy = malloc(ny * 2), *ry = malloc(ny * 2), *hdx = malloc(nx * 2);
	uint16_t *rdx = calloc(nx, 2);
	float *hdw = malloc(nw * 4), *rdw = calloc(nw, 4);

	cr_assert(y && dx && dw && hy && ry && hdx && rdx && hdw && rdw);
	cr_assert_eq(F->zero(dx, nx * 2, NULL), 0);
	cr_assert_eq(F->zero(dw, nw * 4, NULL), 0);

	/* the three ops through the fence, and the CPU's on the same values */
	for (int inv = 0; inv <= 1; inv++) {
		rl_linear_forward_fn ff = inv ? F->linear_forward_invariant : F->linear_forward;
		rl_linear_forward_fn cf =
		    inv ? rl_ops_cpu.linear_forward_invariant : rl_ops_cpu.linear_forward;

		cr_assert_eq(ff(rl_buf_bf16(y), rl_cbuf_bf16(x), rl_cbuf_bf16(w), rl_cbuf_bf16(b),
		                n, in, out, NULL),
		             0);
		cr_assert_eq(cf(rl_buf_bf16(ry), rl_cbuf_bf16(c.x), rl_cbuf_bf16(c.w),
		                rl_cbuf_bf16(c.b), n, in, out, NULL),
		             0);
		cr_assert_eq(F->to_host(hy, y, ny * 2, NULL), 0);
		cr_expect_arr_eq(hy, ry, ny * 2, "fenced %s forward differs from the CPU's",
		                 inv ? "invariant" : "plain");
	}
	cr_assert_eq(F->linear_backward(rl_buf_bf16(dx), dw, NULL, rl_cbuf_bf16(dy),
	                                rl_cbuf_bf16(x), rl_cbuf_bf16(w), n, in, out, NULL),
	             0);
	cr_assert_eq(rl_ops_cpu.linear_backward(rl_buf_bf16(rdx), rdw, NULL, rl_cbuf_bf16(c.dy),
	                                        rl_cbuf_bf16(c.x), rl_cbuf_bf16(c.w), n, in, out,
	                                        NULL),
	             0);
	cr_assert_eq(F->to_host(hdx, dx, nx * 2, NULL), 0);
	cr_assert_eq(F->to_host(hdw, dw, nw * 4, NULL), 0);
	cr_expect_arr_eq(hdx, rdx, nx * 2, "fenced dx differs from the CPU's");
	cr_expect_arr_eq(hdw, rdw, nw * 4, "fenced dW differs from the CPU's");

	/* a bf16 buffer handed over as fp32 reads twice its bytes: refused,
	 * as is a count past the allocation's end and an offset into it that
	 * leaves too little */
	struct rl_cbuf x_as_f32 = {x, RL_F32};
	struct rl_buf y_as_f32 = {y, RL_F32};

	cr_expect_eq(F->linear_forward(rl_buf_f32((float *)dw), x_as_f32, rl_cbuf_f32((float *)dw),
	                               rl_cbuf_f32(NULL), n, in, 1, NULL),
	             -1, "an fp32 read of a bf16 x");
	cr_expect_eq(F->linear_forward(y_as_f32, rl_cbuf_f32((float *)dw), rl_cbuf_f32((float *)dw),
	                               rl_cbuf_f32(NULL), n, 1, out, NULL),
	             -1, "an fp32 write of a bf16 y");
	cr_expect_eq(F->linear_forward(rl_buf_bf16(y), rl_cbuf_bf16(x), rl_cbuf_bf16(w),
	                               rl_cbuf_bf16(b), n + 1, in, out, NULL),
	             -1, "one row more than x and y hold");
	cr_expect_eq(F->linear_backward(rl_buf_bf16(dx + 1), NULL, NULL, rl_cbuf_bf16(dy),
	                                rl_cbuf_bf16(NULL), rl_cbuf_bf16(w), n, in, out, NULL),
	             -1, "dx one element in: one element short");
	cr_expect_eq(F->linear_backward(rl_buf_bf16(NULL), dw + 1, NULL, rl_cbuf_bf16(dy),
	                                rl_cbuf_bf16(x), rl_cbuf_bf16(NULL), n, in, out, NULL),
	             -1, "dW one element in");
	/* the same calls within bounds go through */
	cr_expect_eq(F->linear_forward(rl_buf_f32((float *)dw), rl_cbuf_bf16(x), rl_cbuf_bf16(w),
	                               rl_cbuf_bf16(NULL), n, in, out, NULL),
	             0, "bf16 in, fp32 out, inside dW's allocation");

	F->release(x);
	F->release(w);
	F->release(b);
	F->release(dy);
	F->release(y);
	F->release(dx);
	F->release(dw);
	free(hy);
	free(ry);
	free(hdx);
	free(rdx);
	free(hdw);
	free(rdw);
	lin16_free(&c);
}
