#define _GNU_SOURCE
/* The dump is put together on the first rank: each tensor whole from its
 * tensor-parallel parts, the experts from the ranks of ep that hold them,
 * and under pipeline parallelism every later stage's tensors sent to the
 * first stage as one message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/train/grad_dump.h"
#include "kernels/memory_use.h"
#include "runtime/model/safetensors.h"

struct tensor_head {
	char name[96];
	int64_t ndim, shape[2], numel;
};

struct dump {
	int n, cap;
	struct tensor_head *head;
	float **data;
};

static int dump_add(struct dump *d, const struct tensor_head *h, float *data)
{
	if (d->n == d->cap) {
		int cap = d->cap ? 2 * d->cap : 64;
		struct tensor_head *head = realloc(d->head, (size_t)cap * sizeof *head);
		if (head)
			d->head = head;
		float **v = realloc(d->data, (size_t)cap * sizeof *v);
		if (v)
			d->data = v;
		if (!head || !v)
			return -1;
		d->cap = cap;
	}
	d->head[d->n] = *h;
	d->data[d->n++] = data;
	return 0;
}

static void dump_free(struct dump *d)
{
	for (int i = 0; i < d->n; i++)
		free(d->data[i]);
	free(d->head);
	free(d->data);
}

/* Under expert parallelism: every expert of every sparse layer, each
 * layer's experts of one kind all-gathered over ep (whole tensors: expert
 * tensor parallelism is 1). Every rank of ep takes part. */
static int every_expert(const struct rl_model *m, struct rl_comm *ep, const float *grad_host,
                        struct dump *d, char *err, size_t errlen)
{
	const struct rl_model_shard *sh = &m->shard;

	for (int l = sh->first_layer; l < sh->first_layer + sh->n_layers; l++)
		for (int k = 0; k < RL_P_PER_LAYER; k++) {
			const struct rl_param *x = m->layer[l * RL_P_PER_LAYER + k];

			if (!x || !rl_layer_param_is_expert((enum rl_layer_param)k))
				continue;
			int64_t numel = x->full_shape[0] * x->full_shape[1];
			size_t mine = (size_t)(numel * sh->n_experts);
			float *all = malloc(mine * (size_t)sh->ep.size * sizeof *all + 1);
			if (!all) {
				snprintf(err, errlen, "out of memory for the gradient dump");
				return -1;
			}
			rl_comm_all_gather(ep, grad_host + x->offset, all, mine, RL_COMM_F32,
			                   "gradient dump: a layer's experts");
			for (int e = 0; e < sh->n_experts * sh->ep.size; e++) {
				struct tensor_head h = {
				    .ndim = 2,
				    .shape = {x->full_shape[0], x->full_shape[1]},
				    .numel = numel};
				float *v = malloc((size_t)numel * sizeof *v);

				rl_expert_name(h.name, sizeof h.name, l, e, (enum rl_layer_param)k);
				if (v)
					memcpy(v, all + (size_t)e * (size_t)numel,
					       (size_t)numel * sizeof *v);
				if (!v || dump_add(d, &h, v)) {
					free(v);
					free(all);
					snprintf(err, errlen,
					         "out of memory for the gradient dump");
					return -1;
				}
			}
			free(all);
		}
	return 0;
}

/* This rank's tensors, each whole (put together over tensor
 * parallelism), the tied embedding's last-stage copy left out, and under
 * expert parallelism the experts (every_expert's). */
static int own_tensors(const struct rl_model *m, const float *grad_host, struct dump *d, char *err,
                       size_t errlen)
{
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];
		struct tensor_head h = {.ndim = p->ndim};

		if (p->tied_copy) /* alike on the stage's ranks: no gather skipped by one */
			continue;
		if (m->shard.ep.size > 1 && p->offset >= m->expert_start)
			continue;
		h.shape[0] = p->full_shape[0];
		h.shape[1] = p->ndim == 2 ? p->full_shape[1] : 0;
		h.numel = h.shape[0] * (p->ndim == 2 ? h.shape[1] : 1);
		snprintf(h.name, sizeof h.name, "%s", p->name);
		float *whole = malloc((size_t)h.numel * sizeof *whole);
		if (!whole) {
			snprintf(err, errlen, "out of memory for the gradient dump");
			return -1;
		}
		if (rl_model_gather_param(m, i, grad_host + p->offset, whole, err, errlen)) {
			free(whole);
			return -1;
		}
		if (dump_add(d, &h, whole)) {
			free(whole);
			snprintf(err, errlen, "out of memory for the gradient dump");
			return -1;
		}
	}
	return 0;
}

