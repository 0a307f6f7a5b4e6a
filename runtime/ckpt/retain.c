#define _GNU_SOURCE
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/retain.h"
#include "runtime/ckpt/run_state.h"
#include "runtime/ckpt/store.h"

struct ranked {
	const struct rl_ckpt_rank *c;
	int at;
	bool by_metric, higher;
};

/* Negative when a is better than b. */
static int better(const struct ranked *a, const struct ranked *b)
{
	if (a->by_metric && a->c->has_metric != b->c->has_metric)
		return a->c->has_metric ? -1 : 1;
	if (a->by_metric && a->c->has_metric && a->c->metric != b->c->metric) {
		bool a_wins = a->higher ? a->c->metric > b->c->metric : a->c->metric < b->c->metric;
		return a_wins ? -1 : 1;
	}
	return a->c->step > b->c->step ? -1 : a->c->step < b->c->step;
}

static int cmp_ranked(const void *x, const void *y)
{
	return better(x, y);
}

void rl_ckpt_choose_removals(const struct rl_ckpt_rank *c, int n, int keep_top_k, bool by_metric,
                             bool higher_is_better, bool *remove)
{
	struct ranked *r = calloc((size_t)n + 1, sizeof *r);
	int newest = 0;

	for (int i = 0; i < n; i++) {
		remove[i] = false;
		if (c[i].step > c[newest].step)
			newest = i;
	}
	if (keep_top_k <= 0 || n <= keep_top_k || !r) {
		/* out of memory: removing nothing is the safe way to fail */
		free(r);
		return;
	}
	for (int i = 0; i < n; i++)
		r[i] = (struct ranked){&c[i], i, by_metric, higher_is_better};
	qsort(r, (size_t)n, sizeof *r, cmp_ranked);
	for (int k = keep_top_k; k < n; k++)
		remove[r[k].at] = r[k].at != newest;
	free(r);
}

/* The metric of ROOT/step_N's run state; false when it has none. */
static bool metric_of(const char *root, int64_t step, const char *name, double *v)
{
	char dir[4200], err[256];
	struct rl_ckpt_run_state s;
	bool found = false;

	snprintf(dir, sizeof dir, "%s/step_%" PRId64, root, step);
	if (rl_ckpt_run_state_read(&s, dir, err, sizeof err))
		return false;
	/* NeMo-RL writes the metric as "val:NAME" or "train:NAME"; a step's
	 * line holds both kinds: val:NAME is our val_NAME (DPO's
	 * val_accuracy), or NAME itself (SFT's val_loss), and val:accuracy of
	 * a GRPO run is our val_reward */
	char val_name[300];
	json_t *m = NULL;
	if (strncmp(name, "val:", 4) == 0) {
		snprintf(val_name, sizeof val_name, "val_%s", name + 4);
		m = json_object_get(s.metrics, val_name);
		if (!m && strcmp(name + 4, "accuracy") == 0)
			m = json_object_get(s.metrics, "val_reward");
		name += 4;
	} else if (strncmp(name, "train:", 6) == 0) {
		name += 6;
	}
	if (!m)
		m = json_object_get(s.metrics, name);
	if (json_is_number(m)) {
		*v = json_number_value(m);
		found = true;
	}
	json_decref(s.metrics);
	return found;
}

int rl_ckpt_retain(const char *root, int keep_top_k, const char *metric_name, bool higher_is_better,
                   char *err, size_t errlen)
{
	struct rl_ckpt_listing l;
	int rc = -1;

	if (rl_ckpt_scan(root, &l, err, errlen))
		return -1;
	struct rl_ckpt_rank *c = calloc((size_t)l.n + 1, sizeof *c);
	bool *remove = calloc((size_t)l.n + 1, sizeof *remove);
	if (!c || !remove) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < l.n; i++) {
		c[i].step = l.steps[i];
		if (metric_name)
			c[i].has_metric = metric_of(root, l.steps[i], metric_name, &c[i].metric);
	}
	rl_ckpt_choose_removals(c, l.n, keep_top_k, metric_name != NULL, higher_is_better, remove);
	rc = 0;
	for (int i = 0; i < l.n && rc == 0; i++) {
		char name[64];

		snprintf(name, sizeof name, "step_%" PRId64, l.steps[i]);
		if (remove[i])
			rc = rl_ckpt_remove(root, name, err, errlen);
	}
out:
	free(c);
	free(remove);
	rl_ckpt_listing_free(&l);
	return rc;
}
