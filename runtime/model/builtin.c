#include <jansson.h>
#include <string.h>

#include "runtime/model/builtin.h"

/* transformers draws new weights with std initializer_range (0.02 when the
 * config does not say) */
static double initializer_range(const struct rl_builtin_files *b)
{
	json_t *root = json_loadb(b->config, b->config_len, 0, NULL);
	json_t *v = json_object_get(root, "initializer_range");
	double std = json_is_number(v) ? json_number_value(v) : 0.02;

	json_decref(root);
	return std;
}

int rl_builtin_model_new(const char *name, uint64_t seed, const struct rl_ops *ops,
                         struct rl_model **out, char *err, size_t errlen)
{
	struct rl_builtin_files b;
	struct rl_model_config cfg;

	*out = NULL;
	if (rl_builtin_files(name, &b, err, errlen) ||
	    rl_model_config_from_json(&cfg, b.config, b.config_len, name, err, errlen))
		return -1;
	return rl_model_new_random(out, &cfg, name, ops, seed, initializer_range(&b), err, errlen);
}

int rl_builtin_tokenizer(const char *name, struct rl_tokenizer **out, char *err, size_t errlen)
{
	struct rl_builtin_files b;

	*out = NULL;
	if (rl_builtin_files(name, &b, err, errlen))
		return -1;
	return rl_tokenizer_load_json(out, b.tokenizer, b.tokenizer_len, name, err, errlen);
}
