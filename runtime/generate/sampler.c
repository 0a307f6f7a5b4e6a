/* The host sampler: the arguments checked with messages that name them, then
 * the CPU reference of the sample op (kernels/cpu/sample.c), which generation
 * runs on the backend for whole batches. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "kernels/sample.h"
#include "runtime/generate/sampler.h"

size_t rl_sample_work_bytes(int vocab)
{
	return rl_sample_row_work_bytes(vocab);
}

int rl_sampling_check(const struct rl_sampling *s, char *err, size_t errlen)
{
	if (!isfinite(s->temperature) || s->temperature < 0) {
		snprintf(err, errlen, "sampler: temperature %g must be finite and >= 0",
		         (double)s->temperature);
		return -1;
	}
	if (s->top_k < -1) {
		snprintf(err, errlen, "sampler: top_k %d must be >= 1, or 0 or -1 for off",
		         s->top_k);
		return -1;
	}
	if (!(s->top_p > 0 && s->top_p <= 1)) {
		snprintf(err, errlen, "sampler: top_p %g must be in (0, 1]", (double)s->top_p);
		return -1;
	}
	return 0;
}

static int check_args(const float *logits, int vocab, const struct rl_sampling *s, char *err,
                      size_t errlen)
{
	if (!logits || !s) {
		snprintf(err, errlen, "sampler: %s is NULL", !logits ? "logits" : "sampling");
		return -1;
	}
	if (vocab < 1) {
		snprintf(err, errlen, "sampler: vocab %d must be >= 1", vocab);
		return -1;
	}
	return rl_sampling_check(s, err, errlen);
}

/* The message for a code of the CPU sampler; i is the logit it names. */
static int failed(int rc, const float *logits, int32_t i, const struct rl_sampling *s, char *err,
                  size_t errlen)
{
	if (rc == 1)
		snprintf(err, errlen, "sampler: logits[%d] = %g is not finite", i,
		         (double)logits[i]);
	else if (rc == 2)
		snprintf(err, errlen, "sampler: logits[%d] = %g overflows at temperature %g", i,
		         (double)logits[i], (double)s->temperature);
	else
		snprintf(err, errlen, "sampler: bad arguments");
	return -1;
}

int rl_sample(const float *logits, int vocab, const struct rl_sampling *s, struct rl_rng *rng,
              int32_t *token, float *logprob, float *work, char *err, size_t errlen)
{
	bool greedy;
	int rc;

	if (check_args(logits, vocab, s, err, errlen))
		return -1;
	if (!token) {
		snprintf(err, errlen, "sampler: token is NULL");
		return -1;
	}
	greedy = s->temperature < RL_SAMPLING_GREEDY_EPS;
	if (!greedy && !rng) {
		snprintf(err, errlen, "sampler: rng is NULL at temperature %g",
		         (double)s->temperature);
		return -1;
	}
	if (!greedy && !work) {
		snprintf(err, errlen, "sampler: work is NULL (need rl_sample_work_bytes(%d))",
		         vocab);
		return -1;
	}
	rc = rl_sample_row_cpu(logits, vocab, s->temperature, s->top_k, s->top_p,
	                       greedy ? 0.0 : rl_rng_uniform(rng), token, logprob, work);
	return rc ? failed(rc, logits, *token, s, err, errlen) : 0;
}

int rl_sample_support(const float *logits, int vocab, const struct rl_sampling *s, int32_t *ids,
                      int *n, float *work, char *err, size_t errlen)
{
	int rc;

	if (check_args(logits, vocab, s, err, errlen))
		return -1;
	if (!ids || !n) {
		snprintf(err, errlen, "sampler: %s is NULL", !ids ? "ids" : "n");
		return -1;
	}
	if (s->temperature >= RL_SAMPLING_GREEDY_EPS && !work) {
		snprintf(err, errlen, "sampler: work is NULL (need rl_sample_work_bytes(%d))",
		         vocab);
		return -1;
	}
	rc = rl_sample_support_cpu(logits, vocab, s->temperature, s->top_k, s->top_p, ids, n, work);
	return rc ? failed(rc, logits, ids[0], s, err, errlen) : 0;
}
