/* The bf16 flash attention (kernels/attention_bf16.h): the argument checks,
 * which need no GPU, and under CUDA_TEST_BEGIN parity with the fp32 CPU
 * reference (kernels/cpu/attention.c) run on the same inputs rounded to bf16,
 * rows outside the sequences left alone, and two backward runs giving the
 * same bits. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/attention.h"
#include "kernels/dtype.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/ops_test_util.h"
#ifdef RL_HAVE_CUDA
#include "kernels/attention_bf16.h"
#endif

#ifdef RL_HAVE_CUDA
/* Pointers the checks must reject before touching: never dereferenced. */
#define FAKE(type, addr) ((type *)(uintptr_t)(addr))

static int fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v,
               const int32_t *cu, int n_seqs, int max_seqlen, const struct rl_attention_shape *sh)
{
	return rl_attention_forward_bf16_cuda(out, lse, q, k, v, cu, n_seqs, max_seqlen, sh, NULL);
}
#endif

Test(cuda_flash, bad_arguments)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	uint16_t *b = FAKE(uint16_t, 0x10000), *odd = FAKE(uint16_t, 0x10008);
	float *f = FAKE(float, 0x20000), *f_odd = FAKE(float, 0x20002);
	const int32_t *cu = FAKE(const int32_t, 0x30000);
	const struct rl_attention_shape ok = {4, 2, 64, 0.125f};
	struct rl_attention_shape bad[] = {
	    {4, 2, 96, 0.1f},     {4, 2, 32, 0.1f}, {4, 2, 0, 0.1f},   {4, 3, 64, 0.1f},
	    {4, 0, 64, 0.1f},     {0, 2, 64, 0.1f}, {-4, 2, 64, 0.1f}, {4, 2, 64, NAN},
	    {4, 2, 64, INFINITY}, {4, 8, 64, 0.1f},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(fwd(b, f, b, b, b, cu, 1, 8, &bad[i]), -1, "forward, bad shape %zu",
		             i);
		cr_expect_eq(rl_attention_backward_bf16_cuda(b, b, b, b, b, b, b, b, f, cu, 1, 8,
		                                             &bad[i], f, NULL),
		             -1, "backward, bad shape %zu", i);
		cr_expect_eq(rl_attention_backward_bf16_workspace_size(10, &bad[i]), 0);
	}
	cr_expect_eq(fwd(b, f, b, b, b, cu, 1, 8, NULL), -1, "shape NULL");
	cr_expect_eq(fwd(b, f, b, b, b, cu, -1, 8, &ok), -1, "n_seqs < 0");
	cr_expect_eq(fwd(b, f, b, b, b, cu, 1, -1, &ok), -1, "max_seqlen < 0");
	cr_expect_eq(fwd(b, f, b, b, b, cu, INT_MAX / 2, 8, &ok), -1, "grid.x past INT_MAX");
	cr_expect_eq(fwd(NULL, f, b, b, b, cu, 1, 8, &ok), -1, "out NULL");
	cr_expect_eq(fwd(b, NULL, b, b, b, cu, 1, 8, &ok), -1, "lse NULL");
	cr_expect_eq(fwd(b, f, NULL, b, b, cu, 1, 8, &ok), -1, "q NULL");
	cr_expect_eq(fwd(b, f, b, NULL, b, cu, 1, 8, &ok), -1, "k NULL");
	cr_expect_eq(fwd(b, f, b, b, NULL, cu, 1, 8, &ok), -1, "v NULL");
	cr_expect_eq(fwd(b, f, b, b, b, NULL, 1, 8, &ok), -1, "cu_seqlens NULL");
	cr_expect_eq(fwd(odd, f, b, b, b, cu, 1, 8, &ok), -1, "out misaligned");
	cr_expect_eq(fwd(b, f_odd, b, b, b, cu, 1, 8, &ok), -1, "lse misaligned");
	cr_expect_eq(fwd(b, f, odd, b, b, cu, 1, 8, &ok), -1, "q misaligned");
	cr_expect_eq(fwd(b, f, b, odd, b, cu, 1, 8, &ok), -1, "k misaligned");
	cr_expect_eq(fwd(b, f, b, b, odd, cu, 1, 8, &ok), -1, "v misaligned");
	/* nothing to do: returns before any CUDA call */
	cr_expect_eq(fwd(b, f, b, b, b, cu, 0, 0, &ok), 0, "n_seqs == 0");

	/* backward: each pointer in turn NULL, then misaligned */
	for (int which = 0; which < 12; which++) {
		for (int mis = 0; mis < 2; mis++) {
			uint16_t *p16[8] = {b, b, b, b, b, b, b, b};
			float *lse = f, *ws = f;
			const int32_t *c = cu;

			if (which < 8)
				p16[which] = mis ? odd : NULL;
			else if (which == 8)
				lse = mis ? f_odd : NULL;
			else if (which == 9)
				ws = mis ? f_odd : NULL;
			else if (which == 10 && !mis)
				c = NULL;
			else if (which == 10)
				continue;
			cr_expect_eq(rl_attention_backward_bf16_cuda(
			                 p16[0], p16[1], p16[2], p16[3], p16[4], p16[5], p16[6],
			                 p16[7], lse, c, which == 11 ? -1 : 1, 8, &ok, ws, NULL),
			             -1, "backward, argument %d, misaligned %d", which, mis);
		}
	}
	cr_expect_eq(
	    rl_attention_backward_bf16_cuda(b, b, b, b, b, b, b, b, f, cu, 1, -1, &ok, f, NULL), -1,
	    "backward, max_seqlen < 0");
	cr_expect_eq(
	    rl_attention_backward_bf16_cuda(b, b, b, b, b, b, b, b, f, cu, 0, 0, &ok, f, NULL), 0,
	    "backward, n_seqs == 0");

	cr_expect_eq(rl_attention_backward_bf16_workspace_size(100, &ok), 100 * 4 * sizeof(float));
	cr_expect_eq(rl_attention_backward_bf16_workspace_size(0, &ok), 256);
	cr_expect_eq(rl_attention_backward_bf16_workspace_size(-1, &ok), 0);
	cr_expect_eq(rl_attention_backward_bf16_workspace_size(10, NULL), 0);
