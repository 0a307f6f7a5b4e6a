#define _GNU_SOURCE
/* One GRPO step, in NeMo-RL's order: prompts, generation, rewards,
 * advantages, logprobs of the policy and of the reference, training, refit,
 * and what the step reports. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/generate/generate.h"
#include "runtime/base/rng.h"
#include "runtime/model/kv_cache.h"
#include "runtime/grpo/advantage.h"
#include "runtime/grpo/remote.h"
#include "runtime/grpo/share.h"
#include "runtime/grpo/trainer.h"

uint64_t rl_step_seed(uint64_t seed, int64_t step)
{
	uint64_t state = seed ^ 0x73616d706c696e67ull;

	state += (uint64_t)step * 0x9e3779b97f4a7c15ull;
	return rl_rng_splitmix64(&state);
}

/* Tokenizes the prompts of r; a prompt longer than the input limit is cut
 * and its samples are kept out of the loss, as NeMo-RL does. */
static int encode_prompts(struct rl_trainer *t, struct rl_rollout *r, int32_t **ids, int *lens,
                          int64_t *truncated, char *err, size_t errlen)
{
	const struct rl_config *c = t->cfg;
	/* resolved by the config: max_total_sequence_length when null */
	int64_t limit = c->data.max_input_seq_length.value;

	/* at least one token must be left to generate */
	if (limit > c->policy.max_total_sequence_length - 1)
		limit = c->policy.max_total_sequence_length - 1;
	for (int g = 0; g < r->n_groups; g++) {
		size_t n;

		if (rl_tokenizer_encode(t->tok, r->prompts[g], strlen(r->prompts[g]), true, &ids[g],
		                        &n, err, errlen))
			return -1;
		if (n == 0) {
			snprintf(err, errlen, "problem %d of the step encodes to no tokens", g);
			return -1;
		}
		if ((int64_t)n > limit) {
			n = (size_t)limit;
			(*truncated)++;
			for (int i = 0; i < r->group_size; i++)
				r->s[g * r->group_size + i].loss_mult = 0;
		}
		lens[g] = (int)n;
	}
	return 0;
}

static int take_output(struct rl_sample *s, const int32_t *prompt, int prompt_len,
                       struct rl_gen_output *o)
{
	s->prompt_len = prompt_len;
	s->len = prompt_len + (int)o->n_tokens;
	s->ids = malloc((size_t)s->len * sizeof *s->ids);
	s->prev_lp = calloc(o->n_tokens + 1, sizeof *s->prev_lp);
	s->ref_lp = calloc(o->n_tokens + 1, sizeof *s->ref_lp);
	if (!s->ids || !s->prev_lp || !s->ref_lp)
		return -1;
	memcpy(s->ids, prompt, (size_t)prompt_len * sizeof *s->ids);
	memcpy(s->ids + prompt_len, o->tokens, o->n_tokens * sizeof *s->ids);
	s->gen_lp = o->logprobs;
	o->logprobs = NULL;
	s->response = o->text;
	o->text = NULL;
	s->truncated = o->reason == RL_STOP_MAX_TOKENS;
	return 0;
}

/* The samples [*lo, *hi) this rank scores. A data-parallel rank's share
 * is on every rank of its model replica (tensor, context and pipeline
 * ranks alike), which split it: each sample is scored once in the run.
 * Scored on each of them, a sample could get two rewards (a program that
 * times out, or is killed, on one rank only) and the replica's ranks would
 * train on different advantages. */
static void scoring_range(const struct rl_trainer *t, int n, int *lo, int *hi)
{
	int share_lo, share_hi;

	rl_share_range(t->dp, n, &share_lo, &share_hi);
	if (!t->dist) {
		*lo = share_lo;
		*hi = share_hi;
		return;
	}
	const int *size = t->dist->layout.size, *at = t->dist->coords.rank;
	int replica = size[RL_AXIS_TP] * size[RL_AXIS_CP] * size[RL_AXIS_PP];
	int me = (at[RL_AXIS_PP] * size[RL_AXIS_CP] + at[RL_AXIS_CP]) * size[RL_AXIS_TP] +
	         at[RL_AXIS_TP];

	rl_share_split(share_lo, share_hi, me, replica, lo, hi);
}

