/* The CUDA vector ops and AdamW against their CPU references: add and scale
 * must give the same bits (one IEEE operation per element either way), the
 * sum of squares the same value to the rounding of a double sum and the same
 * bits on every run, AdamW the same bits but for rare double-rounding ties
 * (see kernels/cuda/adamw.cu). Argument checks run without a GPU. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/adamw.h"
#include "kernels/vector.h"
#include "tests/unit/cuda_test_util.h"
#include "tests/unit/ops_test_util.h"

Test(cuda_vector, bad_arguments)
{
#ifndef RL_HAVE_CUDA
	cr_skip_test("built without --with-cuda");
#else
	/* Host pointers stand in for device ones: the checks come before any
	 * CUDA call, and n == 0 returns before one too. */
	float y[4] = {0}, x[4] = {0}, m[4] = {0}, v[4] = {0};
	double out = 0;
	struct rl_adamw_hparams hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};

	cr_expect_eq(rl_add_cuda(rl_buf_f32(NULL), rl_cbuf_f32(x), 4, NULL), -1);
	cr_expect_eq(rl_add_cuda(rl_buf_f32(y), rl_cbuf_f32(NULL), 4, NULL), -1);
	cr_expect_eq(rl_add_cuda(rl_buf_f32(y), rl_cbuf_f32(x), -1, NULL), -1);
	cr_expect_eq(rl_add_cuda(rl_buf_f32(y), rl_cbuf_f32(x), 0, NULL), 0);
	cr_expect_eq(rl_scale_cuda(NULL, 4, 2.0f, NULL), -1);
	cr_expect_eq(rl_scale_cuda(x, -1, 2.0f, NULL), -1);
	cr_expect_eq(rl_scale_cuda(x, 0, 2.0f, NULL), 0);
	cr_expect_eq(rl_sum_squares_cuda(NULL, x, 4, NULL), -1);
	cr_expect_eq(rl_sum_squares_cuda(&out, NULL, 4, NULL), -1);
	cr_expect_eq(rl_sum_squares_cuda(&out, x, -1, NULL), -1);
	cr_expect_eq(rl_sum_squares_cuda(&out, x, 0, NULL), 0);
	cr_expect_eq(rl_round_bf16_cuda(NULL, x, 4, NULL), -1);
	cr_expect_eq(rl_round_bf16_cuda(y, NULL, 4, NULL), -1);
	cr_expect_eq(rl_round_bf16_cuda(y, x, -1, NULL), -1);
	cr_expect_eq(rl_round_bf16_cuda(y, x, 0, NULL), 0);
	cr_expect_eq(rl_to_bf16_cuda(NULL, x, 4, NULL), -1);
	cr_expect_eq(rl_to_bf16_cuda((uint16_t *)y, NULL, 4, NULL), -1);
	cr_expect_eq(rl_from_bf16_cuda(NULL, (uint16_t *)x, 4, NULL), -1);
	cr_expect_eq(rl_from_bf16_cuda(y, (uint16_t *)x, -1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cuda(NULL, x, m, v, 4, &hp, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cuda(y, NULL, m, v, 4, &hp, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cuda(y, x, NULL, v, 4, &hp, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cuda(y, x, m, NULL, 4, &hp, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cuda(y, x, m, v, 4, NULL, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cuda(y, x, m, v, -1, &hp, 1, NULL), -1);
	cr_expect_eq(rl_adamw_step_cuda(y, x, m, v, 4, &hp, 0, NULL), -1);
	cr_expect_eq(rl_adamw_step_cuda(y, x, m, v, 0, &hp, 1, NULL), 0);
	cr_expect(out == 0 && y[0] == 0 && x[0] == 0);
#endif
}

#ifdef RL_HAVE_CUDA
/* 0, tiny, around the float4 width, a tail of every length, and past the
 * grid caps (1 << 20 + 7: sum_squares hits its 1024 blocks with a tail). */
static const size_t sizes[] = {0, 1, 3, 4, 5, 7, 1000, 4097, (1u << 20) + 7};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* n floats copied to a fresh device buffer at off floats from its start
 * (off 1 breaks the 16-byte alignment the float4 paths want); *base is
 * what dev_free takes. */
static float *dev_at(float **base, const float *host, size_t n, int off)
{
	*base = dev_alloc((n + 1) * sizeof(float));
	if (n)
		cuda_ok(cudaMemcpy(*base + off, host, n * sizeof(float), cudaMemcpyHostToDevice),
		        "upload");
	return *base + off;
}

static double *dev_double(double value)
{
	double *d = dev_alloc(sizeof(double));

	cuda_ok(cudaMemcpy(d, &value, sizeof(value), cudaMemcpyHostToDevice), "upload");
	return d;
}

static double get_double(const double *d)
{
	double v;

	dev_sync();
	cuda_ok(cudaMemcpy(&v, d, sizeof(v), cudaMemcpyDeviceToHost), "download");
	return v;
}
#endif

Test(cuda_vector, add_scale_match_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	static const int offs[4][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
	uint32_t seed = 0x5eed0001u;
	cudaStream_t stream;

	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];

		for (int o = 0; o < 4; o++) {
			cudaStream_t st = (k + o) % 2 ? stream : NULL;
			float *y = frand(&seed, n, -2.0f, 2.0f), *x = frand(&seed, n, -2.0f, 2.0f);
			float *got = falloc(n), *by, *bx;
			float *dy = dev_at(&by, y, n, offs[o][0]),
			      *dx = dev_at(&bx, x, n, offs[o][1]);
			float s = o % 2 ? -1.375f : 0.3f;

			/* y += x, then y *= s, on both sides */
			cr_assert_eq(rl_add_cpu(rl_buf_f32(y), rl_cbuf_f32(x), (int64_t)n, NULL),
			             0);
			cr_assert_eq(rl_add_cuda(rl_buf_f32(dy), rl_cbuf_f32(dx), (int64_t)n, st),
			             0, "add n %zu", n);
			dev_download(got, dy, n);
			cr_expect_arr_eq(got, y, n * sizeof(float), "add: n %zu, offsets %d %d", n,
			                 offs[o][0], offs[o][1]);
			cr_assert_eq(rl_scale_cpu(y, (int64_t)n, s, NULL), 0);
			cr_assert_eq(rl_scale_cuda(dy, (int64_t)n, s, st), 0, "scale n %zu", n);
			dev_download(got, dy, n);
			cr_expect_arr_eq(got, y, n * sizeof(float), "scale: n %zu, offset %d", n,
			                 offs[o][0]);
			/* x is only read */
			dev_download(got, dx, n);
			cr_expect_arr_eq(got, x, n * sizeof(float), "add wrote x: n %zu", n);
			dev_free(by);
			dev_free(bx);
			free(y);
			free(x);
			free(got);
		}
	}
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
#endif
}

/* The CPU rounding against values worked by hand: bf16 keeps 7 mantissa
 * bits, so 1 + 2^-8 is halfway between 1 and 1 + 2^-7 and goes to the even
 * one (1), 1 + 3 2^-8 halfway between 1 + 2^-7 and 1 + 2^-6 goes to 1 + 2^-6;
 * the largest finite float rounds up to infinity; 2^-133 (a float
 * subnormal) is a bf16 subnormal and stays. In place works. */
Test(cuda_vector, round_bf16_by_hand)
{
	float x[] = {1.0f + 0x1p-8f,
	             1.0f + 0x3p-8f,
	             -(1.0f + 0x1.02p-7f),
	             0x1.fffffep127f,
	             0x1p-133f,
	             -0.0f,
	             INFINITY,
	             0.1f,
	             1.0f + 0x1p-10f,
	             1.0f - 0x1p-9f - 0x1p-23f};
	float want[] = {1.0f,  1.0f + 0x1p-6f, -(1.0f + 0x1p-7f), INFINITY, 0x1p-133f,
	                -0.0f, INFINITY,       0x1.9ap-4f,        1.0f,     1.0f - 0x1p-8f};
	size_t n = sizeof x / sizeof *x;
	float y[sizeof x / sizeof *x];

	cr_assert_eq(rl_round_bf16_cpu(y, x, (int64_t)n, NULL), 0);
	for (size_t i = 0; i < n; i++)
		cr_expect(memcmp(&y[i], &want[i], sizeof y[i]) == 0, "x[%zu] = %a: %a, want %a", i,
		          (double)x[i], (double)y[i], (double)want[i]);
	/* stored as bf16, the same value: the top half of its fp32 bits */
	uint16_t h[sizeof x / sizeof *x];
	float back[sizeof x / sizeof *x];
	cr_assert_eq(rl_to_bf16_cpu(h, x, (int64_t)n, NULL), 0);
	cr_assert_eq(rl_from_bf16_cpu(back, h, (int64_t)n, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		uint32_t bits;
		memcpy(&bits, &want[i], sizeof bits);
		cr_expect_eq(h[i], bits >> 16, "x[%zu]: bf16 %#x, want %#x", i, h[i], bits >> 16);
	}
	cr_expect_arr_eq(back, want, sizeof back);
	cr_assert_eq(rl_round_bf16_cpu(x, x, (int64_t)n, NULL), 0);
	cr_expect_arr_eq(x, y, sizeof y);
	float nan_in = NAN, nan_out = 0;
	cr_assert_eq(rl_round_bf16_cpu(&nan_out, &nan_in, 1, NULL), 0);
	cr_expect(isnan(nan_out));
	cr_expect_eq(rl_round_bf16_cpu(NULL, x, 1, NULL), -1);
	cr_expect_eq(rl_round_bf16_cpu(y, x, -1, NULL), -1);
}

/* The GPU rounding gives the CPU's bits (one rounding of one value), at
 * every size and alignment, specials and ties included. */
Test(cuda_vector, round_bf16_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	uint32_t seed = 0x5eed0b16u;

	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];
		float *x = frand(&seed, n, -3.0f, 3.0f), *want = falloc(n), *got = falloc(n);
		float *bx, *by;

		/* ties at every exponent, and the specials */
		for (size_t i = 0; i < n; i += 7)
			x[i] =
			    ldexpf(1.0f + 0x1p-8f * (float)(1 + 2 * (i % 5)), (int)(i % 200) - 100);
		if (n > 6) {
			x[1] = INFINITY;
			x[2] = -0.0f;
			x[3] = 3.3e38f;
			x[4] = 0x1p-140f;
			x[5] = -0x1.fffffep127f;
		}
		float *dx = dev_at(&bx, x, n, (int)(k % 2)), *dy = dev_at(&by, x, n, 0);
		cr_assert_eq(rl_round_bf16_cpu(want, x, (int64_t)n, NULL), 0);
		cr_assert_eq(rl_round_bf16_cuda(dy, dx, (int64_t)n, NULL), 0, "n %zu", n);
		dev_download(got, dy, n);
		cr_expect_arr_eq(got, want, n * sizeof(float), "round_bf16: n %zu", n);
		/* stored as bf16 and read back, into the same buffer's bytes */
		uint16_t *h = dev_alloc(n * sizeof *h + 2), *want_h = malloc(n * sizeof *h + 2);
		uint16_t *got_h = malloc(n * sizeof *h + 2);
		cr_assert_eq(rl_to_bf16_cpu(want_h, x, (int64_t)n, NULL), 0);
		cr_assert_eq(rl_to_bf16_cuda(h + k % 2, dx, (int64_t)n, NULL), 0, "n %zu", n);
		dev_sync();
		if (n)
			cuda_ok(cudaMemcpy(got_h, h + k % 2, n * sizeof *h, cudaMemcpyDeviceToHost),
			        "download");
		cr_expect_arr_eq(got_h, want_h, n * sizeof *h, "to_bf16: n %zu", n);
		cr_assert_eq(rl_from_bf16_cuda(dy, h + k % 2, (int64_t)n, NULL), 0, "n %zu", n);
		dev_download(got, dy, n);
		cr_expect_arr_eq(got, want, n * sizeof(float), "from_bf16: n %zu", n);
		dev_free(h);
		free(want_h);
		free(got_h);
		dev_free(bx);
		dev_free(by);
		free(x);
		free(want);
		free(got);
	}
#endif
}

/* Every x[i]^2 is exact in double, so CPU and GPU differ only in the order
 * of their additions. All terms are >= 0, so each sum is within (d 2^-53)
 * relative of the exact one, d its longest chain of additions: about 4100
 * on the CPU (32768-element blocks over eight accumulators, then the
 * blocks), at most a few dozen on the GPU. 1e-12 is twice the sum of both
 * bounds; one missing or doubled element of 3M is 1e-7 off. */
Test(cuda_vector, sum_squares_matches_cpu_and_repeats)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	uint32_t seed = 0x5eed0002u;
	cudaStream_t stream;

	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	for (size_t k = 0; k <= NSIZES; k++) {
		/* and one size where each thread takes several groups */
		size_t n = k < NSIZES ? sizes[k] : ((size_t)3 << 20) + 5;
		cudaStream_t st = k % 2 ? stream : NULL;
		float *x = frand(&seed, n, -3.0f, 3.0f), *b0, *b1;
		float *d0 = dev_at(&b0, x, n, 0), *d1 = dev_at(&b1, x, n, 1);
		double want = 0.25, got[3];
		double *out[3] = {dev_double(0.25), dev_double(0.25), dev_double(0.25)};

		cr_assert_eq(rl_sum_squares_cpu(&want, x, (int64_t)n, NULL), 0);
		/* twice aligned, once misaligned: the grid and the order of the
		 * additions depend on n alone, so all three are the same bits */
		cr_assert_eq(rl_sum_squares_cuda(out[0], d0, (int64_t)n, st), 0, "n %zu", n);
		cr_assert_eq(rl_sum_squares_cuda(out[1], d0, (int64_t)n, st), 0, "n %zu", n);
		cr_assert_eq(rl_sum_squares_cuda(out[2], d1, (int64_t)n, st), 0, "n %zu", n);
		for (int r = 0; r < 3; r++)
			got[r] = get_double(out[r]);
		cr_expect(fabs(got[0] - want) <= 1e-12 * want, "n %zu: got %.17g, cpu %.17g", n,
		          got[0], want);
		cr_expect(memcmp(&got[0], &got[1], sizeof(double)) == 0,
		          "n %zu: two runs differ: %a, %a", n, got[0], got[1]);
		cr_expect(memcmp(&got[0], &got[2], sizeof(double)) == 0,
		          "n %zu: misaligned x gives %a, aligned %a", n, got[2], got[0]);
		if (n == 0)
			cr_expect(got[0] == 0.25, "n 0 changed *out");

		/* it adds to *out: a second call on the same double adds the
		 * sum of squares once more (to the rounding of two additions) */
		cr_assert_eq(rl_sum_squares_cuda(out[0], d0, (int64_t)n, st), 0);
		double twice = get_double(out[0]);
		double s = got[1] - 0.25;
		cr_expect(fabs(twice - (0.25 + 2 * s)) <= 1e-15 * (0.25 + 2 * s),
		          "n %zu: second call gave %.17g, want %.17g", n, twice, 0.25 + 2 * s);
		for (int r = 0; r < 3; r++)
			dev_free(out[r]);
		dev_free(b0);
		dev_free(b1);
		free(x);
	}
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
#endif
}

#ifdef RL_HAVE_CUDA
#define ADAMW_STEPS 5

/* the distance from |x| to the next float up: one ulp of x */
static double ulp(double x)
{
	float a = fabsf((float)x);

	return (double)nextafterf(a, INFINITY) - (double)a;
}

/* Elements not bit-identical to the CPU after one step. A difference starts
 * only at a double-rounding tie in one of the CPU's two emulated fmas (about
 * one element in 2^28 per step) and then stays: m and v one ulp off, which
 * the next steps carry at most as one more rounding each, so <= 2 ulps; the
 * parameter one or two ulps of its update off (lr times m^ / sqrt(v^) of
 * order one), which is several ulps of a parameter smaller than the update.
 * So each off element must be within those bounds, and off elements must be
 * rare: a systematic rounding difference (a contracted product, a fast
 * division) would make thousands of them. */
static int adamw_compare(size_t n, int step, const float *p_gpu, const float *m_gpu,
                         const float *v_gpu, const float *p_cpu, const float *m_cpu,
                         const float *v_cpu, const float *p_prev, float decay)
{
	int off = 0;

	for (size_t i = 0; i < n; i++) {
		if (p_gpu[i] == p_cpu[i] && m_gpu[i] == m_cpu[i] && v_gpu[i] == v_cpu[i])
			continue;
		off++;
		double upd = (double)p_cpu[i] - (double)p_prev[i] * decay;
		double p_tol = 2 * (ulp(p_cpu[i]) + ulp(upd));

		cr_expect(fabs((double)p_gpu[i] - p_cpu[i]) <= p_tol,
		          "n %zu step %d p[%zu]: gpu %a, cpu %a", n, step, i, (double)p_gpu[i],
		          (double)p_cpu[i]);
		cr_expect(fabs((double)m_gpu[i] - m_cpu[i]) <= 2 * ulp(m_cpu[i]),
		          "n %zu step %d m[%zu]: gpu %a, cpu %a", n, step, i, (double)m_gpu[i],
		          (double)m_cpu[i]);
		cr_expect(fabs((double)v_gpu[i] - v_cpu[i]) <= 2 * ulp(v_cpu[i]),
		          "n %zu step %d v[%zu]: gpu %a, cpu %a", n, step, i, (double)v_gpu[i],
		          (double)v_cpu[i]);
	}
	cr_expect((size_t)off <= 2 + (n >> 16), "n %zu step %d: %d elements differ from the CPU", n,
	          step, off);
	return off;
}

/* One GPU run of ADAMW_STEPS steps from p0 with m = v = 0; offs[] shifts
 * param, grad, m, v by whole floats. With the CPU's states per step, it
 * compares each; the final states go to p, m, v. */
static void adamw_gpu_run(size_t n, const int offs[4], const struct rl_adamw_hparams *hp,
                          const float *p0, const float *grads, const float *cpu_states,
                          cudaStream_t st, float *p, float *m, float *v)
{
	float *zeros = falloc(n), *bp, *bg, *bm, *bv;
	float *dp = dev_at(&bp, p0, n, offs[0]), *dg = dev_at(&bg, grads, n, offs[1]);
	float *dm = dev_at(&bm, zeros, n, offs[2]), *dv = dev_at(&bv, zeros, n, offs[3]);
	float decay = (float)(1.0 - (double)hp->lr * (double)hp->weight_decay);
	int off_total = 0;

	for (int step = 1; step <= ADAMW_STEPS; step++) {
		const float *cpu = cpu_states + (size_t)(step - 1) * 3 * n;
		const float *prev = step == 1 ? p0 : cpu - 3 * n;

		if (n)
			cuda_ok(cudaMemcpy(dg, grads + (size_t)(step - 1) * n, n * sizeof(float),
			                   cudaMemcpyHostToDevice),
			        "upload grad");
		cr_assert_eq(rl_adamw_step_cuda(dp, dg, dm, dv, (int64_t)n, hp, step, st), 0,
		             "n %zu step %d", n, step);
		dev_download(p, dp, n);
		dev_download(m, dm, n);
		dev_download(v, dv, n);
		off_total +=
		    adamw_compare(n, step, p, m, v, cpu, cpu + n, cpu + 2 * n, prev, decay);
	}
	if (off_total)
		cr_log_info("adamw n %zu: %d element-steps not bit-identical to the CPU", n,
		            off_total);
	dev_free(bp);
	dev_free(bg);
	dev_free(bm);
	dev_free(bv);
	free(zeros);
}
#endif

Test(cuda_vector, adamw_matches_cpu)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	/* torch's defaults with weight decay; and a small beta1, whose lerp
	 * takes torch's other branch (|1 - beta1| >= 0.5) */
	static const struct rl_adamw_hparams hps[2] = {
	    {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f},
	    {.lr = 3e-2f, .beta1 = 0.3f, .beta2 = 0.95f, .eps = 1e-6f, .weight_decay = 0.01f},
	};
	/* all aligned (float4), the parameter off, everything off */
	static const int offs[3][4] = {{0, 0, 0, 0}, {1, 0, 0, 0}, {1, 1, 1, 1}};
	uint32_t seed = 0x5eed0003u;
	cudaStream_t stream;

	cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
	for (size_t k = 0; k < NSIZES; k++) {
		size_t n = sizes[k];

		for (int h = 0; h < 2; h++) {
			const struct rl_adamw_hparams *hp = &hps[h];
			float *p0 = frand(&seed, n, -1.0f, 1.0f);
			float *grads = frand(&seed, ADAMW_STEPS * n, -1.0f, 1.0f);
			float *states = falloc(ADAMW_STEPS * 3 * n);
			float *p = fdup(p0, n), *m = falloc(n), *v = falloc(n);
			float *run[2][3];

			/* the CPU's p, m, v after each step */
			for (int step = 1; step <= ADAMW_STEPS; step++) {
				float *s = states + (size_t)(step - 1) * 3 * n;

				cr_assert_eq(rl_adamw_step_cpu(p, grads + (size_t)(step - 1) * n, m,
				                               v, (int64_t)n, hp, step, NULL),
				             0);
				memcpy(s, p, n * sizeof(float));
				memcpy(s + n, m, n * sizeof(float));
				memcpy(s + 2 * n, v, n * sizeof(float));
			}
			for (int o = 0; o < 3; o++) {
				for (int r = 0; r < 2; r++) {
					for (int a = 0; a < 3; a++)
						run[r][a] = falloc(n);
					adamw_gpu_run(n, offs[o], hp, p0, grads, states,
					              r ? stream : NULL, run[r][0], run[r][1],
					              run[r][2]);
				}
				/* elementwise: the two runs must be the same bits */
				for (int a = 0; a < 3; a++) {
					cr_expect_arr_eq(run[0][a], run[1][a], n * sizeof(float),
					                 "n %zu: two GPU runs differ (array %d)", n,
					                 a);
					free(run[0][a]);
					free(run[1][a]);
				}
			}
			free(p0);
			free(grads);
			free(states);
			free(p);
			free(m);
			free(v);
		}
	}
	cuda_ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
#endif
}

/* A flat buffer of 8B parameters is past 2^31 elements: every index, count
 * and grid-stride step must be 64-bit. Four buffers of 2^31 + 4099 floats
 * (34 GB; skipped where the device has less free) are zero but for a few
 * probes around 2^31 and at the very end; add, scale, sum_squares and
 * AdamW run over all of it, on the float4 paths and (one float in) the
 * scalar ones, and the probes must come out as the CPU ops make them. An
 * int index would wrap and never reach the probes past 2^31, or fault. */
#ifdef RL_HAVE_CUDA
#define BIG_N      (((int64_t)1 << 31) + 4099)
#define BIG_PROBES 12

static const int64_t big_probe[BIG_PROBES] = {
    0, /* first: the one-float-in calls below skip it */
    1,
    5,
    ((int64_t)1 << 31) - 4,
    ((int64_t)1 << 31) - 1,
    (int64_t)1 << 31,
    ((int64_t)1 << 31) + 1,
    ((int64_t)1 << 31) + 4,
    BIG_N - 5,
    BIG_N - 4,
    BIG_N - 3,
    BIG_N - 1,
};

static void big_put(float *dev, const float *vals)
{
	for (int k = 0; k < BIG_PROBES; k++)
		cuda_ok(
		    cudaMemcpy(dev + big_probe[k], &vals[k], sizeof(float), cudaMemcpyHostToDevice),
		    "probe upload");
}

static void big_get(float *vals, const float *dev)
{
	dev_sync();
	for (int k = 0; k < BIG_PROBES; k++)
		cuda_ok(
		    cudaMemcpy(&vals[k], dev + big_probe[k], sizeof(float), cudaMemcpyDeviceToHost),
		    "probe download");
}

/* within 4 ulps: AdamW may differ by a double-rounding tie (see above) */
static void big_expect_near(const char *what, const float *got, const float *want)
{
	for (int k = 0; k < BIG_PROBES; k++)
		cr_expect(fabs((double)got[k] - want[k]) <= 4 * ulp(want[k]),
		          "%s at %lld: gpu %a, cpu %a", what, (long long)big_probe[k],
		          (double)got[k], (double)want[k]);
}
#endif

Test(cuda_vector, past_int32_elements, .timeout = 120)
{
	CUDA_TEST_BEGIN();
#ifdef RL_HAVE_CUDA
	const size_t bytes = (size_t)BIG_N * sizeof(float);
	const struct rl_adamw_hparams hp = {
	    .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
	size_t free_b = 0, total_b = 0;
	float *buf[4] = {NULL, NULL, NULL, NULL};
	float hy[BIG_PROBES], hx[BIG_PROBES], hm[BIG_PROBES] = {0}, hv[BIG_PROBES] = {0};
	float got[BIG_PROBES];

	cuda_ok(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
	if (free_b < 4 * bytes + ((size_t)1 << 30))
		cr_skip_test("needs %zu MiB of device memory, %zu free", (4 * bytes) >> 20,
		             free_b >> 20);
	for (int i = 0; i < 4; i++) {
		cuda_ok(cudaMalloc((void **)&buf[i], bytes), "cudaMalloc 8.6 GB");
		cuda_ok(cudaMemset(buf[i], 0, bytes), "cudaMemset");
	}

	float *y = buf[0], *x = buf[1], *m = buf[2], *v = buf[3];
	double *out = dev_double(0.0);

	for (int k = 0; k < BIG_PROBES; k++) {
		hy[k] = k % 3 == 2 ? 0.0f : 0.5f + 0.25f * (float)k;
		hx[k] = k % 3 == 2 ? 0.0f : 1.0f - 0.125f * (float)k;
	}
	big_put(y, hy);
	big_put(x, hx);

	/* y += x on the float4 path, then y[1:] *= s on the scalar one */
	cr_assert_eq(rl_add_cuda(rl_buf_f32(y), rl_cbuf_f32(x), BIG_N, NULL), 0);
	cr_assert_eq(rl_scale_cuda(y + 1, BIG_N - 1, -1.5f, NULL), 0);
	cr_assert_eq(rl_add_cpu(rl_buf_f32(hy), rl_cbuf_f32(hx), BIG_PROBES, NULL), 0);
	cr_assert_eq(rl_scale_cpu(hy + 1, BIG_PROBES - 1, -1.5f, NULL), 0);
	big_get(got, y);
	cr_expect_arr_eq(got, hy, sizeof(hy), "add, scale past 2^31");

	/* the squares of the probes alone: all else is 0; aligned and not.
	 * Twelve positive terms, added in another order: at most 12 roundings
	 * of 2^-53 on each side, under 1e-14 (one lost probe is > 1e-3). */
	double want = 0.0, want1 = 0.0;
	for (int k = 0; k < BIG_PROBES; k++) {
		want += (double)hy[k] * hy[k];
		want1 += k ? (double)hy[k] * hy[k] : 0.0;
	}
	cr_assert_eq(rl_sum_squares_cuda(out, y, BIG_N, NULL), 0);
	double s = get_double(out);
	cr_expect(fabs(s - want) <= 1e-14 * want, "sum_squares: %.17g, want %.17g", s, want);
	cuda_ok(cudaMemset(out, 0, sizeof(double)), "reset out");
	cr_assert_eq(rl_sum_squares_cuda(out, y + 1, BIG_N - 1, NULL), 0);
	s = get_double(out);
	cr_expect(fabs(s - want1) <= 1e-14 * want1, "sum_squares from 1: %.17g, want %.17g", s,
	          want1);

	/* AdamW step 1 on the float4 path, step 2 one float in (scalar) */
	cr_assert_eq(rl_adamw_step_cuda(y, x, m, v, BIG_N, &hp, 1, NULL), 0);
	cr_assert_eq(rl_adamw_step_cuda(y + 1, x + 1, m + 1, v + 1, BIG_N - 1, &hp, 2, NULL), 0);
	cr_assert_eq(rl_adamw_step_cpu(hy, hx, hm, hv, BIG_PROBES, &hp, 1, NULL), 0);
	cr_assert_eq(
	    rl_adamw_step_cpu(hy + 1, hx + 1, hm + 1, hv + 1, BIG_PROBES - 1, &hp, 2, NULL), 0);
	big_get(got, y);
	big_expect_near("adamw param", got, hy);
	big_get(got, m);
	big_expect_near("adamw m", got, hm);
	big_get(got, v);
	big_expect_near("adamw v", got, hv);

	dev_free(out);
	for (int i = 0; i < 4; i++)
		dev_free(buf[i]);
#endif
}
