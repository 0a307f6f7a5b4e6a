/* The multi-turn generation session on a model cut over real MPI ranks
 * (started by tests/mpi/tp_session_test.sh under mpiexec): every rank
 * builds the same random model twice, keeps one whole and cuts the other
 * over the world, as its tensor-parallel group and then as pipeline
 * stages, and every rank drives the same episodes through a session on
 * each (a scripted environment: sequence s gets after its turn k an
 * observation and a budget that depend on s and k alone). The cut
 * model's episodes must be the whole model's: the same tokens, the
 * logprobs within the cut's rounding. And one turn per sequence on the
 * cut model is rl_generate's on it, to the bit. Prints "N passed, M
 * failed" on rank 0. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/comm.h"
#include "runtime/generate/session.h"
#include "runtime/parallel/pp_group.h"
#include "runtime/parallel/tp_group.h"
#include "tests/mpi/mpi_check.h"
#include "tests/mpi/random_model.h"

/* fp32 sums over another cut of the heads and the vocabulary: a few
 * ulps of a logprob of size ~log(vocab) */
#define TOL 1e-5

enum { N = 6, V = 37, MAX_RESP = 64, MAX_LEN = 60 };

static void config_of(struct rl_model_config *c, int layers)
{
	memset(c, 0, sizeof *c);
	c->arch = RL_ARCH_LLAMA;
	c->vocab_size = V;
	c->hidden_size = 32;
	c->intermediate_size = 48;
	c->n_layers = layers;
	c->n_heads = 8;
	c->n_kv_heads = 4;
	c->head_dim = 8;
	c->max_position_embeddings = 64;
	c->rms_norm_eps = 1e-6;
	c->rope_theta = 10000;
	c->tie_word_embeddings = false;
	c->bos_token_id = -1;
	c->torch_dtype = RL_F32;
}

struct episode {
	int32_t resp[MAX_RESP];
	float lp[MAX_RESP];
	bool gen[MAX_RESP];
	int n, turns;
};

static int32_t prompts[N][8];
static int lens[N];

static void make_prompts(void)
{
	uint32_t s = 31;

	for (int i = 0; i < N; i++) {
		lens[i] = 3 + i % 4;
		for (int t = 0; t < 8; t++)
			prompts[i][t] = (int32_t)(lcg(&s) % V);
	}
}

static struct rl_gen_params params(void)
{
	return (struct rl_gen_params){.sampling = {0.9f, 0, 1.0f},
	                              .stop = {.max_new_tokens = 5},
	                              .seed = 11,
	                              .stream_base = 2,
	                              .max_slots = 4,
	                              .kv_block = 4,
	                              .batch_invariant = true};
}

/* Every sequence's episode: 1 + s % 3 turns of 2 + (s + k) % 4 tokens,
 * observations of (s + k) % 3 tokens, answered at once; 4 running of
 * all 6 in flight. */
static void run(struct rl_model *m, struct episode *ep, const char *what)
{
	struct rl_gen_params p = params();
	/* waiting sequences give up their running slots */
	p.max_in_flight = N;
	struct rl_gen_session *g;
	int ended[N], n_ended, done = 0;
	char err[512];

	memset(ep, 0, N * sizeof *ep);
	must(rl_gen_session_new(m, NULL, &p, N, MAX_LEN, &g, err, sizeof err), what, err);
	for (int s = 0; s < N; s++)
		must(rl_gen_session_add(g, s, prompts[s], lens[s], 2 + (size_t)(s % 4), err,
		                        sizeof err),
		     what, err);
	while (done < N) {
		must(!rl_gen_session_busy(g), what, "the session stalled");
		must(rl_gen_session_step(g, ended, &n_ended, err, sizeof err), what, err);
		for (int i = 0; i < n_ended; i++) {
			int s = ended[i], k = ep[s].turns++, n_obs = (s + k) % 3;
			const struct rl_gen_output *o = rl_gen_session_turn(g, s);
			int32_t obs[3];

			for (size_t j = 0; j < o->n_tokens && ep[s].n < MAX_RESP; j++) {
				ep[s].resp[ep[s].n] = o->tokens[j];
				ep[s].lp[ep[s].n] = o->logprobs[j];
				ep[s].gen[ep[s].n++] = true;
			}
			if (ep[s].turns == 1 + s % 3) {
				rl_gen_session_finish(g, s);
				done++;
				continue;
			}
			for (int j = 0; j < n_obs && ep[s].n < MAX_RESP; j++) {
				obs[j] = (int32_t)((5 * s + 3 * k + j) % V);
				ep[s].resp[ep[s].n++] = obs[j];
			}
			must(rl_gen_session_continue(
			         g, s, obs, n_obs, 2 + (size_t)((s + k + 1) % 4), err, sizeof err),
			     what, err);
		}
	}
	rl_gen_session_free(g);
}

