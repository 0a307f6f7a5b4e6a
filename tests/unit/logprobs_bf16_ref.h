/* The fused logprobs' bf16 case the CPU and CUDA tests share: bf16 h and
 * W with their fp32 values, targets with some -1, and the gradients of
 * sum(logprob * r) in double from the same values, with the sizes of their
 * terms (for test_logprobs_bf16.c's bounds).
 * defines: struct lp16, lp16_make, lp16_free, lp16_reference */
#ifndef RL_TESTS_LOGPROBS_BF16_REF_H
#define RL_TESTS_LOGPROBS_BF16_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "kernels/logprobs.h"
#include "tests/unit/linear_bf16_ref.h"
#include "tests/unit/ops_test_util.h"

struct lp16 {
	struct rl_lm_logprobs_shape s;
	uint16_t *h, *w;
	float *hf, *wf;
	int32_t *tgt;
};

static inline void lp16_make(struct lp16 *c, uint32_t *seed, int n, int dim, int vocab, int chunk)
{
	c->s = (struct rl_lm_logprobs_shape){
	    .n = n, .dim = dim, .vocab = vocab, .chunk = chunk, .logit_scale = 0.7f};
	c->h = lin16_bits(seed, (size_t)n * dim, -1, 1, &c->hf);
	c->w = lin16_bits(seed, (size_t)vocab * dim, -1, 1, &c->wf);
	c->tgt = malloc((size_t)n * sizeof *c->tgt);
	cr_assert_not_null(c->tgt);
	for (int t = 0; t < n; t++)
		c->tgt[t] = t % 5 == 4 ? -1 : (int32_t)((t * 7 + 3) % vocab);
}

static inline void lp16_free(struct lp16 *c)
{
	free(c->h);
	free(c->w);
	free(c->hf);
	free(c->wf);
	free(c->tgt);
}

/* The gradients of sum(logprob * r) in double from the same bf16 values,
 * and the sizes of their terms. */
static inline void lp16_reference(const struct lp16 *c, const float *r, const float *dh0,
                                  double *dh, double *dh_mag, double *dw, double *dw_mag)
{
	int n = c->s.n, dim = c->s.dim, vocab = c->s.vocab;
	double scale = c->s.logit_scale, *z = dalloc((size_t)vocab);

	for (size_t i = 0; i < (size_t)n * dim; i++) {
		dh[i] = dh0[i];
		dh_mag[i] = fabs(dh0[i]);
	}
	for (int t = 0; t < n; t++) {
		double mx = -INFINITY, sum = 0;

		for (int v = 0; v < vocab; v++) {
			double s = 0;

			for (int k = 0; k < dim; k++)
				s +=
				    (double)c->hf[(size_t)t * dim + k] * c->wf[(size_t)v * dim + k];
			z[v] = scale * s;
			mx = fmax(mx, z[v]);
		}
		for (int v = 0; v < vocab; v++)
			sum += exp(z[v] - mx);
		for (int v = 0; v < vocab; v++) {
			double dl = scale * r[t] * ((v == c->tgt[t]) - exp(z[v] - mx) / sum);

			for (int k = 0; k < dim; k++) {
				size_t hi = (size_t)t * dim + k, wi = (size_t)v * dim + k;

				dh[hi] += dl * c->wf[wi];
				dh_mag[hi] += fabs(dl * c->wf[wi]);
				dw[wi] += dl * c->hf[hi];
				dw_mag[wi] += fabs(dl * c->hf[hi]);
			}
		}
	}
	free(z);
}

#endif