#endif
}

#ifdef RL_HAVE_CUDA

/* One packed batch: rows 0 .. first-1 belong to no sequence (they must come
 * back untouched), then the sequences. max_mode picks the max_seqlen the
 * host passes: 0 the true longest, 1 a bound of 1 (every block loops over
 * all of its row blocks), 2 more than the longest (blocks with no rows). */
struct flash_case {
	const int32_t *lens;
	int n_seqs, first, H, Hkv, D, max_mode;
};

/* The lengths the brief asks for, packed in one batch: a single token,
 * tiles' edges (64, 65, 130 against tiles of 32, 64 and 128 rows) and one
 * long sequence; and short ones with an empty sequence between. */
static const int32_t lens_mix[] = {1, 17, 64, 65, 130, 1000};
static const int32_t lens_short[] = {3, 0, 1, 127, 129};
static const int32_t lens_one[] = {65};

static const struct flash_case cases64[] = {
    {lens_mix, 6, 0, 4, 1, 64, 0},   {lens_mix, 6, 0, 8, 2, 64, 1}, {lens_mix, 6, 0, 4, 4, 64, 2},
    {lens_short, 5, 5, 8, 2, 64, 0}, {lens_one, 1, 0, 4, 1, 64, 0},
};
static const struct flash_case cases128[] = {
    {lens_mix, 6, 0, 4, 1, 128, 2}, {lens_mix, 6, 0, 8, 2, 128, 0},
    {lens_mix, 6, 0, 4, 4, 128, 1}, {lens_short, 5, 3, 4, 1, 128, 0},
    {lens_one, 1, 0, 8, 2, 128, 1},
};

/* n values uniform in [lo, hi), rounded to bf16: bits for the device, the
 * rounded floats for the reference */