int rl_rollout_score(struct rl_trainer *t, struct rl_rollout *r, int64_t *reward_failures,
                     char *err, size_t errlen)
{
	struct rl_comm *world = t->dist ? t->dist->g[RL_G_WORLD] : NULL;
	struct rl_rollout part = *r;
	int64_t failures = 0;
	int lo, hi;

	scoring_range(t, r->n, &lo, &hi);
	part.s = r->s + lo;
	part.n = hi - lo;
	if (part.n > 0 && rl_rewards_score(&t->reward, &part, &failures, err, errlen))
		return -1;
	/* generated elsewhere, every sample is already on every rank */
	if (!t->remote_generation &&
	    rl_share_samples(t->dp, r, (int)t->cfg->policy.max_total_sequence_length, err, errlen))
		return -1;
	if (rl_share_rewards(world, r, lo, hi, err, errlen))
		return -1;
	double sum = (double)failures;
	rl_share_sum(world, &sum, 1, "reward failures");
	*reward_failures += (int64_t)sum;
	return 0;
}

int rl_rollout_generate(struct rl_trainer *t, struct rl_rollout *r, uint64_t seed,
                        int64_t *prompts_truncated, char *err, size_t errlen)
{
	const struct rl_config *c = t->cfg;
	int32_t **ids = calloc((size_t)r->n_groups, sizeof *ids);
	int *lens = calloc((size_t)r->n_groups, sizeof *lens);
	const int32_t **seq_prompt = calloc((size_t)r->n, sizeof *seq_prompt);
	int *seq_len = calloc((size_t)r->n, sizeof *seq_len);
	struct rl_gen_output *out = calloc((size_t)r->n, sizeof *out);
	int rc = -1, longest = 0, lo, hi;

	if (t->remote_generation) {
		rc = rl_remote_generate(t, r, seed, prompts_truncated, err, errlen);
		goto done;
	}
	rl_share_range(t->dp, r->n, &lo, &hi);
	if (!ids || !lens || !seq_prompt || !seq_len || !out) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	if (encode_prompts(t, r, ids, lens, prompts_truncated, err, errlen))
		goto done;
	for (int i = 0; i < r->n; i++) {
		seq_prompt[i] = ids[r->s[i].group];
		seq_len[i] = lens[r->s[i].group];
		if (seq_len[i] > longest)
			longest = seq_len[i];
	}
	int64_t budget = c->policy.max_total_sequence_length - longest;
	if (c->policy.generation.max_new_tokens.value < budget)
		budget = c->policy.generation.max_new_tokens.value;
	struct rl_gen_params p = {
	    .sampling = {(float)c->policy.generation.temperature,
	                 c->policy.generation.top_k.set ? (int)c->policy.generation.top_k.value
	                                                : -1,
	                 (float)c->policy.generation.top_p},
	    .stop = {.eos_ids = t->stop_ids,
	             .n_eos_ids = t->n_eos_ids,
	             .stop_token_ids = t->stop_ids + t->n_eos_ids,
	             .n_stop_token_ids = t->n_stop_ids - t->n_eos_ids,
	             .stop_strings = (const char *const *)c->policy.generation.stop_strings.v,
	             .n_stop_strings = c->policy.generation.stop_strings.n,
	             .max_new_tokens = (size_t)budget},
	    .seed = seed,
	};
	int chunk = (int)c->policy.generation_batch_size;
	for (int start = lo; start < hi; start += chunk) {
		int n = hi - start < chunk ? hi - start : chunk;

		p.stream_base = (uint64_t)start;
		if (rl_generate(t->model, t->tok, n, seq_prompt + start, seq_len + start, &p,
		                out + start, err, errlen))
			goto done;
	}
	/* under expert parallelism, the ranks of ep that are done serve the
	 * others' experts until every one is */
	if (rl_model_decode_drain(t->model, err, errlen))
		goto done;
	for (int i = lo; i < hi; i++) {
		if (take_output(&r->s[i], seq_prompt[i], seq_len[i], &out[i])) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		if (c->grpo.overlong_filtering && r->s[i].truncated)
			r->s[i].loss_mult = 0;
	}
	rc = 0;
done:
	if (out)
		rl_gen_outputs_free(out, r->n);
	for (int g = 0; ids && g < r->n_groups; g++)
		free(ids[g]);
	free(ids);
	free(lens);
	free(seq_prompt);
	free(seq_len);
	free(out);
	return rc;
}

