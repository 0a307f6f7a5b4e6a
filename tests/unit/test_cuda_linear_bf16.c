/* The CUDA linear ops on bf16 buffers: the tensor-core forward and backward
 * against the exact sums of the same bf16 values (linear_bf16_ref.h's
 * bound, with its slack of 2 for the tensor cores' truncating adds); the
 * batch-invariant forward within the bound, equal to the CUDA fp32 chain
 * over the widened values rounded once (the bits), and the same bits for a
 * row whatever the batch: n in {1, 7, 64, 4096}, the sizes at which the
 * launcher changes its tiles. The argument checks run without a GPU. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/linear.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/linear_bf16_ref.h"
#include "tests/unit/op_arg_checks.h"

Test(cuda_linear_bf16, bad_arguments)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	/* host pointers: only NULL-ness and types are looked at first */
	expect_linear_arg_checks(rl_linear_forward_invariant_cuda, rl_linear_backward_cuda);
	expect_linear_arg_checks(rl_linear_forward_cuda, rl_linear_backward_cuda);
#endif
}

#ifdef RL_HAVE_CUDA
/* forward (plain and invariant; bf16 and fp32 y; with and without the
 * bias) and backward of one shape */
static void lin16_cuda_case(uint32_t *seed, int n, int in, int out)
{
	struct lin16_case c;

	lin16_make(&c, seed, n, in, out);

	size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
	uint16_t *d_x = dev_upload_bytes(c.x, nx * 2), *d_w = dev_upload_bytes(c.w, nw * 2),
	         *d_b = dev_upload_bytes(c.b, (size_t)out * 2);
	uint16_t *d_dy = dev_upload_bytes(c.dy, ny * 2);
	void *d_y = dev_alloc(ny * 4);
	int bad = 0;

	for (int inv = 0; inv <= 1; inv++)
		for (int yt = 0; yt <= 1; yt++)
			for (int bias = 0; bias <= (yt == 0); bias++) {
				struct rl_buf y = {d_y, yt == 0 ? RL_BF16 : RL_F32};
				rl_linear_forward_fn f =
				    inv ? rl_linear_forward_invariant_cuda : rl_linear_forward_cuda;

				cr_assert_eq(f(y, rl_cbuf_bf16(d_x), rl_cbuf_bf16(d_w),
				               rl_cbuf_bf16(bias ? d_b : NULL), n, in, out, NULL),
				             0, "n %d in %d out %d", n, in, out);
				void *h = dev_download_bytes(d_y, ny * rl_dtype_size(y.t));
				struct rl_cbuf hy = {h, y.t};

				bad += lin16_forward_bad(inv ? "invariant" : "forward", &c, hy,
				                         bias, 2.0);
				free(h);
			}

	float *dx0, *dw0 = frand(seed, nw, -1, 1), *db0 = frand(seed, (size_t)out, -1, 1);
	uint16_t *dx_start = lin16_bits(seed, nx, -1, 1, &dx0);
	uint16_t *d_dx = dev_upload_bytes(dx_start, nx * 2);
	float *d_dw = dev_upload_bytes(dw0, nw * 4), *d_db = dev_upload_bytes(db0, (size_t)out * 4);

	cr_assert_eq(rl_linear_backward_cuda(rl_buf_bf16(d_dx), d_dw, d_db, rl_cbuf_bf16(d_dy),
	                                     rl_cbuf_bf16(d_x), rl_cbuf_bf16(d_w), n, in, out,
	                                     NULL),
	             0);
	uint16_t *dx = dev_download_bytes(d_dx, nx * 2);
	float *dw = dev_download_bytes(d_dw, nw * 4),
	      *db = dev_download_bytes(d_db, (size_t)out * 4);

	bad += lin16_backward_bad(&c, dx0, dx, dw0, dw, db0, db, 2.0);
	cr_expect(bad == 0, "n %d in %d out %d: %d off", n, in, out, bad);

	void *dbufs[] = {d_x, d_w, d_b, d_dy, d_y, d_dx, d_dw, d_db};
	for (size_t i = 0; i < sizeof dbufs / sizeof *dbufs; i++)
		dev_free(dbufs[i]);
	free(dx0);
	free(dw0);
	free(db0);
	free(dx_start);
	free(dx);
	free(dw);
	free(db);
	lin16_free(&c);
}
#endif

