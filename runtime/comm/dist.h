/* The groups a run communicates in, made from the layout: every rank
 * creates them in the same order, so the split calls match up.
 * defines: enum rl_group, struct rl_dist, rl_dist_init, rl_dist_connect_devices,
 * rl_dist_finalize, rl_group_name */
#ifndef RL_COMM_DIST_H
#define RL_COMM_DIST_H

#include <stdbool.h>

#include "runtime/comm/comm.h"
#include "topology/layout.h"

enum rl_group {
	RL_G_WORLD,
	RL_G_TP,
	RL_G_CP,
	RL_G_DP,
	RL_G_PP,
	RL_G_DP_CP, /* gradients are reduced over data and context ranks */
	RL_G_TP_DP,
	RL_G_MP, /* tp-pp: the ranks that hold one copy of the model */
	RL_G_EP,
	/* under expert parallelism (NULL without): the ranks that hold the
	 * same experts, over which their gradients are reduced (the expert
	 * grid's dp), and the ranks that hold one copy of every expert
	 * (its tp-ep-pp) */
	RL_G_EDP,
	RL_G_EXPERT_MP,
	/* the first and the last pipeline stage: the tied embedding's two
	 * copies; NULL on the stages between */
	RL_G_EMBEDDING,
	RL_N_GROUPS
};

/* Non-colocated generation splits the run's tasks in two roles: the
 * first ones train on the layout, the last generation_ranks generate, as
 * generation_tp-way tensor-parallel replicas. Each role has its own groups,
 * as if it were a run of its own (a generation rank's layout is TP x DP of
 * the generation ranks); the bridge joins them. */
struct rl_dist_roles {
	int generation_ranks; /* 0: every rank trains and generates */
	int generation_tp;
};

struct rl_dist {
	struct rl_comm_world *world;
	struct rl_layout layout; /* this role's */
	struct rl_coords coords;
	int rank, size; /* in this role: g[RL_G_WORLD] is the role's ranks */
	struct rl_comm *g[RL_N_GROUPS];
	/* every task of the run (MPI), where this one is in it, and whether
	 * it generates; without generation ranks, all is g[RL_G_WORLD] */
	struct rl_comm *all;
	int all_rank, all_size;
	bool generation;
	/* the first training rank (its rank 0) and every generation rank
	 * (generation rank r is its rank 1 + r); NULL on the other training
	 * ranks, and without generation ranks */
	struct rl_comm *bridge;
	/* each group's split, which rl_dist_connect_devices repeats */
	int color[RL_N_GROUPS], key[RL_N_GROUPS];
};

/* MPI up, the world checked against the layout and the roles (the
 * layout's world plus the generation ranks; MPI's rank the rank the
 * launcher gave, expect_rank), then every group, on MPI: host values only
 * until rl_dist_connect_devices. roles NULL: every rank trains. */
int rl_dist_init(struct rl_dist *d, const struct rl_layout *l, const struct rl_dist_roles *roles,
                 int expect_rank, double timeout_s, char *err, size_t errlen);
/* Gives the role's groups (its world and every layout group) their device
 * faces on transport t: once the backend is known. Collective over the
 * role's ranks. The bridge and the run's world stay host-only: what they
 * carry (rollouts, refit's buckets) is staged through the host by its
 * users. */
int rl_dist_connect_devices(struct rl_dist *d, enum rl_comm_transport t,
                            const struct rl_comm_stage *stage, char *err, size_t errlen);
void rl_dist_finalize(struct rl_dist *d);

const char *rl_group_name(enum rl_group g);

#endif
