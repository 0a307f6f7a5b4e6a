/* Token log-probabilities on the GPU, the vocabulary walked in chunks as on
 * the CPU: per chunk one GEMM writes scale * h W_c^T into work, and one
 * kernel (a block per token) folds the row into the token's running maximum
 * and sum of exp, kept in lse and logprob themselves until the last chunk.
 * That leaves no room for the target's logit, so the closing kernel (a warp
 * per token) computes it as its own dot product, in double. The backward
 * turns each recomputed chunk into dlogits in place and hands it to two
 * accumulating GEMMs. Reductions are block or warp trees of a fixed shape
 * and nothing uses atomics, so the bits repeat run to run.
 *
 * bf16 h and W (T = uint16_t) go through the tensor cores into the same fp32
 * logits; the backward writes each chunk's dlogits rounded to bf16 (the
 * tensor cores' operand) after the logits in work, sums dh over the chunks
 * in fp32 in work's tail and adds it to dh, rounding once, at the end: the
 * layout and the rounding points of logprobs.h, which the CPU op follows. */
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/logprobs.h"

/* Threads of the per-token kernels: whole warps, for the block reductions. */
#define LP_THREADS 256
/* The target check runs as one block: the targets are n ints, a few loads
 * per thread even for long batches. */
#define LP_CHECK_THREADS 1024

/* rl_block_sum's twin for the maximum. fmaxf drops a NaN; the sum of exp,
 * which takes every element, is what carries it into lse. */
static __device__ float lp_block_max(float v)
{
	__shared__ float warp_max[LP_THREADS / RL_WARP];
	int lane = threadIdx.x % RL_WARP;
	int warp = threadIdx.x / RL_WARP;

	v = rl_warp_max(v);
	__syncthreads(); /* as in rl_block_sum: the scratch may be reused */
	if (lane == 0)
		warp_max[warp] = v;
	__syncthreads();
	v = lane < LP_THREADS / RL_WARP ? warp_max[lane] : -INFINITY;
	return rl_warp_max(v);
}

/* flag[0] = 1 if any target is outside [-1, vocab), else 0. One block, so
 * the verdict needs no second pass and no atomics. */
static __global__ void __launch_bounds__(LP_CHECK_THREADS)
    lp_check_targets(int *__restrict__ flag, const int32_t *__restrict__ targets, int n, int vocab)
{
	int bad = 0;

	for (int t = threadIdx.x; t < n; t += LP_CHECK_THREADS)
		bad |= targets[t] < -1 || targets[t] >= vocab;
	bad = __syncthreads_or(bad);
	if (threadIdx.x == 0)
		flag[0] = bad != 0;
}

/* Block t folds logits[t, 0 : c] into (max, sum), stored in (lse[t],
 * logprob[t]); first ignores what they held. As on the CPU, the sum is only
 * rescaled when the maximum moves, and the rescale is done in double. */
static __global__ void __launch_bounds__(LP_THREADS)
    lp_fold_chunk(float *__restrict__ lse, float *__restrict__ logprob,
                  const float *__restrict__ logits, int c, bool first)
{
	const float *row = logits + (size_t)blockIdx.x * c;
	float mx = -INFINITY;

	for (int j = threadIdx.x; j < c; j += LP_THREADS)
		mx = fmaxf(mx, row[j]);
	mx = lp_block_max(mx);

	float m_old = first ? -INFINITY : lse[blockIdx.x];
	float m = mx > m_old ? mx : m_old;
	double s = 0.0;

	for (int j = threadIdx.x; j < c; j += LP_THREADS)
		s += (double)expf(row[j] - m);
	s = rl_block_sum<LP_THREADS>(s);

	if (threadIdx.x == 0) {
		double s_old = first ? 0.0 : (double)logprob[blockIdx.x];

		/* first chunk: s_old is 0 and exp(-inf) is 0, which stays 0 */
		if (mx > m_old)
			s_old *= exp((double)m_old - (double)mx);
		lse[blockIdx.x] = m;
		logprob[blockIdx.x] = (float)(s_old + s);
	}
}

/* Warp t of the grid turns (lse[t], logprob[t]) = (max, sum) into the
 * outputs: lse = max + log(sum) and logprob = scale h[t] . W[target] - lse,
 * the dot product in double (each float product is exact in it) in a fixed
 * lane order; 0 where the target lives in another rank's slice. */
