/* The CUDA mixture-of-experts ops against their CPU references: the grouped
 * GEMM (forward, and its backward with and without each gradient) on group
 * layouts with empty and one-row groups and dims that are no multiple of the
 * 64-wide tiles, and the combine with k = 1, 2, 8, slots of -1 and rows of y
 * that no slot names filled with NaN (they must not leak). Every float
 * buffer has a guard after it: NaN after an input (a read past the end
 * poisons the result), a sentinel after an output (a write past the end
 * changes it). Both ops promise the same bits on a repeated call; that is
 * checked with memcmp. The argument checks run without a GPU.
 *
 * Tolerances. The grouped GEMM is an fp32 sum of k products on both sides
 * (OpenBLAS sgemm on the CPU, an fma chain on the GPU); each is within
 * k eps |terms| ("mag", eps = 2^-24) of the exact sum at worst, so the two
 * differ by at most 2 k eps mag (+ the rounding of the accumulation into a
 * non-zero gradient, counted in mag). The check allows 4e-6 sqrt(k) mag, the
 * test_cuda_linear bound, which is above the worst case for every k here
 * (k <= 600: 2 k eps = 7e-5 at most, 4e-6 sqrt(600) = 1e-4) and far below
 * what a wrong group, row or transpose costs (of the order of mag). The
 * combine's forward rounds each of its k products and sums in the CPU's
 * order: (k + 1) 2^-23 mag covers both sides' worst case. The weight
 * gradient is a dot in double on both sides, rounded once to float: one ulp
 * (2^-23 |want|) plus 1e-12 mag for the double's own rounding. dy gets one
 * product and one sum: 2^-22 (|dy| + |w dout|). */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/moe.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/ops_test_util.h"

/* ---- argument checks: the same contract on both backends ---- */

/* Host arrays stand in for device ones: the CUDA ops check their arguments
 * before any CUDA call and return before one when there is nothing to do
 * (every group empty, no gradient asked for, no tokens). */
static void bad_grouped(rl_grouped_linear_forward_fn fwd, rl_grouped_linear_backward_fn bwd,
                        const char *name)
{
	float v[8] = {0}, g[8] = {0};
	const int32_t ok[3] = {0, 1, 2}, empty[3] = {0, 0, 0};
	const int32_t not_zero[3] = {1, 1, 2}, down[3] = {0, 2, 1};

	cr_expect_eq(fwd(rl_buf_f32(NULL), rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 2, 2, 2, NULL), -1,
	             "%s: y == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(NULL), rl_cbuf_f32(v), ok, 2, 2, 2, NULL), -1,
	             "%s: x == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(NULL), ok, 2, 2, 2, NULL), -1,
	             "%s: w == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v), NULL, 2, 2, 2, NULL), -1,
	             "%s: offsets == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 0, 2, 2, NULL), -1,
	             "%s: groups == 0", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v), ok, -1, 2, 2, NULL), -1,
	             "%s: groups < 0", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 2, 0, 2, NULL), -1,
	             "%s: in_dim == 0", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 2, 2, -2, NULL), -1,
	             "%s: out_dim < 0", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v), not_zero, 2, 2, 2, NULL),
	             -1, "%s: offsets[0] != 0", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v), down, 2, 2, 2, NULL), -1,
	             "%s: offsets decrease", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), rl_cbuf_f32(v), empty, 2, 2, 2, NULL), 0,
	             "%s: every group empty", name);

	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(NULL), rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 2,
	                 2, 2, NULL),
	             -1, "%s: dy == NULL", name);
	cr_expect_eq(bwd(rl_buf_f32(g), NULL, rl_cbuf_f32(v), rl_cbuf_f32(v), rl_cbuf_f32(NULL), ok,
	                 2, 2, 2, NULL),
	             -1, "%s: dx without w", name);
	cr_expect_eq(bwd(rl_buf_f32(NULL), g, rl_cbuf_f32(v), rl_cbuf_f32(NULL), rl_cbuf_f32(v), ok,
	                 2, 2, 2, NULL),
	             -1, "%s: dw without x", name);
	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), rl_cbuf_f32(v), NULL, 2,
	                 2, 2, NULL),
	             -1, "%s: offsets == NULL", name);
	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 0, 2,
	                 2, NULL),
	             -1, "%s: groups == 0", name);
	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 2,
	                 -1, 2, NULL),
	             -1, "%s: in_dim < 0", name);
	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), rl_cbuf_f32(v), ok, 2, 2,
	                 0, NULL),
	             -1, "%s: out_dim == 0", name);
	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), rl_cbuf_f32(v), not_zero,
	                 2, 2, 2, NULL),
	             -1, "%s: offsets[0]", name);
	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), rl_cbuf_f32(v), down, 2,
	                 2, 2, NULL),
	             -1, "%s: offsets decrease", name);
	/* the bad offsets are refused even with nothing to compute */
	cr_expect_eq(bwd(rl_buf_f32(NULL), NULL, rl_cbuf_f32(v), rl_cbuf_f32(v), rl_cbuf_f32(v),
	                 down, 2, 2, 2, NULL),
	             -1, "%s: no grads, bad", name);
	cr_expect_eq(bwd(rl_buf_f32(NULL), NULL, rl_cbuf_f32(v), rl_cbuf_f32(NULL),
	                 rl_cbuf_f32(NULL), ok, 2, 2, 2, NULL),
	             0, "%s: no gradient", name);
	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), rl_cbuf_f32(v), empty, 2,
	                 2, 2, NULL),
	             0, "%s: every group empty", name);
	for (int i = 0; i < 8; i++)
		cr_expect(g[i] == 0 && v[i] == 0, "%s: wrote to a buffer", name);
}

