/* The multi-turn generation session (runtime/generate/session.c) on the
 * llama fixture, against independent references: one turn per sequence
 * is rl_generate's output to the bit; a multi-turn episode's tokens and
 * logprobs do not depend on the schedule (slots, when and in which order
 * the environment answers); greedy turns are rl_generate's on the whole
 * transcript so far; with batch_invariant every logprob is the trainer's
 * logprob pass over the whole transcript; the count of tokens fed proves
 * that no history is fed twice; misuse is refused with a message. The
 * environment here is a script: sequence s gets, after its turn k, an
 * observation and a budget that depend on s and k alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/fenced.h"
#include "kernels/philox.h"
#include "kernels/sample.h"
#include "runtime/generate/session.h"

#define N        12 /* sequences: 4 prompts, 3 samples each */
#define PER      3
#define MAX_RESP 96
#define MAX_TURN 4
#define VOCAB    512 /* the fixture's */

struct fx {
	struct rl_model *m;
	struct rl_tokenizer *tok;
	int32_t prompt[N][24];
	const int32_t *prompts[N];
	int lens[N];
};

/* How the samples of one prompt are given: each a prompt of its own,
 * copies of the same tokens (which the session shares, rl_generate not),
 * or the same array (which both share). */
enum layout { DISTINCT, COPIES, SHARED };

