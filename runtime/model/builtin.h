/* Models compiled into rlrun, so a run can start with nothing downloaded:
 * `policy.model_name: builtin:tiny-llama` is a small Llama with a
 * character-level tokenizer whose weights are drawn from the run's seed.
 * defines: rl_builtin_model_new, rl_builtin_tokenizer */
#ifndef RL_MODEL_BUILTIN_H
#define RL_MODEL_BUILTIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/model/builtin_files.h"
#include "runtime/model/model.h"
#include "runtime/tokenizer/tokenizer.h"

/* The built-in model NAME, initialised as transformers initialises a new
 * model of its config.json (initializer_range), from seed. Unknown names
 * are an error that lists the known ones. */
int rl_builtin_model_new(const char *name, uint64_t seed, const struct rl_ops *ops,
                         struct rl_model **out, char *err, size_t errlen);
int rl_builtin_tokenizer(const char *name, struct rl_tokenizer **out, char *err, size_t errlen);

#endif
