/* The multi-turn session: the engine of rl_generate (engine.c) held open,
 * its sequences kept in their slots between turns. This file checks the
 * caller's requests, owns the prompts and the turns' outputs, and sets
 * the model's kernels for each step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/generate/engine.h"
#include "runtime/generate/session.h"

struct rl_gen_session {
	struct rl_gen_engine e;
	int max_len;
	/* the prompts' copies: own[s] NULL when s's prompt is an earlier
	 * sequence's copy (the same tokens), which the two then share */
	int32_t **own;
	uint64_t turns;
};

int rl_gen_session_new(struct rl_model *m, const struct rl_tokenizer *tok,
                       const struct rl_gen_params *p, int n_seqs, int max_len,
                       struct rl_gen_session **out, char *err, size_t errlen)
{
	struct rl_gen_session *g;

	*out = NULL;
	if (m->shard.ep.size > 1) {
		snprintf(err, errlen,
		         "multi-turn generation under expert parallelism (ep %d) is not "
		         "implemented: use ep 1",
		         m->shard.ep.size);
		return -1;
	}
	if (n_seqs <= 0 || max_len < 2) {
		snprintf(err, errlen,
		         "generation session: %d sequences of at most %d tokens (want at least 1 "
		         "sequence and 2 tokens)",
		         n_seqs, max_len);
		return -1;
	}
	if (max_len > m->cfg.max_position_embeddings) {
		snprintf(err, errlen,
		         "generation session: max_len %d exceeds the model's "
		         "max_position_embeddings (%d)",
		         max_len, m->cfg.max_position_embeddings);
		return -1;
	}
	if (rl_gen_engine_check_params(tok, p, false, err, errlen))
		return -1;
	g = calloc(1, sizeof *g);
	if (!g) {
		snprintf(err, errlen, "out of memory for a generation session");
		return -1;
	}
	g->e = (struct rl_gen_engine){.m = m, .tok = tok, .p = p, .n = n_seqs};
	g->e.max_running = p->max_slots > 0 && p->max_slots < n_seqs ? p->max_slots : n_seqs;
	g->e.n_slots = p->max_in_flight > g->e.max_running ? p->max_in_flight : g->e.max_running;
	if (g->e.n_slots > n_seqs)
		g->e.n_slots = n_seqs;
	g->max_len = max_len;
	if (rl_gen_engine_init(&g->e, max_len, max_len, err, errlen)) {
		rl_gen_session_free(g);
		return -1;
	}
	g->e.out = calloc((size_t)n_seqs, sizeof *g->e.out);
	g->own = calloc((size_t)n_seqs, sizeof *g->own);
	if (!g->e.out || !g->own) {
		snprintf(err, errlen, "out of memory for a generation session of %d sequences",
		         n_seqs);
		rl_gen_session_free(g);
		return -1;
	}
	*out = g;
	return 0;
}

static const char *state_name(enum rl_gen_seq_state st)
{
	switch (st) {
	case RL_GEN_SEQ_NEW:
		return "not added";
	case RL_GEN_SEQ_QUEUED:
		return "waiting for a slot";
	case RL_GEN_SEQ_RUNNING:
		return "generating its turn";
	case RL_GEN_SEQ_ENDED:
		return "waiting for its caller";
	case RL_GEN_SEQ_READY:
		return "continued, waiting for a running slot";
	case RL_GEN_SEQ_DONE:
		return "finished";
	}
	return "?";
}

static int check_seq(const struct rl_gen_session *g, int s, const char *what, char *err,
                     size_t errlen)
{
	if (s < 0 || s >= g->e.n) {
		snprintf(err, errlen, "generation session: %s sequence %d, not in 0..%d", what, s,
		         g->e.n - 1);
		return -1;
	}
	return 0;
}

/* An earlier sequence's copy of the same tokens, or NULL. */
static const int32_t *same_tokens(const struct rl_gen_session *g, const int32_t *prompt, int len)
{
	for (int s = 0; s < g->e.n; s++)
		if (g->own[s] && g->e.lens[s] == len &&
		    memcmp(g->own[s], prompt, (size_t)len * sizeof *prompt) == 0)
			return g->own[s];
	return NULL;
}

static size_t turn_budget(const struct rl_gen_session *g, size_t want, int len)
{
	size_t room = (size_t)(g->max_len - len);

	return want < room ? want : room;
}

