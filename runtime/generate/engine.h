/* The one generation engine under rl_generate and the multi-turn session:
 * sequences queued in the order they are added, slots of a paged KV cache,
 * admission with prefix sharing of identical prompts, the step budget, one
 * batched forward per step, sampling and logprobs on the backend, and the
 * stop checks of each sequence's turn. rl_generate is a session whose
 * sequences are over at their first turn's end (one_turn); the session
 * keeps a sequence whose turn ended in its slot, its cache and its last
 * token (drawn, not fed yet) until the caller continues or finishes it.
 * Internal to runtime/generate.
 * defines: struct rl_gen_engine, enum rl_gen_seq_state,
 * rl_gen_engine_check_params, rl_gen_engine_init, rl_gen_engine_free,
 * rl_gen_engine_add, rl_gen_engine_continue, rl_gen_engine_finish,
 * rl_gen_engine_admit, rl_gen_engine_step, rl_gen_engine_busy */
#ifndef RL_GENERATE_ENGINE_H
#define RL_GENERATE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/generate/generate.h"
#include "runtime/model/kv_cache.h"

enum rl_gen_seq_state {
	RL_GEN_SEQ_NEW = 0, /* not added yet */
	RL_GEN_SEQ_QUEUED,  /* added, waiting for a slot */
	RL_GEN_SEQ_RUNNING, /* in a slot, generating its turn */
	RL_GEN_SEQ_ENDED,   /* in a slot, its turn over: waits for its caller */
	RL_GEN_SEQ_READY,   /* in a slot, continued: waits for a running place */
	RL_GEN_SEQ_DONE,    /* over, its slot freed */
};

struct rl_gen_engine_slot {
	int seq;             /* the sequence it runs, -1 when free */
	const int32_t *feed; /* what it feeds next step (n_feed 0: nothing, it waits) */
	int n_feed;
};

struct rl_gen_engine {
	struct rl_model *m;
	const struct rl_tokenizer *tok;
	const struct rl_gen_params *p;
	bool one_turn; /* rl_generate: a sequence is over when its first turn ends */
	int n;         /* sequences 0..n-1 */
	/* per sequence: its prompt (the same array for prompts to share), its
	 * current turn, the turn's stop state and token budget, the tokens of
	 * its response so far (turns and observations; a token drawn counts
	 * at once), the token it feeds next, and, after a continue, the token
	 * and the observation it feeds */
	const int32_t **prompts;
	int *lens;
	struct rl_gen_output *out;
	struct rl_stop_seq *stop_seq;
	size_t *cap, *budget;
	int *resp;
	int32_t *next;
	int32_t **pend;
	int *pend_cap, *pend_n;
	unsigned char *state;
	/* the sequences in the order added; waiting: the first of them that may
	 * still be queued */
	int *order;
	int n_order, waiting;
	/* the continued sequences waiting for a running place, first in
	 * first out (a ring of n; an entry whose sequence finished meanwhile
	 * is skipped) */
	int *ready;
	int ready_head, ready_n;
	struct rl_kv_cache *kv;
	/* a slot holds a sequence's cache, running or waiting; at most
	 * max_running of them run a turn at once (n_slots for rl_generate) */
	struct rl_gen_engine_slot *slots;
	int n_slots, live; /* live: slots holding a sequence */
	int max_running, running;
	int sample_vocab;
	struct rl_sample_params sp;
	struct rl_lm_logprobs_shape lp;
	/* a step's groups, and its results on the host */
	int *g_slot, *g_count;
	int32_t *g_ids, *tokens;
	float *logprobs;
	int64_t *counters;
	/* on the backend */
	int32_t *d_tokens;
	int64_t *d_counters;
	float *d_logprobs, *d_lse, *d_work;
	/* what it did: steps run, tokens fed to the model, prompt tokens a
	 * sequence took from another's cache instead */
	uint64_t steps, fed, shared;
	int max_groups; /* the most groups one step ran */
};

/* The checks every engine makes of p (the stop conditions with budget
 * 1 when stop_budget is false: the session's turns bring their own). */
int rl_gen_engine_check_params(const struct rl_tokenizer *tok, const struct rl_gen_params *p,
                               bool stop_budget, char *err, size_t errlen);
/* e's m, tok, p, one_turn, n, n_slots (the most sequences holding a
 * cache at once) and max_running (the most running a turn at once, at
 * most n_slots) set, the rest zero: its cache for sequences of max_len
 * tokens and steps feeding at least longest_feed tokens of one sequence,
 * its slots (fewer when the cache's blocks cannot hold n_slots of them)
 * and its per-sequence state. On failure rl_gen_engine_free cleans up. */
int rl_gen_engine_init(struct rl_gen_engine *e, int max_len, int longest_feed, char *err,
                       size_t errlen);
/* Frees what init allocated (not e->out's contents, nor the prompts). */
void rl_gen_engine_free(struct rl_gen_engine *e);

/* Sequence s (state NEW) queued with its prompt (borrowed) for a first
 * turn of at most budget tokens. */
void rl_gen_engine_add(struct rl_gen_engine *e, int s, const int32_t *prompt, int len,
                       size_t budget);
/* Sequence s (state ENDED) goes on: its last token, then obs, fed at its
 * next step, or once a running place is free (READY); its next turn has
 * at most budget tokens. -1: out of memory. */
int rl_gen_engine_continue(struct rl_gen_engine *e, int s, const int32_t *obs, int n_obs,
                           size_t budget);
/* Sequence s is over: out of the queue, or its slot and its cache freed. */
void rl_gen_engine_finish(struct rl_gen_engine *e, int s);

/* Gives free running places to the READY sequences, in order, then fills
 * free slots from the queued ones, in order. */
int rl_gen_engine_admit(struct rl_gen_engine *e, char *err, size_t errlen);
/* One batched forward of every slot with something to feed (while the
 * step budget lasts), one token drawn for each. ended (may be NULL) gets
 * the sequences whose turn ended, *n_ended how many. */
int rl_gen_engine_step(struct rl_gen_engine *e, int *ended, int *n_ended, char *err, size_t errlen);
/* Whether admit and step would do anything. */
bool rl_gen_engine_busy(const struct rl_gen_engine *e);

#endif
