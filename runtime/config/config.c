/* Ownership of a resolved config. */
#include <stdlib.h>
#include <string.h>

#include "runtime/config/internal.h"

static void free_fields(void *base, bool env)
{
	for (size_t i = 0; i < rl_schema_len; i++) {
		const struct rl_key *k = &rl_schema[i];
		if (!(k->flags & RL_K_IN_ENV) != !env)
			continue;
		void *f = (char *)base + k->offset;
		switch (k->type) {
		case RL_T_STRING:
		case RL_T_ENUM:
		case RL_T_JSON_MAP:
			free(*(char **)f);
			*(char **)f = NULL;
			break;
		case RL_T_STRING_LIST: {
			struct rl_str_list *l = f;
			for (size_t j = 0; j < l->n; j++)
				free(l->v[j]);
			free(l->v);
			*l = (struct rl_str_list){0};
			break;
		}
		case RL_T_INT_LIST:
			free(((struct rl_int_list *)f)->v);
			*(struct rl_int_list *)f = (struct rl_int_list){0};
			break;
		case RL_T_SCHEDULERS:
			rl_cfg_sched_list_free(f);
			break;
		case RL_T_FLOAT_LIST:
			free(((struct rl_float_list *)f)->v);
			*(struct rl_float_list *)f = (struct rl_float_list){0};
			break;
		default:
			break;
		}
	}
}

void rl_config_free(struct rl_config *cfg)
{
	if (!cfg)
		return;
	free_fields(cfg, false);
	for (size_t i = 0; i < cfg->n_env; i++) {
		free_fields(&cfg->env[i], true);
		free(cfg->env[i].name);
	}
	free(cfg->env);
	free(cfg->source);
	*cfg = (struct rl_config){0};
}

const struct rl_cfg_env *rl_config_env(const struct rl_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_env; i++)
		if (strcmp(cfg->env[i].name, name) == 0)
			return &cfg->env[i];
	return NULL;
}
