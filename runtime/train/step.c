#define _GNU_SOURCE
/* One GRPO step, in NeMo-RL's order: the rollout (prompts and
 * generation, from the rollout source), rewards, advantages, logprobs of
 * the policy and of the reference, training, refit, and what the step
 * reports. What makes it GRPO is here and in grpo/; the passes over the
 * policy are any algorithm's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/grpo/advantage.h"
#include "runtime/grpo/dynamic_sampling.h"
#include "runtime/grpo/reward_shaping.h"
#include "runtime/rollout/episodes.h"
#include "runtime/rollout/share.h"
#include "runtime/train/policy_pass.h"
#include "runtime/train/score.h"
#include "runtime/train/step.h"
#include "runtime/train/train.h"
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
		/* an episode's generated tokens are the model's own (NeMo-RL's
		 * mean_gen_tokens_per_sample); its observations were never
		 * sampled, so generation has no logprob of them to compare */
		resp += rl_sample_loss_tokens(s);
		tokens += s->len;
		truncated += s->truncated;
		for (int j = 0; j < n; j++) {
			if (s->loss_mask && !s->loss_mask[s->prompt_len + j])
				continue;
			double d = fabs((double)s->gen_lp[j] - (double)s->prev_lp[j]);
			err_sum += exp(d);
			max_diff = d > max_diff ? d : max_diff;
			n_tok++;
		}
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

/* A multi-turn step's episodes (every round's), summed over the
 * data-parallel shares, as NeMo-RL's rollout metrics. */
