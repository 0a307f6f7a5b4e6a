#define _GNU_SOURCE
/* SPANK entry points: register the options everywhere, dispatch the rest by
 * context to one file per context. Nothing runs for jobs that use neither
 * --rl-config nor an allocation's SPANK_RL_CONFIG: no file is read, no
 * topology loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spank/plugin.h"

SPANK_PLUGIN(rl, 1);

struct rl_spank_state rl_spank;

/* Called once per occurrence of the option; the last one wins, and a repeat
 * of the same value is harmless. */
static int on_rl_config(int val, const char *optarg, int remote)
{
	(void)val;
	(void)remote;
	if (!optarg || !*optarg) {
		slurm_error("%s: --rl-config needs a file name", RL_SPANK_PREFIX);
		return -1;
	}
	char *copy = strdup(optarg);
	if (!copy)
		return -1;
	free(rl_spank.config_arg);
	rl_spank.config_arg = copy;
	return 0;
}

static int on_rl_plan(int val, const char *optarg, int remote)
{
	(void)val;
	(void)optarg;
	(void)remote;
	rl_spank.print_plan = true;
	return 0;
}

static struct spank_option rl_options[] = {
    {"rl-config", "FILE",
     "slurm-rl: check this GRPO config before the job starts, place every task (GPU, CPUs, "
     "NIC, 6-D layout) and give it the RL_* environment",
     1, 0, on_rl_config},
    {"rl-plan", NULL, "slurm-rl: print the plan of the step (with --rl-config) and continue", 0, 0,
     on_rl_plan},
    SPANK_OPTIONS_TABLE_END,
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	char err[512];
	for (struct spank_option *o = rl_options; o->name; o++)
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error("%s: cannot register --%s", RL_SPANK_PREFIX, o->name);
			return -1;
		}
	/* A bad plugstack line is the admin's error: it fails the jobs that use
	 * the plugin, with the reason, and costs the others nothing. */
	if (rl_spank_args_parse(ac, av, &rl_spank.args, err, sizeof err) != 0) {
		slurm_error("%s: %s", RL_SPANK_PREFIX, err);
		free(rl_spank.error);
		rl_spank.error = strdup(err);
	}
	return 0;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (!rl_spank.config_arg)
		return 0;
	if (spank_context() == S_CTX_ALLOCATOR)
		return rl_spank_allocator_post_opt(sp);
	if (spank_context() == S_CTX_LOCAL)
		return rl_spank_local_post_opt(sp);
	return 0;
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	return rl_spank_local_user_init(sp);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return rl_spank_remote_user_init(sp);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	return rl_spank_remote_task_init(sp);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	free(rl_spank.config_arg);
	free(rl_spank.error);
	rl_spank_step_free(rl_spank.step);
	rl_spank_args_free(&rl_spank.args);
	memset(&rl_spank, 0, sizeof rl_spank);
	return 0;
}

void rl_spank_report(const char *text, bool to_stderr)
{
	const char *line = text;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		int len = nl ? (int)(nl - line) : (int)strlen(line);
		slurm_error("%s: %.*s", RL_SPANK_PREFIX, len, line);
		if (to_stderr)
			fprintf(stderr, "%s: %.*s\n", RL_SPANK_PREFIX, len, line);
		line = nl ? nl + 1 : NULL;
	}
}
