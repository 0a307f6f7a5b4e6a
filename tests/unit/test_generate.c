/* Batched generation through rl_generate: sequences stop on their own
 * (stop token, stop string, budget), a sequence's tokens do not depend on the
 * batch it ran in, and sampling is reproducible per seed. Greedy tokens are
 * held to transformers' (the llama fixture's greedy generations). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "runtime/generate/generate.h"
#include "tests/unit/greedy_fixture.h"

struct fx {
	struct rl_model *m;
	struct rl_tokenizer *tok;
	int32_t prompt[2][16], want[2][16];
	int prompt_len[2], want_len[2];
};

static void fx_open(struct fx *f)
{
	char dir[4096], err[512];
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";

	memset(f, 0, sizeof *f);
	snprintf(dir, sizeof dir, "%s/tests/fixtures/models/llama", top);
	cr_assert_eq(rl_model_load(&f->m, dir, &rl_ops_cpu, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_tokenizer_load(&f->tok, dir, err, sizeof err), 0, "%s", err);
	greedy_fixture_read(f->prompt, f->prompt_len, f->want, f->want_len);
}

static void fx_close(struct fx *f)
{
	rl_tokenizer_free(f->tok);
	rl_model_free(f->m);
}

static void run(struct fx *f, int n, const int *which, const struct rl_gen_params *p,
                struct rl_gen_output *out)
{
	const int32_t *prompts[2];
	int lens[2];
	char err[512];

	for (int i = 0; i < n; i++) {
		prompts[i] = f->prompt[which[i]];
		lens[i] = f->prompt_len[which[i]];
	}
	cr_assert_eq(rl_generate(f->m, f->tok, n, prompts, lens, p, out, err, sizeof err), 0, "%s",
	             err);
}

Test(generate, each_sequence_stops_on_its_own)
{
	struct fx f;
	struct rl_gen_output out[2];
	const int both[2] = {0, 1};

	fx_open(&f);
	/* sequence 0's third greedy token becomes a stop token: it stops there,
	 * sequence 1 (which never produces it) runs to its budget unchanged */
	int32_t stop_id = f.want[0][2];
	for (int i = 0; i < f.want_len[1]; i++)
		cr_assert_neq(f.want[1][i], stop_id, "fixture: pick another stop token");
	struct rl_gen_params p = {
	    .sampling = {0, -1, 1},
	    .stop = {.stop_token_ids = &stop_id, .n_stop_token_ids = 1, .max_new_tokens = 12},
	};
	run(&f, 2, both, &p, out);
	cr_expect_eq(out[0].reason, RL_STOP_TOKEN);
	cr_expect_eq(out[0].n_tokens, 3);
	cr_expect_eq(out[1].reason, RL_STOP_MAX_TOKENS);
	cr_assert_eq(out[1].n_tokens, (size_t)f.want_len[1]);
	for (int g = 0; g < 2; g++)
		for (size_t i = 0; i < out[g].n_tokens; i++)
			cr_expect_eq(out[g].tokens[i], f.want[g][i], "sequence %d token %zu", g, i);
	rl_gen_outputs_free(out, 2);
	fx_close(&f);
}

Test(generate, stop_string_cuts_the_text)
{
	struct fx f;
	struct rl_gen_output full, cut;
	const int first[1] = {0};

	fx_open(&f);
	struct rl_gen_params p = {.sampling = {0, -1, 1}, .stop = {.max_new_tokens = 12}};
	run(&f, 1, first, &p, &full);
	cr_assert_not_null(full.text);
	/* a stop string taken from the middle of the greedy text */
	cr_assert_geq(full.text_len, 6, "greedy text too short: '%s'", full.text);
	char stop[4];
	memcpy(stop, full.text + full.text_len / 2, 3);
	stop[3] = '\0';
	const char *stops[1] = {stop};
	p.stop.stop_strings = stops;
	p.stop.n_stop_strings = 1;
	run(&f, 1, first, &p, &cut);
	cr_expect_eq(cut.reason, RL_STOP_STRING);
	size_t at = (size_t)(strstr(full.text, stop) - full.text);
	cr_expect_eq(cut.text_len, at, "text '%s' cut at %zu, want %zu", cut.text, cut.text_len,
	             at);
	cr_expect(strncmp(cut.text, full.text, at) == 0);
	cr_expect_leq(cut.n_tokens, full.n_tokens);
	rl_gen_outputs_free(&full, 1);
	rl_gen_outputs_free(&cut, 1);
	fx_close(&f);
}

