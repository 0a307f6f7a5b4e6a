/* rl_compare rollout: which weights generated a saved rollout. The
 * generation logprobs that a checkpoint's rollout_buffer.bin holds, against
 * a model's own: a whole forward pass over each sample (no KV cache, as
 * generation used) and a log-softmax in double at temperature 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rollout/replay_buffer.h"
#include "runtime/model/model.h"
#include "tests/tools/rl_compare.h"

/* The largest |generation logprob - model logprob| over sample s's
 * response tokens, or -1 with err. */
static double sample_diff(struct rl_model *m, const struct rl_sample *s, char *err, size_t errlen)
{
	int vocab = m->cfg.vocab_size;
	int32_t cu[2] = {0, s->len};
	struct rl_batch b = {s->len, 1, s->ids, cu, NULL};
	struct rl_acts *a = rl_acts_new(m, s->len);
	float *logits = malloc((size_t)s->len * (size_t)vocab * sizeof *logits);
	double worst = -1;

	if (!a || !logits) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (rl_model_forward(m, a, &b, err, errlen) || rl_model_logits(m, a, logits, err, errlen))
		goto out;
	worst = 0;
	for (int t = s->prompt_len; t < s->len; t++) {
		/* the token at t was drawn from the distribution at t - 1 */
		const float *row = logits + (size_t)(t - 1) * (size_t)vocab;
		double top = row[0], sum = 0;

		for (int v = 1; v < vocab; v++)
			top = row[v] > top ? row[v] : top;
		for (int v = 0; v < vocab; v++)
			sum += exp((double)row[v] - top);
		double lp = (double)row[s->ids[t]] - top - log(sum);
		double d = fabs(lp - (double)s->gen_lp[t - s->prompt_len]);
		worst = d > worst ? d : worst;
	}
out:
	free(logits);
	if (a)
		rl_acts_free(m, a);
	return worst;
}

int rl_compare_rollout(const char *step_dir, int index, const char *model_dir, double tol)
{
	struct rl_buffered *b = NULL;
	struct rl_model *m = NULL;
	char err[1024];
	size_t len;
	int n = 0, rc = 2;
	unsigned char *bytes = rl_replay_buffer_load(step_dir, &len, err, sizeof err);

	/* a checkpoint's buffer holds the steps after its own */
	const char *base = strrchr(step_dir, '/') ? strrchr(step_dir, '/') + 1 : step_dir;
	long long step;
	char tail;
	if (sscanf(base, "step_%lld%c", &step, &tail) != 1) {
		snprintf(err, sizeof err, "%s: not a checkpoint's step_N directory", step_dir);
		goto out;
	}
	if (!bytes || rl_replay_buffer_parse(bytes, len, step_dir, step + 1, INT32_MAX, &b, &n, err,
	                                     sizeof err))
		goto out;
	if (index < 1 || index > n) {
		snprintf(err, sizeof err, "%s holds %d rollouts, not a rollout %d", step_dir, n,
		         index);
		goto out;
	}
	if (rl_model_load(&m, model_dir, &rl_ops_cpu, err, sizeof err))
		goto out;
	const struct rl_buffered *r = &b[index - 1];
	double worst = 0;
	for (int i = 0; i < r->r.n; i++) {
		double d = sample_diff(m, &r->r.s[i], err, sizeof err);

		if (d < 0)
			goto out;
		worst = d > worst ? d : worst;
	}
	printf("rollout %d (step %lld, generated after step %lld) against %s: largest logprob "
	       "difference %.3g (tolerance %g)\n",
	       index, (long long)r->step, (long long)r->weights_step, model_dir, worst, tol);
	rc = worst <= tol ? 0 : 1;
out:
	if (rc == 2)
		fprintf(stderr, "rl_compare rollout: %s\n", err);
	free(bytes);
	rl_replay_buffer_free(b, n);
	rl_model_free(m);
	return rc;
}
