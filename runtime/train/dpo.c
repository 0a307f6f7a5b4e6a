#define _GNU_SOURCE
/* Direct preference optimisation (rlrun dpo) on the trainer every algorithm
 * shares: a step takes train_global_batch_size preference pairs from the
 * data source (epochs, shuffling and the checkpointed position are the
 * source's), tokenizes each pair into two sequences (the prompt as GRPO's
 * prompts are rendered and encoded, then the response and EOS), runs the
 * reference policy's logprobs and one gradient pass of DPO's loss
 * (algo/dpo_loss.c), whose micro-batches keep a pair's two sequences
 * together (unit 2), and one optimizer update. Validation is the same loss
 * over the validation pairs, without a gradient. No generation, no reward.
 * What NeMo-RL reports (loss, sft_loss, preference_loss, accuracy,
 * rewards_chosen_mean, rewards_rejected_mean) goes into the step's line,
 * with rewards_margin_mean and the pairs counted (num_valid_samples); the
 * line has no reward (metrics.c's preference line). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/algo/dpo_loss.h"
#include "runtime/base/clock.h"
#include "runtime/rollout/share.h"
#include "runtime/train/policy_pass.h"
#include "runtime/train/trainer.h"
#include "runtime/train/update.h"

struct dpo_state {
	struct rl_dpo_loss loss;
	struct rl_dpo_stats acc; /* the gradient pass's, summed by the loss hook */
};

static int dpo_setup(struct rl_trainer *t, char *err, size_t errlen)
{
	const struct rl_cfg_dpo *c = &t->cfg->dpo;
	struct dpo_state *st = calloc(1, sizeof *st);

	if (!st) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	st->loss = (struct rl_dpo_loss){
	    .beta = c->reference_policy_kl_penalty,
	    .preference_loss_weight = c->preference_loss_weight,
	    .sft_loss_weight = c->sft_loss_weight,
	    .preference_average_log_probs = c->preference_average_log_probs,
	    .sft_average_log_probs = c->sft_average_log_probs,
	};
	t->algo_state = st;
	t->reward.name = "none (preference pairs)";
	/* as NeMo-RL asserts: no validation pairs, no validation */
	if ((t->cfg->grpo.val_period > 0 || t->cfg->grpo.val_at_start) && !t->data.has_val) {
		snprintf(err, errlen,
		         "dpo.val_period %lld%s: validation needs validation pairs "
		         "(data.validation.data_path); or set val_period to 0 and val_at_start "
		         "to false",
		         (long long)t->cfg->grpo.val_period,
		         t->cfg->grpo.val_at_start ? ", val_at_start true" : "");
		return -1;
	}
	if (t->gen.n_eos_ids == 0) {
		snprintf(err, errlen,
		         "dpo: the model names no EOS token, which ends each response of a pair");
		return -1;
	}
	return 0;
}

static void dpo_free(struct rl_trainer *t)
{
	free(t->algo_state);
	t->algo_state = NULL;
}

/* The loss hook: DPO's loss on a micro-batch of whole pairs; the step's
 * valid pairs are half its valid sequences (both of a pair share a
 * sample mask). */
static double dpo_loss(const struct rl_trainer *t, const struct rl_loss_batch *b,
                       const struct rl_loss_norm *norm, float *dcurr, struct rl_loss_stats *acc)
{
	struct dpo_state *st = t->algo_state;
	double v = rl_dpo_loss_compute(&st->loss, b, norm->valid_seqs / 2, dcurr, &st->acc);

	if (acc && !isnan(v))
		acc->loss += v;
	return v;
}

