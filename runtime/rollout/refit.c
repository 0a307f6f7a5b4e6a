/* The sender opens with what both sides must agree on (a hash of the
 * tensors' names and whole shapes, and the bucket size), then one
 * broadcast per bucket. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "runtime/rollout/refit.h"

struct refit_head {
	uint64_t tensors;
	int64_t bucket_floats;
	int64_t n_params;
};

/* One tensor of the refit, in the order both sides walk: the model's
 * dense tensors as it lists them, then every expert of every sparse layer
 * by layer, kind and number, whichever rank holds it. Under expert
 * parallelism the training ranks list their own experts apart, after the
 * dense tensors, and hold only some; this order is the same for them and
 * for generation ranks that hold them all. */
struct slot {
	char name[96];
	int64_t shape[2];        /* whole */
	int param;               /* its index here; -1: an expert another rank holds */
	int layer, kind, expert; /* an expert's (kind -1: a dense tensor) */
};

struct order {
	struct slot *s;
	int n;
};

static int64_t numel_of(const struct slot *s)
{
	return s->shape[0] * (s->shape[1] ? s->shape[1] : 1);
}

/* The stack of layer l's experts of one kind here (its first rl_param),
 * or NULL. */
static const struct rl_param *stack_of(const struct rl_model *m, int l, int kind)
{
	return m->layer[l * RL_P_PER_LAYER + kind];
}

static int order_of(const struct rl_model *m, struct order *o)
{
	const struct rl_model_shard *sh = &m->shard;
	int E = m->cfg.moe.n_experts, first = sh->first_layer, last = first + sh->n_layers;
	bool *held = calloc((size_t)m->n_params + 1, sizeof *held);
	int stacks = 0, k = 0;

	memset(o, 0, sizeof *o);
	if (!held)
		return -1;
	for (int l = first; l < last; l++)
		for (int p = 0; p < RL_P_PER_LAYER; p++) {
			const struct rl_param *x =
			    rl_layer_param_is_expert(p) ? stack_of(m, l, p) : NULL;

			for (int e = 0; x && e < sh->n_experts; e++)
				held[x - m->params + e] = true;
			stacks += x != NULL;
		}
	int dense = 0;
	for (int i = 0; i < m->n_params; i++)
		dense += !held[i];
	o->s = calloc((size_t)(dense + stacks * E) + 1, sizeof *o->s);
	if (!o->s) {
		free(held);
		return -1;
	}
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *x = &m->params[i];

		if (held[i])
			continue;
		struct slot *s = &o->s[k++];
		snprintf(s->name, sizeof s->name, "%s", x->name);
		s->shape[0] = x->full_shape[0];
		s->shape[1] = x->ndim == 2 ? x->full_shape[1] : 0;
		s->param = i;
		s->kind = -1;
	}
	for (int l = first; l < last; l++)
		for (int p = 0; p < RL_P_PER_LAYER; p++) {
			const struct rl_param *x =
			    rl_layer_param_is_expert(p) ? stack_of(m, l, p) : NULL;

			for (int e = 0; x && e < E; e++) {
				struct slot *s = &o->s[k++];
				bool mine =
				    e >= sh->first_expert && e < sh->first_expert + sh->n_experts;

				rl_expert_name(s->name, sizeof s->name, l, e, p);
				s->shape[0] = x->full_shape[0];
				s->shape[1] = x->full_shape[1];
				s->param = mine ? (int)(x - m->params) + e - sh->first_expert : -1;
				s->layer = l;
				s->kind = p;
				s->expert = e;
			}
		}
	o->n = k;
	free(held);
	return 0;
}

static uint64_t tensors_hash(const struct order *o)
{
	XXH3_state_t *st = XXH3_createState();
	uint64_t h = 0;

	if (!st)
		return 0;
	XXH3_64bits_reset(st);
	for (int i = 0; i < o->n; i++) {
		XXH3_64bits_update(st, o->s[i].name, strlen(o->s[i].name) + 1);
		XXH3_64bits_update(st, o->s[i].shape, sizeof o->s[i].shape);
	}
	h = XXH3_64bits_digest(st);
	XXH3_freeState(st);
	return h;
}

