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

/* The tensors [first, end) whole, one after another, into out. */
static int gather(const struct rl_model *m, const float *host, int first, int end, float *out,
                  char *err, size_t errlen)
{
	for (int j = first; j < end; j++) {
		if (rl_model_gather_param(m, j, host + m->params[j].offset, out, err, errlen))
			return -1;
		out += whole_numel(&m->params[j]);
	}
	return 0;
}

/* Sent now: one bucket at a time, gathered and broadcast. */
static int send_now(const struct rl_model *m, const float *host, struct rl_comm *bridge,
                    struct refit_head *head, char *err, size_t errlen)
{
	float *bucket = malloc((size_t)largest_bucket(m, head->bucket_floats) * sizeof *bucket + 1);

	if (!bucket) {
		snprintf(err, errlen, "out of memory for the refit's buckets");
		return -1;
	}
	if (bridge)
		rl_comm_broadcast(bridge, head, sizeof *head, RL_COMM_U8, 0, "refit: the tensors");
	for (int i = 0, end; i < m->n_params; i = end) {
		int64_t n = bucket_end(m, i, head->bucket_floats, &end);

		if (gather(m, host, i, end, bucket, err, errlen)) {
			free(bucket);
			return -1;
		}
		if (bridge)
			rl_comm_broadcast(bridge, bucket, (size_t)n, RL_COMM_F32, 0,
			                  "refit: a bucket of weights");
	}
	free(bucket);
	return 0;
}

/* Sent later: the whole model gathered into one copy, then every bucket
 * started; the copy goes with the last, freed after every one. */
static int send_later(const struct rl_model *m, const float *host, struct rl_comm *bridge,
                      const struct refit_head *h, struct rl_outbox *later, char *err, size_t errlen)
{
	int64_t total = 0;

	for (int i = 0; i < m->n_params; i++)
		total += whole_numel(&m->params[i]);
	float *whole = malloc((size_t)total * sizeof *whole + 1);
	struct refit_head *head = malloc(sizeof *head);
	if (!whole || !head || gather(m, host, 0, m->n_params, whole, err, errlen)) {
		if (!whole || !head)
			snprintf(err, errlen,
			         "out of memory for a copy of the weights (%lld floats)",
			         (long long)total);
		free(whole);
		free(head);
		return -1;
	}
	if (!bridge) {
		free(whole);
		free(head);
		return 0;
	}
	*head = *h;
	rl_outbox_add(later,
	              rl_comm_start_broadcast(bridge, head, sizeof *head, RL_COMM_U8, 0,
	                                      "refit: the tensors"),
	              head);
	int64_t at = 0;
	for (int i = 0, end; i < m->n_params; i = end) {
		int64_t n = bucket_end(m, i, h->bucket_floats, &end);

		rl_outbox_add(later,
		              rl_comm_start_broadcast(bridge, whole + at, (size_t)n, RL_COMM_F32, 0,
		                                      "refit: a bucket of weights"),
		              end == m->n_params ? whole : NULL);
		at += n;
	}
	return 0;
}

int rl_refit_send(const struct rl_model *m, struct rl_comm *bridge, size_t bucket_bytes,
                  struct rl_outbox *later, char *err, size_t errlen)
{
	struct refit_head head = {tensors_hash(m), (int64_t)(bucket_bytes / sizeof(float)),
	                          m->n_params};
	int rc;

	if (head.bucket_floats < 1)
		head.bucket_floats = 1;
	const float *host = rl_model_host_weights(m);
	if (!host) {
		snprintf(err, errlen, "out of memory for the refit");
		return -1;
	}
	rc = later ? send_later(m, host, bridge, &head, later, err, errlen)
	           : send_now(m, host, bridge, &head, err, errlen);
	rl_model_host_weights_release(m, host);
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