static void bad_combine(rl_moe_combine_forward_fn fwd, rl_moe_combine_backward_fn bwd,
                        const char *name)
{
	float v[8] = {0}, g[8] = {0}, wt[2] = {1, 1};
	int32_t slot[2] = {0, 1};

	cr_expect_eq(fwd(rl_buf_f32(NULL), rl_cbuf_f32(v), slot, wt, 1, 2, 4, 2, NULL), -1,
	             "%s: out == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), NULL, wt, 1, 2, 4, 2, NULL), -1,
	             "%s: slot == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), slot, NULL, 1, 2, 4, 2, NULL), -1,
	             "%s: weight == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), slot, wt, -1, 2, 4, 2, NULL), -1,
	             "%s: n_tokens < 0", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), slot, wt, 1, 0, 4, 2, NULL), -1,
	             "%s: k == 0", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), slot, wt, 1, 2, 0, 2, NULL), -1,
	             "%s: dim == 0", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), slot, wt, 1, 2, 4, -1, NULL), -1,
	             "%s: n_slots < 0", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(NULL), slot, wt, 1, 2, 4, 2, NULL), -1,
	             "%s: y == NULL", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(v), slot, wt, 0, 2, 4, 2, NULL), 0,
	             "%s: no tokens", name);
	cr_expect_eq(fwd(rl_buf_f32(g), rl_cbuf_f32(NULL), slot, wt, 0, 2, 4, 0, NULL), 0,
	             "%s: no slots, no y", name);

	cr_expect_eq(
	    bwd(rl_buf_f32(g), NULL, rl_cbuf_f32(v), rl_cbuf_f32(v), slot, wt, 1, 2, 4, NULL), -1,
	    "%s: dweight NULL", name);
	cr_expect_eq(
	    bwd(rl_buf_f32(g), g, rl_cbuf_f32(NULL), rl_cbuf_f32(v), slot, wt, 1, 2, 4, NULL), -1,
	    "%s: dout == NULL", name);
	cr_expect_eq(
	    bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(NULL), slot, wt, 1, 2, 4, NULL), -1,
	    "%s: y == NULL", name);
	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), NULL, wt, 1, 2, 4, NULL),
	             -1, "%s: slot == NULL", name);
	cr_expect_eq(
	    bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), slot, NULL, 1, 2, 4, NULL), -1,
	    "%s: weight == NULL", name);
	cr_expect_eq(
	    bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), slot, wt, -1, 2, 4, NULL), -1,
	    "%s: n_tokens < 0", name);
	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), slot, wt, 1, 0, 4, NULL),
	             -1, "%s: k == 0", name);
	cr_expect_eq(
	    bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), slot, wt, 1, 2, -4, NULL), -1,
	    "%s: dim < 0", name);
	cr_expect_eq(bwd(rl_buf_f32(g), g, rl_cbuf_f32(v), rl_cbuf_f32(v), slot, wt, 0, 2, 4, NULL),
	             0, "%s: no tokens", name);
	cr_expect_eq(
	    bwd(rl_buf_f32(NULL), g, rl_cbuf_f32(v), rl_cbuf_f32(v), slot, wt, 0, 2, 4, NULL), 0,
	    "%s: no tokens, no dy", name);
	for (int i = 0; i < 8; i++)
		cr_expect(g[i] == 0 && v[i] == 0, "%s: wrote to a buffer", name);
}

