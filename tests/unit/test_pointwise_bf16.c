/* The pointwise ops on bf16 buffers (real 2-byte storage): embedding, the
 * residual add, RMSNorm, RoPE and SwiGLU, forward and backward, on the CPU
 * and fenced tables.
 *
 * Each op's contract on bf16 is "read the values exactly, compute as in
 * fp32, round each output once" (kernels/buf.h). So each bf16 result is
 * held, to the bit, to the fp32 op run on the same values with its outputs
 * rounded by rl_f32_to_bf16 (the fp32 ops are held to double and to PyTorch
 * by their own tests); the backward's accumulating outputs are rounded once
 * after their add. RMSNorm is also held to a sum in double within a bound
 * from the arithmetic, so the test does not rest on the fp32 op alone. The
 * fenced table must give the CPU's bits, and refuse a bf16 buffer handed
 * over as fp32 (twice its bytes). */
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
#include "kernels/ops.h"
#include "tests/unit/linear_bf16_ref.h"
#include "tests/unit/ops_test_util.h"

/* got (bf16 bits) against want (fp32 values) rounded once */
static int rounded_bad(const char *what, const uint16_t *got, const float *want, size_t n)
{
	int bad = 0;

	for (size_t i = 0; i < n; i++)
		if (got[i] != rl_f32_to_bf16(want[i]) && bad++ < 5)
			cr_expect(0, "%s[%zu]: %#06x, the fp32 op's %.9g rounds to %#06x", what, i,
			          got[i], (double)want[i], rl_f32_to_bf16(want[i]));
	cr_expect(bad == 0, "%s: %d of %zu off", what, bad, n);
	return bad;
}

Test(pointwise_bf16, add_and_swiglu_round_the_fp32_op)
{
	uint32_t seed = 21;
	size_t n = 5000;
	float *af, *bf, *cf;
	uint16_t *a = lin16_bits(&seed, n, -4, 4, &af), *b = lin16_bits(&seed, n, -4, 4, &bf);
	uint16_t *c = lin16_bits(&seed, n, -4, 4, &cf);
	uint16_t *h = malloc(n * 2), *dg = lin16_copy(a, n), *du = lin16_copy(b, n);
	float *hf = falloc(n), *dgf = fdup(af, n), *duf = fdup(bf, n), *sumf = fdup(af, n);

	/* add: a += b */
	uint16_t *sum = lin16_copy(a, n);
	cr_assert_eq(rl_add_cpu(rl_buf_bf16(sum), rl_cbuf_bf16(b), (int64_t)n, NULL), 0);
	cr_assert_eq(rl_add_cpu(rl_buf_f32(sumf), rl_cbuf_f32(bf), (int64_t)n, NULL), 0);
	rounded_bad("add", sum, sumf, n);

	/* swiglu: h = silu(a) b; backward from dh = c into dg, du */
	cr_assert_eq(rl_swiglu_forward_cpu(rl_buf_bf16(h), rl_cbuf_bf16(a), rl_cbuf_bf16(b),
	                                   (int64_t)n, NULL),
	             0);
	cr_assert_eq(rl_swiglu_forward_cpu(rl_buf_f32(hf), rl_cbuf_f32(af), rl_cbuf_f32(bf),
	                                   (int64_t)n, NULL),
	             0);
	rounded_bad("swiglu h", h, hf, n);
	cr_assert_eq(rl_swiglu_backward_cpu(rl_buf_bf16(dg), rl_buf_bf16(du), rl_cbuf_bf16(c),
	                                    rl_cbuf_bf16(a), rl_cbuf_bf16(b), (int64_t)n, NULL),
	             0);
	cr_assert_eq(rl_swiglu_backward_cpu(rl_buf_f32(dgf), rl_buf_f32(duf), rl_cbuf_f32(cf),
	                                    rl_cbuf_f32(af), rl_cbuf_f32(bf), (int64_t)n, NULL),
	             0);
	rounded_bad("swiglu dgate", dg, dgf, n);
	rounded_bad("swiglu dup", du, duf, n);

	/* mixed types are refused before any work */
	cr_expect_eq(rl_add_cpu(rl_buf_bf16(sum), rl_cbuf_f32(bf), (int64_t)n, NULL), -1);
	cr_expect_eq(rl_swiglu_forward_cpu(rl_buf_bf16(h), rl_cbuf_f32(af), rl_cbuf_bf16(b),
	                                   (int64_t)n, NULL),
	             -1);
	cr_expect_eq(rl_swiglu_backward_cpu(rl_buf_bf16(dg), rl_buf_f32(duf), rl_cbuf_bf16(c),
	                                    rl_cbuf_bf16(a), rl_cbuf_bf16(b), (int64_t)n, NULL),
	             -1);

	void *bufs[] = {a, b, c, h, dg, du, sum, af, bf, cf, hf, dgf, duf, sumf};
	for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
		free(bufs[i]);
}