Test(cuda_linear_bf16, matches_exact_sums)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	uint32_t seed = 0xb16u;

	lin16_cuda_case(&seed, 1, 1, 1);
	lin16_cuda_case(&seed, 3, 5, 7);
	lin16_cuda_case(&seed, 17, 64, 33);
	lin16_cuda_case(&seed, 127, 130, 257);
	lin16_cuda_case(&seed, 300, 1024, 96);
#endif
}

Test(cuda_linear_bf16, invariant_bits_in_every_batch)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int ns[] = {1, 7, 64, 4096};
	const int in = 1000, out = 300, nmax = 4096;
	uint32_t seed = 0x1f16u;
	struct lin16_case c;

	lin16_make(&c, &seed, nmax, in, out);

	size_t ny = (size_t)nmax * out;
	uint16_t *d_x = dev_upload_bytes(c.x, (size_t)nmax * in * 2),
	         *d_w = dev_upload_bytes(c.w, (size_t)out * in * 2);
	uint16_t *d_b = dev_upload_bytes(c.b, (size_t)out * 2), *d_y = dev_alloc(ny * 2);
	float *d_xf = dev_upload_bytes(c.xf, (size_t)nmax * in * 4),
	      *d_wf = dev_upload_bytes(c.wf, (size_t)out * in * 4);
	float *d_bf = dev_upload_bytes(c.bf, (size_t)out * 4), *d_yf = dev_alloc(ny * 4);

	/* the whole batch in bf16, and the fp32 chain over the same values */
	cr_assert_eq(rl_linear_forward_invariant_cuda(rl_buf_bf16(d_y), rl_cbuf_bf16(d_x),
	                                              rl_cbuf_bf16(d_w), rl_cbuf_bf16(d_b), nmax,
	                                              in, out, NULL),
	             0);
	cr_assert_eq(rl_linear_forward_invariant_cuda(rl_buf_f32(d_yf), rl_cbuf_f32(d_xf),
	                                              rl_cbuf_f32(d_wf), rl_cbuf_f32(d_bf), nmax,
	                                              in, out, NULL),
	             0);
	uint16_t *all = dev_download_bytes(d_y, ny * 2);
	float *all32 = dev_download_bytes(d_yf, ny * 4);
	int bad = 0;

	for (size_t i = 0; i < ny; i++)
		if (all[i] != rl_f32_to_bf16(all32[i]) && bad++ < 5)
			cr_expect(0, "y[%zu]: %#x, the fp32 chain rounds to %#x", i, all[i],
			          rl_f32_to_bf16(all32[i]));
	/* the last rows of the batch again, as batches of each size: the
	 * same bits whatever the tiles */
	for (size_t s = 0; s < sizeof ns / sizeof *ns; s++) {
		int n = ns[s], t0 = nmax - n;

		cr_assert_eq(rl_linear_forward_invariant_cuda(
		                 rl_buf_bf16(d_y), rl_cbuf_bf16(d_x + (size_t)t0 * in),
		                 rl_cbuf_bf16(d_w), rl_cbuf_bf16(d_b), n, in, out, NULL),
		             0);
		uint16_t *part = dev_download_bytes(d_y, (size_t)n * out * 2);

		if (memcmp(part, all + (size_t)t0 * out, (size_t)n * out * 2) && bad++ < 5)
			cr_expect(0, "a batch of %d: the rows' bits differ from the batch of %d", n,
			          nmax);
		free(part);
	}
	cr_expect(bad == 0, "%d off", bad);

	void *dbufs[] = {d_x, d_w, d_b, d_y, d_xf, d_wf, d_bf, d_yf};
	for (size_t i = 0; i < sizeof dbufs / sizeof *dbufs; i++)
		dev_free(dbufs[i]);
	free(all);
	free(all32);
	lin16_free(&c);
#endif
}