Test(cuda_moe, bad_arguments)
{
	bad_grouped(rl_grouped_linear_forward_cpu, rl_grouped_linear_backward_cpu, "cpu");
	bad_combine(rl_moe_combine_forward_cpu, rl_moe_combine_backward_cpu, "cpu");
#ifdef RL_HAVE_CUDA
	bad_grouped(rl_grouped_linear_forward_cuda, rl_grouped_linear_backward_cuda, "cuda");
	bad_combine(rl_moe_combine_forward_cuda, rl_moe_combine_backward_cuda, "cuda");
#endif
}

/* Only the CPU op can see a slot out of range (the CUDA one's are device
 * memory, unchecked, as the header says). */
Test(cuda_moe, cpu_combine_checks_slots)
{
	float y[8] = {0}, out[4], wt[2] = {1, 1};
	const int32_t high[2] = {0, 2}, low[2] = {-2, 0}, fine[2] = {-1, 1};

	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), high, wt, 1, 2, 4, 2, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), low, wt, 1, 2, 4, 2, NULL),
	    -1);
	cr_expect_eq(
	    rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(y), fine, wt, 1, 2, 4, 2, NULL),
	    0);
}

#ifdef RL_HAVE_CUDA
#define GUARD    67 /* floats after every device buffer: more than a tile row */
#define SENTINEL 4096.0f

/* n floats of host (NaN where host is NULL) in a fresh device buffer,
 * followed by GUARD floats of fill. */
static float *put(const float *host, size_t n, float fill)
{
	float *tmp = falloc(n + GUARD), *d = dev_alloc((n + GUARD) * sizeof(float));

	for (size_t i = 0; i < n + GUARD; i++)
		tmp[i] = i < n ? (host ? host[i] : NAN) : fill;
	cuda_ok(cudaMemcpy(d, tmp, (n + GUARD) * sizeof(float), cudaMemcpyHostToDevice), "upload");
	free(tmp);
	return d;
}

/* host -> an existing buffer of put's, guard left as it is */
static void reput(float *d, const float *host, size_t n)
{
	dev_sync();
	if (n)
		cuda_ok(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice), "reupload");
}

static float *get(const float *d, size_t n)
{
	float *h = falloc(n);

	dev_download(h, d, n);
	return h;
}

static void guard_intact(const char *what, const float *d, size_t n)
{
	float g[GUARD];
	int bad = 0;

	dev_download(g, d + n, GUARD);
	for (int i = 0; i < GUARD; i++)
		bad += g[i] != SENTINEL;
	cr_expect(bad == 0, "%s: %d floats past the end written", what, bad);
}

/* |got - want| <= rtol mag (+ a floor), counted; the first few printed */
static void near(const char *what, const float *got, const float *want, const double *mag, size_t n,
                 double rtol)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (fabs((double)got[i] - (double)want[i]) <= rtol * mag[i] + 1e-30)
			continue;
		if (bad++ < 5)
			cr_expect(0, "%s[%zu]: gpu %.9g, cpu %.9g (mag %g)", what, i,
			          (double)got[i], (double)want[i], mag[i]);
	}
	cr_expect(bad == 0, "%s: %zu of %zu off", what, bad, n);
}

static void same_bits(const char *what, const float *a, const float *b, size_t n)
{
	cr_expect(n == 0 || memcmp(a, b, n * sizeof(float)) == 0, "%s: bits differ", what);
}

/* ---- the grouped GEMM ---- */

/* groups + 1 offsets. Fewer than 4 groups get max_rows, max_rows - 1, ...
 * rows (whole and partial tiles); from 4 on, every fourth group is empty
 * and the one after it has a single row (with 5, the first and the last
 * are empty), the rest draw 0 .. max_rows rows. max_rows 0: all empty. */
static int32_t *draw_offsets(uint32_t *seed, int groups, int max_rows)
{
	int32_t *off = malloc(((size_t)groups + 1) * sizeof(*off));

	cr_assert_not_null(off);
	off[0] = 0;
	for (int g = 0; g < groups; g++) {
		int rows = max_rows == 0 ? 0
		           : groups < 4  ? (max_rows > g ? max_rows - g : 1)
		           : g % 4 == 0  ? 0
		           : g % 4 == 1  ? 1
		                         : (int)(gc_rng(seed) % (uint32_t)(max_rows + 1));
		off[g + 1] = off[g] + rows;
	}
	return off;
}

