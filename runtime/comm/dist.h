/* The groups a run communicates in, made from the layout: every rank
 * creates them in the same order, so the split calls match up.
 * defines: enum rl_group, struct rl_dist, rl_dist_init, rl_dist_finalize,
 * rl_group_name */
#ifndef RL_COMM_DIST_H
#define RL_COMM_DIST_H

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
	/* the first and the last pipeline stage: the tied embedding's two
	 * copies; NULL on the stages between */
	RL_G_EMBEDDING,
	RL_N_GROUPS
};

struct rl_dist {
	struct rl_comm_world *world;
	struct rl_layout layout;
	struct rl_coords coords;
	int rank, size;
	struct rl_comm *g[RL_N_GROUPS];
	/* on NCCL, the device world every group is split from (one
	 * ncclUniqueId for the run); NULL on MPI */
	struct rl_comm *device_world;
};

/* MPI up, the world checked against the layout (same size; MPI's rank the
 * rank the launcher gave, expect_rank), then every group on kind's backend
 * (the world group is always MPI). */
int rl_dist_init(struct rl_dist *d, const struct rl_layout *l, int expect_rank,
                 enum rl_comm_backend_kind kind, double timeout_s, char *err, size_t errlen);
void rl_dist_finalize(struct rl_dist *d);

const char *rl_group_name(enum rl_group g);

#endif