/* The logprob generation reports for a sampled token is the one the
 * training side computes from the whole sequence with the same temperature:
 * GRPO compares the two. */
static void expect_training_logprobs(struct fx *f, const int32_t *prompt, int prompt_len,
                                     const struct rl_gen_output *o, float temperature)
{
	int T = prompt_len + (int)o->n_tokens;
	int32_t *ids = malloc((size_t)T * sizeof *ids), *targets = malloc((size_t)T * sizeof *ids);
	float *lp = malloc((size_t)T * sizeof *lp);
	int32_t cu[2] = {0, T};
	char err[512];

	memcpy(ids, prompt, (size_t)prompt_len * sizeof *ids);
	memcpy(ids + prompt_len, o->tokens, o->n_tokens * sizeof *ids);
	for (int t = 0; t < T; t++)
		targets[t] = t + 1 < T ? ids[t + 1] : -1;
	struct rl_batch b = {T, 1, ids, cu, targets};
	struct rl_acts *a = rl_acts_new(f->m, T);
	cr_assert_eq(rl_model_forward(f->m, a, &b, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_model_logprobs(f->m, a, lp, 1.0f / temperature, 0, err, sizeof err), 0,
	             "%s", err);
	for (size_t i = 0; i < o->n_tokens; i++) {
		float want = lp[prompt_len - 1 + (int)i];
		cr_expect(fabsf(o->logprobs[i] - want) <= 1e-4f * (1.0f + fabsf(want)),
		          "token %zu: generation logprob %.7g, training %.7g", i, o->logprobs[i],
		          want);
	}
	rl_acts_free(f->m, a);
	free(ids);
	free(targets);
	free(lp);
}

Test(generate, sampling_is_per_sequence_and_reproducible)
{
	struct fx f;
	struct rl_gen_output batch[2], again[2], other[2], pair[2];
	const int both[2] = {0, 1};
	char err[512];

	fx_open(&f);
	struct rl_gen_params p = {
	    .sampling = {0.9f, 40, 0.95f}, .stop = {.max_new_tokens = 12}, .seed = 42};
	run(&f, 2, both, &p, batch);
	run(&f, 2, both, &p, again);
	p.seed = 43;
	run(&f, 2, both, &p, other);
	p.seed = 42;
	/* the same prompt at the same index, with a different neighbour */
	const int32_t *prompts[2] = {f.prompt[1], f.prompt[1]};
	int lens[2] = {f.prompt_len[1], f.prompt_len[1]};
	cr_assert_eq(rl_generate(f.m, f.tok, 2, prompts, lens, &p, pair, err, sizeof err), 0, "%s",
	             err);

	cr_assert_eq(batch[1].n_tokens, pair[1].n_tokens);
	cr_expect(memcmp(batch[1].tokens, pair[1].tokens, batch[1].n_tokens * 4) == 0,
	          "sequence 1 changed with its neighbour");
	for (int g = 0; g < 2; g++) {
		cr_assert_eq(batch[g].n_tokens, again[g].n_tokens);
		cr_expect(memcmp(batch[g].tokens, again[g].tokens, batch[g].n_tokens * 4) == 0,
		          "same seed, different tokens");
		expect_training_logprobs(&f, f.prompt[g], f.prompt_len[g], &batch[g], 0.9f);
	}
	cr_expect(batch[0].n_tokens != other[0].n_tokens ||
	              memcmp(batch[0].tokens, other[0].tokens, batch[0].n_tokens * 4) != 0,
	          "another seed gave the same tokens");
	rl_gen_outputs_free(batch, 2);
	rl_gen_outputs_free(again, 2);
	rl_gen_outputs_free(other, 2);
	rl_gen_outputs_free(pair, 2);
	fx_close(&f);
}