static void grouped_case(uint32_t *seed, int groups, int in, int out, int max_rows)
{
	int32_t *off = draw_offsets(seed, groups, max_rows);
	int n = off[groups], max_k = 1;
	size_t nx = (size_t)n * in, ny = (size_t)n * out, nw = (size_t)groups * out * in;
	float *x = frand(seed, nx, -1, 1), *w = frand(seed, nw, -1, 1);
	float *dy = frand(seed, ny, -1, 1), *dx0 = frand(seed, nx, -1, 1);
	float *dw0 = frand(seed, nw, -1, 1);
	float *y = falloc(ny), *cdx = fdup(dx0, nx), *cdw = fdup(dw0, nw);
	double *ymag = dalloc(ny), *dxmag = dalloc(nx), *dwmag = dalloc(nw);
	char what[96];

	for (int g = 0; g < groups; g++) {
		const float *wg = w + (size_t)g * out * in;

		if (off[g + 1] - off[g] > max_k)
			max_k = off[g + 1] - off[g];
		for (int r = off[g]; r < off[g + 1]; r++)
			for (int o = 0; o < out; o++) {
				double gv = fabs(dy[(size_t)r * out + o]), m = 0;

				for (int i = 0; i < in; i++) {
					double xv = fabs(x[(size_t)r * in + i]);
					double wv = fabs(wg[(size_t)o * in + i]);

					m += xv * wv;
					dxmag[(size_t)r * in + i] += gv * wv;
					dwmag[((size_t)g * out + o) * in + i] += gv * xv;
				}
				ymag[(size_t)r * out + o] = m;
			}
	}
	for (size_t i = 0; i < nx; i++)
		dxmag[i] += fabs(dx0[i]);
	for (size_t i = 0; i < nw; i++)
		dwmag[i] += fabs(dw0[i]);

	cr_assert_eq(rl_grouped_linear_forward_cpu(rl_buf_f32(y), rl_cbuf_f32(x), rl_cbuf_f32(w),
	                                           off, groups, in, out, NULL),
	             0);
	cr_assert_eq(rl_grouped_linear_backward_cpu(rl_buf_f32(cdx), cdw, rl_cbuf_f32(dy),
	                                            rl_cbuf_f32(x), rl_cbuf_f32(w), off, groups, in,
	                                            out, NULL),
	             0);

	float *d_x = put(x, nx, NAN), *d_w = put(w, nw, NAN), *d_dy = put(dy, ny, NAN);
	float *d_y = put(NULL, ny, SENTINEL); /* NaN: every row must be written */
	float *d_dx = put(dx0, nx, SENTINEL), *d_dw = put(dw0, nw, SENTINEL);

	/* forward, twice: the same bits */
	snprintf(what, sizeof(what), "groups %d n %d in %d out %d: y", groups, n, in, out);
	cr_assert_eq(rl_grouped_linear_forward_cuda(rl_buf_f32(d_y), rl_cbuf_f32(d_x),
	                                            rl_cbuf_f32(d_w), off, groups, in, out, NULL),
	             0, "%s", what);
	float *gy = get(d_y, ny);
	near(what, gy, y, ymag, ny, 4e-6 * sqrt((double)in));
	guard_intact(what, d_y, ny);
	cr_assert_eq(rl_grouped_linear_forward_cuda(rl_buf_f32(d_y), rl_cbuf_f32(d_x),
	                                            rl_cbuf_f32(d_w), off, groups, in, out, NULL),
	             0);
	float *gy2 = get(d_y, ny);
	same_bits(what, gy, gy2, ny);

	/* backward, both gradients, added to non-zero ones */
	cr_assert_eq(rl_grouped_linear_backward_cuda(rl_buf_f32(d_dx), d_dw, rl_cbuf_f32(d_dy),
	                                             rl_cbuf_f32(d_x), rl_cbuf_f32(d_w), off,
	                                             groups, in, out, NULL),
	             0);
	float *gdx = get(d_dx, nx), *gdw = get(d_dw, nw);
	snprintf(what, sizeof(what), "groups %d n %d in %d out %d: dx", groups, n, in, out);
	near(what, gdx, cdx, dxmag, nx, 4e-6 * sqrt((double)out));
	guard_intact(what, d_dx, nx);
	snprintf(what, sizeof(what), "groups %d n %d in %d out %d: dw", groups, n, in, out);
	near(what, gdw, cdw, dwmag, nw, 4e-6 * sqrt((double)max_k));
	guard_intact(what, d_dw, nw);
	/* an empty group's weight gradient is left exactly as it was */
	for (int g = 0; g < groups; g++)
		if (off[g + 1] == off[g])
			same_bits("dw of an empty group", gdw + (size_t)g * out * in,
			          dw0 + (size_t)g * out * in, (size_t)out * in);

	/* again from the same start, on another stream: the same bits */
	cudaStream_t st;
	cuda_ok(cudaStreamCreate(&st), "cudaStreamCreate");
	reput(d_dx, dx0, nx);
	reput(d_dw, dw0, nw);
	cr_assert_eq(rl_grouped_linear_backward_cuda(rl_buf_f32(d_dx), d_dw, rl_cbuf_f32(d_dy),
	                                             rl_cbuf_f32(d_x), rl_cbuf_f32(d_w), off,
	                                             groups, in, out, st),
	             0);
	cuda_ok(cudaStreamSynchronize(st), "backward on a stream");
	cuda_ok(cudaStreamDestroy(st), "cudaStreamDestroy");
	float *gdx2 = get(d_dx, nx), *gdw2 = get(d_dw, nw);
	same_bits("dx, second run", gdx, gdx2, nx);
	same_bits("dw, second run", gdw, gdw2, nw);
	free(gdx2);
	free(gdw2);

	/* each gradient alone (the other's input may be NULL): what both gave */
	reput(d_dx, dx0, nx);
	reput(d_dw, dw0, nw);
	cr_assert_eq(rl_grouped_linear_backward_cuda(rl_buf_f32(d_dx), NULL, rl_cbuf_f32(d_dy),
	                                             rl_cbuf_f32(NULL), rl_cbuf_f32(d_w), off,
	                                             groups, in, out, NULL),
	             0);
	gdx2 = get(d_dx, nx);
	same_bits("dx alone", gdx, gdx2, nx);
	gdw2 = get(d_dw, nw);
	same_bits("dw untouched by a dx-only call", dw0, gdw2, nw);
	free(gdx2);
	free(gdw2);
	reput(d_dx, dx0, nx);
	cr_assert_eq(rl_grouped_linear_backward_cuda(rl_buf_f32(NULL), d_dw, rl_cbuf_f32(d_dy),
	                                             rl_cbuf_f32(d_x), rl_cbuf_f32(NULL), off,
	                                             groups, in, out, NULL),
	             0);
	gdw2 = get(d_dw, nw);
	same_bits("dw alone", gdw, gdw2, nw);
	gdx2 = get(d_dx, nx);
	same_bits("dx untouched by a dw-only call", dx0, gdx2, nx);

	float *bufs[] = {x, w, dy, dx0, dw0, y, cdx, cdw, gy, gy2, gdx, gdw, gdx2, gdw2};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		free(bufs[i]);
	float *dbufs[] = {d_x, d_w, d_dy, d_y, d_dx, d_dw};
	for (size_t i = 0; i < sizeof(dbufs) / sizeof(dbufs[0]); i++)
		dev_free(dbufs[i]);
	free(ymag);
	free(dxmag);
	free(dwmag);
	free(off);
}
#endif

