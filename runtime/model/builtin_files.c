#include <stdio.h>
#include <string.h>

#include "runtime/model/builtin_files.h"

/* build-aux/embed.sh writes these from etc/models/<name>/ */
extern const char rl_builtin_tiny_llama_config[];
extern const size_t rl_builtin_tiny_llama_config_len;
extern const char rl_builtin_tiny_llama_tokenizer[];
extern const size_t rl_builtin_tiny_llama_tokenizer_len;

struct builtin {
	const char *name;
	const char *config;
	const size_t *config_len;
	const char *tokenizer;
	const size_t *tokenizer_len;
};

static const struct builtin builtins[] = {
    {"tiny-llama", rl_builtin_tiny_llama_config, &rl_builtin_tiny_llama_config_len,
     rl_builtin_tiny_llama_tokenizer, &rl_builtin_tiny_llama_tokenizer_len},
};

bool rl_builtin_is(const char *name)
{
	return name && strncmp(name, RL_BUILTIN_PREFIX, strlen(RL_BUILTIN_PREFIX)) == 0;
}

int rl_builtin_files(const char *name, struct rl_builtin_files *out, char *err, size_t errlen)
{
	const char *bare = rl_builtin_is(name) ? name + strlen(RL_BUILTIN_PREFIX) : name;

	for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
		if (strcmp(bare, builtins[i].name) == 0) {
			out->config = builtins[i].config;
			out->config_len = *builtins[i].config_len;
			out->tokenizer = builtins[i].tokenizer;
			out->tokenizer_len = *builtins[i].tokenizer_len;
			return 0;
		}
	snprintf(err, errlen, "policy.model_name: no built-in model '%s' (built in: %stiny-llama)",
	         name, RL_BUILTIN_PREFIX);
	return -1;
}