Test(pointwise_bf16, rmsnorm_rounds_the_fp32_op_and_is_near_double)
{
	uint32_t seed = 33;
	const int rows = 37, dim = 200;
	size_t n = (size_t)rows * dim;
	float *xf, *wf, *dyf, *dxf0;
	uint16_t *x = lin16_bits(&seed, n, -3, 3, &xf),
	         *w = lin16_bits(&seed, dim, 0.5f, 1.5f, &wf);
	uint16_t *dy = lin16_bits(&seed, n, -1, 1, &dyf), *dx0 = lin16_bits(&seed, n, -1, 1, &dxf0);
	uint16_t *y = malloc(n * 2), *dx = lin16_copy(dx0, n);
	float *yf = falloc(n), *rstd = falloc(rows), *rstdf = falloc(rows), *dxf = fdup(dxf0, n);
	float *dw = calloc(dim, 4), *dwf = calloc(dim, 4);
	const float eps = 1e-6f;
	int bad = 0;

	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_bf16(y), rstd, rl_cbuf_bf16(x), rl_cbuf_bf16(w),
	                                    rows, dim, eps, NULL),
	             0);
	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_f32(yf), rstdf, rl_cbuf_f32(xf), rl_cbuf_f32(wf),
	                                    rows, dim, eps, NULL),
	             0);
	rounded_bad("rmsnorm y", y, yf, n);
	cr_expect_arr_eq(rstd, rstdf, (size_t)rows * 4, "rstd is the fp32 op's");

	/* against double: y = x w / sqrt(mean x^2 + eps), within the half ulp
	 * of bf16 and the four fp32 roundings before it (rstd's, its division
	 * from double, x s, then w): 2^-8 + 4 2^-24 (1 + 2^-8) of |y| */
	for (int r = 0; r < rows; r++) {
		double ss = 0;

		for (int i = 0; i < dim; i++)
			ss += (double)xf[(size_t)r * dim + i] * xf[(size_t)r * dim + i];
		double s = 1.0 / sqrt(ss / dim + eps);

		for (int i = 0; i < dim; i++) {
			double want = xf[(size_t)r * dim + i] * s * wf[i];
			double got = rl_bf16_to_f32(y[(size_t)r * dim + i]);

			if (fabs(got - want) >
			        (0x1p-8 + 4 * 0x1p-24 * (1 + 0x1p-8)) * fabs(want) + 1e-38 &&
			    bad++ < 5)
				cr_expect(0, "y[%d][%d]: %.9g, double says %.9g", r, i, got, want);
		}
	}
	cr_expect(bad == 0, "rmsnorm against double: %d off", bad);

	cr_assert_eq(rl_rmsnorm_backward_cpu(rl_buf_bf16(dx), dw, rl_cbuf_bf16(dy), rl_cbuf_bf16(x),
	                                     rl_cbuf_bf16(w), rstd, rows, dim, NULL),
	             0);
	cr_assert_eq(rl_rmsnorm_backward_cpu(rl_buf_f32(dxf), dwf, rl_cbuf_f32(dyf),
	                                     rl_cbuf_f32(xf), rl_cbuf_f32(wf), rstdf, rows, dim,
	                                     NULL),
	             0);
	rounded_bad("rmsnorm dx", dx, dxf, n);
	cr_expect_arr_eq(dw, dwf, (size_t)dim * 4, "dweight is the fp32 op's (fp32 main_grad)");
	cr_expect_eq(rl_rmsnorm_forward_cpu(rl_buf_bf16(y), rstd, rl_cbuf_bf16(x), rl_cbuf_f32(wf),
	                                    rows, dim, eps, NULL),
	             -1, "a weight of another type");
	cr_expect_eq(rl_rmsnorm_backward_cpu(rl_buf_bf16(dx), dw, rl_cbuf_f32(dyf), rl_cbuf_bf16(x),
	                                     rl_cbuf_bf16(w), rstd, rows, dim, NULL),
	             -1, "a dy of another type");

	void *bufs[] = {x, w, dy, dx0, y, dx, xf, wf, dyf, dxf0, yf, rstd, rstdf, dxf, dw, dwf};
	for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
		free(bufs[i]);
}

