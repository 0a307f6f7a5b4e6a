/* The batch-invariant pair of logprobs.h on the GPU: the fused forward,
 * whose chunk logits come from the invariant linear (linear_invariant.cu),
 * and rl_logits_logprobs_cuda, which starts from logits generation already
 * holds. Both end in the same device code, so that for the same h, W,
 * logit_scale and chunk they give the same bits:
 *
 *  - lpi_fold folds one chunk of a row, each logit times logit_scale (its
 *    own fp32 multiply, never fused into what follows), into the row's
 *    running (max, sum of exp): the chunk's maximum, then its sum of exp in
 *    double, rescaling the old sum in double when the maximum moves, the
 *    sum rounded to float once per chunk, as the non-invariant op does.
 *    The reductions are block trees of a fixed shape over one row, so the
 *    bits depend on the row and the chunking alone, not on n.
 *  - lpi_finish turns (max, sum, scaled target logit) into lse and logprob.
 *
 * The fused op keeps (max, sum) in (lse, logprob) between its per-chunk
 * launches, which leaves nowhere for the target's logit while work holds
 * the next chunk; its closing kernel computes that logit again as the
 * invariant linear's chain (lpi_dot), which has the bits of the GEMM's
 * entry. rl_logits_logprobs_cuda reads it from the logits row. Neither op
 * checks targets or synchronises: one outside [0, vocab) gives logprob 0.
 * bf16 h and W (T = uint16_t) are widened on load, in the chunks and in
 * lpi_dot alike, so the two still agree to the bit. */
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/linear.h"
#include "kernels/logprobs.h"

/* Threads of the per-row kernels: whole warps, for the block reductions.
 * Part of the numerics: the sum's order follows from it. */
#define LPI_THREADS 256

/* The maximum over the block, given to every thread. fmaxf drops a NaN;
 * the sum of exp, which takes every element, carries it into lse. */
static __device__ float lpi_block_max(float v)
{
	__shared__ float warp_max[LPI_THREADS / RL_WARP];
	int lane = threadIdx.x % RL_WARP;
	int warp = threadIdx.x / RL_WARP;

	v = rl_warp_max(v);
	__syncthreads(); /* an earlier call may still be reading warp_max */
	if (lane == 0)
		warp_max[warp] = v;
	__syncthreads();
	v = lane < LPI_THREADS / RL_WARP ? warp_max[lane] : -INFINITY;
	return rl_warp_max(v);
}

/* Folds scale * row[0 : c] into the running (*m, *s); the block calls it
 * with the same (*m, *s) in every thread and every thread gets the new
 * pair. The first chunk starts from (-inf, 0): then s_old is 0 and
 * exp(-inf) is 0, which stays 0. */
static __device__ void lpi_fold(const float *__restrict__ row, int c, float scale, float *m,
                                float *s)
{
	float mx = -INFINITY;

	for (int j = threadIdx.x; j < c; j += LPI_THREADS)
		mx = fmaxf(mx, __fmul_rn(row[j], scale));
	mx = lpi_block_max(mx);

	float m_old = *m;
	float m_new = mx > m_old ? mx : m_old;
	double sum = 0.0;

	for (int j = threadIdx.x; j < c; j += LPI_THREADS)
		sum += (double)expf(__fmul_rn(row[j], scale) - m_new);
	sum = rl_block_sum<LPI_THREADS>(sum);

	double s_old = (double)*s;

	/* _rn: no multiply here may be fused with the add below, which the
	 * compiler could do differently in the two kernels that inline this */
	if (mx > m_old)
		s_old = __dmul_rn(s_old, exp((double)m_old - (double)mx));
	*m = m_new;
	*s = (float)(s_old + sum);
}

/* lse = max + log(sum); logprob = the scaled target logit - lse, or 0 when
 * the target is not in this W. */
