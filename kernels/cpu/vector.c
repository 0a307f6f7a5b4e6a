/* Elementwise vector ops. Big vectors are split over OpenMP threads. The sum
 * of squares adds partial sums over blocks that depend on the length alone,
 * in a fixed order, so that the grad norm (and with it the clipping factor)
 * does not depend on the thread count or on which thread finishes first. */
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/typed.h"
#include "kernels/dtype.h"
#include "kernels/vector.h"

/* Below this many elements a parallel region costs more than it saves. */
#define PAR_MIN ((int64_t)1 << 16)
/* rl_sum_squares_cpu: the least elements per partial sum, the most partials */
#define SS_BLOCK      ((int64_t)1 << 15)
#define SS_MAX_BLOCKS 256

RL_TYPED_BODY void add(void *y, const void *x, int64_t n, const bool bf16)
{
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++)
		rl_st_add(y, bf16, (size_t)i, rl_ld(x, bf16, (size_t)i));
}

int rl_add_cpu(struct rl_buf y, struct rl_cbuf x, int64_t n, void *stream)
{
	(void)stream;
	if (!y.p || !x.p || n < 0 || !rl_act_type_ok(y.t) || x.t != y.t)
		return -1;
	if (y.t == RL_BF16)
		add(y.p, x.p, n, true);
	else
		add(y.p, x.p, n, false);
	return 0;
}

int rl_scale_cpu(float *x, int64_t n, float s, void *stream)
{
	(void)stream;
	if (!x || n < 0)
		return -1;
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++)
		x[i] *= s;
	return 0;
}

/* Eight accumulators: with one, each add would wait for the previous. They
 * are spelled out because gcc -O2 vectorises these, not an array of them. */
static double block_sum_squares(const float *restrict x, int64_t n)
{
	double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		a0 += (double)x[i] * x[i];
		a1 += (double)x[i + 1] * x[i + 1];
		a2 += (double)x[i + 2] * x[i + 2];
		a3 += (double)x[i + 3] * x[i + 3];
		a4 += (double)x[i + 4] * x[i + 4];
		a5 += (double)x[i + 5] * x[i + 5];
		a6 += (double)x[i + 6] * x[i + 6];
		a7 += (double)x[i + 7] * x[i + 7];
	}
	for (; i < n; i++)
		a0 += (double)x[i] * x[i];
	return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

int rl_sum_squares_cpu(double *out, const float *x, int64_t n, void *stream)
{
	(void)stream;
	if (!out || !x || n < 0)
		return -1;

	/* blocks of at least SS_BLOCK, at most SS_MAX_BLOCKS of them: a
	 * function of n alone, so is the order of the additions */
	int64_t nb = (n + SS_BLOCK - 1) / SS_BLOCK;
	nb = nb > SS_MAX_BLOCKS ? SS_MAX_BLOCKS : nb;

	int64_t block = nb ? (n + nb - 1) / nb : 0;
	double part[SS_MAX_BLOCKS], total = 0.0;

#pragma omp parallel for if (nb > 1) schedule(static)
	for (int64_t b = 0; b < nb; b++) {
		int64_t i0 = b * block;
		int64_t len = n - i0 < block ? n - i0 : block;

		part[b] = len > 0 ? block_sum_squares(x + i0, len) : 0.0;
	}
	for (int64_t b = 0; b < nb; b++)
		total += part[b];
	*out += total;
	return 0;
}

int rl_round_bf16_cpu(float *y, const float *x, int64_t n, void *stream)
{
	(void)stream;
	if (!y || !x || n < 0)
		return -1;
#pragma omp parallel for if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++)
		y[i] = rl_bf16_to_f32(rl_f32_to_bf16(x[i]));
	return 0;
}

int rl_to_bf16_cpu(uint16_t *y, const float *x, int64_t n, void *stream)
{
	(void)stream;
	if (!y || !x || n < 0)
		return -1;
#pragma omp parallel for if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++)
		y[i] = rl_f32_to_bf16(x[i]);
	return 0;
}

int rl_from_bf16_cpu(float *y, const uint16_t *x, int64_t n, void *stream)
{
	(void)stream;
	if (!y || !x || n < 0)
		return -1;
#pragma omp parallel for if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++)
		y[i] = rl_bf16_to_f32(x[i]);
	return 0;
}