Test(pointwise_bf16, rope_and_embedding)
{
	uint32_t seed = 44;
	const int n = 9, heads = 3, hd = 16, vocab = 11, dim = 24;
	size_t nq = (size_t)n * heads * hd;
	float *qf, *tf, *gf;
	uint16_t *q = lin16_bits(&seed, nq, -2, 2, &qf);
	uint16_t *table = lin16_bits(&seed, (size_t)vocab * dim, -2, 2, &tf);
	uint16_t *g = lin16_bits(&seed, (size_t)n * dim, -1, 1, &gf);
	int32_t pos[9] = {0, 1, 2, 3, 0, 1, 700, 5000, 2};
	int32_t ids[9] = {3, -1, 10, 3, 0, 7, 7, 3, 2};
	float inv_freq[8];

	rl_rope_inv_freq(inv_freq, hd, 10000.0, NULL);
	for (int back = 0; back <= 1; back++) {
		uint16_t *qb = lin16_copy(q, nq);
		float *qbf = fdup(qf, nq);
		rl_rope_forward_fn f = back ? rl_rope_backward_cpu : rl_rope_forward_cpu;

		cr_assert_eq(f(rl_buf_bf16(qb), pos, inv_freq, n, heads, hd, NULL), 0);
		cr_assert_eq(f(rl_buf_f32(qbf), pos, inv_freq, n, heads, hd, NULL), 0);
		rounded_bad(back ? "rope backward" : "rope forward", qb, qbf, nq);
		free(qb);
		free(qbf);
	}
	cr_expect_eq(
	    rl_rope_forward_cpu((struct rl_buf){q, RL_F16}, pos, inv_freq, n, heads, hd, NULL), -1,
	    "fp16 is not an activation type");

	/* the gather copies bits (zeros for -1); the scatter adds the widened
	 * values into fp32, as the fp32 op adds its own */
	uint16_t *out = malloc((size_t)n * dim * 2);
	float *dt = calloc((size_t)vocab * dim, 4), *dtf = calloc((size_t)vocab * dim, 4);

	cr_assert_eq(rl_embedding_forward_cpu(rl_buf_bf16(out), ids, rl_cbuf_bf16(table), n, dim,
	                                      vocab, NULL),
	             0);
	for (int t = 0; t < n; t++)
		for (int i = 0; i < dim; i++)
			cr_expect_eq(out[(size_t)t * dim + i],
			             ids[t] < 0 ? 0 : table[(size_t)ids[t] * dim + i],
			             "out[%d][%d]", t, i);
	cr_assert_eq(rl_embedding_backward_cpu(dt, rl_cbuf_bf16(g), ids, n, dim, NULL), 0);
	cr_assert_eq(rl_embedding_backward_cpu(dtf, rl_cbuf_f32(gf), ids, n, dim, NULL), 0);
	cr_expect_arr_eq(dt, dtf, (size_t)vocab * dim * 4, "dtable from bf16 dout");
	cr_expect_eq(
	    rl_embedding_forward_cpu(rl_buf_f32(dt), ids, rl_cbuf_bf16(table), n, dim, vocab, NULL),
	    -1, "out of another type than the table");

	void *bufs[] = {q, table, g, qf, tf, gf, out, dt, dtf};
	for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
		free(bufs[i]);
}

static void *fup(const void *h, size_t bytes)
{
	void *d = rl_ops_fenced.alloc(bytes);

	cr_assert_not_null(d);
	cr_assert_eq(rl_ops_fenced.from_host(d, h, bytes, NULL), 0);
	return d;
}

static void *fdown(const void *d, size_t bytes)
{
	void *h = malloc(bytes ? bytes : 1);

	cr_assert_not_null(h);
	cr_assert_eq(rl_ops_fenced.to_host(h, d, bytes, NULL), 0);
	return h;
}

/* One pass of every op over bf16 buffers on table T: each result in out[]
 * (host copies), for the fenced and CPU runs to be compared. */
