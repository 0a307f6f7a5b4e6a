#define _GNU_SOURCE
/* slurmstepd: user_init runs once per step on each node, already as the
 * user, so the user's config and model files are read with the user's
 * rights; task_init runs in each task between fork and exec. A failure in
 * user_init would not fail an srun step (and would drain the node under
 * sbatch), so it is kept and returned from task_init, where it fails the
 * tasks instead. */
#include <errno.h>
#include <sched.h>
#include <slurm/slurm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spank/plugin.h"

/* spank_getenv into a buffer of ours; NULL when unset */
static const char *job_env(spank_t sp, const char *name, char *buf, size_t len)
{
	return spank_getenv(sp, name, buf, (int)len) == ESPANK_SUCCESS ? buf : NULL;
}

static bool wanted_step(spank_t sp)
{
	uint32_t step = 0;
	if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
		return false;
	/* the batch script and the extern step are not tasks of a run */
	return step != SLURM_BATCH_SCRIPT && step != SLURM_EXTERN_CONT &&
	       step != SLURM_INTERACTIVE_STEP;
}

static int keep_error(const char *what)
{
	free(rl_spank.error);
	rl_spank.error = strdup(what ? what : "out of memory");
	return 0;
}

int rl_spank_remote_user_init(spank_t sp)
{
	char config[4096], gpus[1024], cvd[1024], marker[4096];
	char hub_cache[4096], hf_home[4096], xdg[4096], home[4096];
	if (!wanted_step(sp))
		return 0;
	if (!rl_spank.config_arg && !job_env(sp, RL_SPANK_JOB_ENV, marker, sizeof marker))
		return 0;
	rl_spank.active = true;
	if (rl_spank.error) /* the plugstack line's */
		return 0;

	uint32_t world = 0, n_nodes = 0, node_id = 0, n_local = 0;
	if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &world) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NNODES, &n_nodes) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_NODEID, &node_id) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &n_local) != ESPANK_SUCCESS || n_local == 0)
		return keep_error("slurmstepd did not tell the step's task counts");
	int *ids = calloc(n_local, sizeof *ids);
	if (!ids)
		return keep_error(NULL);
	for (uint32_t i = 0; i < n_local; i++) {
		uint32_t g = 0;
		if (spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, i, &g) != ESPANK_SUCCESS) {
			free(ids);
			return keep_error("slurmstepd did not tell the tasks' global ranks");
		}
		ids[i] = (int)g;
	}
	int argc = 0;
	char **argv = NULL, **overrides = NULL;
	size_t n_overrides = 0;
	if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS)
		n_overrides = rl_step_overrides(&rl_spank.args, argc, argv, &overrides);

	/* the job's environment, not slurmstepd's: where the user's Hugging
	 * Face cache is */
	struct rl_hub_env hub = {
	    .hub_cache = job_env(sp, "HF_HUB_CACHE", hub_cache, sizeof hub_cache),
	    .hf_home = job_env(sp, "HF_HOME", hf_home, sizeof hf_home),
	    .xdg_cache_home = job_env(sp, "XDG_CACHE_HOME", xdg, sizeof xdg),
	    .home = job_env(sp, "HOME", home, sizeof home),
	};
	if (!hub.hub_cache)
		hub.hub_cache = job_env(sp, "HUGGINGFACE_HUB_CACHE", hub_cache, sizeof hub_cache);
	struct rl_step_inputs in = {
	    .config_path = job_env(sp, "RL_CONFIG", config, sizeof config),
	    .overrides = overrides,
	    .n_overrides = n_overrides,
	    .topology_xml = rl_spank.args.topology,
	    .world = (int)world,
	    .n_nodes = (int)n_nodes,
	    .node_id = (int)node_id,
	    .n_local = (int)n_local,
	    .global_ids = ids,
	    .slurm_step_gpus = job_env(sp, "SLURM_STEP_GPUS", gpus, sizeof gpus),
	    .cuda_visible_devices = job_env(sp, "CUDA_VISIBLE_DEVICES", cvd, sizeof cvd),
	    .hub = &hub,
	};
	char *error = NULL;
	if (rl_spank_step_prepare(&in, &rl_spank.step, &error) != 0)
		keep_error(error);
	free(error);
	free(overrides);
	free(ids);
	return 0;
}

static int apply_affinity(const struct rl_task_place *t)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	for (int i = 0; i < t->n_cpus; i++)
		if (t->cpus[i] >= 0 && t->cpus[i] < CPU_SETSIZE)
			CPU_SET(t->cpus[i], &set);
	if (CPU_COUNT(&set) == 0)
		return 0;
	return sched_setaffinity(0, sizeof set, &set);
}

int rl_spank_remote_task_init(spank_t sp)
{
	if (!rl_spank.active)
		return 0;
	int local = -1;
	bool have_id = spank_get_item(sp, S_TASK_ID, &local) == ESPANK_SUCCESS;
	if (rl_spank.error) {
		/* every task fails; the node's first tells the user, once (a
		 * slurm_error in a task reaches its standard error too) */
		if (!have_id || local == 0)
			rl_spank_report(rl_spank.error, true);
		return -1;
	}
	if (!have_id)
		return -1;
	struct rl_env env;
	if (rl_spank_step_task_env(rl_spank.step, local, &env) != 0) {
		rl_spank_report("cannot build the task's environment", true);
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < env.n && rc == 0; i++) {
		char *eq = strchr(env.vars[i], '=');
		*eq = '\0';
		if (spank_setenv(sp, env.vars[i], eq + 1, 1) != ESPANK_SUCCESS) {
			slurm_error("%s: cannot set %s", RL_SPANK_PREFIX, env.vars[i]);
			rc = -1;
		}
		*eq = '=';
	}
	const struct rl_task_place *t = &rl_spank.step->plan.node.tasks[local];
	/* an XML topology describes another machine: its CPU numbers mean
	 * nothing here */
	if (rc == 0 && rl_spank.step->live_topology && apply_affinity(t) != 0)
		slurm_error("%s: cannot bind task %d to its CPUs: %s", RL_SPANK_PREFIX, local,
		            strerror(errno));
	if (rc == 0 && rl_spank.print_plan && local == 0) {
		fprintf(stderr, "%s: node %d: %s\n", RL_SPANK_PREFIX, rl_spank.step->plan.node_id,
		        rl_spank.step->plan.job.summary);
		for (size_t i = 0; i < env.n; i++)
			if (strncmp(env.vars[i], "RL_PLAN=", 8) != 0)
				fprintf(stderr, "%s:   task 0: %s\n", RL_SPANK_PREFIX, env.vars[i]);
		if (*rl_spank.step->plan.node.warning)
			fprintf(stderr, "%s: warning: %s\n", RL_SPANK_PREFIX,
			        rl_spank.step->plan.node.warning);
	}
	rl_env_free(&env);
	return rc;
}
