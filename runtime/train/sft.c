#define _GNU_SOURCE
/* Supervised fine-tuning on the trainer every algorithm shares, as
 * NeMo-RL's sft.py runs it: each step takes policy.train_global_batch_size
 * examples of the data set in the data's order (epochs, shuffling and the
 * checkpointed position are GRPO's, rl_data_source), makes them samples
 * (data/sft_example.c: the prompt rendered as GRPO's, the answer, the
 * loss mask), and takes one optimizer update on NeMo-RL's NLLLossFn
 * (algo/sft_loss.c) through the passes and the update GRPO uses. Nothing is
 * generated, scored or compared with a reference. Validation is the same
 * loss over the validation set, forward only. */
#include <stdlib.h>
#include <string.h>

#include "runtime/algo/sft_loss.h"
#include "runtime/base/clock.h"
#include "runtime/chat/chat_template.h"
#include "runtime/data/sft_example.h"
#include "runtime/train/policy_pass.h"
#include "runtime/train/update.h"

struct sft_state {
	struct rl_sft_format fmt;
	struct rl_chat_template *passthrough; /* a conversation's, without a chat template */
};

/* The id of the chat template's special token NAME; -1 when it has none
 * or the tokenizer does not know it */
static int32_t special_id(const struct rl_trainer *t, const char *name)
{
	const char *text = rl_chat_template_special(t->data.prompt.chat, name);

	return text ? rl_tokenizer_token_to_id(t->tok, text) : -1;
}

static int sft_setup(struct rl_trainer *t, char *err, size_t errlen)
{
	const struct rl_config *c = t->cfg;
	const struct rl_model_config *mc = &t->model->cfg;
	struct sft_state *st = calloc(1, sizeof *st);

	if (!st) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	t->algo_state = st;
	if (!t->data.prompt.chat &&
	    rl_chat_template_from_text(&st->passthrough, RL_CHAT_PASSTHROUGH, "passthrough", NULL,
	                               err, errlen))
		return -1;
	/* NeMo-RL's sft_processor is given data.max_input_seq_length (the
	 * whole sequence's limit, max_total_sequence_length by default) */
	int64_t max_len = c->policy.max_total_sequence_length;
	if (c->data.max_input_seq_length.set && c->data.max_input_seq_length.value < max_len)
		max_len = c->data.max_input_seq_length.value;
	/* NeMo-RL adds the tokenizer's bos_token and eos_token: those of its
	 * tokenizer_config.json where the chat template read them (Llama 3.1
	 * Instruct's eos_token is <|eot_id|>, its config's first eos id
	 * <|end_of_text|>), else the model config's */
	int32_t bos = mc->bos_token_id, eos = mc->n_eos > 0 ? mc->eos_token_ids[0] : -1;
	if (t->data.prompt.chat && special_id(t, "eos_token") >= 0) {
		/* the tokenizer's map is known: no bos_token there is none
		 * (Qwen2.5's, whose config.json names one all the same) */
		bos = special_id(t, "bos_token");
		eos = special_id(t, "eos_token");
	}
	st->fmt = (struct rl_sft_format){
	    .prompt = &t->data.prompt,
	    .chat = t->data.prompt.chat ? t->data.prompt.chat : st->passthrough,
	    .tok = t->tok,
	    .bos_id = bos,
	    .eos_id = eos,
	    .add_bos = c->data.add_bos,
	    .add_eos = c->data.add_eos,
	    .add_generation_prompt = c->data.add_generation_prompt,
	    .only_unmask_final = c->sft.only_unmask_final,
	    .train_on_inputs = c->sft.train_on_inputs,
	    .max_len = max_len,
	};
	return 0;
}

static void sft_free(struct rl_trainer *t)
{
	struct sft_state *st = t->algo_state;

	if (st)
		rl_chat_template_free(st->passthrough);
	free(st);
	t->algo_state = NULL;
}

/* Examples idx[0..n) of ds (which: the config key that names it) as the
 * samples of r: no generation, so prompt_len is where the first token the
 * loss counts sits, and prev_lp has room for the validation's logprobs. */
