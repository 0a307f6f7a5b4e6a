/* srun's local context: runs as the user, in the user's working directory,
 * before any task exists. The config is made absolute here (the remote
 * working directory may differ) and checked with the same library rlrun
 * uses, so a bad config fails srun instead of a job. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "runtime/config/config.h"

/* KEY=VALUE arguments after rlrun in the step's command are overrides that
 * rlrun will apply too: validate with them, so both see the same config. */
static size_t step_overrides(spank_t sp, char ***out)
{
	int argc = 0;
	char **argv = NULL;
	*out = NULL;
	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1)
		return 0;
	const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	if (strcmp(prog, "rlrun") != 0)
		return 0;
	char **v = calloc((size_t)argc, sizeof(char *));
	size_t n = 0;
	for (int i = 1; v && i < argc; i++)
		if (argv[i][0] != '-' && strchr(argv[i], '='))
			v[n++] = argv[i];
	*out = v;
	return n;
}

int rl_spank_local_user_init(spank_t sp)
{
	char real[PATH_MAX];
	if (!realpath(rl_spank.config_arg, real)) {
		slurm_error("%s: --rl-config=%s: %s", RL_SPANK_PREFIX, rl_spank.config_arg,
		            strerror(errno));
		return -1;
	}
	char **overrides;
	size_t n = step_overrides(sp, &overrides);
	struct rl_config cfg;
	struct rl_diags diags = {0};
	int rc = rl_config_load(real, overrides, n, &cfg, &diags);
	free(overrides);
	if (rc == 0)
		rl_config_free(&cfg);
	/* Exported even when invalid: Slurm ignores our failure for an
	 * `optional` plugin, and then rlrun must fail on the same errors rather
	 * than run on some other config. */
	if (setenv("RL_CONFIG", real, 1) != 0) {
		slurm_error("%s: cannot set RL_CONFIG: %s", RL_SPANK_PREFIX, strerror(errno));
		rc = -1;
	}
	if (rc != 0 && diags.n > 0) {
		/* the same FILE:LINE:COL lines as `rlrun config`, on the user's terminal */
		char *text = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&text, &len);
		if (mem) {
			rl_diags_print(&diags, mem);
			fclose(mem);
		}
		for (char *line = text, *nl; line && *line; line = nl + 1) {
			nl = strchr(line, '\n');
			if (nl)
				*nl = '\0';
			slurm_error("%s: %s", RL_SPANK_PREFIX, line);
			if (!nl)
				break;
		}
		free(text);
		slurm_error("%s: %zu error%s in %s", RL_SPANK_PREFIX, diags.n,
		            diags.n == 1 ? "" : "s", real);
	}
	rl_diags_free(&diags);
	return rc == 0 ? 0 : -1;
}
