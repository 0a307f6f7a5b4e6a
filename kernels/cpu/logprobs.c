/* Token log-probabilities from the last hidden state, the vocabulary walked
 * in chunks: each chunk's logits [n, c] are one sgemm into the caller's
 * work buffer, folded into a per-row running maximum and sum of exponentials
 * (the sum in double, rescaled when the maximum moves), so that only
 * O(n x chunk) floats ever exist. The backward recomputes each chunk from
 * the saved lse, overwrites it with dlogits and hands it to two sgemms. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cblas.h>

#include "kernels/cpu/fast_exp.h"
#include "kernels/linear.h"
#include "kernels/logprobs.h"

#define PAR_MIN (1L << 15)

/* chunk > vocab only means a larger work buffer than needed: it is clamped. */
static int check_shape(const struct rl_lm_logprobs_shape *s, int *chunk)
{
	if (!s || s->n < 0 || s->dim <= 0 || s->vocab <= 0 || s->chunk < 1)
		return -1;
	*chunk = s->chunk < s->vocab ? s->chunk : s->vocab;
	return 0;
}

/* work [n, c] = scale * h [n, dim] W[c0 : c0 + c]^T */
static void chunk_logits(float *work, const float *h, const float *w, int n, int dim, int c0, int c,
                         float scale)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, c, dim, scale, h, dim,
	            w + (size_t)c0 * dim, dim, 0.0f, work, c);
}

/* Folds one row's chunk into its running (max, sum), and picks the target's
 * logit when the target falls in the chunk. */
static void fold_row(const float *restrict row, int c, int c0, int32_t target, float *max,
                     double *sum, float *tlogit)
{
	float mx = row[0];

#pragma omp simd reduction(max : mx)
	for (int j = 1; j < c; j++)
		mx = row[j] > mx ? row[j] : mx;
	if (mx > *max) {
		/* first chunk: *sum is 0 and exp(-inf) is 0, which stays 0 */
		*sum *= exp((double)*max - (double)mx);
		*max = mx;
	}

	float m = *max;
	double s = 0.0;

#pragma omp simd reduction(+ : s)
	for (int j = 0; j < c; j++)
		s += rl_fast_exp_neg_flush(row[j] - m);
	*sum += s;
	if (target >= c0 && target < c0 + c)
		*tlogit = row[target - c0];
}

/* How a forward gets a chunk's scaled logits [n, c] into work. */
struct chunk_src {
	const float *h, *w;  /* the fused ops: h [n, dim], W [vocab, dim] */
	const float *logits; /* rl_logits_logprobs: [n, ld] */
	int ld, dim;
	float scale;
	int invariant;
};

static void chunk_from(const struct chunk_src *src, float *work, int n, int c0, int c)
{
	if (src->logits) {
		for (int t = 0; t < n; t++)
			for (int j = 0; j < c; j++)
				work[(size_t)t * c + j] =
				    src->logits[(size_t)t * (size_t)src->ld + (size_t)(c0 + j)] *
				    src->scale;
	} else if (src->invariant) {
		/* the same bits as the invariant LM head's logits, then scaled as
		 * rl_logits_logprobs scales them */
		rl_linear_forward_invariant_cpu(rl_buf_f32(work), rl_cbuf_f32(src->h),
		                                rl_cbuf_f32(src->w + (size_t)c0 * src->dim),
		                                rl_cbuf_f32(NULL), n, src->dim, c, NULL);
		for (size_t i = 0; i < (size_t)n * (size_t)c; i++)
			work[i] *= src->scale;
	} else {
		chunk_logits(work, src->h, src->w, n, src->dim, c0, c, src->scale);
	}
}

