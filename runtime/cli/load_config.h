/* The config arguments every config-reading command takes:
 * [CONFIG] [KEY=VALUE...], CONFIG defaulting to $RL_CONFIG, then to the
 * built-in grpo-tiny.yaml.
 * defines: rl_cli_load_config */
#ifndef RL_CLI_LOAD_CONFIG_H
#define RL_CLI_LOAD_CONFIG_H

#include "runtime/config/config.h"

/* Loads the config named by args[0..n) for command cmd. Returns RL_EXIT_OK
 * with *cfg filled, or the exit status after printing the errors (every
 * config problem as FILE:LINE:COL) and, for bad arguments, usage. */
int rl_cli_load_config(const char *cmd, const char *usage, char **args, int n,
                       struct rl_config *cfg);

#endif
