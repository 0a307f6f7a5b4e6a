#define _GNU_SOURCE
/* One GRPO step, in NeMo-RL's order: the rollout (prompts and
 * generation, from the rollout source), rewards, advantages, logprobs of
 * the policy and of the reference, training, refit, and what the step
 * reports. What makes it GRPO is here and in grpo/; the passes over the
 * policy are any algorithm's. */
#include <math.h>

#include "runtime/base/clock.h"
#include "runtime/grpo/advantage.h"
#include "runtime/train/policy_pass.h"
#include "runtime/train/score.h"
#include "runtime/train/step.h"
#include "runtime/train/update.h"
#include "runtime/train/validate.h"

void rl_step_rollout_stats(const struct rl_rollout *r, struct rl_step_metrics *m)
{
	double sum = 0, sq = 0, resp = 0, err_sum = 0, max_diff = 0;
	int64_t tokens = 0, n_tok = 0, truncated = 0;

	for (int i = 0; i < r->n; i++) {
		const struct rl_sample *s = &r->s[i];
		int n = s->len - s->prompt_len;

		sum += s->reward;
		sq += s->reward * s->reward;
		resp += n;
		tokens += s->len;
		truncated += s->truncated;
		for (int j = 0; j < n; j++) {
			double d = fabs((double)s->gen_lp[j] - (double)s->prev_lp[j]);
			err_sum += exp(d);
			max_diff = d > max_diff ? d : max_diff;
		}
		n_tok += n;
	}
	m->reward_mean = sum / r->n;
	double var = sq / r->n - m->reward_mean * m->reward_mean;
	m->reward_std = var > 0 ? sqrt(var) : 0;
	m->response_tokens_mean = resp / r->n;
	m->truncated_fraction = (double)truncated / r->n;
	m->tokens = tokens;
	m->token_mult_prob_error = n_tok ? err_sum / (double)n_tok : 1.0;
	m->gen_logprob_max_diff = max_diff;
}

void rl_step_take_report(const struct rl_rollout_report *rep, struct rl_step_metrics *m)
{
	m->prompts_truncated = rep->prompts_truncated;
	m->t.generation = rep->generation_s;
	m->t.async = rep->async;
	m->t.exposed_generation = rep->exposed_s;
	m->t.buffer_starvation = rep->starved_s;
	m->trajectory_age = rep->trajectory_age;
}

int rl_trainer_step(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                    size_t errlen)
{
	struct rl_rollout r = {0};
	struct rl_rollout_report rep = {0};
	double t0 = rl_now(), t1;
	int rc = -1, got;

	m->step = step;
	if ((got = rl_rollout_next(&t->rollouts, step, &r, &rep, err, errlen))) {
		rc = got;
		goto out;
	}
	rl_step_take_report(&rep, m);
	t1 = rl_now();

	int64_t failures = 0;
	int scored = rl_trainer_score(t, &r, &failures, err, errlen);
	if (scored) {
		rc = scored;
		goto out;
	}
	m->reward_failures = failures;
	if (rl_grpo_rollout_advantages(&r, &t->cfg->grpo)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	m->t.reward_calculation = rl_now() - t1;

	t1 = rl_now();
	if (rl_policy_logprobs(t, &r, false, err, errlen) ||
	    (t->cfg->loss_fn.reference_policy_kl_penalty != 0 &&
	     rl_policy_logprobs(t, &r, true, err, errlen)))
		goto out;
	m->t.policy_and_reference_logprobs = rl_now() - t1;
	rl_step_rollout_stats(&r, m);

	t1 = rl_now();
	if (rl_policy_train(t, &r, m, err, errlen))
		goto out;
	m->t.policy_training = rl_now() - t1;

	/* Refit: colocated, generation runs on the very weights just
	 * trained and the hand-over is nothing; it is timed all the same, so
	 * the table keeps NeMo-RL's columns. Non-colocated, the weights go
	 * to the generation ranks (asynchronous: from a copy, taken when
	 * they are done with the rollouts asked for before). */
	t1 = rl_now();
	if (rl_rollout_refit(&t->rollouts, step, err, errlen))
		goto out;
	m->t.refit = rl_now() - t1;
	m->t.total_step_time = rl_now() - t0;
	m->tokens_per_sec = m->t.total_step_time > 0 ? (double)m->tokens / m->t.total_step_time : 0;
	rc = 0;
out:
	rl_rollout_free(&r);
	return rc;
}

static double grpo_loss(const struct rl_trainer *t, const struct rl_loss_batch *b,
                        const struct rl_loss_norm *norm, float *dcurr, struct rl_loss_stats *acc)
{
	return rl_loss_compute(&t->loss, b, norm, dcurr, acc);
}

const struct rl_trainer_algo rl_trainer_algo_grpo = {
    .name = "GRPO",
    .step = rl_trainer_step,
    .validate = rl_trainer_validate,
    .loss = grpo_loss,
};