/* Prompts of 5..14 tokens from a fixed generator, PER samples each. */
static void fx_open(struct fx *f, const struct rl_ops *ops, enum layout layout)
{
	char dir[4096], err[512];
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	uint32_t x = 2026;

	memset(f, 0, sizeof *f);
	snprintf(dir, sizeof dir, "%s/tests/fixtures/models/llama", top);
	cr_assert_eq(rl_model_load(&f->m, dir, ops, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_tokenizer_load(&f->tok, dir, err, sizeof err), 0, "%s", err);
	cr_assert_eq(f->m->cfg.vocab_size, VOCAB);
	for (int i = 0; i < N; i++) {
		int g = i / PER;

		for (int t = 0; t < 24; t++) {
			x = x * 1664525u + 1013904223u;
			f->prompt[i][t] = (int32_t)(3 + (x >> 9) % (VOCAB - 3));
		}
		if (i % PER && layout != DISTINCT)
			memcpy(f->prompt[i], f->prompt[g * PER], sizeof f->prompt[i]);
		f->prompts[i] = layout == SHARED ? f->prompt[g * PER] : f->prompt[i];
		f->lens[i] = 5 + (7 * g) % 10;
	}
}

static void fx_close(struct fx *f)
{
	rl_tokenizer_free(f->tok);
	rl_model_free(f->m);
}

/* ---- the scripted environment ---- */

static int turns_of(int s)
{
	return 1 + s % 3;
}

static size_t budget_of(int s, int k)
{
	return 3 + (size_t)((s + 2 * k) % 5);
}

/* after turn k: 0..3 tokens */
static int obs_of(int s, int k, int32_t *obs)
{
	int n = (s + k) % 4;

	for (int j = 0; j < n; j++)
		obs[j] = (int32_t)(5 + (7 * s + 11 * k + 3 * j) % (VOCAB - 5));
	return n;
}

/* What a sequence went through: its response (turns and observations),
 * each token's logprob and whether the model generated it, and its
 * turns' outputs. */
struct transcript {
	int32_t resp[MAX_RESP];
	float lp[MAX_RESP];
	bool gen[MAX_RESP];
	int n, turns;
	int start[MAX_TURN], len[MAX_TURN];
	enum rl_stop_reason reason[MAX_TURN];
	char text[MAX_TURN][256];
};

/* How the environment answers: each observation `delay(s, k)` steps after
 * the turn ended (0: at once), those due together continued in sequence
 * order or its reverse; sequences added all at once or half of them
 * after a few steps. */
struct schedule {
	int delay_mod; /* 0: no delay */
	bool reverse, add_late;
};

static int delay_of(const struct schedule *sc, int s, int k)
{
	return sc->delay_mod ? (3 * s + 5 * k) % sc->delay_mod : 0;
}

static void record_turn(struct transcript *tr, const struct rl_gen_output *o)
{
	int k = tr->turns++;

	cr_assert_leq(tr->turns, MAX_TURN);
	cr_assert_leq(tr->n + (int)o->n_tokens, MAX_RESP);
	tr->start[k] = tr->n;
	tr->len[k] = (int)o->n_tokens;
	tr->reason[k] = o->reason;
	if (o->text) {
		cr_assert_lt(o->text_len, sizeof tr->text[k]);
		memcpy(tr->text[k], o->text, o->text_len);
		tr->text[k][o->text_len] = '\0';
	}
	for (size_t i = 0; i < o->n_tokens; i++) {
		tr->resp[tr->n] = o->tokens[i];
		tr->lp[tr->n] = o->logprobs[i];
		tr->gen[tr->n++] = true;
	}
}

/* Runs every sequence's episode (turns_of(s) turns) to its end under sc;
 * returns the session's statistics. */
static struct rl_gen_session_stats run_episodes(struct fx *f, const struct rl_gen_params *p,
                                                int max_len, const struct schedule *sc,
                                                struct transcript *tr)
{
	struct rl_gen_session *g;
	struct rl_gen_session_stats st;
	int ended[N], n_ended, due[N], added = 0, clock = 0, done = 0;
	char err[512];

	memset(tr, 0, N * sizeof *tr);
	cr_assert_eq(rl_gen_session_new(f->m, f->tok, p, N, max_len, &g, err, sizeof err), 0, "%s",
	             err);
	for (int s = 0; s < N; s++)
		due[s] = -1;
	while (done < N) {
		int want = sc->add_late && clock < 3 ? N / 2 : N;

		for (; added < want; added++)
			cr_assert_eq(rl_gen_session_add(g, added, f->prompts[added], f->lens[added],
			                                budget_of(added, 0), err, sizeof err),
			             0, "%s", err);
		if (rl_gen_session_busy(g)) {
			cr_assert_eq(rl_gen_session_step(g, ended, &n_ended, err, sizeof err), 0,
			             "%s", err);
			clock++;
			for (int i = 0; i < n_ended; i++) {
				int s = ended[i];
				const struct rl_gen_output *o = rl_gen_session_turn(g, s);

				cr_assert_not_null(o);
				record_turn(&tr[s], o);
				if (tr[s].turns == turns_of(s)) {
					rl_gen_session_finish(g, s);
					done++;
				} else {
					due[s] = clock + delay_of(sc, s, tr[s].turns - 1);
				}
			}
		} else {
			/* nothing runs: the clock moves to the next answer */
			int next = -1;

			for (int s = 0; s < N; s++)
				if (due[s] >= 0 && (next < 0 || due[s] < next))
					next = due[s];
			cr_assert(next >= 0 || added < N, "the session stalled");
			clock = next > clock ? next : clock + 1;
		}
		for (int i = 0; i < N; i++) {
			int s = sc->reverse ? N - 1 - i : i;
			int32_t obs[4];

			if (due[s] < 0 || due[s] > clock)
				continue;
			due[s] = -1;
			int n_obs = obs_of(s, tr[s].turns - 1, obs);
			for (int j = 0; j < n_obs; j++) {
				tr[s].resp[tr[s].n] = obs[j];
				tr[s].lp[tr[s].n] = 0;
				tr[s].gen[tr[s].n++] = false;
			}
			cr_assert_eq(rl_gen_session_continue(g, s, obs, n_obs,
			                                     budget_of(s, tr[s].turns), err,
			                                     sizeof err),
			             0, "%s", err);
		}
	}
	cr_assert_not(rl_gen_session_busy(g));
	rl_gen_session_stats(g, &st);
	rl_gen_session_free(g);
	return st;
}

static void expect_same_episodes(const struct transcript *a, const struct transcript *b,
                                 const char *what)
{
	for (int s = 0; s < N; s++) {
		cr_assert_eq(a[s].turns, b[s].turns, "%s: sequence %d turns", what, s);
		cr_assert_eq(a[s].n, b[s].n, "%s: sequence %d length", what, s);
		cr_assert_eq(memcmp(a[s].resp, b[s].resp, (size_t)a[s].n * sizeof(int32_t)), 0,
		             "%s: sequence %d tokens", what, s);
		cr_assert_eq(memcmp(a[s].lp, b[s].lp, (size_t)a[s].n * sizeof(float)), 0,
		             "%s: sequence %d logprobs", what, s);
		for (int k = 0; k < a[s].turns; k++)
			cr_assert_eq(a[s].reason[k], b[s].reason[k], "%s: sequence %d turn %d",
			             what, s, k);
	}
}

static struct rl_gen_params sampled(int slots, bool invariant)
{
	return (struct rl_gen_params){
	    .sampling = {0.8f, 20, 0.9f},
	    .stop = {.max_new_tokens = 8},
	    .seed = 77,
	    .stream_base = 5,
	    .max_slots = slots,
	    .kv_block = 4,
	    .logprob_chunk = 100,
	    .batch_invariant = invariant,
	};
}

/* ---- (a) one turn per sequence is rl_generate ---- */

/* Adds every prompt, steps to the end, and finishes each sequence as its
 * turn ends, before the next step: the slots then change hands when
 * rl_generate's do, so even without batch-invariant kernels the batches
 * (and so the bits) are the same. */
static void one_turn_each(struct fx *f, const struct rl_gen_params *p, struct rl_gen_output *out)
{
	struct rl_gen_session *g;
	int ended[N], n_ended, longest = 0, got = 0;
	char err[512];

	for (int s = 0; s < N; s++)
		longest = f->lens[s] > longest ? f->lens[s] : longest;
	cr_assert_eq(rl_gen_session_new(f->m, f->tok, p, N, longest + (int)p->stop.max_new_tokens,
	                                &g, err, sizeof err),
	             0, "%s", err);
	for (int s = 0; s < N; s++)
		cr_assert_eq(rl_gen_session_add(g, s, f->prompts[s], f->lens[s],
		                                p->stop.max_new_tokens, err, sizeof err),
		             0, "%s", err);
	while (rl_gen_session_busy(g)) {
		cr_assert_eq(rl_gen_session_step(g, ended, &n_ended, err, sizeof err), 0, "%s",
		             err);
		for (int i = 0; i < n_ended; i++) {
			const struct rl_gen_output *o = rl_gen_session_turn(g, ended[i]);
			struct rl_gen_output *d = &out[ended[i]];

			cr_assert_not_null(o);
			cr_assert_null(d->tokens, "sequence %d ended twice", ended[i]);
			*d = *o;
			d->tokens = malloc(o->n_tokens * sizeof *d->tokens);
			d->logprobs = malloc(o->n_tokens * sizeof *d->logprobs);
			d->text = malloc(o->text_len + 1);
			memcpy(d->tokens, o->tokens, o->n_tokens * sizeof *d->tokens);
			memcpy(d->logprobs, o->logprobs, o->n_tokens * sizeof *d->logprobs);
			cr_assert_not_null(o->text);
			memcpy(d->text, o->text, o->text_len + 1);
			rl_gen_session_finish(g, ended[i]);
			got++;
		}
	}
	cr_assert_eq(got, N, "%d of %d sequences ended", got, N);
	rl_gen_session_free(g);
}

Test(gen_session, one_turn_is_rl_generate)
{
	struct fx f;
	static struct rl_gen_output want[N], got[N];
	const int32_t eos[] = {1}, stop_ids[] = {7, 300};
	const char *stops[] = {"e", "ou"};
	const struct rl_sampling samplings[] = {{0, -1, 1}, {0.8f, 20, 0.9f}, {1.0f, 0, 0.7f}};
	const int slots[] = {0, 1, 5};
	char err[512];
	int checked = 0, by_stop = 0;

	for (int layout = DISTINCT; layout <= SHARED; layout++) {
		fx_open(&f, &rl_ops_cpu, layout);
		for (size_t a = 0; a < 3; a++)
			for (size_t b = 0; b < 3; b++)
				/* copies: the session shares their prefill and
				 * rl_generate does not, which only batch-invariant
				 * kernels make the same bits */
				for (int inv = layout == COPIES; inv < 2; inv++) {
					struct rl_gen_params p = sampled(slots[b], inv);

					p.sampling = samplings[a];
					p.stop.eos_ids = eos;
					p.stop.n_eos_ids = 1;
					p.stop.stop_token_ids = stop_ids;
					p.stop.n_stop_token_ids = 2;
					if (a == 1) {
						p.stop.stop_strings = stops;
						p.stop.n_stop_strings = 2;
					}
					p.stop.max_new_tokens = 6 + 3 * a;
					cr_assert_eq(rl_generate(f.m, f.tok, N, f.prompts, f.lens,
					                         &p, want, err, sizeof err),
					             0, "%s", err);
					memset(got, 0, sizeof got);
					one_turn_each(&f, &p, got);
					for (int s = 0; s < N; s++) {
						const struct rl_gen_output *w = &want[s],
						                           *o = &got[s];

						cr_assert_eq(o->n_tokens, w->n_tokens,
						             "sampling %zu slots %d inv %d seq %d",
						             a, slots[b], inv, s);
						cr_assert_eq(memcmp(o->tokens, w->tokens,
						                    w->n_tokens * sizeof(int32_t)),
						             0, "seq %d tokens", s);
						cr_assert_eq(memcmp(o->logprobs, w->logprobs,
						                    w->n_tokens * sizeof(float)),
						             0, "seq %d logprobs", s);
						cr_assert_eq(o->reason, w->reason, "seq %d reason",
						             s);
						cr_assert_str_eq(o->text, w->text, "seq %d text",
						                 s);
						by_stop += w->reason != RL_STOP_MAX_TOKENS;
						checked++;
					}
					rl_gen_outputs_free(want, N);
					rl_gen_outputs_free(got, N);
				}
		fx_close(&f);
	}
	/* the stops were exercised, not only the budget */
	cr_expect_gt(by_stop, checked / 20, "only %d of %d sequences stopped before the budget",
	             by_stop, checked);
}

/* ---- (b) the schedule does not change an episode ---- */

static void schedules_agree(const struct rl_ops *ops, const struct transcript *ref)
{
	struct fx f;
	static struct transcript base[N], other[N];
	const struct {
		int slots, in_flight;
		struct schedule sc;
		const char *what;
	} runs[] = {
	    {1, 0, {0, false, false}, "one slot"},
	    {3, 0, {4, true, false}, "3 slots, late answers in reverse order"},
	    {0, 0, {7, false, true}, "every slot, late answers, half the sequences added late"},
	    {5, 0, {3, true, true}, "5 slots, late answers in reverse, added late"},
	    {2, N, {3, false, false}, "2 running of all in flight, late answers"},
	    {3,
	     7,
	     {5, true, true},
	     "3 running of 7 in flight, late answers in reverse, added late"},
	};

	fx_open(&f, ops, SHARED);
	struct rl_gen_params p = sampled(0, true);
	run_episodes(&f, &p, 80, &(struct schedule){0, false, false}, base);
	if (ref)
		expect_same_episodes(ref, base, "fenced against the CPU");
	for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
		p = sampled(runs[r].slots, true);
		p.max_in_flight = runs[r].in_flight;
		run_episodes(&f, &p, 80, &runs[r].sc, other);
		expect_same_episodes(base, other, runs[r].what);
	}
	/* the test can fail: the samples of one prompt differ, and episodes
	 * have several turns */
	int differ = 0, multi = 0;
	for (int s = 0; s < N; s++) {
		int t0 = s - s % PER;

		differ += s != t0 && (base[s].len[0] != base[t0].len[0] ||
		                      memcmp(base[s].resp, base[t0].resp,
		                             (size_t)base[s].len[0] * sizeof(int32_t)) != 0);
		multi += base[s].turns > 1;
	}
	cr_expect_geq(differ, N / 2, "only %d samples differ from their prompt's first", differ);
	cr_expect_eq(multi, 8);
	fx_close(&f);
}

