/* Token log-probabilities from the last hidden state, the vocabulary walked
 * in chunks: each chunk's logits [n, c] are one sgemm into the caller's
 * work buffer, folded into a per-row running maximum and sum of exponentials
 * (the sum in double, rescaled when the maximum moves), so that only
 * O(n x chunk) floats ever exist. The backward recomputes each chunk from
 * the saved lse, overwrites it with dlogits and hands it to two sgemms.
 *
 * bf16 h and W are widened exactly (h once, W a chunk of rows at a time) and
 * go through the same sgemms, so the forward is the fp32 op on the same
 * values. The backward rounds each chunk's dlogits to bf16 before its two
 * products, as the tensor cores take them, and sums dh over the chunks in
 * fp32 (the work buffer's tail, logprobs.h) before one rounding into dh. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cblas.h>

#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/typed.h"
#include "kernels/linear.h"
#include "kernels/logprobs.h"
#include "kernels/vector.h"

#define PAR_MIN (1L << 15)

/* chunk > vocab only means a larger work buffer than needed: it is clamped. */
static int check_shape(const struct rl_lm_logprobs_shape *s, int *chunk)
{
	if (!s || s->n < 0 || s->dim <= 0 || s->vocab <= 0 || s->chunk < 1)
		return -1;
	*chunk = s->chunk < s->vocab ? s->chunk : s->vocab;
	return 0;
}

/* work [n, c] = scale * h [n, dim] W_c^T, W_c the chunk's c rows of W */
static void chunk_logits(float *work, const float *h, const float *wc, int n, int dim, int c,
                         float scale)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, c, dim, scale, h, dim, wc, dim,
	            0.0f, work, c);
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
	const float *h;      /* the fused ops: h [n, dim] (fp32, widened from bf16) */
	struct rl_cbuf w;    /* and W [vocab, dim], fp32 or bf16 */
	float *hbuf, *wbuf;  /* bf16: h widened, room for a chunk of W's rows */
	const float *logits; /* rl_logits_logprobs: [n, ld] */
	int ld, dim;
	float scale;
	int invariant;
};

/* W's rows [c0, c0 + c) in fp32: in place, or widened into src->wbuf. */
static const float *chunk_w(const struct chunk_src *src, int c0, int c)
{
	size_t at = (size_t)c0 * (size_t)src->dim;

	if (src->w.t == RL_F32)
		return (const float *)src->w.p + at;
	rl_from_bf16_cpu(src->wbuf, (const uint16_t *)src->w.p + at, (int64_t)c * src->dim, NULL);
	return src->wbuf;
}

/* A fused op's source over typed h and W: bf16 h widened into src->hbuf,
 * room for a chunk of W's rows in src->wbuf; both freed with free_src. */
static int typed_src(struct chunk_src *src, struct rl_cbuf h, struct rl_cbuf w,
                     const struct rl_lm_logprobs_shape *s, int chunk, int invariant)
{
	*src = (struct chunk_src){
	    .w = w, .dim = s->dim, .scale = s->logit_scale, .invariant = invariant};
	src->h = rl_widened(h, (size_t)s->n * (size_t)s->dim, &src->hbuf);
	if (w.t != RL_F32)
		src->wbuf = malloc((size_t)chunk * (size_t)s->dim * sizeof(float));
	return src->h && (w.t == RL_F32 || src->wbuf) ? 0 : -1;
}