Test(cuda_moe, grouped_linear_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	/* groups, in, out, max rows a group */
	static const int cases[][4] = {
	    {1, 1, 1, 1},     {1, 3, 17, 130},    {1, 130, 127, 200}, {1, 17, 3, 64},
	    {5, 17, 3, 70},   {5, 127, 130, 150}, {5, 1, 130, 65},    {5, 130, 1, 129},
	    {64, 3, 17, 20},  {64, 17, 1, 70},    {64, 130, 127, 10}, {64, 1, 3, 3},
	    {3, 64, 64, 128}, {2, 200, 300, 300}, {4, 3, 3, 0}, /* every group empty */
	};
	uint32_t seed = 0x6d6f65u;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		grouped_case(&seed, cases[c][0], cases[c][1], cases[c][2], cases[c][3]);
#endif
}

#ifdef RL_HAVE_CUDA
/* ---- the combine ---- */

/* n_tokens k slots: a random injection into [0, n_slots), about one in
 * neg_every (0: none, 1: all) replaced by -1. */
static int32_t *draw_slots(uint32_t *seed, int n_tokens, int k, int n_slots, int neg_every)
{
	size_t pairs = (size_t)n_tokens * k;
	int32_t *perm = malloc(((size_t)n_slots + 1) * sizeof(*perm));
	int32_t *slot = malloc((pairs + 1) * sizeof(*slot));

	cr_assert_not_null(perm);
	cr_assert_not_null(slot);
	cr_assert(pairs <= (size_t)n_slots || neg_every == 1);
	for (int i = 0; i < n_slots; i++)
		perm[i] = i;
	for (int i = n_slots - 1; i > 0; i--) {
		int j = (int)(gc_rng(seed) % (uint32_t)(i + 1));
		int32_t t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < pairs; i++)
		slot[i] = neg_every && gc_rng(seed) % (uint32_t)neg_every == 0 ? -1 : perm[i];
	free(perm);
	return slot;
}

