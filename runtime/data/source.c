#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/source.h"

/* Synthetic validation problems are numbered from here, far past any
 * training run, so the two sets never share a problem stream. */
#define VAL_PROBLEM_BASE (UINT64_C(1) << 62)

/* Puts the config key in front of a loader's message, which names the path
 * only. */
static void name_key(char *err, size_t errlen, const char *key)
{
	char *msg = strdup(err);
	if (msg)
		snprintf(err, errlen, "%s: %s", key, msg);
	free(msg);
}

/* A data set as the run reads it: preference pairs, conversations
 * (openai_format), or problems whose answers are optional only when an
 * external reward program decides; SFT learns the answers, so it needs
 * every one. */
static int load(const struct rl_config *cfg, bool preference, enum rl_pref_format pref,
                const char *path, struct rl_dataset *ds, char *err, size_t errlen)
{
	const struct rl_cfg_data *c = &cfg->data;

	if (preference)
		return rl_dataset_load_preference(path, pref, c->prompt_key, c->chosen_key,
		                                  c->rejected_key, ds, err, errlen);
	if (strcmp(c->dataset_name, "openai_format") == 0)
		return rl_dataset_load_chat(path, c->chat_key, ds, err, errlen);
	return rl_dataset_load_jsonl(path, c->input_key, c->output_key,
	                             cfg->algorithm == RL_ALGO_SFT, ds, err, errlen);
}

