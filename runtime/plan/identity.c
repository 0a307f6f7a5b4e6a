#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/plan/identity.h"
#include "runtime/plan/node_plan.h"
#include "runtime/plan/spec.h"

/* -1: unset; -2: not a number (err filled) */
static long env_long(const char *name, char *err, size_t errlen)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return -1;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (*end || errno || x < 0 || x > 1L << 24) {
		snprintf(err, errlen, "%s=%s is not a rank or a size", name, v);
		return -2;
	}
	return x;
}

/* The launchers we know, most specific first: the plugin's own, then
 * MPICH's Hydra / PMI, Open MPI, then plain srun. */
static const struct {
	const char *rank, *size, *name;
} launchers[] = {
    {"RL_RANK", "RL_WORLD_SIZE", "slurm-rl plugin"},
    {"PMI_RANK", "PMI_SIZE", "MPI (PMI)"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "MPI (Open MPI)"},
    {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
};

static int check_plugin_env(const struct rl_identity *id, const struct rl_job_plan *plan, char *err,
                            size_t errlen)
{
	const char *role = getenv("RL_ROLE"),
	           *want_role = id->generation ? "generation" : "training";

	if (role && strcmp(role, want_role) != 0) {
		snprintf(err, errlen,
		         "the plugin made this task a %s rank, but this config makes it a %s rank: "
		         "the plugin and rlrun did not read the same config",
		         role, want_role);
		return -1;
	}
	for (int a = 0; a < RL_N_AXES; a++) {
		char name[16];
		int want_rank, want_size;
		rl_job_task_axis(plan, id->rank, a, &want_rank, &want_size);
		rl_axis_env_name(a, "SIZE", name, sizeof name);
		long size = env_long(name, err, errlen);
		rl_axis_env_name(a, "RANK", name, sizeof name);
		long rank = env_long(name, err, errlen);
		if (size == -2 || rank == -2)
			return -1;
		if ((size >= 0 && size != want_size) || (rank >= 0 && rank != want_rank)) {
			snprintf(
			    err, errlen,
			    "the plugin placed this task at %.*s rank %ld of %ld, but this config "
			    "gives %d of %d: the plugin and rlrun did not read the same config "
			    "(pass overrides after rlrun on the srun line, not in between)",
			    /* the axis as the variable spells it: RL_<AXIS>_RANK */
			    (int)strlen(rl_axis_name(a)), name + 3, rank, size, want_rank,
			    want_size);
			return -1;
		}
	}
	return 0;
}

int rl_identity_get(const struct rl_config *cfg, struct rl_identity *id, char *err, size_t errlen)
{
	memset(id, 0, sizeof *id);
	id->world = 1;
	id->launcher = "none";
	for (size_t i = 0; i < sizeof launchers / sizeof *launchers; i++) {
		long rank = env_long(launchers[i].rank, err, errlen);
		long size = env_long(launchers[i].size, err, errlen);
		if (rank == -2 || size == -2)
			return -1;
		if (rank < 0 || size < 1)
			continue;
		if (rank >= size) {
			snprintf(err, errlen, "%s=%ld is not below %s=%ld", launchers[i].rank, rank,
			         launchers[i].size, size);
			return -1;
		}
		id->rank = (int)rank;
		id->world = (int)size;
		id->launcher = launchers[i].name;
		id->from_plugin = i == 0;
		break;
	}
	long nodes = env_long("SLURM_NNODES", err, errlen);
	if (nodes == -2)
		return -1;
	if (nodes < 1 || nodes > id->world)
		nodes = 1;

	/* Sizes, checked against the model's config.json when it can be read
	 * (the rule the plugin and the cut use), before MPI starts: a layout
	 * the model cannot take is one line from rank 0, not a crash in the
	 * cut on every rank. An auto plan on GPUs needs the node's topology, which
	 * only the plugin (or rlrun plan) loads; its RL_* values are then taken
	 * as they are, since the config says nothing to compare them with. */
	struct rl_job_spec spec;
	struct rl_job_plan plan;
	if (rl_job_spec_from_config(cfg, id->world, (int)nodes,
	                            rl_node_tasks_max(id->world, (int)nodes), NULL, NULL, &spec,
	                            err, errlen) != 0)
		return -1;
	if (spec.autoplan && spec.use_gpus && id->from_plugin) {
		long tp = env_long("RL_TP_SIZE", err, errlen),
		     pp = env_long("RL_PP_SIZE", err, errlen),
		     cp = env_long("RL_CP_SIZE", err, errlen);
		spec.autoplan = false;
		spec.tp = tp > 0 ? (int)tp : 1, spec.pp = pp > 0 ? (int)pp : 1,
		spec.cp = cp > 0 ? (int)cp : 1;
	} else if (spec.autoplan && spec.use_gpus) {
		snprintf(err, errlen,
		         "policy.parallel: auto on GPUs is decided by the plugin from the node's "
		         "topology; without it, give the sizes (rlrun plan shows what auto picks)");
		return -1;
	}
	if (rl_job_plan_make(&spec, NULL, &plan, err, errlen) != 0)
		return -1;
	id->layout = plan.layout;
	rl_layout_coords(&id->layout, id->rank, &id->coords);
	id->generation_ranks = plan.spec.generation_ranks;
	id->generation_tp = plan.spec.generation_tp;
	id->generation = rl_job_generation_rank(&plan, id->rank);
	return id->from_plugin ? check_plugin_env(id, &plan, err, errlen) : 0;
}
