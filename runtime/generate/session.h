/* Multi-turn generation: the engine of generate.h held open across turns,
 * for episodes whose model turns alternate with an environment's
 * observations. The caller drives it: it adds sequences, steps the engine
 * (one batched forward of every sequence that can run, as rl_generate's
 * steps), and takes the sequences whose turn ended; each then waits, its
 * slot and its KV cache kept, until the caller either continues it with
 * an observation's tokens (appended to its cache after the turn's last
 * token, with no prefill of what came before) or finishes it. A sequence
 * waiting for its environment never holds the others: a step runs every
 * sequence that can run, and a finished sequence's slot takes the next
 * waiting one at once.
 *
 * A sequence's response is everything after its prompt: its turns'
 * tokens and the observations between them, in order. Its token at
 * response position t draws from Philox at (seed, stream_base + s, t)
 * (rl_generate's key when there is one turn), so that with
 * batch_invariant what an episode generates depends on its prompt, its
 * observations, the weights and that key alone: not on when its
 * environment answered, which other sequences shared its steps, or the
 * slots. Its logprobs are then the bits the trainer's batch-invariant
 * logprob pass computes over the whole transcript.
 * defines: struct rl_gen_session, rl_gen_session_new, rl_gen_session_add,
 * rl_gen_session_step, rl_gen_session_busy, rl_gen_session_turn,
 * rl_gen_session_continue, rl_gen_session_finish, rl_gen_session_free,
 * rl_gen_session_len, struct rl_gen_session_stats, rl_gen_session_stats */
#ifndef RL_GENERATE_SESSION_H
#define RL_GENERATE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/generate/generate.h"

struct rl_gen_session;

/* A session for sequences 0..n_seqs-1 under p (p->max_slots of them
 * running a turn at once, p->max_in_flight of them holding a cache at
 * once; p->stop.max_new_tokens is ignored: each turn brings its own
 * budget), none longer than max_len tokens in all (prompt, turns and
 * observations; at most the model's max_position_embeddings). p and tok
 * must outlive the session, and the model's weights must not change
 * while it lives (its cache holds what they computed). A sequence
 * waiting for its caller keeps its cache, and its running slot too
 * unless max_in_flight is above max_slots: then a continued sequence
 * runs as soon as fewer than max_slots run (in the order continued,
 * before new sequences are admitted). The cache's blocks (p->kv_blocks,
 * p->memory_utilization) may cut max_in_flight. Prompts with the same tokens share
 * their prefill (rl_generate's sharing, by content here). Under tensor
 * or pipeline parallelism every rank of the model's groups makes the
 * same session calls in the same order (the steps are collective);
 * expert parallelism is refused (not implemented). Returns 0, or -1
 * with err. */
int rl_gen_session_new(struct rl_model *m, const struct rl_tokenizer *tok,
                       const struct rl_gen_params *p, int n_seqs, int max_len,
                       struct rl_gen_session **out, char *err, size_t errlen);
/* Sequence s joins with its prompt (copied), to generate its first turn
 * of at most max_new_tokens (and never past max_len: the turn then stops
 * with RL_STOP_MAX_TOKENS); it runs when a slot is free, in the order
 * added. Returns 0, or -1 with err (s added before, an empty prompt, or
 * one that leaves no room for a token under max_len). */
int rl_gen_session_add(struct rl_gen_session *g, int s, const int32_t *prompt, int len,
                       size_t max_new_tokens, char *err, size_t errlen);
/* One engine step: waiting sequences admitted to free slots, then one
 * batched forward of every running sequence not waiting for its caller.
 * ended[0..*n_ended) gets the sequences whose turn ended in it (ended has
 * room for n_seqs). A call with nothing to run does nothing. Returns 0,
 * or -1 with err. */
int rl_gen_session_step(struct rl_gen_session *g, int *ended, int *n_ended, char *err,
                        size_t errlen);
/* Whether a step would run anything: a sequence running, or waiting for
 * a slot that is free. False while every sequence in the session waits
 * for its caller (or is finished). */
bool rl_gen_session_busy(const struct rl_gen_session *g);
/* Sequence s's last turn as rl_generate reports a sequence: its tokens
 * (the stopping token included), their logprobs, its text (decoded, cut
 * before a stop string) and why it stopped. Valid until s continues or
 * finishes; NULL while s's turn has not ended. */
const struct rl_gen_output *rl_gen_session_turn(const struct rl_gen_session *g, int s);
/* Sequence s, whose turn ended, goes on: obs (n_obs tokens, copied; may
 * be 0) follow the turn's tokens in its response and cache, and it
 * generates its next turn of at most max_new_tokens (cut at max_len as
 * above). Returns 0, or -1 with err (s not waiting, or its tokens so far
 * and obs leave no room for a token under max_len: finish it then). */
int rl_gen_session_continue(struct rl_gen_session *g, int s, const int32_t *obs, int n_obs,
                            size_t max_new_tokens, char *err, size_t errlen);
/* Sequence s is over: its slot and its cache are freed for the others. */
void rl_gen_session_finish(struct rl_gen_session *g, int s);
void rl_gen_session_free(struct rl_gen_session *g);

/* Sequence s's tokens so far: its prompt and its response (every turn's
 * tokens, the last turn's included, and the observations); what max_len
 * bounds. 0 for a sequence not added. */
int rl_gen_session_len(const struct rl_gen_session *g, int s);

/* What the session did so far. fed_tokens counts every token given to
 * the model: each prompt once (less what it shared), then each drawn
 * token and each observation once; a continue never feeds a sequence's
 * history again. */
struct rl_gen_session_stats {
	uint64_t steps;         /* batched forwards */
	uint64_t fed_tokens;    /* tokens fed to the model */
	uint64_t shared_tokens; /* prompt tokens taken from an identical prompt's cache */
	uint64_t turns;         /* turns ended */
	int max_batch;          /* the most sequences one step ran */
};
void rl_gen_session_stats(const struct rl_gen_session *g, struct rl_gen_session_stats *st);

#endif
