/* rlrun env NAME: a built-in environment (env/builtin_env.h) speaking
 * rl-env(7) on stdin and stdout, the program a run with that environment
 * starts. */
#include <stdio.h>
#include <string.h>

#include "runtime/cli/commands.h"
#include "runtime/env/builtin_env.h"

int rl_cmd_env(int argc, char **argv)
{
	if (argc != 2 || !rl_env_builtin_known(argv[1])) {
		fprintf(stderr, "usage: rlrun env calculator|guess  (rl-env(7))\n");
		return RL_EXIT_USAGE;
	}
	return rl_env_builtin_run(argv[1], stdin, stdout, stderr) ? RL_EXIT_FAIL : RL_EXIT_OK;
}