Test(gen_session, episodes_do_not_depend_on_the_schedule)
{
	schedules_agree(&rl_ops_cpu, NULL);
}

Test(gen_session, fenced_gives_the_cpu_bits)
{
	struct fx f;
	static struct transcript cpu[N];

	fx_open(&f, &rl_ops_cpu, SHARED);
	struct rl_gen_params p = sampled(0, true);
	run_episodes(&f, &p, 80, &(struct schedule){0, false, false}, cpu);
	fx_close(&f);
	schedules_agree(&rl_ops_fenced, cpu);
}

/* ---- (c) greedy turns are rl_generate on the transcript so far ---- */

Test(gen_session, greedy_turn_is_rl_generate_on_the_transcript)
{
	struct fx f;
	static struct transcript tr[N];
	const int32_t eos[] = {1}, stop_ids[] = {300};
	const char *stops[] = {"_i"};
	char err[512];
	int turns = 0, by_string = 0, later = 0;

	fx_open(&f, &rl_ops_cpu, SHARED);
	struct rl_gen_params p = sampled(4, true);
	p.sampling = (struct rl_sampling){0, -1, 1};
	p.stop.eos_ids = eos;
	p.stop.n_eos_ids = 1;
	p.stop.stop_token_ids = stop_ids;
	p.stop.n_stop_token_ids = 1;
	p.stop.stop_strings = stops;
	p.stop.n_stop_strings = 1;
	run_episodes(&f, &p, 80, &(struct schedule){3, true, false}, tr);
	for (int s = 0; s < N; s++)
		for (int k = 0; k < tr[s].turns; k++) {
			int32_t whole[128];
			int len = f.lens[s] + tr[s].start[k];
			const int32_t *pr[1] = {whole};
			struct rl_gen_output o;
			struct rl_gen_params q = p;

			memcpy(whole, f.prompts[s], (size_t)f.lens[s] * sizeof *whole);
			memcpy(whole + f.lens[s], tr[s].resp,
			       (size_t)tr[s].start[k] * sizeof *whole);
			q.stop.max_new_tokens = budget_of(s, k);
			cr_assert_eq(rl_generate(f.m, f.tok, 1, pr, &len, &q, &o, err, sizeof err),
			             0, "%s", err);
			cr_assert_eq(o.n_tokens, (size_t)tr[s].len[k], "sequence %d turn %d length",
			             s, k);
			cr_assert_eq(memcmp(o.tokens, tr[s].resp + tr[s].start[k],
			                    o.n_tokens * sizeof(int32_t)),
			             0, "sequence %d turn %d tokens", s, k);
			cr_assert_eq(memcmp(o.logprobs, tr[s].lp + tr[s].start[k],
			                    o.n_tokens * sizeof(float)),
			             0, "sequence %d turn %d logprobs", s, k);
			cr_assert_eq(o.reason, tr[s].reason[k], "sequence %d turn %d reason", s, k);
			cr_assert_str_eq(o.text, tr[s].text[k], "sequence %d turn %d text", s, k);
			rl_gen_outputs_free(&o, 1);
			turns++;
			by_string += tr[s].reason[k] == RL_STOP_STRING;
			later += k > 0 && tr[s].reason[k] != RL_STOP_MAX_TOKENS;
		}
	cr_assert_eq(turns, 4 * (1 + 2 + 3));
	/* a stop string's search starts afresh each turn: exercised */
	cr_expect_geq(by_string, 4, "%d turns stopped by the stop string", by_string);
	cr_expect_geq(later, 1, "%d later turns stopped before their budget", later);
	fx_close(&f);
}

