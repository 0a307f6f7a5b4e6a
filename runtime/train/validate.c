#define _GNU_SOURCE
#include <stdio.h>

#include "runtime/base/clock.h"
#include "runtime/logger/escape.h"
#include "runtime/train/score.h"
#include "runtime/train/validate.h"

/* Each text on its one line, its control characters escaped: a
 * response's newlines would otherwise read as the next field. */
static void print_sample(FILE *out, size_t k, const char *prompt, const char *response,
                         const char *answer, double reward)
{
	fprintf(out, "  validation sample %zu (reward %.2f)\n    prompt:   ", k, reward);
	rl_fputs_escaped(prompt, out);
	fputs("\n    response: ", out);
	rl_fputs_escaped(response ? response : "", out);
	fputc('\n', out);
	if (answer) {
		fputs("    answer:   ", out);
		rl_fputs_escaped(answer, out);
		fputc('\n', out);
	}
}

int rl_trainer_validate(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                        size_t errlen)
{
	const struct rl_config *c = t->cfg;
	size_t n = rl_data_source_val_count(&t->data, (size_t)c->grpo.max_val_samples);
	size_t printed = 0;
	double t0 = rl_now(), sum = 0;
	int64_t unused = 0;

	if (n == 0)
		return 0;
	for (size_t start = 0; start < n; start += (size_t)c->grpo.val_batch_size) {
		size_t k = n - start < (size_t)c->grpo.val_batch_size
		               ? n - start
		               : (size_t)c->grpo.val_batch_size;
		struct rl_rollout r;
		int rc = -1, scored = 0;

		if (rl_rollout_alloc(&r, (int)k, 1)) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		for (size_t i = 0; i < k; i++)
			if (rl_data_source_val(&t->data, start + i, &r.problems[i], &r.answers[i],
			                       &r.prompts[i], &r.metadata[i], err, errlen))
				goto done;
		if (rl_rollout_generate(&t->rollouts, &r,
		                        rl_step_seed((uint64_t)c->grpo.seed, -1 - step), &unused,
		                        err, errlen) ||
		    (scored = rl_trainer_score(t, &r, &unused, err, errlen)))
			goto done;
		for (size_t i = 0; i < k; i++) {
			sum += r.s[i].reward;
			/* the text stays with the rank that generated it */
			if (t->progress && r.s[i].response &&
			    printed < (size_t)c->logger.num_val_samples_to_print)
				print_sample(t->progress, printed++, r.prompts[i], r.s[i].response,
				             r.answers[i], r.s[i].reward);
		}
		rc = 0;
	done:
		rl_rollout_free(&r);
		if (rc)
			return scored < 0 ? scored : -1;
	}
	m->has_val = true;
	m->val_reward = sum / (double)n;
	m->t.validation = rl_now() - t0;
	return 0;
}