static void free_src(struct chunk_src *src)
{
	free(src->hbuf);
	free(src->wbuf);
}

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
		                                rl_cbuf_f32(chunk_w(src, c0, c)), rl_cbuf_f32(NULL),
		                                n, src->dim, c, NULL);
		for (size_t i = 0; i < (size_t)n * (size_t)c; i++)
			work[i] *= src->scale;
	} else {
		chunk_logits(work, src->h, chunk_w(src, c0, c), n, src->dim, c, src->scale);
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

/* The fused forwards: plain (one sgemm a chunk) or batch-invariant. */
static int fused_forward(float *logprob, float *lse, struct rl_cbuf h, struct rl_cbuf w,
                         const int32_t *targets, const struct rl_lm_logprobs_shape *shape,
                         float *work, int invariant)
{
	struct chunk_src src;
	int chunk, rc = -1;

	if (!h.p || !w.p || check_shape(shape, &chunk) || !rl_lm_logprobs_types_ok(h.t, w.t))
		return -1;
	if (typed_src(&src, h, w, shape, chunk, invariant) == 0)
		rc = forward(logprob, lse, &src, targets, shape, work);
	free_src(&src);
	return rc;
}

int rl_lm_logprobs_forward_cpu(float *logprob, float *lse, struct rl_cbuf h, struct rl_cbuf w,
                               const int32_t *targets, const struct rl_lm_logprobs_shape *shape,
                               float *work, void *stream)
{
	(void)stream;
	return fused_forward(logprob, lse, h, w, targets, shape, work, 0);
}

int rl_lm_logprobs_forward_invariant_cpu(float *logprob, float *lse, struct rl_cbuf h,
                                         struct rl_cbuf w, const int32_t *targets,
                                         const struct rl_lm_logprobs_shape *shape, float *work,
                                         void *stream)
{
	(void)stream;
	return fused_forward(logprob, lse, h, w, targets, shape, work, 1);
}

int rl_logits_logprobs_cpu(float *logprob, float *lse, const float *logits, int ld,
                           const int32_t *targets, const struct rl_lm_logprobs_shape *shape,
                           float *work, void *stream)
{
	(void)stream;
	if (!logits || !shape || ld < shape->vocab)
		return -1;

	struct chunk_src src = {.logits = logits, .ld = ld, .dim = 1, .scale = shape->logit_scale};

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

int rl_lm_logprobs_backward_cpu(struct rl_buf dh, float *dw, const float *dlogprob,
                                struct rl_cbuf h, struct rl_cbuf w, const int32_t *targets,
                                const float *lse, const struct rl_lm_logprobs_shape *shape,
                                float *work, void *stream)
{
	(void)stream;
	int chunk;

	if (!dlogprob || !h.p || !w.p || !targets || !lse || !work || check_shape(shape, &chunk) ||
	    !rl_lm_logprobs_types_ok(h.t, w.t) || (dh.p && dh.t != h.t))
		return -1;

	int n = shape->n, dim = shape->dim, vocab = shape->vocab;
	float scale = shape->logit_scale;
	bool bf16 = h.t == RL_BF16;
	size_t logits = (size_t)n * (size_t)chunk, nh = (size_t)n * (size_t)dim;
	/* bf16: dh's fp32 sum over the chunks, where logprobs.h puts it */
	float *acc = bf16 && dh.p ? work + logits + (logits + 1) / 2 : NULL;
	struct chunk_src src;

	if (n == 0 || (!dh.p && !dw))
		return 0;
	if (typed_src(&src, h, w, shape, chunk, 0)) {
		free_src(&src);
		return -1;
	}
	for (int c0 = 0; c0 < vocab; c0 += chunk) {
		int c = vocab - c0 < chunk ? vocab - c0 : chunk;
		const float *wc = chunk_w(&src, c0, c);

		chunk_logits(work, src.h, wc, n, dim, c, scale);
#pragma omp parallel for if ((long)n * c >= PAR_MIN) schedule(static)
		for (int t = 0; t < n; t++)
			dlogits_row(work + (size_t)t * c, c, c0, targets[t], lse[t],
			            scale * dlogprob[t]);
		if (bf16) /* the tensor cores' operand */
			rl_round_bf16_cpu(work, work, (int64_t)n * c, NULL);

		/* dh [n, dim] += dlogits [n, c] W_c [c, dim] */
		if (acc)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dim, c, 1.0f,
			            work, c, wc, dim, c0 ? 1.0f : 0.0f, acc, dim);
		else if (dh.p)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dim, c, 1.0f,
			            work, c, wc, dim, 1.0f, dh.p, dim);
		/* dW_c [c, dim] += dlogits^T [c, n] h [n, dim] */
		if (dw)
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c, dim, n, 1.0f, work,
			            c, src.h, dim, 1.0f, dw + (size_t)c0 * dim, dim);
	}
	if (acc)
		for (size_t i = 0; i < nh; i++)
			((uint16_t *)dh.p)[i] =
			    rl_f32_to_bf16(rl_bf16_to_f32(((uint16_t *)dh.p)[i]) + acc[i]);
	free_src(&src);
	return 0;
}
