#define _GNU_SOURCE
/* On-policy distillation (rlrun distill, NeMo-RL's distillation config):
 * the student generates its rollouts as GRPO's step does, a frozen
 * teacher scores the student's own tokens, and the loss is the per-token
 * reverse KL to the teacher (algo/distill_loss.c). The teacher is loaded
 * as the policy is (each rank its cut, the policy's layout, the run's
 * precision, its own activation buffers) and runs through the same
 * logprob pass, writing its logprobs where the reference's go
 * (rl_sample.ref_lp). Rewards are scored for the metrics and validation
 * only: no advantage enters the loss. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/algo/distill_loss.h"
#include "runtime/base/clock.h"
#include "runtime/train/policy_pass.h"
#include "runtime/train/score.h"
#include "runtime/train/load_model.h"
#include "runtime/train/step.h"
#include "runtime/train/trainer.h"
#include "runtime/train/update.h"
#include "runtime/train/validate.h"

struct distill {
	struct rl_distill_loss loss;
	struct rl_model *teacher;
	/* one per micro-batch a pipeline stage holds at once, as the policy's */
	struct rl_acts **acts;
	int n_acts;
};

/* The teacher's ids must mean the student's tokens: the student's
 * tokenizer writes the samples and the two models' logprobs of one id
 * are compared. What decides an id is the vocabulary (token -> id, added
 * tokens included) and, for the logits, config.json's vocab_size: both
 * must be equal, as NeMo-RL's check_vocab_equality asks. */
static int same_tokenizer(const struct rl_trainer *t, const struct rl_tokenizer *tok,
                          const struct rl_model *teacher, char *err, size_t errlen)
{
	const struct rl_config *c = t->cfg;
	const char *student =
	    c->policy.tokenizer_name ? c->policy.tokenizer_name : c->policy.model_name;
	const char *mine =
	    c->teacher.tokenizer_name ? c->teacher.tokenizer_name : c->teacher.model_name;
	int n = rl_tokenizer_vocab_size(t->tok), m = rl_tokenizer_vocab_size(tok);

	if (n != m) {
		snprintf(err, errlen,
		         "teacher.model_name: the teacher's tokenizer (%s) has %d ids, the "
		         "student's (%s) %d: distillation compares the two models' logprobs of "
		         "the same token ids, so they must share the tokenizer",
		         mine, m, student, n);
		return -1;
	}
	for (int32_t id = 0; id < n; id++) {
		const char *a = rl_tokenizer_id_to_token(t->tok, id);
		const char *b = rl_tokenizer_id_to_token(tok, id);

		if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0)) {
			snprintf(
			    err, errlen,
			    "teacher.model_name: the teacher's tokenizer (%s) differs from the "
			    "student's (%s): id %d is \"%s\" for the student, \"%s\" for the "
			    "teacher; distillation compares the two models' logprobs of the "
			    "same token ids, so they must share the tokenizer",
			    mine, student, id, a ? a : "(none)", b ? b : "(none)");
			return -1;
		}
	}
	if (teacher->cfg.vocab_size != t->model->cfg.vocab_size) {
		snprintf(err, errlen,
		         "teacher.model_name: %s's config.json has vocab_size %d, the student's "
		         "(%s) %d: their logits would not cover the same ids",
		         c->teacher.model_name, teacher->cfg.vocab_size, c->policy.model_name,
		         t->model->cfg.vocab_size);
		return -1;
	}
	return 0;
}

static void distill_free(struct rl_trainer *t)
{
	struct distill *d = t->algo_state;

	if (!d)
		return;
	for (int i = 0; i < d->n_acts; i++)
		rl_acts_free(d->teacher, d->acts[i]);
	free(d->acts);
	rl_model_free(d->teacher);
	free(d);
	t->algo_state = NULL;
}

