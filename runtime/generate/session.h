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
 * rl_gen_session_continue, rl_gen_session_finish, rl_gen_session_free */
#ifndef RL_GENERATE_SESSION_H
#define RL_GENERATE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/generate/generate.h"

struct rl_gen_session;

/* A session for sequences 0..n_seqs-1 under p (p->max_slots of them at
 * once; p->stop.max_new_tokens is ignored: each turn brings its own
 * budget), none longer than max_len tokens in all (prompt, turns and
 * observations; at most the model's max_position_embeddings). p and tok
 * must outlive the session. Returns 0, or -1 with err. */
int rl_gen_session_new(struct rl_model *m, const struct rl_tokenizer *tok,
                       const struct rl_gen_params *p, int n_seqs, int max_len,
                       struct rl_gen_session **out, char *err, size_t errlen);
/* Sequence s joins with its prompt (copied), to generate its first turn
 * of at most max_new_tokens; it runs when a slot is free, in the order
 * added. Returns 0, or -1 with err. */
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
 * finishes. */
const struct rl_gen_output *rl_gen_session_turn(const struct rl_gen_session *g, int s);
/* Sequence s, whose turn ended, goes on: obs (n_obs tokens, copied; may
 * be 0) follow the turn's tokens in its response and cache, and it
 * generates its next turn of at most max_new_tokens. Returns 0, or -1
 * with err (s not waiting, or past max_len). */
int rl_gen_session_continue(struct rl_gen_session *g, int s, const int32_t *obs, int n_obs,
                            size_t max_new_tokens, char *err, size_t errlen);
/* Sequence s is over: its slot and its cache are freed for the others. */
void rl_gen_session_finish(struct rl_gen_session *g, int s);
void rl_gen_session_free(struct rl_gen_session *g);

#endif
