/* The rlrun subcommands. Each returns the process exit status:
 * 0 success, 1 failure or not implemented, 2 usage error or invalid config,
 * 4 (train) stopped early with a checkpoint, to be resumed. */
#ifndef RL_CLI_COMMANDS_H
#define RL_CLI_COMMANDS_H

#include <stddef.h>

enum { RL_EXIT_OK = 0, RL_EXIT_FAIL = 1, RL_EXIT_USAGE = 2, RL_EXIT_STOPPED = 4 };

int rl_cmd_config(int argc, char **argv);
int rl_cmd_forward(int argc, char **argv);
int rl_cmd_generate(int argc, char **argv);
int rl_cmd_tokenize(int argc, char **argv);
int rl_cmd_train(int argc, char **argv);
int rl_cmd_sft(int argc, char **argv);
int rl_cmd_dpo(int argc, char **argv);
int rl_cmd_distill(int argc, char **argv);
/* the plugin's step line: the algorithm $RL_CONFIG names */
int rl_cmd_run_config(int argc, char **argv);
int rl_cmd_plot(int argc, char **argv);
int rl_cmd_plan(int argc, char **argv);
int rl_cmd_ckpt(int argc, char **argv);
/* a built-in environment program (rl-env(7)) */
int rl_cmd_env(int argc, char **argv);

/* The default config compiled into rlrun (etc/examples/grpo-tiny.yaml). */
extern const char rl_default_config[];
extern const size_t rl_default_config_len;
#define RL_DEFAULT_CONFIG_NAME "grpo-tiny.yaml (built in)"

#endif
