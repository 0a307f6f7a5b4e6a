/* The generation engine (runtime/generate/generate.c over the paged KV
 * cache), on the llama fixture: with batch_invariant on, greedy output is
 * still transformers'; sampled output does not depend on how many slots
 * run at once or on prefix sharing; the logprobs it reports are the
 * trainer's batch-invariant logprob pass's to the bit; the fenced backend
 * gives the CPU's bits; a pool too small says so. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "kernels/fenced.h"
#include "runtime/generate/generate.h"
#include "tests/unit/greedy_fixture.h"

#define N_PROMPTS 4
#define PER       16
#define N         (N_PROMPTS * PER)
#define NEW       12

struct fx {
	struct rl_model *m;
	int32_t prompt[2][16], want[2][16];
	int prompt_len[2], want_len[2];
};

static void fx_open(struct fx *f, const struct rl_ops *ops)
{
	char dir[4096], err[512];
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";

	memset(f, 0, sizeof *f);
	snprintf(dir, sizeof dir, "%s/tests/fixtures/models/llama", top);
	cr_assert_eq(rl_model_load(&f->m, dir, ops, err, sizeof err), 0, "%s", err);
	greedy_fixture_read(f->prompt, f->prompt_len, f->want, f->want_len);
}

/* Four prompts of different lengths made from the fixture's two; GRPO's
 * layout: PER samples of each, given as the same array (shared) or as
 * copies (not). */
static int32_t prompt_store[N][16];

static void prompts_of(const struct fx *f, bool shared, const int32_t **p, int *lens)
{
	for (int i = 0; i < N; i++) {
		int k = i / PER, src = k % 2, len = f->prompt_len[src] - k / 2;

		memcpy(prompt_store[i], f->prompt[src], sizeof prompt_store[i]);
		p[i] = shared ? prompt_store[k * PER] : prompt_store[i];
		lens[i] = len > 1 ? len : 1;
	}
}

static struct rl_gen_params sampled(int slots)
{
	return (struct rl_gen_params){
	    .sampling = {0.8f, 20, 0.9f},
	    .stop = {.max_new_tokens = NEW},
	    .seed = 1234,
	    .stream_base = 7,
	    .max_slots = slots,
	    .kv_block = 4,
	    .logprob_chunk = 100,
	    .batch_invariant = true,
	};
}

static void generate(struct rl_model *m, const int32_t **p, const int *lens,
                     const struct rl_gen_params *gp, struct rl_gen_output *out)
{
	char err[512];

	cr_assert_eq(rl_generate(m, NULL, N, p, lens, gp, out, err, sizeof err), 0, "%s", err);
}

static void expect_same(const struct rl_gen_output *a, const struct rl_gen_output *b,
                        const char *what)
{
	for (int i = 0; i < N; i++) {
		cr_assert_eq(a[i].n_tokens, b[i].n_tokens, "%s: sample %d length", what, i);
		cr_assert_eq(memcmp(a[i].tokens, b[i].tokens, a[i].n_tokens * sizeof(int32_t)), 0,
		             "%s: sample %d tokens", what, i);
		cr_assert_eq(memcmp(a[i].logprobs, b[i].logprobs, a[i].n_tokens * sizeof(float)), 0,
		             "%s: sample %d logprobs", what, i);
	}
}

Test(engine, greedy_is_transformers_with_invariant_kernels)
{
	struct fx f;
	struct rl_gen_output out[2];
	const int32_t *p[2];
	int lens[2];
	char err[512];

	fx_open(&f, &rl_ops_cpu);
	for (int g = 0; g < 2; g++) {
		p[g] = f.prompt[g];
		lens[g] = f.prompt_len[g];
	}
	struct rl_gen_params gp = {.sampling = {0.0f, -1, 1.0f},
	                           .stop = {.max_new_tokens = (size_t)f.want_len[0]},
	                           .kv_block = 4,
	                           .batch_invariant = true};
	cr_assert_eq(f.want_len[0], f.want_len[1]);
	cr_assert_eq(rl_generate(f.m, NULL, 2, p, lens, &gp, out, err, sizeof err), 0, "%s", err);
	for (int g = 0; g < 2; g++) {
		cr_assert_eq(out[g].n_tokens, (size_t)f.want_len[g]);
		cr_expect_eq(memcmp(out[g].tokens, f.want[g], out[g].n_tokens * sizeof(int32_t)), 0,
		             "prompt %d: not transformers' greedy tokens", g);
	}
	rl_gen_outputs_free(out, 2);
	rl_model_free(f.m);
}

