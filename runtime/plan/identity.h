/* Who this rlrun process is in the step's layout. Under the plugin the
 * RL_* environment says so, and is checked against the layout rlrun
 * computes from its own config (the two must have read the same config);
 * started without the plugin (directly, mpiexec) rlrun computes it from the
 * launcher's rank variables, by the same code.
 * defines: struct rl_identity, rl_identity_get */
#ifndef RL_PLAN_IDENTITY_H
#define RL_PLAN_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/config/config.h"
#include "topology/layout.h"

struct rl_identity {
	int rank;
	int world;
	bool from_plugin;
	const char *launcher;    /* "slurm-rl plugin", "MPI (PMI)", "Slurm", "none" */
	struct rl_layout layout; /* the training ranks' (rank < layout.world) */
	struct rl_coords coords;
	/* non-colocated generation: the last generation_ranks of world,
	 * generation_tp-way tensor parallel; generation says this rank is one */
	int generation_ranks, generation_tp;
	bool generation;
};

/* Returns 0, or -1 with err: a rank variable that is not a number, or
 * RL_* values that disagree with the config. */
int rl_identity_get(const struct rl_config *cfg, struct rl_identity *id, char *err, size_t errlen);

#endif