/* The slots [first, *end) that fill one bucket: as many as fit, at least
 * one. Returns the bucket's floats. */
static int64_t bucket_end(const struct order *o, int first, int64_t bucket_floats, int *end)
{
	int64_t n = numel_of(&o->s[first]);
	int i = first + 1;

	while (i < o->n && n + numel_of(&o->s[i]) <= bucket_floats)
		n += numel_of(&o->s[i++]);
	*end = i;
	return n;
}

static int64_t largest_bucket(const struct order *o, int64_t bucket_floats)
{
	int64_t most = 0;

	for (int i = 0, end; i < o->n; i = end) {
		int64_t n = bucket_end(o, i, bucket_floats, &end);

		most = n > most ? n : most;
	}
	return most;
}

/* A training rank's walk through the slots: what it gathers, and the
 * experts of the stack at hand, all-gathered over the ep group. */
struct walk {
	const struct rl_model *m;
	const float *host;
	const struct rl_refit_sender *from;
	int layer, kind; /* the stack in `stack` (kind -1: none) */
	float *stack;
};

static int fill(struct walk *w, const struct slot *s, float *out, char *err, size_t errlen)
{
	const struct rl_model *m = w->m;
	int64_t numel = numel_of(s);

	if (s->kind < 0 || m->shard.ep.size <= 1) {
		/* a dense tensor, or an expert every rank holds */
		if (!w->from->dense)
			return 0;
		return rl_model_gather_param(m, s->param, w->host + m->params[s->param].offset, out,
		                             err, errlen);
	}
	if (!w->from->experts)
		return 0;
	if (w->layer != s->layer || w->kind != s->kind) {
		const struct rl_param *x = stack_of(m, s->layer, s->kind);
		size_t mine = (size_t)(m->shard.n_experts * numel);
		float *grown =
		    realloc(w->stack, mine * (size_t)m->shard.ep.size * sizeof *grown + 1);

		if (!grown) {
			snprintf(err, errlen, "out of memory gathering the experts of %s", x->name);
			return -1;
		}
		w->stack = grown;
		rl_comm_all_gather(w->from->experts, w->host + x->offset, w->stack, mine,
		                   RL_COMM_F32, "refit: a layer's experts");
		w->layer = s->layer;
		w->kind = s->kind;
	}
	memcpy(out, w->stack + (size_t)s->expert * (size_t)numel, (size_t)numel * sizeof *out);
	return 0;
}

/* The slots [first, end) whole, one after another, into out. */
static int gather(struct walk *w, const struct order *o, int first, int end, float *out, char *err,
                  size_t errlen)
{
	for (int j = first; j < end; j++) {
		if (fill(w, &o->s[j], out, err, errlen))
			return -1;
		out += numel_of(&o->s[j]);
	}
	return 0;
}