static __device__ void lpi_finish(float *lse, float *logprob, float m, float s, bool has_target,
                                  float tlogit)
{
	float l = (float)((double)m + log((double)s));

	*lse = l;
	*logprob = has_target ? tlogit - l : 0.0f;
}

/* h . w over dim in the invariant linear's order (linear_invariant.cu: one
 * fmaf chain from +0, k = 0, 1, ..., dim - 1), so the result has the bits
 * of that product's entry. The warp loads 32 k at a time, coalesced, and
 * every lane runs the same chain on them through shuffles, so every lane
 * ends with the sum. Called by whole warps. */
template <typename T>
static __device__ float lpi_dot(const T *__restrict__ h, const T *__restrict__ w, int dim, int lane)
{
	float acc = 0.0f;

	for (int k0 = 0; k0 < dim; k0 += RL_WARP) {
		int k = k0 + lane;
		int kn = dim - k0 < RL_WARP ? dim - k0 : RL_WARP;
		float hv = k < dim ? rl_widen(h[k]) : 0.0f, wv = k < dim ? rl_widen(w[k]) : 0.0f;

		for (int j = 0; j < kn; j++)
			acc = fmaf(__shfl_sync(0xffffffffu, hv, j), __shfl_sync(0xffffffffu, wv, j),
			           acc);
	}
	return acc;
}

/* Block t folds logits[t, 0 : c] (row stride ld) into (lse[t], logprob[t])
 * = (max, sum); first ignores what they held. */
static __global__ void __launch_bounds__(LPI_THREADS)
    lpi_fold_chunk(float *__restrict__ lse, float *__restrict__ logprob,
                   const float *__restrict__ logits, int64_t ld, int c, float scale, bool first)
{
	float m = first ? -INFINITY : lse[blockIdx.x];
	float s = first ? 0.0f : logprob[blockIdx.x];

	/* every thread has read (m, s) before the fold's barriers; thread 0
	 * writes after them */
	lpi_fold(logits + (size_t)blockIdx.x * ld, c, scale, &m, &s);
	if (threadIdx.x == 0) {
		lse[blockIdx.x] = m;
		logprob[blockIdx.x] = s;
	}
}

/* Warp t of the grid closes the fused op's row t: the target's logit is
 * scale * (h[t] . W[target]) in the GEMM's bits, then lpi_finish. */
template <typename T>
static __global__ void __launch_bounds__(LPI_THREADS)
    lpi_fused_finish(float *__restrict__ logprob, float *__restrict__ lse, const T *__restrict__ h,
                     const T *__restrict__ w, const int32_t *__restrict__ targets, int n, int dim,
                     int vocab, float scale)
{
	/* whole warps leave together, so lpi_dot's shuffles see full warps */
	int64_t t = ((int64_t)blockIdx.x * LPI_THREADS + threadIdx.x) / RL_WARP;
	int lane = threadIdx.x % RL_WARP;

	if (t >= n)
		return;

	int32_t tgt = targets[t];
	bool has_target = tgt >= 0 && tgt < vocab;
	float tlogit = 0.0f;

	if (has_target)
		tlogit = __fmul_rn(lpi_dot(h + (size_t)t * dim, w + (size_t)tgt * dim, dim, lane),
		                   scale);
	if (lane == 0)
		lpi_finish(&lse[t], &logprob[t], lse[t], logprob[t], has_target, tlogit);
}

/* Block t does all of row t of the logits: the chunks in order through
 * lpi_fold, (max, sum) kept in registers (floats, as the fused op keeps
 * them in memory), then lpi_finish. */
