/* The files of the built-in models (config.json, tokenizer.json), compiled
 * in. Apart from the engine so that the plugin, which only plans, can read a
 * built-in model's shape without linking the model code.
 * defines: struct rl_builtin_files, rl_builtin_is, rl_builtin_files */
#ifndef RL_MODEL_BUILTIN_FILES_H
#define RL_MODEL_BUILTIN_FILES_H

#include <stdbool.h>
#include <stddef.h>

#define RL_BUILTIN_PREFIX "builtin:"

struct rl_builtin_files {
	const char *config;
	size_t config_len;
	const char *tokenizer;
	size_t tokenizer_len;
};

/* True when name asks for a built-in model ("builtin:..."). */
bool rl_builtin_is(const char *name);
/* The files of NAME ("builtin:tiny-llama"). Unknown names are an error
 * that lists the known ones. */
int rl_builtin_files(const char *name, struct rl_builtin_files *out, char *err, size_t errlen);

#endif