struct run16 {
	uint16_t *y, *h, *dx, *dg, *du, *emb, *sum, *q;
	float *dw, *dt;
};

static void run_ops(const struct rl_ops *T, int fenced, struct run16 *o)
{
	uint32_t seed = 55;
	const int rows = 6, dim = 32, vocab = 5, heads = 2;
	size_t n = (size_t)rows * dim;
	float *xf, *wf, *gf, *vf, *rf;
	uint16_t *x = lin16_bits(&seed, n, -2, 2, &xf), *w = lin16_bits(&seed, dim, -2, 2, &wf);
	uint16_t *g = lin16_bits(&seed, n, -2, 2, &gf), *v = lin16_bits(&seed, n, -2, 2, &vf);
	uint16_t *tab = lin16_bits(&seed, (size_t)vocab * dim, -2, 2, &rf);
	int32_t ids[6] = {0, 4, -1, 2, 2, 1}, pos[6] = {0, 1, 2, 0, 1, 2};
	float inv_freq[8], zeros[160] = {0}; /* vocab x dim: the largest fp32 buffer */
	uint16_t zero16[192] = {0};

	rl_rope_inv_freq(inv_freq, 16, 10000.0, NULL);

#define UP(p, b) (fenced ? fup(p, b) : lin16_copy((const void *)(p), (b) / 2))
	uint16_t *dx_ = UP(x, n * 2), *w_ = UP(w, dim * 2), *g_ = UP(g, n * 2), *v_ = UP(v, n * 2);
	uint16_t *tab_ = UP(tab, (size_t)vocab * dim * 2), *y_ = UP(zero16, n * 2);
	uint16_t *h_ = UP(zero16, n * 2), *dg_ = UP(g, n * 2), *du_ = UP(v, n * 2);
	uint16_t *emb_ = UP(zero16, n * 2), *sum_ = UP(x, n * 2), *q_ = UP(g, n * 2);
	uint16_t *x_ = UP(x, n * 2);
	float *rstd_ = fenced ? fup(zeros, rows * 4) : calloc(rows, 4);
	float *dw_ = fenced ? fup(zeros, dim * 4) : calloc(dim, 4);
	float *dt_ = fenced ? fup(zeros, (size_t)vocab * dim * 4) : calloc((size_t)vocab * dim, 4);
	int32_t *ids_ = fenced ? fup(ids, sizeof ids) : ids;
	int32_t *pos_ = fenced ? fup(pos, sizeof pos) : pos;
	float *if_ = fenced ? fup(inv_freq, sizeof inv_freq) : inv_freq;
#undef UP

	cr_assert_eq(T->rmsnorm_forward(rl_buf_bf16(y_), rstd_, rl_cbuf_bf16(x_), rl_cbuf_bf16(w_),
	                                rows, dim, 1e-6f, NULL),
	             0);
	cr_assert_eq(T->rmsnorm_backward(rl_buf_bf16(dx_), dw_, rl_cbuf_bf16(g_), rl_cbuf_bf16(x_),
	                                 rl_cbuf_bf16(w_), rstd_, rows, dim, NULL),
	             0);
	cr_assert_eq(T->swiglu_forward(rl_buf_bf16(h_), rl_cbuf_bf16(g_), rl_cbuf_bf16(v_),
	                               (int64_t)n, NULL),
	             0);
	cr_assert_eq(T->swiglu_backward(rl_buf_bf16(dg_), rl_buf_bf16(du_), rl_cbuf_bf16(x_),
	                                rl_cbuf_bf16(g_), rl_cbuf_bf16(v_), (int64_t)n, NULL),
	             0);
	cr_assert_eq(T->embedding_forward(rl_buf_bf16(emb_), ids_, rl_cbuf_bf16(tab_), rows, dim,
	                                  vocab, NULL),
	             0);
	cr_assert_eq(T->embedding_backward(dt_, rl_cbuf_bf16(g_), ids_, rows, dim, NULL), 0);
	cr_assert_eq(T->add(rl_buf_bf16(sum_), rl_cbuf_bf16(v_), (int64_t)n, NULL), 0);
	cr_assert_eq(T->rope_forward(rl_buf_bf16(q_), pos_, if_, rows, heads, 16, NULL), 0);

	if (fenced) {
		/* a bf16 buffer handed over as fp32 reaches past its allocation */
		struct rl_buf y32 = {y_, RL_F32};
		struct rl_cbuf x32 = {x_, RL_F32}, w32 = {w_, RL_F32};

		cr_expect_eq(T->rmsnorm_forward(y32, rstd_, x32, w32, rows, dim, 1e-6f, NULL), -1);
		cr_expect_eq(T->swiglu_forward(y32, x32, x32, (int64_t)n, NULL), -1);
		cr_expect_eq(T->add(y32, x32, (int64_t)n, NULL), -1);
		cr_expect_eq(T->rope_forward(y32, pos_, if_, rows, heads, 16, NULL), -1);
		cr_expect_eq(T->embedding_forward(y32, ids_, x32, rows, dim, vocab, NULL), -1);
		cr_expect_eq(T->embedding_backward(dt_, x32, ids_, rows, dim, NULL), -1);
		cr_expect_eq(T->rmsnorm_backward(rl_buf_bf16(dx_), dw_, x32, rl_cbuf_bf16(x_),
		                                 rl_cbuf_bf16(w_), rstd_, rows, dim, NULL),
		             -1);
		cr_expect_eq(T->swiglu_backward(rl_buf_bf16(dg_), rl_buf_bf16(du_), x32,
		                                rl_cbuf_bf16(g_), rl_cbuf_bf16(v_), (int64_t)n,
		                                NULL),
		             -1);
	}

#define DOWN(p, b) (fenced ? fdown(p, b) : lin16_copy((const void *)(p), (b) / 2))
	o->y = DOWN(y_, n * 2);
	o->h = DOWN(h_, n * 2);
	o->dx = DOWN(dx_, n * 2);
	o->dg = DOWN(dg_, n * 2);
	o->du = DOWN(du_, n * 2);
	o->emb = DOWN(emb_, n * 2);
	o->sum = DOWN(sum_, n * 2);
	o->q = DOWN(q_, n * 2);
#undef DOWN
	o->dw = fenced ? fdown(dw_, dim * 4) : fdup(dw_, dim);
	o->dt = fenced ? fdown(dt_, (size_t)vocab * dim * 4) : fdup(dt_, (size_t)vocab * dim);

	void *dev[] = {dx_, w_,   g_,   v_, tab_, y_,    h_,  dg_,
	               du_, emb_, sum_, q_, x_,   rstd_, dw_, dt_};
	for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
		fenced ? rl_ops_fenced.release(dev[i]) : free(dev[i]);
	if (fenced) {
		rl_ops_fenced.release(ids_);
		rl_ops_fenced.release(pos_);
		rl_ops_fenced.release(if_);
	}
	void *host[] = {x, w, g, v, tab, xf, wf, gf, vf, rf};
	for (size_t i = 0; i < sizeof host / sizeof *host; i++)
		free(host[i]);
}