static uint16_t *bf16_rand(uint32_t *seed, size_t n, float lo, float hi, float **rounded)
{
	float *x = frand(seed, n, lo, hi);
	uint16_t *b = malloc((n ? n : 1) * sizeof(*b));

	cr_assert_not_null(b);
	for (size_t i = 0; i < n; i++) {
		b[i] = rl_f32_to_bf16(x[i]);
		x[i] = rl_bf16_to_f32(b[i]);
	}
	*rounded = x;
	return b;
}

static uint16_t *up16(const uint16_t *h, size_t n)
{
	uint16_t *d = dev_alloc(n * sizeof(*d));

	if (n)
		cuda_ok(cudaMemcpy(d, h, n * sizeof(*d), cudaMemcpyHostToDevice), "upload");
	return d;
}

/* bytes of device memory set to 0xff: NaN as bf16 and as fp32 */
static void *dev_poison(size_t bytes)
{
	void *d = dev_alloc(bytes);

	cuda_ok(cudaMemset(d, 0xff, bytes ? bytes : 16), "memset");
	return d;
}

static uint16_t *down16(const uint16_t *d, size_t n)
{
	uint16_t *h = malloc((n ? n : 1) * sizeof(*h));

	cr_assert_not_null(h);
	dev_sync();
	if (n)
		cuda_ok(cudaMemcpy(h, d, n * sizeof(*h), cudaMemcpyDeviceToHost), "download");
	return h;
}

/* Rows below first must still be poison; rows first .. first+n-1 (width
 * values each) must satisfy |got - want| <= rtol |want| + atol, atol given
 * per element (NULL: atol_scale * max |want| for all). Returns the worst
 * |got - want| / (rtol |want| + atol): under 1 passes. */
static double check_rows(const char *what, const uint16_t *got, const float *want,
                         const float *atol_each, double rtol, double atol_scale, size_t first,
                         size_t n, size_t width)
{
	double mx = 0.0, worst = 0.0;
	int bad = 0;

	for (size_t i = 0; i < first * width; i++)
		if (got[i] != 0xffff && bad++ < 3)
			cr_expect(0, "%s[%zu]: row %zu is outside every sequence and was written",
			          what, i, i / width);
	for (size_t i = first * width; i < (first + n) * width; i++)
		mx = fmax(mx, fabs((double)want[i]));
	for (size_t i = first * width; i < (first + n) * width; i++) {
		const double g = rl_bf16_to_f32(got[i]), w = want[i];
		const double tol =
		    rtol * fabs(w) + (atol_each ? atol_each[i] : atol_scale * mx) + 1e-30;
		const double r = fabs(g - w) / tol;

		if (!(r <= 1.0) && bad++ < 5)
			cr_expect(0, "%s[%zu] (row %zu): got %.6g, want %.6g, tolerance %.3g", what,
			          i, i / width, g, w, tol);
		worst = r > worst || r != r ? r : worst;
	}
	cr_expect(bad == 0, "%s: %d values off", what, bad);
	return worst;
}

/* Runs one case: the forward, then the backward twice into fresh buffers,
 * which must give the same bits. */
