/* The plugin's decisions, apart from the SPANK calls that feed them, so that
 * they run in unit tests without Slurm: plugstack arguments, overrides from
 * the step's command line, and the plan of one node of a step.
 * defines: struct rl_spank_args, struct rl_step_inputs, struct rl_spank_step,
 * rl_spank_args_parse, rl_spank_args_free, rl_step_overrides, rl_spank_config_errors,
 * rl_spank_step_prepare, rl_spank_step_task_env, rl_spank_step_free */
#ifndef RL_SPANK_STEP_H
#define RL_SPANK_STEP_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/config/config.h"
#include "runtime/plan/node_plan.h"
#include "topology/topology.h"

/* plugstack.conf: `required spank_rl.so rlrun=/opt/rl/bin/rlrun topology=FILE` */
struct rl_spank_args {
	char *rlrun;    /* a step runs rlrun when argv[0] is this path or its base name */
	char *topology; /* an hwloc XML instead of the live node (tests, odd BIOSes) */
};

/* Returns 0, or -1 with err naming the argument. Unknown keys are errors. */
int rl_spank_args_parse(int ac, char **av, struct rl_spank_args *args, char *err, size_t errlen);
void rl_spank_args_free(struct rl_spank_args *args);

/* The KEY=VALUE arguments of a step whose program is rlrun (argv[0] its
 * base name or args->rlrun): what rlrun will apply too. Fills *out with
 * pointers into argv (free only the array); returns their count. */
size_t rl_step_overrides(const struct rl_spank_args *args, int argc, char **argv, char ***out);

/* Every problem of a config that failed to load, as `rlrun config` prints
 * them (FILE:LINE:COL each), and a line that counts them; malloc'd, NULL
 * when out of memory. */
char *rl_spank_config_errors(struct rl_diags *diags, const char *path);

/* What slurmstepd tells about the step on this node. */
struct rl_step_inputs {
	const char *config_path; /* RL_CONFIG of the job */
	char *const *overrides;
	size_t n_overrides;
	const char *topology_xml; /* NULL: this node */
	int world, n_nodes, node_id;
	int n_local;
	const int *global_ids; /* of the local tasks, by local id */
	const char *slurm_step_gpus, *cuda_visible_devices;
	/* the job's HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and HOME, where hub
	 * names are (slurmstepd's own environment is not the job's) */
	const struct rl_hub_env *hub;
};

struct rl_spank_step {
	struct rl_config cfg;
	struct rl_topo topo;
	struct rl_node_plan plan;
	bool live_topology; /* affinity is applied only to the machine itself */
};

/* Reads the config (as the user), checks that the run's model and data
 * files can be read (runtime/plan/inputs.h), reads the topology, and plans
 * this node, refusing a layout the model cannot take. On failure returns
 * -1 with *error a malloc'd message (several lines for config errors,
 * FILE:LINE:COL each). */
int rl_spank_step_prepare(const struct rl_step_inputs *in, struct rl_spank_step **out,
                          char **error);
/* Environment of local task local_id. */
int rl_spank_step_task_env(const struct rl_spank_step *s, int local_id, struct rl_env *env);
void rl_spank_step_free(struct rl_spank_step *s);

#endif
