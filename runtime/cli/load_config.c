#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cli/load_config.h"
#include "runtime/cli/commands.h"

/* Under a launcher every task loads the config: the first speaks for all,
 * so that notes are said once (the rank variables of identity.c, in its
 * order). */
static bool first_task(void)
{
	static const char *const vars[] = {"RL_RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK",
	                                   "SLURM_PROCID"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		if (v && *v)
			return strcmp(v, "0") == 0;
	}
	return true;
}

int rl_cli_load_config(const char *cmd, const char *usage, char **args, int n,
                       struct rl_config *cfg)
{
	const char *path = NULL;
	char **overrides = calloc((size_t)n + 1, sizeof(char *));
	size_t n_overrides = 0;

	if (!overrides)
		return RL_EXIT_FAIL;
	for (int i = 0; i < n; i++) {
		const char *a = args[i];

		if (a[0] == '-' && a[1] == '-') {
			fprintf(stderr, "rlrun %s: unknown option '%s'\n%s", cmd, a, usage);
			free(overrides);
			return RL_EXIT_USAGE;
		}
		if (strchr(a, '='))
			overrides[n_overrides++] = args[i];
		else if (!path)
			path = a;
		else {
			fprintf(stderr, "rlrun %s: more than one CONFIG ('%s' and '%s')\n%s", cmd,
			        path, a, usage);
			free(overrides);
			return RL_EXIT_USAGE;
		}
	}
	if (!path && getenv("RL_CONFIG") && *getenv("RL_CONFIG"))
		path = getenv("RL_CONFIG");
	struct rl_diags diags = {0};
	int rc = path ? rl_config_load(path, overrides, n_overrides, cfg, &diags)
	              : rl_config_load_text(RL_DEFAULT_CONFIG_NAME, rl_default_config,
	                                    rl_default_config_len, NULL, overrides, n_overrides,
	                                    cfg, &diags);
	free(overrides);
	if (first_task())
		rl_notes_print(&diags, stderr);
	if (rc != 0) {
		rl_diags_print(&diags, stderr);
		fprintf(stderr, "rlrun %s: %zu error%s in %s\n", cmd, diags.n,
		        diags.n == 1 ? "" : "s", path ? path : RL_DEFAULT_CONFIG_NAME);
		rl_diags_free(&diags);
		return RL_EXIT_USAGE;
	}
	rl_diags_free(&diags);
	return RL_EXIT_OK;
}
