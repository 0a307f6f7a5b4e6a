#include <jansson.h>
#include <string.h>

#include "runtime/model/builtin.h"

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

static const struct builtin *find(const char *name, char *err, size_t errlen)
{
	const char *bare = name + strlen(RL_BUILTIN_PREFIX);

	for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
		if (strcmp(bare, builtins[i].name) == 0)
			return &builtins[i];
	snprintf(err, errlen, "policy.model_name: no built-in model '%s' (built in: %stiny-llama)",
	         name, RL_BUILTIN_PREFIX);
	return NULL;
}

/* transformers draws new weights with std initializer_range (0.02 when the
 * config does not say) */
static double initializer_range(const struct builtin *b)
{
	json_t *root = json_loadb(b->config, *b->config_len, 0, NULL);
	json_t *v = json_object_get(root, "initializer_range");
	double std = json_is_number(v) ? json_number_value(v) : 0.02;

	json_decref(root);
	return std;
}

int rl_builtin_model_new(const char *name, uint64_t seed, const struct rl_ops *ops,
                         struct rl_model **out, char *err, size_t errlen)
{
	const struct builtin *b = find(name, err, errlen);
	struct rl_model_config cfg;

	*out = NULL;
	if (!b || rl_model_config_from_json(&cfg, b->config, *b->config_len, name, err, errlen))
		return -1;
	return rl_model_new_random(out, &cfg, name, ops, seed, initializer_range(b), err, errlen);
}

int rl_builtin_tokenizer(const char *name, struct rl_tokenizer **out, char *err, size_t errlen)
{
	const struct builtin *b = find(name, err, errlen);

	*out = NULL;
	if (!b)
		return -1;
	return rl_tokenizer_load_json(out, b->tokenizer, *b->tokenizer_len, name, err, errlen);
}