int rl_gen_session_add(struct rl_gen_session *g, int s, const int32_t *prompt, int len,
                       size_t max_new_tokens, char *err, size_t errlen)
{
	const int32_t *shared;

	if (check_seq(g, s, "add", err, errlen))
		return -1;
	if (g->e.state[s] != RL_GEN_SEQ_NEW) {
		snprintf(err, errlen, "generation session: sequence %d was added already (%s)", s,
		         state_name(g->e.state[s]));
		return -1;
	}
	if (len <= 0 || !prompt) {
		snprintf(err, errlen, "generation session: sequence %d: the prompt is empty", s);
		return -1;
	}
	if (len >= g->max_len) {
		snprintf(err, errlen,
		         "generation session: sequence %d: a prompt of %d tokens leaves no room "
		         "for a token under max_len %d",
		         s, len, g->max_len);
		return -1;
	}
	if (max_new_tokens == 0) {
		snprintf(err, errlen,
		         "generation session: sequence %d: max_new_tokens must be >= 1", s);
		return -1;
	}
	shared = same_tokens(g, prompt, len);
	if (!shared) {
		g->own[s] = malloc((size_t)len * sizeof *prompt);
		if (!g->own[s]) {
			snprintf(err, errlen, "out of memory for a prompt of %d tokens", len);
			return -1;
		}
		memcpy(g->own[s], prompt, (size_t)len * sizeof *prompt);
		shared = g->own[s];
	}
	rl_gen_engine_add(&g->e, s, shared, len, turn_budget(g, max_new_tokens, len));
	return 0;
}

int rl_gen_session_step(struct rl_gen_session *g, int *ended, int *n_ended, char *err,
                        size_t errlen)
{
	bool was;
	int rc;

	*n_ended = 0;
	if (!rl_gen_engine_busy(&g->e))
		return 0;
	was = rl_model_set_invariant(g->e.m, g->e.p->batch_invariant);
	rc = rl_gen_engine_admit(&g->e, err, errlen) ||
	     rl_gen_engine_step(&g->e, ended, n_ended, err, errlen);
	rl_model_set_invariant(g->e.m, was);
	g->turns += (uint64_t)*n_ended;
	return rc ? -1 : 0;
}

bool rl_gen_session_busy(const struct rl_gen_session *g)
{
	return rl_gen_engine_busy(&g->e);
}

const struct rl_gen_output *rl_gen_session_turn(const struct rl_gen_session *g, int s)
{
	if (s < 0 || s >= g->e.n || g->e.state[s] != RL_GEN_SEQ_ENDED)
		return NULL;
	return &g->e.out[s];
}

int rl_gen_session_continue(struct rl_gen_session *g, int s, const int32_t *obs, int n_obs,
                            size_t max_new_tokens, char *err, size_t errlen)
{
	int len;

	if (check_seq(g, s, "continue", err, errlen))
		return -1;
	if (g->e.state[s] != RL_GEN_SEQ_ENDED) {
		snprintf(err, errlen,
		         "generation session: cannot continue sequence %d: it is %s, not waiting "
		         "for its caller",
		         s, state_name(g->e.state[s]));
		return -1;
	}
	if (n_obs < 0 || (n_obs > 0 && !obs)) {
		snprintf(err, errlen,
		         "generation session: sequence %d: an observation of %d tokens", s, n_obs);
		return -1;
	}
	if (max_new_tokens == 0) {
		snprintf(err, errlen,
		         "generation session: sequence %d: max_new_tokens must be >= 1", s);
		return -1;
	}
	len = g->e.lens[s] + g->e.resp[s];
	if (n_obs >= g->max_len - len) {
		snprintf(err, errlen,
		         "generation session: sequence %d has %d tokens; an observation of %d "
		         "leaves no room for a token under max_len %d",
		         s, len, n_obs, g->max_len);
		return -1;
	}
	if (rl_gen_engine_continue(&g->e, s, obs, n_obs,
	                           turn_budget(g, max_new_tokens, len + n_obs))) {
		snprintf(err, errlen, "out of memory for an observation of %d tokens", n_obs);
		return -1;
	}
	return 0;
}

void rl_gen_session_finish(struct rl_gen_session *g, int s)
{
	if (!g || s < 0 || s >= g->e.n || g->e.state[s] == RL_GEN_SEQ_NEW)
		return;
	rl_gen_engine_finish(&g->e, s);
	rl_gen_outputs_free(&g->e.out[s], 1);
	g->e.cap[s] = 0;
}

int rl_gen_session_len(const struct rl_gen_session *g, int s)
{
	if (s < 0 || s >= g->e.n || g->e.state[s] == RL_GEN_SEQ_NEW)
		return 0;
	return g->e.lens[s] + g->e.resp[s];
}

void rl_gen_session_stats(const struct rl_gen_session *g, struct rl_gen_session_stats *st)
{
	*st = (struct rl_gen_session_stats){.steps = g->e.steps,
	                                    .fed_tokens = g->e.fed,
	                                    .shared_tokens = g->e.shared,
	                                    .turns = g->turns,
	                                    .max_batch = g->e.max_groups};
}

void rl_gen_session_free(struct rl_gen_session *g)
{
	if (!g)
		return;
	if (g->e.out)
		rl_gen_outputs_free(g->e.out, g->e.n);
	if (g->own)
		for (int s = 0; s < g->e.n; s++)
			free(g->own[s]);
	free(g->own);
	free(g->e.out);
	rl_gen_engine_free(&g->e);
	free(g);
}
