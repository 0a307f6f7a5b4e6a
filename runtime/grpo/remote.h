/* Non-colocated generation: the training ranks ask the generation ranks
 * for rollouts and hand them new weights. Training rank 0 leads: it sends
 * each command over the bridge, collects the generation replicas' samples
 * and passes them on to the other training ranks; the generation ranks do
 * nothing but serve its commands, in order, until it says stop.
 * defines: rl_remote_generate, rl_remote_request, rl_remote_receive, rl_remote_refit,
 * rl_remote_stop, rl_generation_serve */
#ifndef RL_GRPO_REMOTE_H
#define RL_GRPO_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/grpo/rollout_wire.h"
#include "runtime/grpo/trainer.h"

/* Every training rank: r's prompts sampled by the generation ranks with
 * seed, and every sample of r filled as rl_rollout_generate fills its
 * own share (tokens, generation logprobs, flags, response text), on every
 * training rank. */
int rl_remote_generate(struct rl_trainer *t, struct rl_rollout *r, uint64_t seed,
                       int64_t *prompts_truncated, char *err, size_t errlen);
/* The two halves of rl_remote_generate, for asynchronous GRPO: training
 * rank 0 sends the request (the others return at once), and every
 * training rank later receives what it asked for. Between them the
 * generation ranks generate while training goes on. */
int rl_remote_request(struct rl_trainer *t, const struct rl_rollout *r, uint64_t seed, char *err,
                      size_t errlen);
int rl_remote_receive(struct rl_trainer *t, struct rl_rollout *r, struct rl_wire_info *info,
                      char *err, size_t errlen);
/* Every training rank: the generation ranks take the weights as they are
 * now (the first model replica sends them), once they are done with what
 * was asked before. Asynchronous GRPO does not wait for that: training
 * rank 0 keeps a copy of the weights until they take it, and waits only
 * for the refit before. */
int rl_remote_refit(struct rl_trainer *t, char *err, size_t errlen);
/* Training rank 0, at the end of the run: the rollouts still in flight are
 * taken (and left unused), and the generation ranks return. */
void rl_remote_stop(struct rl_trainer *t);
/* A generation rank, set up (rl_trainer_setup): serves until told to stop.
 * Returns 0, or -1 with err. */
int rl_generation_serve(struct rl_trainer *t, char *err, size_t errlen);

#endif