static void combine_case(uint32_t *seed, int n_tokens, int k, int dim, int spare, int neg_every)
{
	size_t pairs = (size_t)n_tokens * k;
	int n_slots = neg_every == 1 && spare == 0 ? 0 : (int)pairs + spare;
	int32_t *slot = draw_slots(seed, n_tokens, k, n_slots, neg_every);
	size_t ny = (size_t)n_slots * dim, nout = (size_t)n_tokens * dim;
	float *y = frand(seed, ny, -1, 1), *wt = frand(seed, pairs, -1, 1);
	float *dout = frand(seed, nout, -1, 1), *dy0 = frand(seed, ny, -1, 1);
	float *out = falloc(nout), *cdy = fdup(dy0, ny), *cdw = falloc(pairs);
	double *omag = dalloc(nout), *dymag = dalloc(ny), *dwtol = dalloc(pairs);
	char *named = calloc((size_t)n_slots + 1, 1);
	char what[96];

	cr_assert_not_null(named);
	/* the rows no slot names are NaN, and so are the weights of -1 slots:
	 * neither may be read */
	for (size_t i = 0; i < pairs; i++)
		if (slot[i] >= 0)
			named[slot[i]] = 1;
		else
			wt[i] = NAN;
	for (int s = 0; s < n_slots; s++)
		if (!named[s])
			for (int c = 0; c < dim; c++)
				y[(size_t)s * dim + c] = NAN;

	cr_assert_eq(rl_moe_combine_forward_cpu(rl_buf_f32(out), rl_cbuf_f32(n_slots ? y : NULL),
	                                        slot, wt, n_tokens, k, dim, n_slots, NULL),
	             0);
	cr_assert_eq(rl_moe_combine_backward_cpu(rl_buf_f32(cdy), cdw, rl_cbuf_f32(dout),
	                                         rl_cbuf_f32(y), slot, wt, n_tokens, k, dim, NULL),
	             0);
	for (int t = 0; t < n_tokens; t++)
		for (int j = 0; j < k; j++) {
			size_t i = (size_t)t * k + j;
			double dot = 0;

			if (slot[i] < 0)
				continue;
			for (int c = 0; c < dim; c++) {
				double yv = fabs(y[(size_t)slot[i] * dim + c]);
				double gv = fabs(dout[(size_t)t * dim + c]);

				omag[(size_t)t * dim + c] += fabs(wt[i]) * yv;
				dymag[(size_t)slot[i] * dim + c] += fabs(wt[i]) * gv;
				dot += gv * yv;
			}
			dwtol[i] = 0x1p-23 * fabs(cdw[i]) + 1e-12 * dot;
		}
	for (size_t i = 0; i < ny; i++)
		dymag[i] += fabs(dy0[i]);

	int32_t *d_slot = dev_upload_i32(slot, pairs);
	float *d_y = put(y, ny, NAN), *d_wt = put(wt, pairs, NAN), *d_dout = put(dout, nout, NAN);
	float *d_out = put(NULL, nout, SENTINEL), *d_dy = put(dy0, ny, SENTINEL);
	float *d_dw = put(NULL, pairs, SENTINEL); /* NaN: every weight must be written */

	/* forward, twice: the same bits */
	snprintf(what, sizeof(what), "tokens %d k %d dim %d slots %d: out", n_tokens, k, dim,
	         n_slots);
	cr_assert_eq(rl_moe_combine_forward_cuda(rl_buf_f32(d_out),
	                                         rl_cbuf_f32(n_slots ? d_y : NULL), d_slot, d_wt,
	                                         n_tokens, k, dim, n_slots, NULL),
	             0, "%s", what);
	float *gout = get(d_out, nout);
	near(what, gout, out, omag, nout, (k + 1) * 0x1p-23);
	guard_intact(what, d_out, nout);
	cr_assert_eq(rl_moe_combine_forward_cuda(rl_buf_f32(d_out),
	                                         rl_cbuf_f32(n_slots ? d_y : NULL), d_slot, d_wt,
	                                         n_tokens, k, dim, n_slots, NULL),
	             0);
	float *gout2 = get(d_out, nout);
	same_bits(what, gout, gout2, nout);

	/* backward into a non-zero dy */
	cr_assert_eq(rl_moe_combine_backward_cuda(rl_buf_f32(d_dy), d_dw, rl_cbuf_f32(d_dout),
	                                          rl_cbuf_f32(d_y), d_slot, d_wt, n_tokens, k, dim,
	                                          NULL),
	             0);
	float *gdy = get(d_dy, ny), *gdw = get(d_dw, pairs);
	snprintf(what, sizeof(what), "tokens %d k %d dim %d: dy", n_tokens, k, dim);
	near(what, gdy, cdy, dymag, ny, 0x1p-22);
	guard_intact(what, d_dy, ny);
	for (int s = 0; s < n_slots; s++)
		if (!named[s])
			same_bits("dy of a row no slot names", gdy + (size_t)s * dim,
			          dy0 + (size_t)s * dim, (size_t)dim);
	snprintf(what, sizeof(what), "tokens %d k %d dim %d: dweight", n_tokens, k, dim);
	for (size_t i = 0; i < pairs; i++) {
		if (slot[i] < 0)
			cr_expect(gdw[i] == 0.0f, "%s[%zu] of a -1 slot: %g", what, i,
			          (double)gdw[i]);
		else
			cr_expect(fabs((double)gdw[i] - cdw[i]) <= dwtol[i],
			          "%s[%zu]: gpu %.9g, cpu %.9g", what, i, (double)gdw[i],
			          (double)cdw[i]);
	}
	guard_intact(what, d_dw, pairs);

	/* dweight alone (dy NULL), on another stream: the same bits */
	cudaStream_t st;
	cuda_ok(cudaStreamCreate(&st), "cudaStreamCreate");
	cuda_ok(cudaMemset(d_dw, 0xff, pairs * sizeof(float)), "NaN dweight");
	cr_assert_eq(rl_moe_combine_backward_cuda(rl_buf_f32(NULL), d_dw, rl_cbuf_f32(d_dout),
	                                          rl_cbuf_f32(d_y), d_slot, d_wt, n_tokens, k, dim,
	                                          st),
	             0);
	cuda_ok(cudaStreamSynchronize(st), "backward on a stream");
	cuda_ok(cudaStreamDestroy(st), "cudaStreamDestroy");
	float *gdw2 = get(d_dw, pairs);
	same_bits("dweight without dy", gdw, gdw2, pairs);

	float *bufs[] = {y, wt, dout, dy0, out, cdy, cdw, gout, gout2, gdy, gdw, gdw2};
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		free(bufs[i]);
	float *dbufs[] = {d_y, d_wt, d_dout, d_out, d_dy, d_dw};
	for (size_t i = 0; i < sizeof(dbufs) / sizeof(dbufs[0]); i++)
		dev_free(dbufs[i]);
	dev_free(d_slot);
	free(slot);
	free(named);
	free(omag);
	free(dymag);
	free(dwtol);
}
#endif

Test(cuda_moe, combine_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	/* tokens, k, dim, spare rows of y (NaN), one slot in neg_every is -1 */
	static const int cases[][5] = {
	    {1, 1, 1, 0, 0},    {7, 2, 3, 5, 4},     {300, 8, 17, 33, 5}, {33, 1, 130, 1, 3},
	    {5, 8, 1000, 7, 2}, {64, 2, 127, 64, 6}, {129, 8, 1, 0, 0},   {3, 8, 33, 2, 1},
	    {4, 2, 5, 0, 1}, /* every slot -1, no rows at all: y is NULL in the forward */
	};
	uint32_t seed = 0xc0b1eu;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		combine_case(&seed, cases[c][0], cases[c][1], cases[c][2], cases[c][3],
		             cases[c][4]);
#endif
}