Test(pointwise_bf16, fenced_equals_cpu_and_checks_sizes)
{
	struct run16 c, f;
	const size_t n16 = 6 * 32 * 2;

	run_ops(&rl_ops_cpu, 0, &c);
	run_ops(&rl_ops_fenced, 1, &f);
	cr_expect_arr_eq(f.y, c.y, n16, "rmsnorm y");
	cr_expect_arr_eq(f.dx, c.dx, n16, "rmsnorm dx");
	cr_expect_arr_eq(f.dw, c.dw, 32 * 4, "rmsnorm dweight");
	cr_expect_arr_eq(f.h, c.h, n16, "swiglu h");
	cr_expect_arr_eq(f.dg, c.dg, n16, "swiglu dgate");
	cr_expect_arr_eq(f.du, c.du, n16, "swiglu dup");
	cr_expect_arr_eq(f.emb, c.emb, n16, "embedding");
	cr_expect_arr_eq(f.dt, c.dt, 5 * 32 * 4, "embedding dtable");
	cr_expect_arr_eq(f.sum, c.sum, n16, "add");
	cr_expect_arr_eq(f.q, c.q, n16, "rope");

	struct run16 *runs[] = {&c, &f};
	for (int r = 0; r < 2; r++) {
		void *b[] = {runs[r]->y,   runs[r]->h,   runs[r]->dx, runs[r]->dg, runs[r]->du,
		             runs[r]->emb, runs[r]->sum, runs[r]->q,  runs[r]->dw, runs[r]->dt};
		for (size_t i = 0; i < sizeof b / sizeof *b; i++)
			free(b[i]);
	}
}