static int forward(float *logprob, float *lse, const struct chunk_src *src, const int32_t *targets,
                   const struct rl_lm_logprobs_shape *shape, float *work)
{
	int chunk;

	if (!logprob || !lse || !targets || !work || check_shape(shape, &chunk))
		return -1;

	int n = shape->n, vocab = shape->vocab;

	for (int t = 0; t < n; t++)
		if (targets[t] < -1 || targets[t] >= vocab)
			return -1;
	if (n == 0)
		return 0;

	/* lse holds the running maximum and logprob the target's logit until
	 * the last chunk; the sums need double and get their own n. */
	double *sum = malloc((size_t)n * sizeof(*sum));

	if (!sum)
		return -1;
	for (int t = 0; t < n; t++) {
		lse[t] = -INFINITY;
		sum[t] = 0.0;
		logprob[t] = 0.0f; /* stays 0 where the target lives elsewhere */
	}

	for (int c0 = 0; c0 < vocab; c0 += chunk) {
		int c = vocab - c0 < chunk ? vocab - c0 : chunk;

		chunk_from(src, work, n, c0, c);
#pragma omp parallel for if ((long)n * c >= PAR_MIN) schedule(static)
		for (int t = 0; t < n; t++)
			fold_row(work + (size_t)t * c, c, c0, targets[t], &lse[t], &sum[t],
			         &logprob[t]);
	}

	for (int t = 0; t < n; t++) {
		float l = (float)((double)lse[t] + log(sum[t]));

		lse[t] = l;
		if (targets[t] >= 0)
			logprob[t] -= l;
	}
	free(sum);
	return 0;
}

int rl_lm_logprobs_forward_cpu(float *logprob, float *lse, const float *h, const float *w,
                               const int32_t *targets, const struct rl_lm_logprobs_shape *shape,
                               float *work, void *stream)
{
	(void)stream;
	if (!h || !w || !shape)
		return -1;

	struct chunk_src src = {h, w, NULL, 0, shape->dim, shape->logit_scale, 0};

	return forward(logprob, lse, &src, targets, shape, work);
}

int rl_lm_logprobs_forward_invariant_cpu(float *logprob, float *lse, const float *h, const float *w,
                                         const int32_t *targets,
                                         const struct rl_lm_logprobs_shape *shape, float *work,
                                         void *stream)
{
	(void)stream;
	if (!h || !w || !shape)
		return -1;

	struct chunk_src src = {h, w, NULL, 0, shape->dim, shape->logit_scale, 1};

	return forward(logprob, lse, &src, targets, shape, work);
}

int rl_logits_logprobs_cpu(float *logprob, float *lse, const float *logits, int ld,
                           const int32_t *targets, const struct rl_lm_logprobs_shape *shape,
                           float *work, void *stream)
{
	(void)stream;
	if (!logits || !shape || ld < shape->vocab)
		return -1;

	struct chunk_src src = {NULL, NULL, logits, ld, 1, shape->logit_scale, 0};

	return forward(logprob, lse, &src, targets, shape, work);
}

/* row[j] becomes dlogits = scale dlogprob ([j == target] - softmax) */
static void dlogits_row(float *restrict row, int c, int c0, int32_t target, float lse, float d)
{
#pragma omp simd
	for (int j = 0; j < c; j++)
		row[j] = -d * rl_fast_exp_neg_flush(row[j] - lse);
	if (target >= c0 && target < c0 + c)
		row[target - c0] += d;
}

int rl_lm_logprobs_backward_cpu(float *dh, float *dw, const float *dlogprob, const float *h,
                                const float *w, const int32_t *targets, const float *lse,
                                const struct rl_lm_logprobs_shape *shape, float *work, void *stream)
{
	(void)stream;
	int chunk;

	if (!dlogprob || !h || !w || !targets || !lse || !work || check_shape(shape, &chunk))
		return -1;

	int n = shape->n, dim = shape->dim, vocab = shape->vocab;
	float scale = shape->logit_scale;

	if (n == 0 || (!dh && !dw))
		return 0;

	for (int c0 = 0; c0 < vocab; c0 += chunk) {
		int c = vocab - c0 < chunk ? vocab - c0 : chunk;
		const float *wc = w + (size_t)c0 * dim;

		chunk_logits(work, h, w, n, dim, c0, c, scale);
#pragma omp parallel for if ((long)n * c >= PAR_MIN) schedule(static)
		for (int t = 0; t < n; t++)
			dlogits_row(work + (size_t)t * c, c, c0, targets[t], lse[t],
			            scale * dlogprob[t]);

		/* dh [n, dim] += dlogits [n, c] W_c [c, dim] */
		if (dh)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dim, c, 1.0f,
			            work, c, wc, dim, 1.0f, dh, dim);
		/* dW_c [c, dim] += dlogits^T [c, n] h [n, dim] */
		if (dw)
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, dim, n, 1.0f, work,
			            c, h, dim, 1.0f, dw + (size_t)c0 * dim, dim);
	}
	return 0;
}