template <typename T>
static __global__ void __launch_bounds__(LP_THREADS)
    lp_finish(float *__restrict__ logprob, float *__restrict__ lse, const T *__restrict__ h,
              const T *__restrict__ w, const int32_t *__restrict__ targets, int n, int dim,
              int vocab, float scale)
{
	/* whole warps leave together, so the shuffles below see full warps */
	int64_t t = ((int64_t)blockIdx.x * LP_THREADS + threadIdx.x) / RL_WARP;
	int lane = threadIdx.x % RL_WARP;

	if (t >= n)
		return;

	double l = (double)lse[t] + log((double)logprob[t]);
	int32_t tgt = targets[t];
	double dot = 0.0;

	/* checked before the first chunk; tested again so that targets changed
	 * since (a caller's race) cannot read outside W */
	if (tgt >= 0 && tgt < vocab) {
		const T *ht = h + (size_t)t * dim, *wt = w + (size_t)tgt * dim;

		for (int k = lane; k < dim; k += RL_WARP)
			dot += (double)rl_widen(ht[k]) * (double)rl_widen(wt[k]);
		dot = rl_warp_sum(dot);
	}
	if (lane == 0) {
		lse[t] = (float)l;
		logprob[t] = tgt >= 0 && tgt < vocab ? (float)((double)scale * dot - l) : 0.0f;
	}
}

/* Block t overwrites logits[t, 0 : c] with
 * dlogits = d ([c0 + j == target] - exp(logit - lse[t])), d = scale dlogprob[t],
 * or with d16 not NULL writes them rounded to bf16 into d16[t, 0 : c]. */
static __global__ void __launch_bounds__(LP_THREADS)
    lp_dlogits(float *__restrict__ logits, uint16_t *__restrict__ d16,
               const float *__restrict__ lse, const float *__restrict__ dlogprob,
               const int32_t *__restrict__ targets, int c, int c0, float scale)
{
	float *row = logits + (size_t)blockIdx.x * c;
	uint16_t *row16 = d16 ? d16 + (size_t)blockIdx.x * c : NULL;
	float l = lse[blockIdx.x];
	float d = scale * dlogprob[blockIdx.x];
	/* int64: a target near INT_MAX must not wrap into the chunk */
	int64_t tj = (int64_t)targets[blockIdx.x] - c0;

	for (int j = threadIdx.x; j < c; j += LP_THREADS) {
		float v = -d * expf(row[j] - l);

		v = j == tj ? v + d : v;
		if (row16)
			row16[j] = rl_bf16_rne(v);
		else
			row[j] = v;
	}
}

/* The checks both ops share, before any CUDA call; chunk > vocab only means
 * a larger work buffer than needed and is clamped, as on the CPU. */
static int lp_check_shape(const struct rl_lm_logprobs_shape *s, int *chunk)
{
	if (!s || s->n < 0 || s->dim <= 0 || s->vocab <= 0 || s->chunk < 1)
		return -1;
	*chunk = s->chunk < s->vocab ? s->chunk : s->vocab;
	return 0;
}

/* work [n, c] = scale * h [n, dim] W[c0 : c0 + c]^T, in fp32 */
static int lp_chunk_logits(float *work, struct rl_cbuf h, struct rl_cbuf w, int n, int dim, int c0,
                           int c, float scale, void *stream)
{
	return rl_gemm_typed(n, c, dim, false, h.p, dim, true, rl_cbuf_at(w, (size_t)c0 * dim).p,
	                     dim, work, c, scale, 0.0f, NULL, h.t, RL_F32, stream);
}

/* dh[i] = dh[i] + acc[i] rounded once to bf16 */
static __global__ void lp_add_rounded(uint16_t *__restrict__ dh, const float *__restrict__ acc,
                                      int64_t n)
{
	for (int64_t i = rl_grid_thread(); i < n; i += rl_grid_stride())
		dh[i] = rl_bf16_rne(__fadd_rn(rl_widen(dh[i]), acc[i]));
}

/* Any target outside [-1, vocab)? Read back through work[0], which is free
 * before the first GEMM; the one synchronisation of the op. */
static int lp_targets_ok(const int32_t *targets, int n, int vocab, float *work, cudaStream_t st)
{
	int *flag = (int *)work;
	int bad = 1;

	lp_check_targets<<<1, LP_CHECK_THREADS, 0, st>>>(flag, targets, n, vocab);
	if (rl_launched())
		return -1;
	if (cudaMemcpyAsync(&bad, flag, sizeof(bad), cudaMemcpyDeviceToHost, st) != cudaSuccess ||
	    cudaStreamSynchronize(st) != cudaSuccess) {
		/* not left for the next op's rl_launched() (a sticky fault stays) */
		(void)cudaGetLastError();
		return -1;
	}
	return bad ? -1 : 0;
}