static __global__ void __launch_bounds__(LPI_THREADS)
    lpi_logits_rows(float *__restrict__ logprob, float *__restrict__ lse,
                    const float *__restrict__ logits, int64_t ld,
                    const int32_t *__restrict__ targets, int vocab, int chunk, float scale)
{
	const float *row = logits + (size_t)blockIdx.x * ld;
	float m = -INFINITY, s = 0.0f;

	for (int c0 = 0; c0 < vocab; c0 += chunk)
		lpi_fold(row + c0, vocab - c0 < chunk ? vocab - c0 : chunk, scale, &m, &s);
	if (threadIdx.x == 0) {
		int32_t tgt = targets[blockIdx.x];
		bool has_target = tgt >= 0 && tgt < vocab;

		lpi_finish(&lse[blockIdx.x], &logprob[blockIdx.x], m, s, has_target,
		           has_target ? __fmul_rn(row[tgt], scale) : 0.0f);
	}
}

/* chunk > vocab only means a larger work buffer than needed: it is
 * clamped, as everywhere. dim is checked by the caller that reads it. */
static int lpi_check_shape(const struct rl_lm_logprobs_shape *s, int *chunk)
{
	if (!s || s->n < 0 || s->vocab <= 0 || s->chunk < 1)
		return -1;
	*chunk = s->chunk < s->vocab ? s->chunk : s->vocab;
	return 0;
}

extern "C" int rl_lm_logprobs_forward_invariant_cuda(float *logprob, float *lse, struct rl_cbuf h,
                                                     struct rl_cbuf w, const int32_t *targets,
                                                     const struct rl_lm_logprobs_shape *shape,
                                                     float *work, void *stream)
{
	int chunk;

	if (!logprob || !lse || !h.p || !w.p || !targets || !work ||
	    lpi_check_shape(shape, &chunk) || shape->dim <= 0 || !rl_lm_logprobs_types_ok(h.t, w.t))
		return -1;

	int n = shape->n, dim = shape->dim, vocab = shape->vocab;
	float scale = shape->logit_scale;
	cudaStream_t st = rl_stream(stream);

	if (n == 0)
		return 0;

	for (int c0 = 0; c0 < vocab; c0 += chunk) {
		int c = vocab - c0 < chunk ? vocab - c0 : chunk;

		/* work [n, c] = h W[c0 : c0 + c]^T, unscaled: the scale is the
		 * fold's own multiply, as it is for rl_logits_logprobs_cuda */
		if (rl_linear_forward_invariant_cuda(rl_buf_f32(work), h,
		                                     rl_cbuf_at(w, (size_t)c0 * dim),
		                                     rl_cbuf_f32(NULL), n, dim, c, stream))
			return -1;
		lpi_fold_chunk<<<n, LPI_THREADS, 0, st>>>(lse, logprob, work, c, c, scale, c0 == 0);
		if (rl_launched())
			return -1;
	}

	int64_t blocks = rl_ceil_div(n, LPI_THREADS / RL_WARP);

	if (h.t == RL_BF16)
		lpi_fused_finish<uint16_t><<<(unsigned)blocks, LPI_THREADS, 0, st>>>(
		    logprob, lse, (const uint16_t *)h.p, (const uint16_t *)w.p, targets, n, dim,
		    vocab, scale);
	else
		lpi_fused_finish<float><<<(unsigned)blocks, LPI_THREADS, 0, st>>>(
		    logprob, lse, (const float *)h.p, (const float *)w.p, targets, n, dim, vocab,
		    scale);
	return rl_launched();
}

extern "C" int rl_logits_logprobs_cuda(float *logprob, float *lse, const float *logits, int ld,
                                       const int32_t *targets,
                                       const struct rl_lm_logprobs_shape *shape, float *work,
                                       void *stream)
{
	int chunk;

	/* work is required as on the CPU, though the logits are read in place */
	if (!logprob || !lse || !logits || !targets || !work || lpi_check_shape(shape, &chunk) ||
	    ld < shape->vocab)
		return -1;
	if (shape->n == 0)
		return 0;

	lpi_logits_rows<<<shape->n, LPI_THREADS, 0, rl_stream(stream)>>>(
	    logprob, lse, logits, ld, targets, shape->vocab, chunk, shape->logit_scale);
	return rl_launched();
}
