/* The model parity tests' fixture: a model directory written by
 * tests/fixtures/fixture_models.py or fixture_moe.py, loaded on the CPU
 * backend, beside what transformers computed with it (<name>.ref.json,
 * <name>.ref.safetensors), and the packed batch of its sequences.
 * defines: struct fixture, fixture_open, fixture_close, ref_tensor,
 * scaled_error, batch_loss */
#ifndef RL_TESTS_MODEL_FIXTURE_H
#define RL_TESTS_MODEL_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "runtime/model/model.h"
#include "runtime/model/safetensors.h"

struct fixture {
	struct rl_model *model;
	struct rl_st_archive *ref;
	json_t *meta;
	struct rl_batch batch;
	int32_t *ids, *cu, *targets;
	int n_predicted;
};

static inline void fixture_open(struct fixture *f, const char *name)
{
	char path[4096], err[512];
	const char *src = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	json_error_t jerr;

	memset(f, 0, sizeof *f);
	snprintf(path, sizeof path, "%s/tests/fixtures/models/%s", src, name);
	cr_assert_eq(rl_model_load(&f->model, path, &rl_ops_cpu, err, sizeof err), 0, "%s", err);
	snprintf(path, sizeof path, "%s/tests/fixtures/models/%s.ref.safetensors", src, name);
	cr_assert_eq(rl_st_open(&f->ref, path, err, sizeof err), 0, "%s", err);
	snprintf(path, sizeof path, "%s/tests/fixtures/models/%s.ref.json", src, name);
	f->meta = json_load_file(path, 0, &jerr);
	cr_assert_not_null(f->meta, "%s: %s", path, jerr.text);

	json_t *seqs = json_object_get(f->meta, "sequences");
	size_t n_seqs = json_array_size(seqs), total = 0, i, j;
	json_t *s, *v;

	json_array_foreach(seqs, i, s) total += json_array_size(s);
	f->ids = malloc(total * sizeof *f->ids);
	f->targets = malloc(total * sizeof *f->targets);
	f->cu = malloc((n_seqs + 1) * sizeof *f->cu);
	f->cu[0] = 0;
	json_array_foreach(seqs, i, s)
	{
		size_t len = json_array_size(s);
		json_array_foreach(s, j, v)
		{
			size_t t = (size_t)f->cu[i] + j;
			f->ids[t] = (int32_t)json_integer_value(v);
			f->targets[t] = j + 1 < len
			                    ? (int32_t)json_integer_value(json_array_get(s, j + 1))
			                    : -1;
			f->n_predicted += j + 1 < len;
		}
		f->cu[i + 1] = f->cu[i] + (int32_t)len;
	}
	f->batch = (struct rl_batch){(int)total, (int)n_seqs, f->ids, f->cu, f->targets};
}

static inline void fixture_close(struct fixture *f)
{
	rl_model_free(f->model);
	rl_st_close(f->ref);
	json_decref(f->meta);
	free(f->ids);
	free(f->cu);
	free(f->targets);
}

static inline float *ref_tensor(struct fixture *f, const char *name, int64_t numel)
{
	const struct rl_st_tensor *t = rl_st_find(f->ref, name);
	char err[512];

	cr_assert_not_null(t, "reference has no %s", name);
	float *out = malloc((size_t)numel * sizeof *out);
	cr_assert_eq(rl_st_read_f32(f->ref, name, out, t->ndim, t->shape, err, sizeof err), 0, "%s",
	             err);
	return out;
}

static inline double scaled_error(const float *got, const float *want, int64_t n)
{
	double maxdiff = 0, maxref = 0;

	for (int64_t i = 0; i < n; i++) {
		maxdiff = fmax(maxdiff, fabs((double)got[i] - want[i]));
		maxref = fmax(maxref, fabs((double)want[i]));
	}
	return maxref > 0 ? maxdiff / maxref : maxdiff;
}

/* Mean next-token NLL of the batch, plus the load-balancing loss; dlogprob
 * for its backward when asked. */
static inline double batch_loss(struct fixture *f, struct rl_acts *a, float *dlogprob)
{
	char err[512];
	int T = f->batch.n_tokens;
	float *lp = malloc((size_t)T * sizeof *lp);
	double nll = 0;

	cr_assert_eq(rl_model_forward(f->model, a, &f->batch, err, sizeof err), 0, "%s", err);
	/* an odd chunk, so the vocabulary walk has a ragged last step */
	cr_assert_eq(rl_model_logprobs(f->model, a, lp, 1.0f, 97, err, sizeof err), 0, "%s", err);
	for (int t = 0; t < T; t++) {
		nll -= lp[t];
		if (dlogprob)
			dlogprob[t] = f->targets[t] >= 0 ? -1.0f / (float)f->n_predicted : 0.0f;
	}
	free(lp);
	/* a mixture of experts adds its load-balancing loss (0 otherwise) */
	return nll / f->n_predicted + rl_acts_aux_loss(f->model, a);
}

#endif