static int distill_setup(struct rl_trainer *t, char *err, size_t errlen)
{
	const struct rl_config *c = t->cfg;
	struct rl_tokenizer *tok = NULL;
	struct distill *d = calloc(1, sizeof *d);

	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	t->algo_state = d;
	if (rl_distill_loss_init(&d->loss, c->loss_fn.kl_type, c->loss_fn.mixed_kl_weight,
	                         c->loss_fn.zero_outside_topk, err, errlen))
		return -1;
	if (!c->teacher.model_name) {
		snprintf(err, errlen, "teacher.model_name: on-policy distillation needs a teacher");
		return -1;
	}
	/* frozen: the policy's backend, layout and precision, no optimizer */
	int rc =
	    rl_trainer_load_model(t, t->model->ops, c->teacher.model_name, "teacher.model_name",
	                          c->teacher.tokenizer_name, "teacher.tokenizer.name", &d->teacher,
	                          &tok, &t->teacher_xxh3, err, errlen);
	if (rc == 0)
		rc = same_tokenizer(t, tok, d->teacher, err, errlen);
	rl_tokenizer_free(tok);
	if (rc)
		return -1;
	/* the teacher only runs forward: with activation checkpointing its
	 * layers share buffers as the policy's do */
	if (rl_trainer_acts_new(t, d->teacher, &d->acts, &d->n_acts)) {
		snprintf(err, errlen, "out of memory for the teacher's micro-batches of %d tokens",
		         t->max_mb_tokens);
		return -1;
	}
	if (t->progress)
		fprintf(t->progress,
		        "rlrun distill: teacher %s (%d layers, hidden %d), student %s (%d layers, "
		        "hidden %d)\n",
		        c->teacher.model_name, d->teacher->cfg.n_layers,
		        d->teacher->cfg.hidden_size, c->policy.model_name, t->model->cfg.n_layers,
		        t->model->cfg.hidden_size);
	return 0;
}

/* The teacher's logprobs of every sample's tokens into ref_lp, with the
 * kernels the policy's logprob pass takes (generation's batch-invariant
 * ones by default), so that its numbers do not depend on which samples
 * share a micro-batch: the layouts agree. */
static int teacher_logprobs(struct rl_trainer *t, struct rl_rollout *r, char *err, size_t errlen)
{
	struct distill *d = t->algo_state;
	struct rl_scorer sc = {
	    .model = d->teacher,
	    .acts = d->acts,
	    .n_acts = d->n_acts,
	    .invariant = t->gen.batch_invariant,
	};

	return rl_model_logprobs_pass(t, r, &sc, offsetof(struct rl_sample, ref_lp), err, errlen);
}

/* The mean over the step's response tokens of prev_lp - ref_lp: the
 * reverse KL of the student that sampled them to the teacher, estimated
 * on its own samples (every rank holds every sample's logprobs). */
static double reverse_kl(const struct rl_rollout *r)
{
	double sum = 0;
	int64_t n = 0;

	for (int i = 0; i < r->n; i++) {
		const struct rl_sample *s = &r->s[i];

		for (int j = 0; j < s->len - s->prompt_len; j++)
			sum += (double)s->prev_lp[j] - (double)s->ref_lp[j];
		n += s->len - s->prompt_len;
	}
	return n ? sum / (double)n : 0.0;
}

static int distill_step(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                        size_t errlen)
{
	struct rl_rollout r = {0};
	struct rl_rollout_report rep = {0};
	double t0 = rl_now(), t1;
	int rc = -1, got;
	int64_t failures = 0;

	m->step = step;
	if ((got = rl_rollout_next(&t->rollouts, step, &r, &rep, err, errlen))) {
		rc = got;
		goto out;
	}
	rl_step_take_report(&rep, m);
	t1 = rl_now();
	/* the student's reward: reported, never trained on */
	if ((got = rl_trainer_score(t, &r, &failures, err, errlen))) {
		rc = got;
		goto out;
	}
	m->reward_failures = failures;
	m->t.reward_calculation = rl_now() - t1;

	t1 = rl_now();
	if (teacher_logprobs(t, &r, err, errlen) || rl_policy_logprobs(t, &r, false, err, errlen))
		goto out;
	m->t.policy_and_reference_logprobs = rl_now() - t1;
	rl_step_rollout_stats(&r, m);
	m->distill = true;
	m->reverse_kl = reverse_kl(&r);

	if (rl_step_train_and_refit(t, &r, step, t0, m, err, errlen))
		goto out;
	rc = 0;
out:
	rl_rollout_free(&r);
	return rc;
}

static double distill_loss(const struct rl_trainer *t, const struct rl_loss_batch *b,
                           const struct rl_loss_norm *norm, float *dcurr, struct rl_loss_stats *acc)
{
	const struct distill *d = t->algo_state;

	return rl_distill_loss_compute(&d->loss, b, norm, dcurr, acc);
}

const struct rl_trainer_algo rl_trainer_algo_distill = {
    .name = "distillation",
    .setup = distill_setup,
    .free = distill_free,
    .step = distill_step,
    /* the student's reward on the validation prompts, as GRPO's */
    .validate = rl_trainer_validate,
    .loss = distill_loss,
};