Test(engine, sampled_tokens_do_not_depend_on_slots_or_sharing)
{
	struct fx f;
	static struct rl_gen_output base[N], other[N];
	const int32_t *p[N], *q[N];
	int lens[N];

	fx_open(&f, &rl_ops_cpu);
	prompts_of(&f, true, p, lens);
	struct rl_gen_params gp = sampled(N);
	generate(f.m, p, lens, &gp, base);
	const int slots[] = {1, 7};
	for (size_t k = 0; k < sizeof slots / sizeof *slots; k++) {
		gp = sampled(slots[k]);
		generate(f.m, p, lens, &gp, other);
		expect_same(base, other, slots[k] == 1 ? "1 slot" : "7 slots");
		rl_gen_outputs_free(other, N);
	}
	/* copies: no prompt is shared, each is prefilled on its own */
	prompts_of(&f, false, q, lens);
	gp = sampled(N);
	generate(f.m, q, lens, &gp, other);
	expect_same(base, other, "without prefix sharing");
	rl_gen_outputs_free(other, N);
	/* the samples of one prompt differ (they draw from their own streams) */
	int differ = 0;
	for (int i = 1; i < PER; i++)
		differ += base[i].n_tokens != base[0].n_tokens ||
		          memcmp(base[i].tokens, base[0].tokens, base[0].n_tokens * 4) != 0;
	cr_expect_gt(differ, PER / 2, "only %d of %d samples differ from the first", differ,
	             PER - 1);
	rl_gen_outputs_free(base, N);
	rl_model_free(f.m);
}

/* The trainer's side: the batch-invariant logprob pass over the packed
 * prompts and responses. */