/* Sent now: one bucket at a time, gathered and broadcast. */
static int send_now(struct walk *w, const struct order *o, struct refit_head *head, char *err,
                    size_t errlen)
{
	struct rl_comm *bridge = w->from->bridge;
	float *bucket = malloc((size_t)largest_bucket(o, head->bucket_floats) * sizeof *bucket + 1);

	if (!bucket) {
		snprintf(err, errlen, "out of memory for the refit's buckets");
		return -1;
	}
	if (bridge)
		rl_comm_broadcast(bridge, head, sizeof *head, RL_COMM_U8, 0, "refit: the tensors");
	for (int i = 0, end; i < o->n; i = end) {
		int64_t n = bucket_end(o, i, head->bucket_floats, &end);

		if (gather(w, o, i, end, bucket, err, errlen)) {
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

/* Sent later (training rank 0): the whole model gathered into one copy,
 * then every bucket started; the copy goes with the last, freed after
 * every one. */
static int send_later(struct walk *w, const struct order *o, const struct refit_head *h,
                      struct rl_outbox *later, char *err, size_t errlen)
{
	struct rl_comm *bridge = w->from->bridge;
	int64_t total = 0;

	for (int i = 0; i < o->n; i++)
		total += numel_of(&o->s[i]);
	float *whole = malloc((size_t)total * sizeof *whole + 1);
	struct refit_head *head = malloc(sizeof *head);
	if (!whole || !head || gather(w, o, 0, o->n, whole, err, errlen)) {
		if (!whole || !head)
			snprintf(err, errlen,
			         "out of memory for a copy of the weights (%lld floats)",
			         (long long)total);
		free(whole);
		free(head);
		return -1;
	}
	*head = *h;
	rl_outbox_add(later,
	              rl_comm_start_broadcast(bridge, head, sizeof *head, RL_COMM_U8, 0,
	                                      "refit: the tensors"),
	              head);
	int64_t at = 0;
	for (int i = 0, end; i < o->n; i = end) {
		int64_t n = bucket_end(o, i, h->bucket_floats, &end);

		rl_outbox_add(later,
		              rl_comm_start_broadcast(bridge, whole + at, (size_t)n, RL_COMM_F32, 0,
		                                      "refit: a bucket of weights"),
		              end == o->n ? whole : NULL);
		at += n;
	}
	return 0;
}

int rl_refit_send(const struct rl_model *m, const struct rl_refit_sender *from, size_t bucket_bytes,
                  struct rl_outbox *later, char *err, size_t errlen)
{
	struct order o;
	int rc = -1;

	if (order_of(m, &o)) {
		snprintf(err, errlen, "out of memory for the refit");
		return -1;
	}
	struct refit_head head = {tensors_hash(&o), (int64_t)(bucket_bytes / sizeof(float)), o.n};
	struct walk w = {.m = m, .from = from, .kind = -1};

	if (head.bucket_floats < 1)
		head.bucket_floats = 1;
	w.host = rl_model_host_weights(m);
	if (!w.host) {
		snprintf(err, errlen, "out of memory for the refit");
		free(o.s);
		return -1;
	}
	/* only the sender keeps a copy; the others gather a bucket at a time */
	rc = later && from->bridge ? send_later(&w, &o, &head, later, err, errlen)
	                           : send_now(&w, &o, &head, err, errlen);
	rl_model_host_weights_release(m, w.host);
	free(w.stack);
	free(o.s);
	return rc;
}

int rl_refit_recv(struct rl_model *m, struct rl_comm *bridge, char *err, size_t errlen)
{
	struct refit_head head;
	struct order o;
	float *bucket = NULL;
	int rc = -1;

	if (order_of(m, &o)) {
		snprintf(err, errlen, "out of memory for the refit");
		return -1;
	}
	uint64_t mine = tensors_hash(&o);
	rl_comm_broadcast(bridge, &head, sizeof head, RL_COMM_U8, 0, "refit: the tensors");
	if (head.tensors != mine || head.n_params != o.n || head.bucket_floats < 1) {
		snprintf(err, errlen,
		         "refit: the training ranks' model (%lld tensors) is not the generation "
		         "ranks' (%d tensors, or other names or shapes)",
		         (long long)head.n_params, o.n);
		goto out;
	}
	bucket = malloc((size_t)largest_bucket(&o, head.bucket_floats) * sizeof *bucket + 1);
	if (!bucket) {
		snprintf(err, errlen, "out of memory for the refit's buckets");
		goto out;
	}
	for (int i = 0, end; i < o.n; i = end) {
		int64_t n = bucket_end(&o, i, head.bucket_floats, &end), at = 0;

		rl_comm_broadcast(bridge, bucket, (size_t)n, RL_COMM_F32, 0,
		                  "refit: a bucket of weights");
		for (int j = i; j < end; j++) {
			/* a generation rank holds every expert (no expert
			 * parallelism of its own) */
			if (o.s[j].param < 0) {
				snprintf(err, errlen, "refit: %s is not on this generation rank",
				         o.s[j].name);
				goto out;
			}
			if (rl_model_scatter_param(m, o.s[j].param, bucket + at, err, errlen))
				goto out;
			at += numel_of(&o.s[j]);
		}
	}
	rc = 0;
out:
	free(bucket);
	free(o.s);
	return rc;
}
