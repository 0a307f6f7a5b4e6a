/* rlrun config [CONFIG] [KEY=VALUE...] | --schema[=text|man] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "runtime/config/config.h"
#include "runtime/config/schema_doc.h"

static const char usage[] =
    "usage: rlrun config [CONFIG] [KEY=VALUE...]\n"
    "       rlrun config --schema[=text|man]\n"
    "Prints the resolved config as YAML. CONFIG defaults to $RL_CONFIG, then to\n"
    "the built-in grpo-tiny.yaml. Errors are FILE:LINE:COL lines, exit status 2.\n";

int rl_cmd_config(int argc, char **argv)
{
	const char *path = NULL;
	char **overrides = calloc((size_t)argc + 1, sizeof(char *));
	size_t n_overrides = 0;
	if (!overrides)
		return RL_EXIT_FAIL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage, stdout);
			free(overrides);
			return RL_EXIT_OK;
		}
		if (strncmp(a, "--schema", 8) == 0 && (a[8] == '\0' || a[8] == '=')) {
			const char *fmt = a[8] ? a + 9 : "text";
			free(overrides);
			if (strcmp(fmt, "text") != 0 && strcmp(fmt, "man") != 0) {
				fprintf(stderr,
				        "rlrun config: --schema takes text or man, not '%s'\n",
				        fmt);
				return RL_EXIT_USAGE;
			}
			rl_schema_print(stdout,
			                strcmp(fmt, "man") == 0 ? RL_SCHEMA_ROFF : RL_SCHEMA_TEXT);
			return fflush(stdout) == 0 ? RL_EXIT_OK : RL_EXIT_FAIL;
		}
		if (a[0] == '-' && a[1] == '-') {
			fprintf(stderr, "rlrun config: unknown option '%s'\n%s", a, usage);
			free(overrides);
			return RL_EXIT_USAGE;
		}
		if (strchr(a, '='))
			overrides[n_overrides++] = argv[i];
		else if (!path)
			path = a;
		else {
			fprintf(stderr, "rlrun config: more than one CONFIG ('%s' and '%s')\n%s",
			        path, a, usage);
			free(overrides);
			return RL_EXIT_USAGE;
		}
	}
	if (!path && getenv("RL_CONFIG") && *getenv("RL_CONFIG"))
		path = getenv("RL_CONFIG");

	struct rl_config cfg;
	struct rl_diags diags = {0};
	int rc = path ? rl_config_load(path, overrides, n_overrides, &cfg, &diags)
	              : rl_config_load_text(RL_DEFAULT_CONFIG_NAME, rl_default_config,
	                                    rl_default_config_len, NULL, overrides, n_overrides,
	                                    &cfg, &diags);
	free(overrides);
	if (rc != 0) {
		rl_diags_print(&diags, stderr);
		fprintf(stderr, "rlrun config: %zu error%s in %s\n", diags.n,
		        diags.n == 1 ? "" : "s", path ? path : RL_DEFAULT_CONFIG_NAME);
		rl_diags_free(&diags);
		return RL_EXIT_USAGE;
	}
	printf("# slurm-rl resolved config from %s\n", cfg.source);
	fflush(stdout);
	rc = rl_config_write_yaml(&cfg, stdout);
	rl_config_free(&cfg);
	rl_diags_free(&diags);
	if (rc != 0 || fflush(stdout) != 0) {
		fprintf(stderr, "rlrun config: cannot write the config to stdout\n");
		return RL_EXIT_FAIL;
	}
	return RL_EXIT_OK;
}
