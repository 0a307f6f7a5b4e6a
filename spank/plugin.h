/* State shared by the context files of the plugin. One instance per process
 * (srun, sbatch/salloc, or slurmstepd for one step), filled by the option
 * callbacks and the plugstack arguments. */
#ifndef RL_SPANK_PLUGIN_H
#define RL_SPANK_PLUGIN_H

#include <slurm/spank.h>
#include <stdbool.h>

#include "spank/step.h"

#define RL_SPANK_PREFIX "spank_rl"
/* Set by sbatch/salloc --rl-config in the job's environment: the srun steps
 * inside the job act as if they had the option (Slurm does not pass an
 * allocation's SPANK options on to its steps). */
#define RL_SPANK_JOB_ENV "SPANK_RL_CONFIG"

struct rl_spank_state {
	char *config_arg; /* --rl-config as the user typed it; NULL when not given */
	bool print_plan;  /* --rl-plan */
	bool active;      /* this step uses the plugin */
	struct rl_spank_args args;
	struct rl_spank_step *step; /* slurmstepd: prepared in user_init */
	char *error;                /* slurmstepd: user_init's failure, returned by task_init */
};

extern struct rl_spank_state rl_spank;

/* srun (local context): resolve and validate the config as the user. */
int rl_spank_local_user_init(spank_t sp);
/* srun, before the allocation: the same check on srun's own argv. */
int rl_spank_local_post_opt(spank_t sp);
/* sbatch / salloc: the same, before the job is submitted. */
int rl_spank_allocator_post_opt(spank_t sp);
/* slurmstepd, as the user: config, topology and plan of this node. */
int rl_spank_remote_user_init(spank_t sp);
/* slurmstepd, in each task before exec: its environment and CPU set. */
int rl_spank_remote_task_init(spank_t sp);

/* Logs text, one slurm_error per line with the plugin's prefix; to_stderr
 * also writes it to the process's standard error, which in a task is the
 * user's terminal (slurmstepd's log is not). */
void rl_spank_report(const char *text, bool to_stderr);

#endif