static void rollout_stats(const struct rl_rollout *r, struct rl_step_metrics *m)
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

static int set_advantages(const struct rl_trainer *t, struct rl_rollout *r)
{
	double *rewards = malloc((size_t)r->n * sizeof *rewards);
	double *adv = malloc((size_t)r->n * sizeof *adv);

	if (!rewards || !adv) {
		free(rewards);
		free(adv);
		return -1;
	}
	for (int i = 0; i < r->n; i++)
		rewards[i] = r->s[i].reward;
	rl_grpo_advantages(rewards, r->n_groups, r->group_size,
	                   t->cfg->grpo.use_leave_one_out_baseline, t->cfg->grpo.normalize_rewards,
	                   &t->cfg->grpo.advantage_clip_low, &t->cfg->grpo.advantage_clip_high, adv,
	                   NULL, NULL);
	for (int i = 0; i < r->n; i++)
		r->s[i].advantage = adv[i];
	free(rewards);
	free(adv);
	return 0;
}

int rl_trainer_next_prompts(struct rl_trainer *t, struct rl_rollout *r, char *err, size_t errlen)
{
	if (rl_rollout_alloc(r, (int)t->cfg->grpo.num_prompts_per_step,
	                     (int)t->cfg->grpo.num_generations_per_prompt)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int got = rl_data_source_next(&t->data, r->n_groups, r->problems, r->answers, r->prompts,
	                              err, errlen);
	return got < 0 ? -1 : got == 0 ? 1 : 0;
}

int rl_trainer_step(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                    size_t errlen)
{
	struct rl_rollout r = {0};
	double t0 = rl_now(), t1;
	int rc = -1;

	m->step = step;
	if (t->cfg->grpo.async_grpo.enabled) {
		int got = rl_async_rollout(t, step, &r, m, err, errlen);

		if (got) {
			rc = got;
			goto out;
		}
		t1 = rl_now();
	} else {
		int got = rl_trainer_next_prompts(t, &r, err, errlen);

		if (got) {
			rc = got;
			goto out;
		}
		if (rl_rollout_generate(t, &r, rl_step_seed((uint64_t)t->cfg->grpo.seed, step),
		                        &m->prompts_truncated, err, errlen))
			goto out;
		t1 = rl_now();
		m->t.generation = t1 - t0;
	}

	int64_t failures = 0;
	if (rl_rollout_score(t, &r, &failures, err, errlen))
		goto out;
	m->reward_failures = failures;
	if (set_advantages(t, &r)) {
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
	rollout_stats(&r, m);

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
	if (t->remote_generation && rl_remote_refit(t, err, errlen))
		goto out;
	t->refit_step = step;
	m->t.refit = rl_now() - t1;
	m->t.total_step_time = rl_now() - t0;
	m->tokens_per_sec = m->t.total_step_time > 0 ? (double)m->tokens / m->t.total_step_time : 0;
	rc = 0;
out:
	rl_rollout_free(&r);
	return rc;
}