/* Every later stage's tensors to the first stage of pp. */
static int gather_stages(struct rl_comm *pp, struct dump *d, char *err, size_t errlen)
{
	int stage = rl_comm_rank(pp), stages = rl_comm_size(pp);
	int64_t counts[2] = {d->n, 0};

	if (stage > 0) {
		for (int i = 0; i < d->n; i++)
			counts[1] += d->head[i].numel;
		float *values = malloc(((size_t)counts[1] + 1) * sizeof *values);
		if (!values) {
			snprintf(err, errlen, "out of memory for the gradient dump");
			return -1;
		}
		for (int64_t i = 0, at = 0; i < d->n; at += d->head[i++].numel)
			memcpy(values + at, d->data[i], (size_t)d->head[i].numel * sizeof *values);
		rl_comm_send(pp, counts, 2, RL_COMM_I64, 0, "gradient dump sizes");
		rl_comm_send(pp, d->head, (size_t)d->n * sizeof *d->head, RL_COMM_U8, 0,
		             "gradient dump names");
		rl_comm_send(pp, values, (size_t)counts[1], RL_COMM_F32, 0, "gradient dump values");
		free(values);
		return 0;
	}
	for (int s = 1; s < stages; s++) {
		rl_comm_recv(pp, counts, 2, RL_COMM_I64, s, "gradient dump sizes");
		struct tensor_head *heads = malloc(((size_t)counts[0] + 1) * sizeof *heads);
		float *values = malloc(((size_t)counts[1] + 1) * sizeof *values);
		if (!heads || !values) {
			free(heads);
			free(values);
			snprintf(err, errlen, "out of memory for the gradient dump");
			return -1;
		}
		rl_comm_recv(pp, heads, (size_t)counts[0] * sizeof *heads, RL_COMM_U8, s,
		             "gradient dump names");
		rl_comm_recv(pp, values, (size_t)counts[1], RL_COMM_F32, s, "gradient dump values");
		int rc = 0;
		for (int64_t i = 0, at = 0; rc == 0 && i < counts[0]; at += heads[i++].numel) {
			float *v = malloc((size_t)heads[i].numel * sizeof *v + 1);

			if (v)
				memcpy(v, values + at, (size_t)heads[i].numel * sizeof *v);
			if (!v || dump_add(d, &heads[i], v)) {
				free(v);
				snprintf(err, errlen, "out of memory for the gradient dump");
				rc = -1;
			}
		}
		free(heads);
		free(values);
		if (rc)
			return -1;
	}
	return 0;
}

int rl_grad_dump_write(struct rl_trainer *t, double loss, char *err, size_t errlen)
{
	const struct rl_model *m = t->model;
	size_t bytes = (size_t)m->n_elems * sizeof(float);
	float *full = malloc(bytes + sizeof(float));
	float *dev = NULL;
	struct dump d = {0};
	struct rl_st_source *src = NULL;
	float loss32 = (float)loss;
	int rc = -1;

	if (!full) {
		snprintf(err, errlen, "out of memory for the gradient dump");
		goto out;
	}
	const float *grad = m->flat_grad;
	if (t->dist) {
		dev = rl_ops_alloc(m->ops, RL_MEM_ACTIVATIONS, bytes);
		/* the experts, under expert parallelism, are a region of
		 * their own */
		if (!dev || rl_zero_gather_grads(&t->zero, dev, err, errlen) ||
		    (t->zero_experts.group &&
		     rl_zero_gather_grads(&t->zero_experts, dev + m->expert_start, err, errlen)))
			goto out;
		grad = dev;
	}
	if (m->ops->to_host(full, grad, bytes, NULL)) {
		snprintf(err, errlen, "copying the gradient to the host failed");
		goto out;
	}
	if (own_tensors(m, full, &d, err, errlen) ||
	    (m->shard.ep.size > 1 && every_expert(m, t->dist->g[RL_G_EP], full, &d, err, errlen)) ||
	    (t->pp && rl_comm_size(t->pp) > 1 && gather_stages(t->pp, &d, err, errlen)))
		goto out;
	if (!rl_trainer_is_main(t)) {
		rc = 0;
		goto out;
	}
	src = calloc((size_t)d.n + 1, sizeof *src);
	if (!src) {
		snprintf(err, errlen, "out of memory for the gradient dump");
		goto out;
	}
	for (int i = 0; i < d.n; i++) {
		src[i] = (struct rl_st_source){
		    d.head[i].name, RL_F32, (int)d.head[i].ndim, {0}, d.data[i]};
		src[i].shape[0] = d.head[i].shape[0];
		src[i].shape[1] = d.head[i].shape[1];
	}
	src[d.n] = (struct rl_st_source){"loss", RL_F32, 1, {1}, &loss32};
	rc = rl_st_write(t->grad_dump, src, d.n + 1, err, errlen);
out:
	if (dev)
		rl_ops_release(m->ops, dev);
	dump_free(&d);
	free(full);
	free(src);
	return rc;
}
