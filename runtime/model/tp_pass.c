/* The collectives inside a pass over a tensor-parallel model, Megatron's
 * f/g pairs: the input of a column-parallel layer is whole on every rank
 * (gathered along the sequence under sequence parallelism), the output of
 * a row-parallel layer is each rank's part of a sum (reduced, or
 * reduce-scattered along the sequence). One rank: no calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/model/split.h"

void rl_rows_of(const struct rl_model *m, int T, bool sp, struct rl_rows *r)
{
	int p = m->shard.tp.size;

	r->T = T;
	r->sp = sp && p > 1;
	r->n = r->sp ? T / p : T;
	r->first = r->sp ? m->shard.tp.rank * r->n : 0;
}

void rl_tp_gather_rows(const struct rl_model *m, const struct rl_rows *r, const float *mine,
                       float *buf, int d, const char *what)
{
	const struct rl_tp_group *tp = &m->shard.tp;

	if (r->sp)
		tp->all_gather(tp->ctx, mine, buf, (size_t)r->n * (size_t)d, what);
}

int32_t rl_tp_local_row(const struct rl_model *m, int32_t id)
{
	int32_t r = id - m->shard.vocab_start;

	return id >= 0 && r >= 0 && r < m->shard.vocab ? r : -1;
}

float *rl_tp_sum_target(const struct rl_model *m, const struct rl_rows *r, float *out,
                        float *scratch)
{
	(void)m;
	return r->sp ? scratch : out;
}

void rl_tp_sum_rows(const struct rl_model *m, const struct rl_rows *r, float *partial, float *out,
                    int d, const char *what)
{
	const struct rl_tp_group *tp = &m->shard.tp;

	if (tp->size == 1)
		return;
	if (r->sp)
		tp->reduce_scatter(tp->ctx, partial, out, (size_t)r->n * (size_t)d, what);
	else
		tp->all_reduce(tp->ctx, partial, (size_t)r->T * (size_t)d, what);
}

const float *rl_tp_row_bias(const struct rl_model *m, const float *bias)
{
	return m->shard.tp.rank == 0 ? bias : NULL;
}

int rl_tp_gather_vocab(const struct rl_model *m, const float *local, int rows, float *full_host,
                       char *err, size_t errlen)
{
	const struct rl_tp_group *tp = &m->shard.tp;
	int V = m->cfg.vocab_size;

	if (tp->size == 1) {
		if (m->ops->to_host(full_host, local, (size_t)rows * (size_t)V * sizeof(float),
		                    NULL)) {
			snprintf(err, errlen, "copying the logits to the host failed");
			return -1;
		}
		return 0;
	}
	size_t bytes = (size_t)rows * (size_t)m->shard.vocab * sizeof(float);
	float *mine = malloc(bytes ? bytes : 1);
	int rc = -1;

	/* every rank reaches the gather, failed or not: the others would
	 * wait in it for ever */
	if (!mine || m->ops->to_host(mine, local, bytes, NULL))
		snprintf(err, errlen, "copying the logits to the host failed");
	else
		rc = 0;
	if (rl_tp_gather_split(tp, mine ? mine : full_host, full_host, rows, V, 1,
	                       "vocab-parallel logits", err, errlen))
		rc = -1;
	free(mine);
	return rc;
}

void rl_tp_combine_logprobs(const struct rl_model *m, float *logprob, float *lse,
                            const int32_t *targets_host, int T, float *scratch)
{
	const struct rl_tp_group *tp = &m->shard.tp;
	int p = tp->size;
	float *lse_all = scratch, *logit = scratch + (size_t)p * (size_t)T;

	for (int t = 0; t < T; t++)
		logit[t] = targets_host[t] >= 0 ? logprob[t] + lse[t] : 0.0f;
	tp->all_gather_host(tp->ctx, lse, lse_all, (size_t)T, "vocab-parallel lse all-gather");
	tp->all_reduce_host(tp->ctx, logit, (size_t)T, "vocab-parallel target logit");
	for (int t = 0; t < T; t++) {
		double most = -INFINITY, sum = 0;

		for (int r = 0; r < p; r++)
			if (lse_all[(size_t)r * (size_t)T + (size_t)t] > most)
				most = lse_all[(size_t)r * (size_t)T + (size_t)t];
		for (int r = 0; r < p; r++)
			sum += exp(lse_all[(size_t)r * (size_t)T + (size_t)t] - most);
		lse[t] = (float)(most + log(sum));
		logprob[t] = logit[t] - lse[t];
	}
}