static int make_samples(struct rl_trainer *t, const struct rl_dataset *ds, const char *which,
                        const size_t *idx, int n, struct rl_rollout *r, char *err, size_t errlen)
{
	const struct sft_state *st = t->algo_state;

	if (rl_rollout_alloc(r, n, 1)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct rl_sample *s = &r->s[i];
		struct rl_sft_tokens tk;
		char why[1024];

		if (rl_sft_encode(&st->fmt, &ds->ex[idx[i]], &tk, why, sizeof why)) {
			snprintf(err, errlen, "%s: %s: example %zu: %s", which, ds->path,
			         idx[i] + 1, why);
			return -1;
		}
		s->ids = tk.ids;
		s->loss_mask = tk.mask;
		s->len = tk.len;
		s->prompt_len = tk.len;
		for (int k = 0; k < tk.len; k++)
			if (tk.mask[k]) {
				s->prompt_len = k;
				break;
			}
		s->loss_mult = tk.overlong ? 0.0 : 1.0;
		s->truncated = tk.overlong;
		if (!(s->prev_lp =
		          calloc((size_t)(s->len - s->prompt_len) + 1, sizeof *s->prev_lp))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	return 0;
}

/* The validation loss: the mean negative log-likelihood of every counted
 * token of the validation batches (val_batches of val_global_batch_size
 * examples, in the file's order), each token weighing the same, as
 * NeMo-RL's validate() weighs its batches' losses by their tokens. */
static int sft_validate(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                        size_t errlen)
{
	const struct rl_config *c = t->cfg;
	const struct rl_dataset *val = &t->data.val;
	size_t B = (size_t)c->sft.val_global_batch_size;
	double t0 = rl_now(), sum = 0, count = 0;

	(void)step;
	if (!t->data.has_val)
		return 0; /* NeMo-RL: no validation set, no validation */
	size_t batches = (val->n + B - 1) / B;
	if (c->sft.val_batches > 0 && (size_t)c->sft.val_batches < batches)
		batches = (size_t)c->sft.val_batches;
	size_t *idx = malloc(B * sizeof *idx);
	if (!idx) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t b = 0; b < batches; b++) {
		struct rl_rollout r;
		size_t start = b * B, k = val->n - start < B ? val->n - start : B;
		int rc;

		for (size_t i = 0; i < k; i++)
			idx[i] = start + i;
		rc = make_samples(t, val, "data.validation.path", idx, (int)k, &r, err, errlen) ||
		     rl_policy_logprobs(t, &r, false, err, errlen);
		for (int i = 0; rc == 0 && i < r.n; i++) {
			const struct rl_sample *s = &r.s[i];

			for (int j = s->prompt_len; j < s->len; j++)
				if (s->loss_mask[j]) {
					sum -= s->loss_mult * (double)s->prev_lp[j - s->prompt_len];
					count += s->loss_mult;
				}
		}
		rl_rollout_free(&r);
		if (rc) {
			free(idx);
			return -1;
		}
	}
	free(idx);
	m->supervised = true;
	m->has_val = true;
	m->val_loss = count > 0 ? sum / count : 0.0;
	m->t.validation = rl_now() - t0;
	return 0;
}

static int sft_step(struct rl_trainer *t, int64_t step, struct rl_step_metrics *m, char *err,
                    size_t errlen)
{
	const struct rl_config *c = t->cfg;
	struct rl_rollout r = {0};
	const size_t *idx;
	double t0 = rl_now(), t1;
	int rc = -1;

	m->step = step;
	m->supervised = true;
	if (!rl_data_source_next_indices(&t->data, &idx))
		return 1;
	bool last = step == c->grpo.max_num_steps || rl_data_source_last_batch(&t->data);
	if (make_samples(t, &t->data.train, "data.train.path", idx,
	                 (int)c->policy.train_global_batch_size, &r, err, errlen))
		goto out;
	for (int i = 0; i < r.n; i++) {
		m->tokens += r.s[i].len;
		m->valid_tokens += (int64_t)r.s[i].loss_mult * rl_sample_loss_tokens(&r.s[i]);
	}
	m->t.data_processing = rl_now() - t0;

	t1 = rl_now();
	if (rl_policy_train(t, &r, m, err, errlen))
		goto out;
	m->t.policy_training = rl_now() - t1;
	/* sft.val_at_end: the last step's validation, unless val_period has
	 * it validated already */
	bool periodic = c->grpo.val_period > 0 && step % c->grpo.val_period == 0;
	if (c->sft.val_at_end && last && !periodic && sft_validate(t, step, m, err, errlen))
		goto out;
	m->t.total_step_time = rl_now() - t0;
	m->tokens_per_sec = m->t.total_step_time > 0 ? (double)m->tokens / m->t.total_step_time : 0;
	rc = 0;
out:
	rl_rollout_free(&r);
	return rc;
}

static double sft_loss(const struct rl_trainer *t, const struct rl_loss_batch *b,
                       const struct rl_loss_norm *norm, float *dcurr, struct rl_loss_stats *acc)
{
	(void)t;
	return rl_sft_loss_compute(b, norm, dcurr, acc);
}

const struct rl_trainer_algo rl_trainer_algo_sft = {
    .name = "SFT",
    .setup = sft_setup,
    .free = sft_free,
    .step = sft_step,
    .validate = sft_validate,
    .loss = sft_loss,
};
