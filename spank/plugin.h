/* State shared by the context files of the plugin. One instance per process
 * (srun, or slurmstepd for one step), filled by the option callback. */
#ifndef RL_SPANK_PLUGIN_H
#define RL_SPANK_PLUGIN_H

#include <slurm/spank.h>

#define RL_SPANK_PREFIX "spank_rl"

struct rl_spank_state {
	char *config_arg; /* --rl-config as the user typed it; NULL when not given */
};

extern struct rl_spank_state rl_spank;

/* srun (local context): resolve and validate the config as the user. */
int rl_spank_local_user_init(spank_t sp);

#endif
