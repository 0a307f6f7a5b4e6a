/* The CUDA pointwise ops on bf16 buffers against the CPU ops on the same
 * bf16 buffers: the embedding's gather and scatter and the residual add to
 * the bit (a copy; one fp32 add and one rounding on both; the scatter adds
 * in the CPU's token order); RMSNorm, RoPE and SwiGLU within one rounding
 * of each side: both compute an fp32 value (within the fp32 parity test's
 * tolerance, tol, of each other) and round it once to bf16, which moves each
 * by at most 2^-8 of itself, so |gpu - cpu| <= tol + 2^-8 (|gpu| + |cpu|).
 * The argument checks, types included, run without a GPU. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/embedding.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "kernels/vector.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/linear_bf16_ref.h"

Test(cuda_pointwise_bf16, types_refused_before_any_work)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	uint16_t h[8] = {0};
	float f[8] = {0};
	int32_t ids[2] = {0, 0}, pos[2] = {0, 0};
	struct rl_buf H = rl_buf_bf16(h), F = rl_buf_f32(f), F16 = {h, RL_F16};
	struct rl_cbuf CH = rl_cbuf_bf16(h), CF = rl_cbuf_f32(f);

	cr_expect_eq(rl_rmsnorm_forward_cuda(H, f, CH, CF, 1, 4, 1e-6f, NULL), -1);
	cr_expect_eq(rl_rmsnorm_forward_cuda(F, f, CH, CH, 1, 4, 1e-6f, NULL), -1);
	cr_expect_eq(rl_rmsnorm_backward_cuda(H, f, CF, CH, CH, f, 1, 4, NULL), -1);
	cr_expect_eq(rl_rope_forward_cuda(F16, pos, f, 2, 1, 4, NULL), -1);
	cr_expect_eq(rl_swiglu_forward_cuda(H, CF, CH, 4, NULL), -1);
	cr_expect_eq(rl_swiglu_backward_cuda(H, F, CH, CH, CH, 4, NULL), -1);
	cr_expect_eq(rl_add_cuda(H, CF, 4, NULL), -1);
	cr_expect_eq(rl_embedding_forward_cuda(F, ids, CH, 2, 4, 1, NULL), -1);
	cr_expect_eq(rl_embedding_backward_cuda(f, (struct rl_cbuf){h, RL_F16}, ids, 2, 4, NULL),
	             -1);
#endif
}

#ifdef RL_HAVE_CUDA
/* |g - c| <= rtol |c| + atol + 2^-8 (|g| + |c|) for the bf16 values */
static void near16(const char *what, const uint16_t *gpu, const uint16_t *cpu, size_t n,
                   double rtol, double atol)
{
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		double g = rl_bf16_to_f32(gpu[i]), c = rl_bf16_to_f32(cpu[i]);

		if (fabs(g - c) <= rtol * fabs(c) + atol + 0x1p-8 * (fabs(g) + fabs(c)))
			continue;
		if (bad++ < 5)
			cr_expect(0, "%s[%zu]: gpu %.9g, cpu %.9g", what, i, g, c);
	}
	cr_expect(bad == 0, "%s: %d of %zu off", what, bad, n);
}
#endif