extern "C" int rl_lm_logprobs_forward_cuda(float *logprob, float *lse, struct rl_cbuf h,
                                           struct rl_cbuf w, const int32_t *targets,
                                           const struct rl_lm_logprobs_shape *shape, float *work,
                                           void *stream)
{
	int chunk;

	if (!logprob || !lse || !h.p || !w.p || !targets || !work ||
	    lp_check_shape(shape, &chunk) || !rl_lm_logprobs_types_ok(h.t, w.t))
		return -1;

	int n = shape->n, dim = shape->dim, vocab = shape->vocab;
	cudaStream_t st = rl_stream(stream);

	if (n == 0)
		return 0;
	if (lp_targets_ok(targets, n, vocab, work, st))
		return -1;
	for (int c0 = 0; c0 < vocab; c0 += chunk) {
		int c = vocab - c0 < chunk ? vocab - c0 : chunk;

		if (lp_chunk_logits(work, h, w, n, dim, c0, c, shape->logit_scale, stream))
			return -1;
		lp_fold_chunk<<<n, LP_THREADS, 0, st>>>(lse, logprob, work, c, c0 == 0);
		if (rl_launched())
			return -1;
	}

	int64_t blocks = rl_ceil_div(n, LP_THREADS / RL_WARP);

	if (h.t == RL_BF16)
		lp_finish<uint16_t><<<(unsigned)blocks, LP_THREADS, 0, st>>>(
		    logprob, lse, (const uint16_t *)h.p, (const uint16_t *)w.p, targets, n, dim,
		    vocab, shape->logit_scale);
	else
		lp_finish<float><<<(unsigned)blocks, LP_THREADS, 0, st>>>(
		    logprob, lse, (const float *)h.p, (const float *)w.p, targets, n, dim, vocab,
		    shape->logit_scale);
	return rl_launched();
}

extern "C" int rl_lm_logprobs_backward_cuda(struct rl_buf dh, float *dw, const float *dlogprob,
                                            struct rl_cbuf h, struct rl_cbuf w,
                                            const int32_t *targets, const float *lse,
                                            const struct rl_lm_logprobs_shape *shape, float *work,
                                            void *stream)
{
	int chunk;

	if (!dlogprob || !h.p || !w.p || !targets || !lse || !work ||
	    lp_check_shape(shape, &chunk) || !rl_lm_logprobs_types_ok(h.t, w.t) ||
	    (dh.p && dh.t != h.t))
		return -1;

	int n = shape->n, dim = shape->dim, vocab = shape->vocab;
	float scale = shape->logit_scale;
	cudaStream_t st = rl_stream(stream);
	bool bf16 = h.t == RL_BF16;
	size_t logits = (size_t)n * (size_t)chunk;
	/* bf16 (logprobs.h): the rounded dlogits after the logits, then dh's
	 * fp32 sum over the chunks */
	uint16_t *d16 = bf16 ? (uint16_t *)(work + logits) : NULL;
	float *acc = bf16 && dh.p ? work + logits + (logits + 1) / 2 : NULL;

	if (n == 0 || (!dh.p && !dw))
		return 0;
	for (int c0 = 0; c0 < vocab; c0 += chunk) {
		int c = vocab - c0 < chunk ? vocab - c0 : chunk;
		const void *wc = rl_cbuf_at(w, (size_t)c0 * dim).p,
		           *dl = bf16 ? (const void *)d16 : work;

		if (lp_chunk_logits(work, h, w, n, dim, c0, c, scale, stream))
			return -1;
		lp_dlogits<<<n, LP_THREADS, 0, st>>>(work, d16, lse, dlogprob, targets, c, c0,
		                                     scale);
		if (rl_launched())
			return -1;
		/* dh [n, dim] += dlogits [n, c] W_c [c, dim] (bf16: into acc, from
		 * nothing at the first chunk) */
		if (acc && rl_gemm_typed(n, dim, c, false, dl, c, false, wc, dim, acc, dim, 1.0f,
		                         c0 ? 1.0f : 0.0f, NULL, h.t, RL_F32, stream))
			return -1;
		if (!acc && dh.p &&
		    rl_gemm_typed(n, dim, c, false, dl, c, false, wc, dim, dh.p, dim, 1.0f, 1.0f,
		                  NULL, h.t, RL_F32, stream))
			return -1;
		/* dW_c [c, dim] += dlogits^T [c, n] h [n, dim] */
		if (dw &&
		    rl_gemm_typed(c, dim, n, true, dl, c, false, h.p, dim, dw + (size_t)c0 * dim,
		                  dim, 1.0f, 1.0f, NULL, h.t, RL_F32, stream))
			return -1;
	}
	if (!acc)
		return 0;

	int64_t total = (int64_t)n * dim;

	lp_add_rounded<<<rl_stride_blocks(total, LP_THREADS, 65536), LP_THREADS, 0, st>>>(
	    (uint16_t *)dh.p, acc, total);
	return rl_launched();
}
