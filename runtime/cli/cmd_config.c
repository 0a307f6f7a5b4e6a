/* rlrun config [CONFIG] [KEY=VALUE...] | --schema[=text|man] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cli/commands.h"
#include "runtime/cli/load_config.h"
#include "runtime/config/config.h"
#include "runtime/config/schema_doc.h"

static const char usage[] =
    "usage: rlrun config [CONFIG] [KEY=VALUE...]\n"
    "       rlrun config --schema[=text|man]\n"
    "Prints the resolved config as YAML. CONFIG defaults to $RL_CONFIG, then to\n"
    "the built-in grpo-tiny.yaml. Errors are FILE:LINE:COL lines, exit status 2.\n";

int rl_cmd_config(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(usage, stdout);
			return RL_EXIT_OK;
		}
		if (strncmp(a, "--schema", 8) == 0 && (a[8] == '\0' || a[8] == '=')) {
			const char *fmt = a[8] ? a + 9 : "text";

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
	}

	struct rl_config cfg;
	int rc = rl_cli_load_config("config", usage, argv + 1, argc - 1, &cfg);

	if (rc != RL_EXIT_OK)
		return rc;
	printf("# slurm-rl resolved config from %s\n", cfg.source);
	fflush(stdout);
	rc = rl_config_write_yaml(&cfg, stdout);
	rl_config_free(&cfg);
	if (rc != 0 || fflush(stdout) != 0) {
		fprintf(stderr, "rlrun config: cannot write the config to stdout\n");
		return RL_EXIT_FAIL;
	}
	return RL_EXIT_OK;
}
