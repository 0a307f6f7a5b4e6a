/* A model of the run read for this rank, the policy's way.
 * defines: rl_trainer_load_model */
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

#endif