static void flash_case_run(const struct flash_case *c, uint32_t seed)
{
	int32_t cu[16];
	int longest = 0;

	cu[0] = c->first;
	for (int s = 0; s < c->n_seqs; s++) {
		cu[s + 1] = cu[s] + c->lens[s];
		longest = c->lens[s] > longest ? c->lens[s] : longest;
	}

	const size_t T = (size_t)cu[c->n_seqs], n_rows = T - (size_t)c->first;
	const size_t nq = T * c->H * c->D, nkv = T * c->Hkv * c->D, nl = T * c->H;
	const struct rl_attention_shape sh = {c->H, c->Hkv, c->D, 1.0f / sqrtf((float)c->D)};
	const int max_seqlen = c->max_mode == 0 ? longest : c->max_mode == 1 ? 1 : 2 * longest + 7;
	float *qf, *kf, *vf, *gf;
	/* scores of a few units: a softmax neither flat nor one-hot */
	uint16_t *qb = bf16_rand(&seed, nq, -2.0f, 2.0f, &qf);
	uint16_t *kb = bf16_rand(&seed, nkv, -2.0f, 2.0f, &kf);
	uint16_t *vb = bf16_rand(&seed, nkv, -1.0f, 1.0f, &vf);
	uint16_t *gb = bf16_rand(&seed, nq, -1.0f, 1.0f, &gf);

	/* the reference, in fp32 on the rounded inputs; dv_abs is dV for
	 * |dout|, sum_i P_ij |dO_i|: the scale of dV's rounding error (the
	 * other two gradients of that call are not used) */
	float *out = falloc(nq), *lse = falloc(nl), *dq = falloc(nq), *dk = falloc(nkv),
	      *dv = falloc(nkv), *g_abs = falloc(nq), *dq_abs = falloc(nq), *dk_abs = falloc(nkv),
	      *dv_abs = falloc(nkv);

	for (size_t i = 0; i < nq; i++)
		g_abs[i] = fabsf(gf[i]);
	cr_assert_eq(rl_attention_forward_cpu(out, lse, qf, kf, vf, cu, c->n_seqs, &sh, NULL), 0);
	cr_assert_eq(rl_attention_backward_cpu(dq, dk, dv, gf, qf, kf, vf, out, lse, cu, c->n_seqs,
	                                       &sh, NULL),
	             0);
	cr_assert_eq(rl_attention_backward_cpu(dq_abs, dk_abs, dv_abs, g_abs, qf, kf, vf, out, lse,
	                                       cu, c->n_seqs, &sh, NULL),
	             0);

	int32_t *d_cu = dev_upload_i32(cu, (size_t)c->n_seqs + 1);
	uint16_t *d_q = up16(qb, nq), *d_k = up16(kb, nkv), *d_v = up16(vb, nkv),
	         *d_g = up16(gb, nq);
	uint16_t *d_out = dev_poison(nq * 2);
	float *d_lse = dev_poison(nl * 4);
	const size_t ws_bytes = rl_attention_backward_bf16_workspace_size((int64_t)T, &sh);
	float *d_ws = dev_poison(ws_bytes);

	cr_assert(ws_bytes >= nl * sizeof(float));
	cr_assert_eq(rl_attention_forward_bf16_cuda(d_out, d_lse, d_q, d_k, d_v, d_cu, c->n_seqs,
	                                            max_seqlen, &sh, NULL),
	             0, "forward launch");

	uint16_t *d_grad[2][3];
	uint16_t *grad[2][3];

	for (int run = 0; run < 2; run++) {
		d_grad[run][0] = dev_poison(nq * 2);
		d_grad[run][1] = dev_poison(nkv * 2);
		d_grad[run][2] = dev_poison(nkv * 2);
		cr_assert_eq(rl_attention_backward_bf16_cuda(
		                 d_grad[run][0], d_grad[run][1], d_grad[run][2], d_g, d_q, d_k, d_v,
		                 d_out, d_lse, d_cu, c->n_seqs, max_seqlen, &sh, d_ws, NULL),
		             0, "backward launch");
		grad[run][0] = down16(d_grad[run][0], nq);
		grad[run][1] = down16(d_grad[run][1], nkv);
		grad[run][2] = down16(d_grad[run][2], nkv);
	}

	uint16_t *got_out = down16(d_out, nq);
	float *got_lse = falloc(nl);

	dev_download(got_lse, d_lse, nl);

	/* bf16 keeps 8 significant bits: rounding is off by at most u = 2^-8
	 * relative. out = sum_j p_j v_j / l with each p_j rounded before the
	 * product: |error| <= u sum_j p_j |v_j| / l <= u max |v| = u, plus
	 * u |out| when out itself is rounded; fp32 accumulation and ex2.approx
	 * add ~1e-6. Tolerance: twice that bound, 2^-7 + 2^-7 |out|. */
	const double w_out = check_rows("out", got_out, out, NULL, 1.0 / 128, 1.0 / 128,
	                                (size_t)c->first, n_rows, (size_t)c->H * c->D);
	/* lse is fp32 throughout (bf16 products are exact in fp32): ex2.approx
	 * (2 ulp) and another summation order over up to 1000 keys move it by
	 * ~1e-6; tolerance 1e-4 + 1e-5 |lse|. Rows outside the sequences stay
	 * poison (NaN bits). */
	double w_lse = 0.0;

	for (size_t i = 0; i < (size_t)c->first * c->H; i++) {
		uint32_t bits;

		memcpy(&bits, &got_lse[i], sizeof(bits));
		cr_expect(bits == 0xffffffffu, "lse[%zu] is outside every sequence and was written",
		          i);
	}
	for (size_t i = (size_t)c->first * c->H; i < nl; i++) {
		const double err = fabs((double)got_lse[i] - lse[i]);
		const double tol = 1e-4 + 1e-5 * fabs(lse[i]);

		if (!(err <= tol))
			cr_expect(0, "lse[%zu]: got %.7g, want %.7g", i, got_lse[i], lse[i]);
		w_lse = err / tol > w_lse ? err / tol : w_lse;
	}

	/* dV = sum_i P_ij dO_i with P rounded: |error| <= u sum_i P_ij |dO_i|
	 * = u dv_abs, plus u |dV| from its own rounding; tolerance twice that.
	 * dK and dQ sum dS = P (dP - D) (rounded: u) times Q or K, and D comes
	 * from the bf16 out (the reference's is fp32), an error dS carries as
	 * P dD; there is no cheap per-element bound, so twice the bound's
	 * shape at the tensor's scale: 2^-7 |ref| + 2^-6 max |ref| (measured
	 * worst, in a CPU emulation of the kernels: a quarter of it). */
	for (size_t i = 0; i < nkv; i++)
		dv_abs[i] *= 1.0f / 128;

	const double w_dv = check_rows("dv", grad[0][2], dv, dv_abs, 1.0 / 128, 0.0,
	                               (size_t)c->first, n_rows, (size_t)c->Hkv * c->D);
	const double w_dk = check_rows("dk", grad[0][1], dk, NULL, 1.0 / 128, 1.0 / 64,
	                               (size_t)c->first, n_rows, (size_t)c->Hkv * c->D);
	const double w_dq = check_rows("dq", grad[0][0], dq, NULL, 1.0 / 128, 1.0 / 64,
	                               (size_t)c->first, n_rows, (size_t)c->H * c->D);

	cr_log_info("H %d Hkv %d D %d first %d max_mode %d: worst error / tolerance: out %.3f "
	            "lse %.3f dq %.3f dk %.3f dv %.3f",
	            c->H, c->Hkv, c->D, c->first, c->max_mode, w_out, w_lse, w_dq, w_dk, w_dv);

	/* deterministic: the second backward gives the same bits */
	cr_expect_arr_eq(grad[0][0], grad[1][0], nq * 2, "dq differs between two runs");
	cr_expect_arr_eq(grad[0][1], grad[1][1], nkv * 2, "dk differs between two runs");
	cr_expect_arr_eq(grad[0][2], grad[1][2], nkv * 2, "dv differs between two runs");

	for (int run = 0; run < 2; run++)
		for (int i = 0; i < 3; i++) {
			dev_free(d_grad[run][i]);
			free(grad[run][i]);
		}
	dev_free(d_cu);
	dev_free(d_q);
	dev_free(d_k);
	dev_free(d_v);
	dev_free(d_g);
	dev_free(d_out);
	dev_free(d_lse);
	dev_free(d_ws);
	free(got_out);
	free(got_lse);
	free(qb);
	free(kb);
	free(vb);
	free(gb);
	free(qf);
	free(kf);
	free(vf);
	free(gf);
	free(out);
	free(lse);
	free(dq);
	free(dk);
	free(dv);
	free(g_abs);
	free(dq_abs);
	free(dk_abs);
	free(dv_abs);
}
#endif

Test(cuda_flash, head_dim_64_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	for (size_t i = 0; i < sizeof(cases64) / sizeof(cases64[0]); i++)
		flash_case_run(&cases64[i], 0x1234u + (uint32_t)i);
#endif
}

Test(cuda_flash, head_dim_128_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	for (size_t i = 0; i < sizeof(cases128) / sizeof(cases128[0]); i++)
		flash_case_run(&cases128[i], 0x8765u + (uint32_t)i);
#endif
}