/* One sequence: the prompt's tokens, the response's, EOS. */
static int encode_pair_side(const struct rl_trainer *t, const int32_t *prompt, size_t n_prompt,
                            const char *response, struct rl_sample *s, char *err, size_t errlen)
{
	int32_t *resp = NULL;
	size_t n_resp = 0;

	if (rl_tokenizer_encode(t->tok, response, strlen(response), false, &resp, &n_resp, err,
	                        errlen))
		return -1;
	s->len = (int)(n_prompt + n_resp + 1);
	s->prompt_len = (int)n_prompt;
	s->ids = malloc((size_t)s->len * sizeof *s->ids);
	s->prev_lp = calloc(n_resp + 2, sizeof *s->prev_lp);
	s->ref_lp = calloc(n_resp + 2, sizeof *s->ref_lp);
	if (!s->ids || !s->prev_lp || !s->ref_lp) {
		free(resp);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memcpy(s->ids, prompt, n_prompt * sizeof *s->ids);
	memcpy(s->ids + n_prompt, resp, n_resp * sizeof *s->ids);
	s->ids[s->len - 1] = t->gen.stop_ids[0];
	free(resp);
	return 0;
}

/* Pair j of r (samples 2j chosen, 2j + 1 rejected) from its prompt and
 * example. A pair longer than policy.max_total_sequence_length is kept
 * out of the loss, as NeMo-RL drops it (loss_multiplier 0): both its
 * sequences cut to fit and masked. Returns 1 when it was, 0, or -1. */
static int encode_pair(const struct rl_trainer *t, struct rl_rollout *r, int j,
                       const struct rl_example *ex, char *err, size_t errlen)
{
	int32_t *prompt = NULL;
	size_t n_prompt = 0;
	int max_len = (int)t->cfg->policy.max_total_sequence_length, dropped = 0;

	if (rl_tokenizer_encode(t->tok, r->prompts[j], strlen(r->prompts[j]),
	                        t->gen.add_special_tokens, &prompt, &n_prompt, err, errlen))
		return -1;
	if (n_prompt == 0) {
		free(prompt);
		snprintf(err, errlen, "a preference pair's prompt encodes to no tokens");
		return -1;
	}
	if (encode_pair_side(t, prompt, n_prompt, ex->answer, &r->s[2 * j], err, errlen) ||
	    encode_pair_side(t, prompt, n_prompt, ex->rejected, &r->s[2 * j + 1], err, errlen)) {
		free(prompt);
		return -1;
	}
	free(prompt);
	for (int k = 0; k < 2; k++)
		dropped |= r->s[2 * j + k].len > max_len;
	for (int k = 0; dropped && k < 2; k++) {
		struct rl_sample *s = &r->s[2 * j + k];
		if (s->len > max_len)
			s->len = max_len;
		if (s->prompt_len > s->len)
			s->prompt_len = s->len;
		s->loss_mult = 0;
	}
	return dropped;
}

/* k pairs as a rollout of k groups of 2, taking the prompts (owned). */
static int build_pairs(const struct rl_trainer *t, struct rl_rollout *r, int k,
                       const struct rl_example **ex, char **prompts, int64_t *dropped, char *err,
                       size_t errlen)
{
	if (rl_rollout_alloc(r, k, 2)) {
		for (int j = 0; j < k; j++)
			free(prompts[j]);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int j = 0; j < k; j++)
		r->prompts[j] = prompts[j];
	for (int j = 0; j < k; j++) {
		int got = encode_pair(t, r, j, ex[j], err, errlen);
		if (got < 0)
			return -1;
		*dropped += got;
	}
	return 0;
}

/* A packing budget that cannot take a pair would be found by the
 * planner as a failure of its own; say which key. */
static int check_pairs_fit(const struct rl_trainer *t, const struct rl_rollout *r, char *err,
                           size_t errlen)
{
	const struct rl_cfg_policy *p = &t->cfg->policy;
	int64_t budget = rl_mb_token_budget(p, true, 2);

	for (int j = 0; j < r->n_groups; j++) {
		int64_t len = r->s[2 * j].len + r->s[2 * j + 1].len;
		if (len > budget) {
			snprintf(err, errlen,
			         "a preference pair of %lld tokens does not fit a micro-batch: "
			         "policy.sequence_packing.train_mb_tokens is %lld; DPO needs both "
			         "sequences of a pair in one micro-batch (at least 2 x "
			         "max_total_sequence_length)",
			         (long long)len, (long long)budget);
			return -1;
		}
	}
	return 0;
}

static void put_extra(struct rl_step_metrics *m, const char *name, double v)
{
	if (m->n_extra < RL_MAX_EXTRA_METRICS) {
		m->extra[m->n_extra].name = name;
		m->extra[m->n_extra].v = v;
		m->n_extra++;
	}
}

/* The statistics of every data-parallel rank's share, and of the last
 * pipeline stage (the load-balancing term: of every stage's layers), on
 * every rank. */
static void sum_stats(struct rl_trainer *t, struct rl_dpo_stats *s, double *moe_aux)
{
	double v[] = {s->loss,
	              s->preference_loss,
	              s->sft_loss,
	              s->accuracy,
	              s->rewards_chosen_mean,
	              s->rewards_rejected_mean,
	              s->rewards_margin_mean,
	              s->pairs,
	              *moe_aux};

	rl_share_sum(t->dp, v, (int)(sizeof v / sizeof *v), "DPO statistics");
	rl_share_sum(t->pp, v, (int)(sizeof v / sizeof *v), "DPO statistics from the last stage");
	*s = (struct rl_dpo_stats){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
	*moe_aux = v[8];
}

static void token_stats(const struct rl_rollout *r, struct rl_step_metrics *m)
{
	int64_t tokens = 0;
	double resp = 0;

	for (int i = 0; i < r->n; i++) {
		tokens += r->s[i].len;
		resp += r->s[i].len - r->s[i].prompt_len;
	}
	m->tokens = tokens;
	m->response_tokens_mean = r->n ? resp / r->n : 0;
}

static int dpo_step(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                    size_t errlen)
{
	struct dpo_state *st = t->algo_state;
	int B = (int)t->cfg->policy.train_global_batch_size;
	const struct rl_example **ex = calloc((size_t)B, sizeof *ex);
	char **prompts = calloc((size_t)B, sizeof *prompts);
	int *which = calloc(2 * (size_t)B, sizeof *which);
	struct rl_rollout r = {0};
	double t0 = rl_now(), t1;
	int64_t dropped = 0;
	int rc = -1, got;

	m->step = step;
	if (!ex || !prompts || !which) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	got = rl_data_source_next_examples(&t->data, B, ex, prompts, err, errlen);
	if (got <= 0) {
		for (int j = 0; j < B; j++)
			free(prompts[j]);
		rc = got == 0 ? 1 : -1;
		goto out;
	}
	if (build_pairs(t, &r, B, ex, prompts, &dropped, err, errlen) ||
	    check_pairs_fit(t, &r, err, errlen))
		goto out;
	m->prompts_truncated = dropped;
	token_stats(&r, m);

	t1 = rl_now();
	if (rl_policy_logprobs(t, &r, true, err, errlen))
		goto out;
	m->t.policy_and_reference_logprobs = rl_now() - t1;

	t1 = rl_now();
	for (int i = 0; i < r.n; i++)
		which[i] = i;
	struct rl_loss_stats ls = {0};
	double gn = 0;
	st->acc = (struct rl_dpo_stats){0};
	m->lr = rl_lr_at(&t->lr, t->optimizer_steps);
	if (rl_policy_gradients(t, &r, which, r.n, &ls, err, errlen))
		goto out;
	struct rl_dpo_stats s = st->acc;
	double moe_aux = ls.moe_aux_loss;
	sum_stats(t, &s, &moe_aux);
	m->moe = t->model->cfg.moe.n_experts > 0;
	m->moe_aux_loss = moe_aux;
	if (rl_policy_update(t, s.loss, &gn, err, errlen))
		goto out;
	m->t.policy_training = rl_now() - t1;
	m->grad_norm = gn;
	m->loss = s.loss;
	m->preference = true;
	put_extra(m, "sft_loss", s.sft_loss);
	put_extra(m, "preference_loss", s.preference_loss);
	put_extra(m, "accuracy", s.accuracy);
	put_extra(m, "rewards_chosen_mean", s.rewards_chosen_mean);
	put_extra(m, "rewards_rejected_mean", s.rewards_rejected_mean);
	put_extra(m, "rewards_margin_mean", s.rewards_margin_mean);
	put_extra(m, "num_valid_samples", s.pairs);
	m->t.total_step_time = rl_now() - t0;
	m->tokens_per_sec = m->t.total_step_time > 0 ? (double)m->tokens / m->t.total_step_time : 0;
	rc = 0;
out:
	rl_rollout_free(&r);
	free(ex);
	free(prompts);
	free(which);
	return rc;
}

/* The loss over a batch's pairs on the host, from each sequence's
 * response logprobs (prev_lp: the policy now; ref_lp: the reference), laid
 * out as a micro-batch of response tokens only. */
static int host_loss(const struct dpo_state *st, const struct rl_rollout *r,
                     struct rl_dpo_stats *acc)
{
	int n_tok = 0;

	for (int i = 0; i < r->n; i++)
		n_tok += r->s[i].len - r->s[i].prompt_len;
	float *curr = malloc(((size_t)n_tok + 1) * sizeof *curr);
	float *ref = malloc(((size_t)n_tok + 1) * sizeof *ref);
	uint8_t *mask = malloc((size_t)n_tok + 1);
	int32_t *cu = malloc(((size_t)r->n + 1) * sizeof *cu);
	double *sm = malloc(((size_t)r->n + 1) * sizeof *sm);
	int rc = -1;

	if (!curr || !ref || !mask || !cu || !sm)
		goto out;
	cu[0] = 0;
	for (int i = 0, at = 0; i < r->n; i++) {
		const struct rl_sample *s = &r->s[i];
		int n = s->len - s->prompt_len;
		memcpy(curr + at, s->prev_lp, (size_t)n * sizeof *curr);
		memcpy(ref + at, s->ref_lp, (size_t)n * sizeof *ref);
		memset(mask + at, 1, (size_t)n);
		at += n;
		cu[i + 1] = at;
		sm[i] = s->loss_mult;
	}
	struct rl_loss_batch b = {.n_tokens = n_tok,
	                          .n_seqs = r->n,
	                          .cu_seqlens = cu,
	                          .curr = curr,
	                          .ref = ref,
	                          .token_mask = mask,
	                          .sample_mask = sm};
	/* a denominator of one: the sums, divided by the pairs at the end */
	rc = isnan(rl_dpo_loss_compute(&st->loss, &b, 1, NULL, acc)) ? -1 : 0;
out:
	free(curr);
	free(ref);
	free(mask);
	free(cu);
	free(sm);
	return rc;
}

static int dpo_validate(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                        size_t errlen)
{
	const struct rl_cfg_dpo *c = &t->cfg->dpo;
	const struct dpo_state *st = t->algo_state;
	size_t n = rl_data_source_val_count(&t->data, SIZE_MAX);
	size_t bs = (size_t)c->val_global_batch_size;
	struct rl_dpo_stats acc = {0};
	double t0 = rl_now();

	(void)step;
	if (c->val_batches > 0 && n > (size_t)c->val_batches * bs)
		n = (size_t)c->val_batches * bs;
	if (n == 0)
		return 0;
	for (size_t start = 0; start < n; start += bs) {
		int k = (int)(n - start < bs ? n - start : bs);
		const struct rl_example **ex = calloc((size_t)k, sizeof *ex);
		char **prompts = calloc((size_t)k, sizeof *prompts);
		struct rl_rollout r = {0};
		int64_t dropped = 0;
		int rc = -1;

		if (!ex || !prompts) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		for (int j = 0; j < k; j++)
			if (rl_data_source_val_example(&t->data, start + (size_t)j, &ex[j],
			                               &prompts[j], err, errlen)) {
				for (int i = 0; i < j; i++)
					free(prompts[i]);
				goto done;
			}
		if (build_pairs(t, &r, k, ex, prompts, &dropped, err, errlen) ||
		    rl_policy_logprobs(t, &r, false, err, errlen) ||
		    rl_policy_logprobs(t, &r, true, err, errlen))
			goto done;
		if (host_loss(st, &r, &acc)) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		rc = 0;
	done:
		rl_rollout_free(&r);
		free(ex);
		free(prompts);
		if (rc)
			return -1;
	}
	double p = acc.pairs > 0 ? acc.pairs : 1;
	m->has_val = true;
	m->preference = true;
	put_extra(m, "val_loss", acc.loss / p);
	put_extra(m, "val_sft_loss", acc.sft_loss / p);
	put_extra(m, "val_preference_loss", acc.preference_loss / p);
	put_extra(m, "val_accuracy", acc.accuracy / p);
	put_extra(m, "val_rewards_chosen_mean", acc.rewards_chosen_mean / p);
	put_extra(m, "val_rewards_rejected_mean", acc.rewards_rejected_mean / p);
	put_extra(m, "val_rewards_margin_mean", acc.rewards_margin_mean / p);
	m->t.validation = rl_now() - t0;
	return 0;
}

const struct rl_trainer_algo rl_trainer_algo_dpo = {
    .name = "DPO",
    .setup = dpo_setup,
    .free = dpo_free,
    .step = dpo_step,
    .validate = dpo_validate,
    .loss = dpo_loss,
    .unit = 2,
};