static void episode_metrics(struct rl_trainer *t, struct rl_step_metrics *m)
{
	struct rl_episode_stats st;

	if (!t->episodes)
		return;
	rl_episodes_take_stats(t->episodes, &st);
	double sums[8] = {(double)st.episodes,     (double)st.turns,
	                  (double)st.natural,      (double)st.max_turns_reached,
	                  (double)st.failed,       (double)st.env_tokens,
	                  (double)st.total_tokens, 0};
	double maxima[2] = {(double)st.max_turns, (double)st.max_gen_tokens};
	rl_share_sum(t->dp, sums, 8, "episode metrics");
	if (t->dp && rl_comm_size(t->dp) > 1)
		rl_comm_all_reduce(t->dp, maxima, 2, RL_COMM_F64, RL_COMM_MAX, "episode maxima");
	double n = sums[0] > 0 ? sums[0] : 1;
	m->multi_turn = true;
	m->avg_turns_per_sample = sums[1] / n;
	m->natural_termination_rate = sums[2] / n;
	m->max_turns_reached_rate = sums[3] / n;
	m->env_failures = (int64_t)sums[4];
	m->mean_env_tokens_per_sample = sums[5] / n;
	m->mean_total_tokens_per_sample = sums[6] / n;
	m->max_turns_per_sample = (int64_t)maxima[0];
	m->max_gen_tokens_per_sample = (int64_t)maxima[1];
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

/* A round's samples scored, and their rewards scaled and shaped (judge,
 * when not NULL, gets them before the shaping). */
static int score_round(struct rl_trainer *t, struct rl_rollout *r, double *judge,
                       struct rl_step_metrics *m, char *err, size_t errlen)
{
	int64_t failures = 0;
	int scored = rl_trainer_score(t, r, &failures, err, errlen);

	if (scored)
		return scored;
	m->reward_failures += failures;
	rl_grpo_shape_rewards(r, &t->cfg->grpo, judge);
	return 0;
}

/* DAPO's dynamic sampling: rounds of int(batch_multiplier x
 * num_prompts_per_step) prompts, the data's next each time, until the
 * step has num_prompts_per_step groups whose rewards are not all equal;
 * those groups, in the order generated, are the step's rollout r. Every
 * rank has every reward, so every rank takes the same rounds. */
static int dynamic_rollout(struct rl_trainer *t, int64_t step, struct rl_rollout *r,
                           struct rl_rollout_report *rep, struct rl_step_metrics *m, char *err,
                           size_t errlen)
{
	const struct rl_cfg_grpo *g = &t->cfg->grpo;
	/* NeMo-RL's int(num_prompts_per_step * batch_multiplier) */
	int per_round = (int)((double)g->num_prompts_per_step * g->batch_multiplier);
	struct rl_ds_batch b;
	double *judge = NULL;
	int rc = -1;

	if (rl_ds_begin(&b, (int)g->num_prompts_per_step, (int)g->num_generations_per_prompt) ||
	    !(judge = calloc((size_t)per_round * (size_t)g->num_generations_per_prompt + 1,
	                     sizeof *judge))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int round = 0; round < g->dynamic_sampling_max_gen_batches && !rl_ds_full(&b);
	     round++) {
		struct rl_rollout one = {0};
		int got = rl_rollout_next_round(&t->rollouts, step, round, per_round, &one, rep,
		                                err, errlen);
		if (got) {
			rc = got;
			goto out;
		}
		double t1 = rl_now();
		got = score_round(t, &one, judge, m, err, errlen);
		if (!got)
			rl_ds_take(&b, &one, judge);
		rl_rollout_free(&one);
		m->t.reward_calculation += rl_now() - t1;
		if (got) {
			rc = got;
			goto out;
		}
	}
	if (!rl_ds_full(&b)) {
		/* every rank saw the same rewards: every rank stops here alike */
		if (rl_trainer_rank(t) == 0)
			snprintf(
			    err, errlen,
			    "step %lld: dynamic sampling found %d of the %lld prompt groups it "
			    "needs whose rewards are not all equal after "
			    "grpo.dynamic_sampling_max_gen_batches=%lld rounds of %d prompts (%lld "
			    "groups dropped); raise grpo.batch_multiplier or "
			    "grpo.dynamic_sampling_max_gen_batches, or "
			    "grpo.num_generations_per_prompt "
			    "for more diverse groups, or use easier or harder data",
			    (long long)step, b.filled, (long long)g->num_prompts_per_step,
			    (long long)g->dynamic_sampling_max_gen_batches, per_round,
			    (long long)b.dropped_groups);
		else
			err[0] = '\0';
		rc = RL_TRAIN_AGREED_FAILURE;
		goto out;
	}
	m->dynamic_sampling = true;
	m->ds_num_gen_batches = b.rounds;
	m->ds_discarded_valid_samples = b.discarded_valid_samples;
	m->ds_dropped_groups = b.dropped_groups;
	/* the reward of every sample generated (NeMo-RL's train/reward is the
	 * last round's): what the policy earns, where filtered_reward is that
	 * of the groups trained on */
	m->ds_reward_mean = b.reward_sum / (double)b.n_generated;
	double var = b.reward_sq / (double)b.n_generated - m->ds_reward_mean * m->ds_reward_mean;
	m->ds_reward_std = var > 0 ? sqrt(var) : 0;
	*r = b.r;
	memset(&b.r, 0, sizeof b.r);
	rc = 0;
out:
	rl_ds_free(&b);
	free(judge);
	return rc;
}

/* The step's rollout, scored, its rewards scaled and shaped: one round,
 * or dynamic sampling's. */
static int step_rollout(struct rl_trainer *t, int64_t step, struct rl_rollout *r,
                        struct rl_rollout_report *rep, struct rl_step_metrics *m, char *err,
                        size_t errlen)
{
	if (t->cfg->grpo.use_dynamic_sampling)
		return dynamic_rollout(t, step, r, rep, m, err, errlen);
	int got = rl_rollout_next(&t->rollouts, step, r, rep, err, errlen);
	if (got)
		return got;
	double t1 = rl_now();
	got = score_round(t, r, NULL, m, err, errlen);
	m->t.reward_calculation += rl_now() - t1;
	return got;
}

int rl_trainer_step(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                    size_t errlen)
{
	struct rl_rollout r = {0};
	struct rl_rollout_report rep = {0};
	double t0 = rl_now(), t1;
	int rc = -1, got;

	m->step = step;
	m->reward_failures = 0;
	m->t.reward_calculation = 0;
	/* the episodes of a validation since the last step are not this
	 * step's */
	struct rl_episode_stats before;
	rl_episodes_take_stats(t->episodes, &before);
	if ((got = step_rollout(t, step, &r, &rep, m, err, errlen))) {
		rc = got;
		goto out;
	}
	rl_step_take_report(&rep, m);
	episode_metrics(t, m);

	t1 = rl_now();
	if (rl_grpo_rollout_advantages(&r, &t->cfg->grpo)) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	m->t.reward_calculation += rl_now() - t1;

	t1 = rl_now();
	if (rl_policy_logprobs(t, &r, false, err, errlen) ||
	    (t->cfg->loss_fn.reference_policy_kl_penalty != 0 &&
	     rl_policy_logprobs(t, &r, true, err, errlen)))
		goto out;
	m->t.policy_and_reference_logprobs = rl_now() - t1;
	rl_step_rollout_stats(&r, m);
	if (m->dynamic_sampling) {
		/* rl_step_rollout_stats saw the groups trained on only */
		m->filtered_reward = m->reward_mean;
		m->reward_mean = m->ds_reward_mean;
		m->reward_std = m->ds_reward_std;
	}

	if (rl_step_train_and_refit(t, &r, step, t0, m, err, errlen))
		goto out;
	rc = 0;
out:
	rl_rollout_free(&r);
	return rc;
}

int rl_step_train_and_refit(struct rl_trainer *t, struct rl_rollout *r, int64_t step, double t0,
                            struct rl_step_metrics *m, char *err, size_t errlen)
{
	double t1 = rl_now();

	if (rl_policy_train(t, r, m, err, errlen))
		return -1;
	m->t.policy_training = rl_now() - t1;

	/* Refit: colocated, generation runs on the very weights just
	 * trained and the hand-over is nothing; it is timed all the same, so
	 * the table keeps NeMo-RL's columns. Non-colocated, the weights go
	 * to the generation ranks (asynchronous: from a copy, taken when
	 * they are done with the rollouts asked for before). */
	t1 = rl_now();
	if (rl_rollout_refit(&t->rollouts, step, err, errlen))
		return -1;
	m->t.refit = rl_now() - t1;
	m->t.total_step_time = rl_now() - t0;
	m->tokens_per_sec = m->t.total_step_time > 0 ? (double)m->tokens / m->t.total_step_time : 0;
	return 0;
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
