/* rl_generate: the engine (engine.c) run to the end over a batch of
 * prompts, each sequence over at its first turn's end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/generate/engine.h"

static int check_params(const struct rl_model *m, const struct rl_tokenizer *tok, int n,
                        const int *lens, const struct rl_gen_params *p, int *longest, char *err,
                        size_t errlen)
{
	if (n <= 0) {
		snprintf(err, errlen, "no prompts");
		return -1;
	}
	if (rl_gen_engine_check_params(tok, p, true, err, errlen))
		return -1;
	*longest = 0;
	for (int s = 0; s < n; s++) {
		if (lens[s] <= 0) {
			snprintf(err, errlen, "prompt %d is empty", s);
			return -1;
		}
		if (lens[s] > *longest)
			*longest = lens[s];
	}
	if ((size_t)*longest + p->stop.max_new_tokens > (size_t)m->cfg.max_position_embeddings) {
		snprintf(err, errlen,
		         "prompt (%d tokens) plus max_new_tokens (%zu) exceeds the model's "
		         "max_position_embeddings (%d)",
		         *longest, p->stop.max_new_tokens, m->cfg.max_position_embeddings);
		return -1;
	}
	return 0;
}

int rl_generate(struct rl_model *m, const struct rl_tokenizer *tok, int n_prompts,
                const int32_t *const *prompts, const int *prompt_lens,
                const struct rl_gen_params *p, struct rl_gen_output *out, char *err, size_t errlen)
{
	struct rl_gen_engine e = {.m = m, .tok = tok, .p = p, .one_turn = true, .n = n_prompts};
	int longest, rc = -1;
	bool was;

	if (n_prompts > 0)
		memset(out, 0, (size_t)n_prompts * sizeof *out);
	if (check_params(m, tok, n_prompts, prompt_lens, p, &longest, err, errlen))
		return -1;
	was = rl_model_set_invariant(m, p->batch_invariant);
	e.n_slots = p->max_slots > 0 && p->max_slots < n_prompts ? p->max_slots : n_prompts;
	e.max_running = e.n_slots;
	if (rl_gen_engine_init(&e, longest + (int)p->stop.max_new_tokens, longest, err, errlen))
		goto out;
	e.out = out;
	for (int s = 0; s < n_prompts; s++)
		rl_gen_engine_add(&e, s, prompts[s], prompt_lens[s], p->stop.max_new_tokens);
	while (e.waiting < e.n_order || e.live > 0) {
		if (rl_gen_engine_admit(&e, err, errlen) ||
		    rl_gen_engine_step(&e, NULL, NULL, err, errlen))
			goto out;
	}
	rc = 0;
out:
	if (rc)
		rl_gen_outputs_free(out, n_prompts);
	rl_gen_engine_free(&e);
	rl_model_set_invariant(m, was);
	return rc;
}

void rl_gen_outputs_free(struct rl_gen_output *out, int n)
{
	for (int s = 0; s < n; s++) {
		free(out[s].tokens);
		free(out[s].logprobs);
		free(out[s].text);
		memset(&out[s], 0, sizeof out[s]);
	}
}
