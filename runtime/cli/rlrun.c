/* rlrun: one process per task of a slurm-rl job, and the command-line tool
 * that checks and explains its configs. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cli/commands.h"
#include "runtime/base/omp_policy.h"

static const char usage[] =
    "usage: rlrun COMMAND [ARGS...]\n"
    "\n"
    "Reinforcement-learning post-training (GRPO) of language models, placed by Slurm.\n"
    "\n"
    "commands:\n"
    "  config [CONFIG] [KEY=VALUE...]   print the resolved config (errors as FILE:LINE:COL)\n"
    "  config --schema[=text|man]       every config key: type, default, range, meaning\n"
    "  forward --model DIR --ids LIST [--out FILE]\n"
    "                                   logits of one sequence (raw fp32 with --out)\n"
    "  generate --model DIR (--prompt TEXT | --ids LIST) [sampling options]\n"
    "                                   sample a continuation with the KV cache\n"
    "  tokenize --model DIR (--text TEXT | --decode LIST)\n"
    "                                   text to token ids and back\n"
    "  train [CONFIG] [KEY=VALUE...]    run GRPO (progress here, metrics.jsonl in logger.log_dir)\n"
    "  sft CONFIG [KEY=VALUE...]        supervised fine-tuning (the config's sft: block)\n"
    "  dpo CONFIG [KEY=VALUE...]        direct preference optimisation (its dpo: block)\n"
    "  distill CONFIG [KEY=VALUE...]    on-policy distillation (its distillation: block)\n"
    "  plot LOG_DIR [-o FILE.png]       reward and step-time breakdown over the steps\n"
    "  plan [CONFIG] [KEY=VALUE...] [--topology FILE] [--nodes N] [--tasks-per-node M]\n"
    "       [--env RANK]                layout, groups and each task's GPU, CPUs and NIC\n"
    "  ckpt list DIR | verify DIR/step_N | export DIR/step_N --hf OUT\n"
    "                                   a run's checkpoints: list, check, export\n"
    "  env calculator|guess             a built-in environment on stdin/stdout (rl-env(7))\n"
    "\n"
    "Under the plugin (srun --rl-config=FILE rlrun [KEY=VALUE...]), rlrun with no\n"
    "command runs $RL_CONFIG's algorithm.\n"
    "\n"
    "options:\n"
    "  -h, --help       this text\n"
    "  -V, --version    the version\n"
    "\n"
    "See rlrun(1), rl-config(5) and spank_rl(8).\n";

int main(int argc, char **argv)
{
	rl_omp_passive_reexec(argv);
	/* the plugin's step line, `srun --rl-config=FILE rlrun [KEY=VALUE...]`:
	 * the config is in the environment and the arguments are overrides */
	bool under_plugin = getenv("RL_CONFIG") && *getenv("RL_CONFIG");
	if (under_plugin && (argc < 2 || strchr(argv[1], '=')))
		return rl_cmd_run_config(argc, argv);
	if (argc < 2) {
		fputs(usage, stderr);
		return RL_EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		fputs(usage, stdout);
		return RL_EXIT_OK;
	}
	if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
		printf("rlrun (slurm-rl) %s\n", PACKAGE_VERSION);
		return RL_EXIT_OK;
	}
	if (strcmp(cmd, "config") == 0)
		return rl_cmd_config(argc - 1, argv + 1);
	if (strcmp(cmd, "forward") == 0)
		return rl_cmd_forward(argc - 1, argv + 1);
	if (strcmp(cmd, "generate") == 0)
		return rl_cmd_generate(argc - 1, argv + 1);
	if (strcmp(cmd, "tokenize") == 0)
		return rl_cmd_tokenize(argc - 1, argv + 1);
	if (strcmp(cmd, "train") == 0)
		return rl_cmd_train(argc - 1, argv + 1);
	if (strcmp(cmd, "sft") == 0)
		return rl_cmd_sft(argc - 1, argv + 1);
	if (strcmp(cmd, "dpo") == 0)
		return rl_cmd_dpo(argc - 1, argv + 1);
	if (strcmp(cmd, "distill") == 0)
		return rl_cmd_distill(argc - 1, argv + 1);
	if (strcmp(cmd, "plot") == 0)
		return rl_cmd_plot(argc - 1, argv + 1);
	if (strcmp(cmd, "plan") == 0)
		return rl_cmd_plan(argc - 1, argv + 1);
	if (strcmp(cmd, "ckpt") == 0)
		return rl_cmd_ckpt(argc - 1, argv + 1);
	if (strcmp(cmd, "env") == 0)
		return rl_cmd_env(argc - 1, argv + 1);
	fprintf(stderr, "rlrun: unknown command '%s'\n%s", cmd, usage);
	return RL_EXIT_USAGE;
}