Test(cuda_pointwise_bf16, matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	uint32_t seed = 0x5eedu;
	const int rows = 300, dim = 520, heads = 4, hd = 130, vocab = 97;
	size_t n = (size_t)rows * dim;
	float *xf, *wf, *gf, *vf, *tf, *inv_freq = falloc(hd / 2);
	uint16_t *x = lin16_bits(&seed, n, -3, 3, &xf), *w = lin16_bits(&seed, dim, 0, 2, &wf);
	uint16_t *g = lin16_bits(&seed, n, -3, 3, &gf), *v = lin16_bits(&seed, n, -3, 3, &vf);
	uint16_t *tab = lin16_bits(&seed, (size_t)vocab * dim, -1, 1, &tf);
	int32_t *ids = malloc((size_t)rows * 4), *pos = malloc((size_t)rows * 4);
	float *rstd = falloc(rows), *dw = calloc(dim, 4), *dt = calloc((size_t)vocab * dim, 4);

	cr_assert(ids && pos && dw && dt);
	for (int t = 0; t < rows; t++) {
		ids[t] = t % 7 == 3 ? -1 : (int32_t)((t * 13) % vocab);
		pos[t] = t * 37 % 4096;
	}
	rl_rope_inv_freq(inv_freq, hd, 500000.0, NULL);

	uint16_t *d_x = dev_upload_bytes(x, n * 2), *d_w = dev_upload_bytes(w, dim * 2),
	         *d_g = dev_upload_bytes(g, n * 2);
	uint16_t *d_v = dev_upload_bytes(v, n * 2),
	         *d_tab = dev_upload_bytes(tab, (size_t)vocab * dim * 2);
	uint16_t *d_y = dev_alloc(n * 2);
	int32_t *d_ids = dev_upload_bytes(ids, (size_t)rows * 4),
	        *d_pos = dev_upload_bytes(pos, (size_t)rows * 4);
	float *d_rstd = dev_alloc((size_t)rows * 4),
	      *d_if = dev_upload_bytes(inv_freq, (size_t)hd / 2 * 4);
	float *d_dw = dev_upload_bytes(dw, dim * 4),
	      *d_dt = dev_upload_bytes(dt, (size_t)vocab * dim * 4);
	uint16_t *y = malloc(n * 2), *gy;

	/* RMSNorm forward and backward (dx from g, into a copy of v) */
	cr_assert_eq(rl_rmsnorm_forward_cpu(rl_buf_bf16(y), rstd, rl_cbuf_bf16(x), rl_cbuf_bf16(w),
	                                    rows, dim, 1e-6f, NULL),
	             0);
	cr_assert_eq(rl_rmsnorm_forward_cuda(rl_buf_bf16(d_y), d_rstd, rl_cbuf_bf16(d_x),
	                                     rl_cbuf_bf16(d_w), rows, dim, 1e-6f, NULL),
	             0);
	gy = dev_download_bytes(d_y, n * 2);
	near16("rmsnorm y", gy, y, n, 1e-5, 1e-6);
	free(gy);

	uint16_t *dx = lin16_copy(v, n), *d_dx = dev_upload_bytes(v, n * 2);

	cr_assert_eq(rl_rmsnorm_backward_cpu(rl_buf_bf16(dx), dw, rl_cbuf_bf16(g), rl_cbuf_bf16(x),
	                                     rl_cbuf_bf16(w), rstd, rows, dim, NULL),
	             0);
	/* the GPU from the CPU's rstd: the backward alone is compared */
	float *d_rstd_cpu = dev_upload_bytes(rstd, (size_t)rows * 4);

	cr_assert_eq(rl_rmsnorm_backward_cuda(rl_buf_bf16(d_dx), d_dw, rl_cbuf_bf16(d_g),
	                                      rl_cbuf_bf16(d_x), rl_cbuf_bf16(d_w), d_rstd_cpu,
	                                      rows, dim, NULL),
	             0);
	gy = dev_download_bytes(d_dx, n * 2);
	near16("rmsnorm dx", gy, dx, n, 1e-5, 1e-6);
	free(gy);

	float *gdw = dev_download_bytes(d_dw, dim * 4);
	double *dwmag = dalloc(dim);

	for (size_t i = 0; i < n; i++)
		dwmag[i % dim] += fabs((double)gf[i] * xf[i] * rstd[i / dim]);
	for (int i = 0; i < dim; i++)
		cr_expect(fabs(gdw[i] - dw[i]) <= 1e-5 * dwmag[i] + 1e-6, "dweight[%d]: %g vs %g",
		          i, (double)gdw[i], (double)dw[i]);
	free(gdw);
	free(dwmag);

	/* RoPE, both directions, in place on copies of g */
	for (int back = 0; back <= 1; back++) {
		uint16_t *q = lin16_copy(g, n), *d_q = dev_upload_bytes(g, n * 2);
		rl_rope_forward_fn cf = back ? rl_rope_backward_cpu : rl_rope_forward_cpu;
		rl_rope_forward_fn gf_ = back ? rl_rope_backward_cuda : rl_rope_forward_cuda;

		cr_assert_eq(cf(rl_buf_bf16(q), pos, inv_freq, rows, heads, hd, NULL), 0);
		cr_assert_eq(gf_(rl_buf_bf16(d_q), d_pos, d_if, rows, heads, hd, NULL), 0);
		gy = dev_download_bytes(d_q, n * 2);
		/* cos and sin a few ulp apart on the two (rope.cu): 1e-6 of |x| */
		near16(back ? "rope backward" : "rope forward", gy, q, n, 1e-6, 1e-6);
		free(gy);
		free(q);
		dev_free(d_q);
	}

	/* SwiGLU: h = silu(g) v; then dgate, dup from dh = x */
	uint16_t *h = malloc(n * 2), *dg = lin16_copy(x, n), *du = lin16_copy(v, n);
	uint16_t *d_dg = dev_upload_bytes(x, n * 2), *d_du = dev_upload_bytes(v, n * 2);

	cr_assert_eq(rl_swiglu_forward_cpu(rl_buf_bf16(h), rl_cbuf_bf16(g), rl_cbuf_bf16(v),
	                                   (int64_t)n, NULL),
	             0);
	cr_assert_eq(rl_swiglu_forward_cuda(rl_buf_bf16(d_y), rl_cbuf_bf16(d_g), rl_cbuf_bf16(d_v),
	                                    (int64_t)n, NULL),
	             0);
	gy = dev_download_bytes(d_y, n * 2);
	near16("swiglu h", gy, h, n, 1e-5, 1e-6);
	free(gy);
	cr_assert_eq(rl_swiglu_backward_cpu(rl_buf_bf16(dg), rl_buf_bf16(du), rl_cbuf_bf16(x),
	                                    rl_cbuf_bf16(g), rl_cbuf_bf16(v), (int64_t)n, NULL),
	             0);
	cr_assert_eq(rl_swiglu_backward_cuda(rl_buf_bf16(d_dg), rl_buf_bf16(d_du),
	                                     rl_cbuf_bf16(d_x), rl_cbuf_bf16(d_g),
	                                     rl_cbuf_bf16(d_v), (int64_t)n, NULL),
	             0);
	gy = dev_download_bytes(d_dg, n * 2);
	near16("swiglu dgate", gy, dg, n, 1e-5, 1e-6);
	free(gy);
	gy = dev_download_bytes(d_du, n * 2);
	near16("swiglu dup", gy, du, n, 1e-5, 1e-6);
	free(gy);

	/* the residual add and the embedding: the CPU's bits */
	uint16_t *sum = lin16_copy(x, n), *d_sum = dev_upload_bytes(x, n * 2);

	cr_assert_eq(rl_add_cpu(rl_buf_bf16(sum), rl_cbuf_bf16(g), (int64_t)n, NULL), 0);
	cr_assert_eq(rl_add_cuda(rl_buf_bf16(d_sum), rl_cbuf_bf16(d_g), (int64_t)n, NULL), 0);
	gy = dev_download_bytes(d_sum, n * 2);
	cr_expect_arr_eq(gy, sum, n * 2, "add: the CPU's bits");
	free(gy);
	cr_assert_eq(rl_embedding_forward_cpu(rl_buf_bf16(y), ids, rl_cbuf_bf16(tab), rows, dim,
	                                      vocab, NULL),
	             0);
	cr_assert_eq(rl_embedding_forward_cuda(rl_buf_bf16(d_y), d_ids, rl_cbuf_bf16(d_tab), rows,
	                                       dim, vocab, NULL),
	             0);
	cr_assert_eq(rl_embedding_check_cuda(NULL), 0);
	gy = dev_download_bytes(d_y, n * 2);
	cr_expect_arr_eq(gy, y, n * 2, "embedding: a copy");
	free(gy);
	cr_assert_eq(rl_embedding_backward_cpu(dt, rl_cbuf_bf16(g), ids, rows, dim, NULL), 0);
	cr_assert_eq(rl_embedding_backward_cuda(d_dt, rl_cbuf_bf16(d_g), d_ids, rows, dim, NULL),
	             0);
	float *gdt = dev_download_bytes(d_dt, (size_t)vocab * dim * 4);
	cr_expect_arr_eq(gdt, dt, (size_t)vocab * dim * 4, "embedding dtable: the CPU's order");
	free(gdt);

	void *dev[] = {d_x,  d_w,  d_g,  d_v,  d_tab,      d_y,  d_ids, d_pos, d_rstd,
	               d_if, d_dw, d_dt, d_dx, d_rstd_cpu, d_dg, d_du,  d_sum};
	for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
		dev_free(dev[i]);
	void *host[] = {x,   w,   g,    v,  tab, xf, wf, gf, vf, tf, inv_freq,
	                ids, pos, rstd, dw, dt,  y,  dx, h,  dg, du, sum};
	for (size_t i = 0; i < sizeof host / sizeof *host; i++)
		free(host[i]);
#endif
}