/* ---- (d) logprobs are the trainer's pass over the transcript, and each
 * draw is the sampling rule's at Philox (seed, stream_base + s, t) over
 * the pass's logits, t the token's place in the response ---- */

static void logprobs_are_the_pass(const struct rl_ops *ops)
{
	struct fx f;
	static struct transcript tr[N];
	int T = 0, cu[N + 1], gen = 0;
	char err[512];

	fx_open(&f, ops, SHARED);
	struct rl_gen_params p = sampled(3, true);
	run_episodes(&f, &p, 80, &(struct schedule){5, false, true}, tr);
	for (int s = 0; s < N; s++)
		T += f.lens[s] + tr[s].n;
	int32_t *ids = malloc((size_t)T * sizeof *ids), *tg = malloc((size_t)T * sizeof *tg);
	float *lp = malloc((size_t)T * sizeof *lp);
	cr_assert(ids && tg && lp);
	cu[0] = 0;
	for (int s = 0; s < N; s++) {
		int at = cu[s], len = f.lens[s] + tr[s].n;

		memcpy(ids + at, f.prompts[s], (size_t)f.lens[s] * sizeof *ids);
		memcpy(ids + at + f.lens[s], tr[s].resp, (size_t)tr[s].n * sizeof *ids);
		for (int t = 0; t < len; t++)
			tg[at + t] = t + 1 < len ? ids[at + t + 1] : -1;
		cu[s + 1] = at + len;
	}
	struct rl_batch b = {T, N, ids, cu, tg};
	struct rl_acts *a = rl_acts_new(f.m, T);
	cr_assert_not_null(a);
	bool was = rl_model_set_invariant(f.m, true);
	cr_assert_eq(rl_model_forward(f.m, a, &b, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_model_logprobs(f.m, a, lp, 1.0f / 0.8f, 100, err, sizeof err), 0, "%s",
	             err);
	float *logits = malloc((size_t)T * VOCAB * sizeof *logits);
	void *work = malloc(rl_sample_row_work_bytes(VOCAB));
	cr_assert(logits && work);
	cr_assert_eq(rl_model_logits(f.m, a, logits, err, sizeof err), 0, "%s", err);
	rl_model_set_invariant(f.m, was);
	for (int s = 0; s < N; s++)
		for (int t = 0; t < tr[s].n; t++) {
			/* the token at response position t is predicted at the row
			 * before it */
			int row = cu[s] + f.lens[s] + t - 1;

			if (!tr[s].gen[t])
				continue;
			gen++;
			double u =
			    rl_philox_uniform(p.seed, p.stream_base + (uint64_t)s, (uint64_t)t);
			int32_t drawn;
			cr_assert_eq(rl_sample_row_cpu(logits + (size_t)row * VOCAB, VOCAB,
			                               p.sampling.temperature, p.sampling.top_k,
			                               p.sampling.top_p, u, &drawn, NULL, work),
			             0);
			cr_assert_eq(
			    drawn, tr[s].resp[t],
			    "sequence %d response token %d: drew %d, the rule at (seed, %d, "
			    "%d) draws %d",
			    s, t, tr[s].resp[t], (int)p.stream_base + s, t, drawn);
			cr_assert_eq(memcmp(&tr[s].lp[t], &lp[row], sizeof(float)), 0,
			             "sequence %d response token %d: generation %.9g, logprob pass "
			             "%.9g",
			             s, t, (double)tr[s].lp[t], (double)lp[row]);
		}
	cr_assert_gt(gen, N);
	rl_acts_free(f.m, a);
	free(ids);
	free(tg);
	free(lp);
	free(logits);
	free(work);
	fx_close(&f);
}

Test(gen_session, logprobs_are_the_logprob_pass_bits)
{
	logprobs_are_the_pass(&rl_ops_cpu);
}

Test(gen_session, fenced_logprobs_are_the_logprob_pass_bits)
{
	logprobs_are_the_pass(&rl_ops_fenced);
}

/* ---- (e) no re-prefill ---- */

Test(gen_session, a_continue_feeds_only_what_is_new)
{
	struct fx f;
	static struct transcript tr[N];
	uint64_t want = 0, reprefill = 0;

	/* no two prompts alike: each is fed once in full */
	fx_open(&f, &rl_ops_cpu, DISTINCT);
	struct rl_gen_params p = sampled(4, true);
	struct rl_gen_session_stats st =
	    run_episodes(&f, &p, 80, &(struct schedule){2, false, false}, tr);
	for (int s = 0; s < N; s++) {
		/* the prompt, every token of the response but the last drawn
		 * (never fed: the episode ended) */
		want += (uint64_t)(f.lens[s] + tr[s].n - 1);
		/* what feeding the whole transcript anew at each turn costs */
		for (int k = 0; k < tr[s].turns; k++)
			reprefill += (uint64_t)(f.lens[s] + tr[s].start[k] + tr[s].len[k] - 1);
	}
	cr_expect_eq(st.shared_tokens, 0);
	cr_expect_eq(st.fed_tokens, want, "fed %llu tokens, the transcripts hold %llu",
	             (unsigned long long)st.fed_tokens, (unsigned long long)want);
	cr_expect_lt(st.fed_tokens, reprefill);
	cr_expect_eq(st.turns, 4 * (1 + 2 + 3));
	fx_close(&f);

	/* shared: every sample after a prompt's first takes all its prompt
	 * but the last token from the first's cache */
	uint64_t shared = 0;
	fx_open(&f, &rl_ops_cpu, SHARED);
	p = sampled(0, true);
	st = run_episodes(&f, &p, 80, &(struct schedule){0, false, false}, tr);
	want = 0;
	for (int s = 0; s < N; s++) {
		want += (uint64_t)(f.lens[s] + tr[s].n - 1);
		if (s % PER)
			shared += (uint64_t)(f.lens[s] - 1);
	}
	cr_expect_eq(st.shared_tokens, shared);
	cr_expect_eq(st.fed_tokens, want - shared);
	fx_close(&f);
}

/* ---- a waiting sequence gives up its running slot ---- */

/* Steps until nothing runs; returns how many turns ended. */
static int step_all(struct rl_gen_session *g, int *ended_seq)
{
	int ended[N], n_ended, total = 0;
	char err[512];

	while (rl_gen_session_busy(g)) {
		cr_assert_eq(rl_gen_session_step(g, ended, &n_ended, err, sizeof err), 0, "%s",
		             err);
		for (int i = 0; i < n_ended; i++)
			ended_seq[total++] = ended[i];
	}
	return total;
}

Test(gen_session, waiting_sequences_give_up_their_running_slots)
{
	struct fx f;
	struct rl_gen_session *g;
	struct rl_gen_session_stats st;
	int ended[4 * N];
	char err[512];
	int32_t obs[2] = {9, 10};

	fx_open(&f, &rl_ops_cpu, DISTINCT);
	/* without max_in_flight: the first two, waiting, hold both slots */
	struct rl_gen_params p = sampled(2, true);
	cr_assert_eq(rl_gen_session_new(f.m, f.tok, &p, N, 80, &g, err, sizeof err), 0, "%s", err);
	for (int s = 0; s < N; s++)
		cr_assert_eq(rl_gen_session_add(g, s, f.prompts[s], f.lens[s], 3, err, sizeof err),
		             0, "%s", err);
	cr_expect_eq(step_all(g, ended), 2);
	rl_gen_session_free(g);

	/* with it: every first turn runs, two at a time, while the others
	 * wait for their caller */
	p.max_in_flight = N;
	cr_assert_eq(rl_gen_session_new(f.m, f.tok, &p, N, 80, &g, err, sizeof err), 0, "%s", err);
	for (int s = 0; s < N; s++)
		cr_assert_eq(rl_gen_session_add(g, s, f.prompts[s], f.lens[s], 3, err, sizeof err),
		             0, "%s", err);
	cr_assert_eq(step_all(g, ended), N);
	rl_gen_session_stats(g, &st);
	cr_expect_eq(st.max_batch, 2);
	/* all continued at once: two run, the others wait their turn, in the
	 * order continued; one finished while it waits drops out */
	for (int s = N - 1; s >= 0; s--)
		cr_assert_eq(rl_gen_session_continue(g, s, obs, 2, 2, err, sizeof err), 0, "%s",
		             err);
	cr_assert_eq(rl_gen_session_continue(g, 0, obs, 2, 2, err, sizeof err), -1);
	cr_expect(strstr(err, "waiting for a running slot") != NULL, "%s", err);
	rl_gen_session_finish(g, 0);
	int n = step_all(g, ended);
	cr_assert_eq(n, N - 1);
	/* the same budget: two by two, in the order continued */
	for (int i = 0; i < n; i++)
		cr_expect(ended[i] == N - 1 - 2 * (i / 2) || ended[i] == N - 2 - 2 * (i / 2),
		          "turn %d ended for sequence %d", i, ended[i]);
	rl_gen_session_stats(g, &st);
	cr_expect_eq(st.max_batch, 2);
	rl_gen_session_free(g);
	fx_close(&f);
}

/* ---- (f) limits and misuse ---- */

Test(gen_session, a_turn_stops_at_max_len)
{
	struct fx f;
	struct rl_gen_session *g;
	int ended[N], n_ended, max_len = 20;
	char err[512];
	int32_t obs[3] = {9, 10, 11};

	fx_open(&f, &rl_ops_cpu, DISTINCT);
	struct rl_gen_params p = sampled(0, true);
	p.sampling = (struct rl_sampling){0, -1, 1};
	cr_assert_eq(rl_gen_session_new(f.m, f.tok, &p, 1, max_len, &g, err, sizeof err), 0, "%s",
	             err);
	cr_assert_eq(rl_gen_session_add(g, 0, f.prompts[0], f.lens[0], 4, err, sizeof err), 0, "%s",
	             err);
	do
		cr_assert_eq(rl_gen_session_step(g, ended, &n_ended, err, sizeof err), 0, "%s",
		             err);
	while (n_ended == 0);
	cr_assert_eq(rl_gen_session_len(g, 0),
	             f.lens[0] + (int)rl_gen_session_turn(g, 0)->n_tokens);
	/* a turn asking for more than max_len leaves is cut there */
	while (rl_gen_session_len(g, 0) + 3 < max_len) {
		cr_assert_eq(rl_gen_session_continue(g, 0, obs, 3, 1000, err, sizeof err), 0, "%s",
		             err);
		do
			cr_assert_eq(rl_gen_session_step(g, ended, &n_ended, err, sizeof err), 0,
			             "%s", err);
		while (n_ended == 0);
	}
	const struct rl_gen_output *o = rl_gen_session_turn(g, 0);
	cr_expect_eq(o->reason, RL_STOP_MAX_TOKENS);
	cr_expect_eq(rl_gen_session_len(g, 0), max_len);
	cr_assert_eq(rl_gen_session_continue(g, 0, NULL, 0, 4, err, sizeof err), -1);
	cr_expect(strstr(err, "max_len 20") != NULL, "%s", err);
	rl_gen_session_free(g);
	fx_close(&f);
}

Test(gen_session, misuse_is_refused)
{
	struct fx f;
	struct rl_gen_session *g;
	int ended[N], n_ended;
	char err[512];
	int32_t obs[40] = {0};

	fx_open(&f, &rl_ops_cpu, DISTINCT);
	struct rl_gen_params p = sampled(1, true);
	cr_assert_eq(rl_gen_session_new(f.m, f.tok, &p, 3, 40, &g, err, sizeof err), 0, "%s", err);
	/* continue a sequence not added, then one queued behind a busy slot */
	cr_assert_eq(rl_gen_session_continue(g, 0, obs, 1, 4, err, sizeof err), -1);
	cr_expect(strstr(err, "not added") != NULL, "%s", err);
	cr_assert_eq(rl_gen_session_add(g, 0, f.prompts[0], f.lens[0], 4, err, sizeof err), 0, "%s",
	             err);
	cr_assert_eq(rl_gen_session_add(g, 0, f.prompts[0], f.lens[0], 4, err, sizeof err), -1);
	cr_expect(strstr(err, "added already") != NULL, "%s", err);
	cr_assert_eq(rl_gen_session_add(g, 3, f.prompts[0], f.lens[0], 4, err, sizeof err), -1);
	cr_expect(strstr(err, "not in 0..2") != NULL, "%s", err);
	cr_assert_eq(rl_gen_session_add(g, 2, obs, 40, 4, err, sizeof err), -1);
	cr_expect(strstr(err, "no room") != NULL, "%s", err);
	cr_assert_eq(rl_gen_session_add(g, 1, f.prompts[1], f.lens[1], 4, err, sizeof err), 0, "%s",
	             err);
	cr_assert_eq(rl_gen_session_step(g, ended, &n_ended, err, sizeof err), 0, "%s", err);
	cr_assert_eq(n_ended, 0);
	cr_assert_eq(rl_gen_session_continue(g, 1, obs, 1, 4, err, sizeof err), -1);
	cr_expect(strstr(err, "waiting for a slot") != NULL, "%s", err);
	cr_assert_eq(rl_gen_session_continue(g, 0, obs, 1, 4, err, sizeof err), -1);
	cr_expect(strstr(err, "generating its turn") != NULL, "%s", err);
	cr_assert_null(rl_gen_session_turn(g, 0));
	while (n_ended == 0)
		cr_assert_eq(rl_gen_session_step(g, ended, &n_ended, err, sizeof err), 0, "%s",
		             err);
	cr_assert_eq(ended[0], 0);
	/* sequence 0 waits and holds the only slot: nothing runs */
	cr_expect_not(rl_gen_session_busy(g));
	int len = rl_gen_session_len(g, 0);
	cr_assert_eq(rl_gen_session_continue(g, 0, obs, 40 - len, 4, err, sizeof err), -1);
	cr_expect(strstr(err, "no room") != NULL, "%s", err);
	cr_assert_eq(rl_gen_session_continue(g, 0, obs, 1, 0, err, sizeof err), -1);
	rl_gen_session_finish(g, 0);
	cr_assert_eq(rl_gen_session_continue(g, 0, obs, 1, 4, err, sizeof err), -1);
	cr_expect(strstr(err, "finished") != NULL, "%s", err);
	/* its slot went to sequence 1 */
	cr_expect(rl_gen_session_busy(g));
	rl_gen_session_free(g);

	/* a session longer than the model's positions; expert parallelism */
	cr_assert_eq(rl_gen_session_new(f.m, f.tok, &p, 3, 257, &g, err, sizeof err), -1);
	cr_expect(strstr(err, "max_position_embeddings") != NULL, "%s", err);
	int ep = f.m->shard.ep.size;
	f.m->shard.ep.size = 2;
	cr_assert_eq(rl_gen_session_new(f.m, f.tok, &p, 3, 40, &g, err, sizeof err), -1);
	cr_expect(strstr(err, "not implemented") != NULL, "%s", err);
	f.m->shard.ep.size = ep;
	fx_close(&f);
}
