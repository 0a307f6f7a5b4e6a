#define _GNU_SOURCE
/* SPANK entry points: register the option everywhere, dispatch the rest by
 * context to one file per context. Nothing runs for jobs that do not use
 * --rl-config. */
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

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

static struct spank_option rl_options[] = {
    {"rl-config", "FILE",
     "slurm-rl: check this GRPO config before the job starts and give it to every task (RL_CONFIG)",
     1, 0, on_rl_config},
    SPANK_OPTIONS_TABLE_END,
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	for (struct spank_option *o = rl_options; o->name; o++)
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error("%s: cannot register --%s", RL_SPANK_PREFIX, o->name);
			return -1;
		}
	return 0;
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (!rl_spank.config_arg)
		return 0;
	return rl_spank_local_user_init(sp);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	free(rl_spank.config_arg);
	rl_spank.config_arg = NULL;
	return 0;
}