static void compare(const struct episode *whole, const struct episode *cut, const char *what)
{
	for (int s = 0; s < N; s++) {
		bool same = whole[s].n == cut[s].n && whole[s].turns == cut[s].turns &&
		            memcmp(whole[s].resp, cut[s].resp, (size_t)cut[s].n * 4) == 0;
		check(same, "%s: sequence %d's tokens are not the whole model's", what, s);
		for (int t = 0; same && t < cut[s].n; t++)
			if (cut[s].gen[t])
				check(fabs((double)cut[s].lp[t] - whole[s].lp[t]) <=
				          TOL * (1 + fabs((double)whole[s].lp[t])),
				      "%s: sequence %d token %d: logprob %.9g, whole model %.9g",
				      what, s, t, (double)cut[s].lp[t], (double)whole[s].lp[t]);
	}
}

/* One turn per sequence, each finished as it ends: rl_generate's bits on
 * the same (cut) model. */
static void one_turn_is_rl_generate(struct rl_model *m, const char *what)
{
	struct rl_gen_params p = params();
	struct rl_gen_output want[N];
	const int32_t *pr[N];
	struct rl_gen_session *g;
	int ended[N], n_ended, got = 0;
	char err[512];

	for (int s = 0; s < N; s++)
		pr[s] = prompts[s];
	must(rl_generate(m, NULL, N, pr, lens, &p, want, err, sizeof err), what, err);
	must(
	    rl_gen_session_new(m, NULL, &p, N, 6 + (int)p.stop.max_new_tokens, &g, err, sizeof err),
	    what, err);
	for (int s = 0; s < N; s++)
		must(rl_gen_session_add(g, s, prompts[s], lens[s], p.stop.max_new_tokens, err,
		                        sizeof err),
		     what, err);
	while (rl_gen_session_busy(g)) {
		must(rl_gen_session_step(g, ended, &n_ended, err, sizeof err), what, err);
		for (int i = 0; i < n_ended; i++) {
			int s = ended[i];
			const struct rl_gen_output *o = rl_gen_session_turn(g, s);

			check(o->n_tokens == want[s].n_tokens &&
			          memcmp(o->tokens, want[s].tokens, o->n_tokens * 4) == 0 &&
			          memcmp(o->logprobs, want[s].logprobs, o->n_tokens * 4) == 0,
			      "%s: sequence %d's one turn is not rl_generate's", what, s);
			rl_gen_session_finish(g, s);
			got++;
		}
	}
	check(got == N, "%s: %d of %d sequences ended", what, got, N);
	rl_gen_session_free(g);
	rl_gen_outputs_free(want, N);
}

int main(void)
{
	struct rl_comm_world *w;
	struct rl_comm *world, *embedding;
	struct rl_model_config c;
	static struct episode whole_ep[N], cut_ep[N];
	char err[512];

	start_ranks(&w, &world, 0, "test_tp_session");
	make_prompts();

	/* tensor parallelism over the world */
	struct rl_model_cut cut = {0};
	rl_tp_group_bind(&cut.tp, world);
	cut.pp.size = 1;
	config_of(&c, 2);
	struct rl_model *whole = random_model(&c, 5, 77), *part = random_model(&c, 5, 77);
	must(rl_model_split(&part, &cut, err, sizeof err), "tp split", err);
	run(whole, whole_ep, "whole");
	run(part, cut_ep, "tp");
	compare(whole_ep, cut_ep, "tensor parallel");
	one_turn_is_rl_generate(part, "tensor parallel");
	rl_model_free(part);

	/* the world as pipeline stages, a layer each */
	int stages = rl_comm_size(world), stage = rl_comm_rank(world);
	must(rl_comm_split(world, stage == 0 || stage == stages - 1 ? 0 : -1, stage, "embedding",
	                   &embedding, err, sizeof err),
	     "embedding group", err);
	rl_model_free(whole);
	config_of(&c, stages);
	whole = random_model(&c, 5, 77);
	part = random_model(&c, 5, 77);
	cut = (struct rl_model_cut){0};
	cut.tp.size = 1;
	cut.cp.size = 1;
	rl_pp_group_bind(&cut.pp, world, embedding);
	must(rl_model_split(&part, &cut, err, sizeof err), "pipeline split", err);
	run(whole, whole_ep, "whole");
	run(part, cut_ep, "pp");
	compare(whole_ep, cut_ep, "pipeline");
	one_turn_is_rl_generate(part, "pipeline");
	rl_model_free(part);
	rl_model_free(whole);
	rl_comm_free(embedding);
	return finish_ranks(w, world, "test_tp_session");
}
