/* The sender opens with what both sides must agree on (a hash of the
 * tensors' names and whole shapes, and the bucket size), then one
 * broadcast per bucket. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/grpo/refit.h"

struct refit_head {
	uint64_t tensors;
	int64_t bucket_floats;
	int64_t n_params;
};

static int64_t whole_numel(const struct rl_param *p)
{
	return p->full_shape[0] * (p->ndim == 2 ? p->full_shape[1] : 1);
}

static uint64_t tensors_hash(const struct rl_model *m)
{
	XXH3_state_t *st = XXH3_createState();
	uint64_t h = 0;

	if (!st)
		return 0;
	XXH3_64bits_reset(st);
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];

		XXH3_64bits_update(st, p->name, strlen(p->name) + 1);
		XXH3_64bits_update(st, &p->ndim, sizeof p->ndim);
		XXH3_64bits_update(st, p->full_shape, sizeof p->full_shape);
	}
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

/* The tensors [first, *end) that fill one bucket: as many as fit, at least
 * one. Returns the bucket's floats. */
static int64_t bucket_end(const struct rl_model *m, int first, int64_t bucket_floats, int *end)
{
	int64_t n = whole_numel(&m->params[first]);
	int i = first + 1;

	while (i < m->n_params && n + whole_numel(&m->params[i]) <= bucket_floats)
		n += whole_numel(&m->params[i++]);
	*end = i;
	return n;
}

static int64_t largest_bucket(const struct rl_model *m, int64_t bucket_floats)
{
	int64_t most = 0;

	for (int i = 0, end; i < m->n_params; i = end) {
		int64_t n = bucket_end(m, i, bucket_floats, &end);

		most = n > most ? n : most;
	}
	return most;
}

int rl_refit_send(const struct rl_model *m, struct rl_comm *bridge, size_t bucket_bytes, char *err,
                  size_t errlen)
{
	struct refit_head head = {tensors_hash(m), (int64_t)(bucket_bytes / sizeof(float)),
	                          m->n_params};
	int rc = -1;

	if (head.bucket_floats < 1)
		head.bucket_floats = 1;
	if (bridge)
		rl_comm_broadcast(bridge, &head, sizeof head, RL_COMM_U8, 0, "refit: the tensors");
	const float *host = rl_model_host_weights(m);
	float *bucket = malloc((size_t)largest_bucket(m, head.bucket_floats) * sizeof *bucket + 1);
	if (!host || !bucket) {
		snprintf(err, errlen, "out of memory for the refit's buckets");
		goto done;
	}
	for (int i = 0, end; i < m->n_params; i = end) {
		int64_t n = bucket_end(m, i, head.bucket_floats, &end), at = 0;

		for (int j = i; j < end; j++) {
			if (rl_model_gather_param(m, j, host + m->params[j].offset, bucket + at,
			                          err, errlen))
				goto done;
			at += whole_numel(&m->params[j]);
		}
		if (bridge)
			rl_comm_broadcast(bridge, bucket, (size_t)n, RL_COMM_F32, 0,
			                  "refit: a bucket of weights");
	}
	rc = 0;
done:
	if (host)
		rl_model_host_weights_release(m, host);
	free(bucket);
	return rc;
}

int rl_refit_recv(struct rl_model *m, struct rl_comm *bridge, char *err, size_t errlen)
{
	struct refit_head head;
	uint64_t mine = tensors_hash(m);

	rl_comm_broadcast(bridge, &head, sizeof head, RL_COMM_U8, 0, "refit: the tensors");
	if (head.tensors != mine || head.n_params != m->n_params || head.bucket_floats < 1) {
		snprintf(err, errlen,
		         "refit: the training ranks' model (%lld tensors) is not the generation "
		         "ranks' (%d tensors, or other names or shapes)",
		         (long long)head.n_params, m->n_params);
		return -1;
	}
	float *bucket = malloc((size_t)largest_bucket(m, head.bucket_floats) * sizeof *bucket + 1);
	if (!bucket) {
		snprintf(err, errlen, "out of memory for the refit's buckets");
		return -1;
	}
	for (int i = 0, end; i < m->n_params; i = end) {
		int64_t n = bucket_end(m, i, head.bucket_floats, &end), at = 0;

		rl_comm_broadcast(bridge, bucket, (size_t)n, RL_COMM_F32, 0,
		                  "refit: a bucket of weights");
		for (int j = i; j < end; j++) {
			if (rl_model_scatter_param(m, j, bucket + at, err, errlen)) {
				free(bucket);
				return -1;
			}
			at += whole_numel(&m->params[j]);
		}
	}
	free(bucket);
	return 0;
}