static void pass_logprobs(struct rl_model *m, const int32_t **p, const int *lens,
                          const struct rl_gen_output *out, float scale, int chunk, float **lp,
                          int *starts)
{
	int T = 0, *cu = malloc((N + 1) * sizeof *cu);
	char err[512];

	for (int i = 0; i < N; i++)
		T += lens[i] + (int)out[i].n_tokens;
	int32_t *ids = malloc((size_t)T * sizeof *ids), *tg = malloc((size_t)T * sizeof *tg);
	cu[0] = 0;
	for (int i = 0; i < N; i++) {
		int at = cu[i], len = lens[i] + (int)out[i].n_tokens;

		memcpy(ids + at, p[i], (size_t)lens[i] * sizeof *ids);
		memcpy(ids + at + lens[i], out[i].tokens, out[i].n_tokens * sizeof *ids);
		for (int t = 0; t < len; t++)
			tg[at + t] = t + 1 < len ? ids[at + t + 1] : -1;
		starts[i] = at + lens[i] - 1;
		cu[i + 1] = at + len;
	}
	struct rl_batch b = {T, N, ids, cu, tg};
	struct rl_acts *a = rl_acts_new(m, T);
	*lp = malloc((size_t)T * sizeof **lp);
	cr_assert(a && *lp);
	bool was = rl_model_set_invariant(m, true);
	cr_assert_eq(rl_model_forward(m, a, &b, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_model_logprobs(m, a, *lp, scale, chunk, err, sizeof err), 0, "%s", err);
	rl_model_set_invariant(m, was);
	rl_acts_free(m, a);
	free(ids);
	free(tg);
	free(cu);
}

/* model: NULL for the llama fixture, or another fixture's directory name
 * (its prompts are the llama's ids modulo its vocabulary) */
static void check_exact(const struct rl_ops *ops, const char *model)
{
	struct fx f;
	static struct rl_gen_output out[N];
	const int32_t *p[N];
	int lens[N], starts[N];
	float *lp;

	fx_open(&f, ops);
	prompts_of(&f, true, p, lens);
	if (model) {
		char dir[4096], err[512];
		const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";

		rl_model_free(f.m);
		snprintf(dir, sizeof dir, "%s/tests/fixtures/models/%s", top, model);
		cr_assert_eq(rl_model_load(&f.m, dir, ops, err, sizeof err), 0, "%s", err);
		for (int i = 0; i < N; i++)
			for (int t = 0; t < 16; t++)
				prompt_store[i][t] %= f.m->cfg.vocab_size;
	}
	struct rl_gen_params gp = sampled(7);
	generate(f.m, p, lens, &gp, out);
	pass_logprobs(f.m, p, lens, out, 1.0f / 0.8f, 100, &lp, starts);
	for (int i = 0; i < N; i++)
		for (size_t j = 0; j < out[i].n_tokens; j++)
			cr_assert_eq(
			    memcmp(&out[i].logprobs[j], &lp[starts[i] + (int)j], sizeof(float)), 0,
			    "sample %d token %zu: generation %.9g, logprob pass %.9g", i, j,
			    (double)out[i].logprobs[j], (double)lp[starts[i] + (int)j]);
	free(lp);
	rl_gen_outputs_free(out, N);
	rl_model_free(f.m);
}

Test(engine, generation_logprobs_are_the_logprob_pass_bits)
{
	check_exact(&rl_ops_cpu, NULL);
}

/* every family: biases (qwen2), q/k norms (qwen3), tied embeddings and
 * partial rotary (llama-tied-rope3), and the experts' grouped GEMMs, which
 * see other row counts in the two passes (qwen2-moe, qwen3-moe) */
Test(engine, every_family_is_exact)
{
	const char *models[] = {"llama-tied-rope3", "qwen2", "qwen3", "qwen2-moe", "qwen3-moe"};

	for (size_t i = 0; i < sizeof models / sizeof *models; i++)
		check_exact(&rl_ops_cpu, models[i]);
}

Test(engine, fenced_gives_the_cpu_bits_and_exact_logprobs)
{
	struct fx f, g;
	static struct rl_gen_output a[N], b[N];
	const int32_t *p[N];
	int lens[N];

	fx_open(&f, &rl_ops_cpu);
	fx_open(&g, &rl_ops_fenced);
	prompts_of(&f, true, p, lens);
	struct rl_gen_params gp = sampled(7);
	generate(f.m, p, lens, &gp, a);
	generate(g.m, p, lens, &gp, b);
	expect_same(a, b, "fenced");
	rl_gen_outputs_free(a, N);
	rl_gen_outputs_free(b, N);
	rl_model_free(f.m);
	rl_model_free(g.m);
	check_exact(&rl_ops_fenced, NULL);
}

/* A pool for two sequences at a time runs two at a time, with the same
 * tokens; one that cannot hold a sequence says so. */
Test(engine, a_small_pool_runs_fewer_at_once)
{
	struct fx f;
	static struct rl_gen_output base[N], out[N];
	const int32_t *p[N];
	int lens[N], longest = 0;
	char err[512];

	fx_open(&f, &rl_ops_cpu);
	prompts_of(&f, true, p, lens);
	for (int i = 0; i < N; i++)
		longest = lens[i] > longest ? lens[i] : longest;
	struct rl_gen_params gp = sampled(N);
	generate(f.m, p, lens, &gp, base);
	int per_seq = (longest + NEW + 3) / 4; /* blocks of 4 */
	gp.kv_blocks = 2 * per_seq + 1;
	generate(f.m, p, lens, &gp, out);
	expect_same(base, out, "a pool for two sequences");
	rl_gen_outputs_free(out, N);
	gp.kv_blocks = per_seq - 1;
	cr_assert_eq(rl_generate(f.m, NULL, N, p, lens, &gp, out, err, sizeof err), -1);
	cr_expect(strstr(err, "cannot hold one sequence") != NULL, "%s", err);
	rl_gen_outputs_free(base, N);
	rl_model_free(f.m);
}