int rl_data_source_open(struct rl_data_source *d, const struct rl_config *cfg, size_t per_step,
                        char *err, size_t errlen)
{
	const struct rl_cfg_data *c = &cfg->data;

	memset(d, 0, sizeof *d);
	d->seed = (uint64_t)cfg->grpo.seed;
	if (rl_prompt_load(&d->prompt, c, err, errlen))
		return -1;
	if (rl_prompt_use_chat_template(&d->prompt, cfg, err, errlen)) {
		rl_prompt_free(&d->prompt);
		return -1;
	}
	enum rl_pref_format pref;
	bool preference = rl_pref_format_parse(c->dataset_name, &pref) == 0;
	if (strcmp(c->dataset_name, "jsonl") != 0 &&
	    strcmp(c->dataset_name, "openai_format") != 0 && !preference) {
		d->synthetic = true;
		if (rl_task_parse(c->dataset_name, &d->task)) {
			snprintf(err, errlen, "data.dataset_name: no built-in task '%s'",
			         c->dataset_name);
			goto fail;
		}
		return 0;
	}
	if (load(cfg, preference, pref, c->train_path, &d->train, err, errlen)) {
		name_key(err, errlen, "data.train.path");
		goto fail;
	}
	if (c->validation_path) {
		if (load(cfg, preference, pref, c->validation_path, &d->val, err, errlen)) {
			name_key(err, errlen, "data.validation.path");
			goto fail;
		}
		d->has_val = true;
	}
	if (rl_data_order_init(&d->order, d->train.n, per_step, c->shuffle, d->seed,
	                       cfg->grpo.max_num_epochs, err, errlen))
		goto fail;
	d->batch_idx = calloc(per_step, sizeof *d->batch_idx);
	if (!d->batch_idx) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	return 0;
fail:
	rl_data_source_close(d);
	return -1;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int fill(struct rl_data_source *d, const char *problem, const char *answer, char **p_out,
                char **a_out, char **prompt_out, char *err, size_t errlen)
{
	*p_out = strdup(problem);
	*a_out = dup_or_null(answer);
	*prompt_out = rl_prompt_render(&d->prompt, problem, err, errlen);
	if (!*prompt_out)
		return -1;
	if (!*p_out || (answer && !*a_out)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static int synthetic_problem(struct rl_data_source *d, uint64_t index, char **problem,
                             char **answer, char **prompt, char *err, size_t errlen)
{
	char *p = NULL, *a = NULL;
	int rc;

	if (rl_task_make(d->task, d->seed, index, &p, &a)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	rc = fill(d, p, a, problem, answer, prompt, err, errlen);
	free(p);
	free(a);
	return rc;
}

int rl_data_source_next(struct rl_data_source *d, int n, char **problems, char **answers,
                        char **prompts, char **metadata, char *err, size_t errlen)
{
	if (metadata)
		for (int i = 0; i < n; i++)
			metadata[i] = NULL;
	if (d->synthetic) {
		for (int i = 0; i < n; i++)
			if (synthetic_problem(d, (uint64_t)d->next_problem++, &problems[i],
			                      &answers[i], &prompts[i], err, errlen))
				return -1;
		return 1;
	}
	if (!rl_data_order_next(&d->order, d->batch_idx))
		return 0;
	for (int i = 0; i < n; i++) {
		const struct rl_example *ex = &d->train.ex[d->batch_idx[i]];
		if (fill(d, ex->problem, ex->answer, &problems[i], &answers[i], &prompts[i], err,
		         errlen))
			return -1;
		if (metadata && ex->metadata && !(metadata[i] = strdup(ex->metadata))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	return 1;
}

int rl_data_source_next_indices(struct rl_data_source *d, const size_t **idx)
{
	if (d->synthetic || !rl_data_order_next(&d->order, d->batch_idx))
		return 0;
	*idx = d->batch_idx;
	return 1;
}

bool rl_data_source_last_batch(const struct rl_data_source *d)
{
	const struct rl_data_order *o = &d->order;

	return !d->synthetic && (o->epoch >= o->max_epochs ||
	                         (o->epoch == o->max_epochs - 1 && o->pos + o->batch > o->n));
}

int rl_data_source_next_examples(struct rl_data_source *d, int n, const struct rl_example **ex,
                                 char **prompts, char *err, size_t errlen)
{
	const size_t *idx;

	if (d->synthetic) {
		snprintf(err, errlen, "a built-in task has no examples to hand out");
		return -1;
	}
	if (!rl_data_source_next_indices(d, &idx))
		return 0;
	for (int i = 0; i < n; i++) {
		ex[i] = &d->train.ex[idx[i]];
		if (!(prompts[i] = rl_prompt_render(&d->prompt, ex[i]->problem, err, errlen)))
			return -1;
	}
	return 1;
}

int rl_data_source_val_example(struct rl_data_source *d, size_t k, const struct rl_example **ex,
                               char **prompt, char *err, size_t errlen)
{
	*ex = &d->val.ex[k];
	*prompt = rl_prompt_render(&d->prompt, (*ex)->problem, err, errlen);
	return *prompt ? 0 : -1;
}

size_t rl_data_source_val_count(const struct rl_data_source *d, size_t max)
{
	if (d->synthetic)
		return max;
	return d->has_val ? (d->val.n < max ? d->val.n : max) : 0;
}

int rl_data_source_val(struct rl_data_source *d, size_t k, char **problem, char **answer,
                       char **prompt, char **metadata, char *err, size_t errlen)
{
	if (metadata)
		*metadata = NULL;
	if (d->synthetic)
		return synthetic_problem(d, VAL_PROBLEM_BASE + k, problem, answer, prompt, err,
		                         errlen);
	const struct rl_example *ex = &d->val.ex[k];
	if (fill(d, ex->problem, ex->answer, problem, answer, prompt, err, errlen))
		return -1;
	if (metadata && ex->metadata && !(*metadata = strdup(ex->metadata))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

void rl_data_source_close(struct rl_data_source *d)
{
	rl_prompt_free(&d->prompt);
	if (d->train.ex)
		rl_dataset_free(&d->train);
	if (d->val.ex)
		rl_dataset_free(&d->val);
	if (d->order.perm)
		rl_data_order_free(&d->order);
	free(d->batch_idx);
	memset(d, 0, sizeof *d);
}

void rl_data_source_position(const struct rl_data_source *d, struct rl_data_position *p)
{
	size_t pos = 0;

	memset(p, 0, sizeof *p);
	p->next_problem = d->next_problem;
	if (d->synthetic)
		return;
	p->examples = d->train.n;
	rl_data_order_position(&d->order, &p->epoch, &pos);
	p->position = pos;
}

int rl_data_source_restore(struct rl_data_source *d, const struct rl_data_position *p, char *err,
                           size_t errlen)
{
	if (d->synthetic && p->examples) {
		snprintf(err, errlen,
		         "the checkpoint's data is a dataset of %llu examples; this run's is a "
		         "built-in task",
		         (unsigned long long)p->examples);
		return -1;
	}
	if (!d->synthetic && p->examples != d->train.n) {
		if (p->examples)
			snprintf(err, errlen,
			         "the checkpoint's dataset has %llu examples; this run's "
			         "data.train_path has %zu",
			         (unsigned long long)p->examples, d->train.n);
		else
			snprintf(err, errlen,
			         "the checkpoint's data is a built-in task; this run's is "
			         "data.train_path");
		return -1;
	}
	if (p->next_problem < 0) {
		snprintf(err, errlen, "the checkpoint's next problem number %lld is negative",
		         (long long)p->next_problem);
		return -1;
	}
	d->next_problem = p->next_problem;
	if (d->synthetic)
		return 0;
	return rl_data_order_restore(&d->order, p->epoch, (size_t)p->position, err, errlen);
}
