/* A model of the run read for this rank, the policy's way, and its
 * activation buffers.
 * defines: rl_trainer_load_model, rl_trainer_acts_new */
#ifndef RL_TRAIN_LOAD_MODEL_H
#define RL_TRAIN_LOAD_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/train/trainer.h"

/* NAME (a hub name, a directory or builtin:NAME; key names it in
 * messages) cut for this rank as the run's layout says, on ops, in
 * policy.precision, with its tokenizer (tok_name, NULL: NAME's own;
 * tok_key). *hash is the xxh3 of its weights as loaded, the same in any
 * layout: of the whole model built in, or of each tensor's bytes in the
 * files (the reference policy's rule; a resume checks it). The policy's
 * and on-policy distillation's teacher. Collective (the hash of a model
 * read from files). */
int rl_trainer_load_model(struct rl_trainer *t, const struct rl_ops *ops, const char *name,
                          const char *key, const char *tok_name, const char *tok_key,
                          struct rl_model **model, struct rl_tokenizer **tok, uint64_t *hash,
                          char *err, size_t errlen);

/* Model m's activation buffers for this rank's micro-batches of
 * t->max_mb_tokens tokens: one per micro-batch its pipeline stage holds at
 * once in 1F1B (as many as there are stages from it to the last), each
 * recomputing its layers in the backward pass under activation
 * checkpointing. *n counts those made, so that a failure (-1, out of
 * memory) leaves what to free. The policy's and the teacher's. */
int rl_trainer_acts_new(const struct rl_trainer *t, struct rl_model *m, struct rl_acts ***acts,
                        int *n);

#endif
