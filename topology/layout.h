/* The 6-D parallel layout as Megatron-Core's RankGenerator: one order string
 * ("tp-cp-ep-dp-pp", leftmost axis stride 1) turns a rank into coordinates
 * and a mask of axes into process groups. Dense layers use the grid
 * TP x CP x DP x PP (EP 1); expert layers fold onto the same ranks as
 * ETP x EP x EDP x PP (order "tp-ep-dp-pp", EDP = world / (ETP EP PP)).
 * A pure function of the sizes: the plugin, the planner and rlrun agree.
 * defines: enum rl_axis, struct rl_layout, struct rl_coords, rl_layout_*,
 * rl_axis_name */
#ifndef RL_LAYOUT_H
#define RL_LAYOUT_H

#include <stddef.h>
#include <stdio.h>

enum rl_axis { RL_AXIS_TP, RL_AXIS_CP, RL_AXIS_EP, RL_AXIS_DP, RL_AXIS_PP, RL_N_AXES };

#define RL_LAYOUT_ORDER "tp-cp-ep-dp-pp"

struct rl_layout {
	int world;
	int size[RL_N_AXES];        /* dense grid: TP, CP, 1, DP, PP */
	int expert_size[RL_N_AXES]; /* expert grid: ETP, 1, EP, EDP, PP */
	int sequence_parallel;      /* recorded for the plan; shapes no group */
};

struct rl_coords {
	int rank[RL_N_AXES];        /* in the dense grid (EP always 0) */
	int expert_rank[RL_N_AXES]; /* in the expert grid (CP always 0) */
};

/* Sizes as the config gives them; DP (and EDP) follow from world. Returns
 * 0, or -1 with err saying which product does not divide world. */
int rl_layout_init(struct rl_layout *l, int world, int tp, int pp, int cp, int ep, int etp,
                   char *err, size_t errlen);

/* A rank outside 0..world-1 gives -1 in every field. */
void rl_layout_coords(const struct rl_layout *l, int rank, struct rl_coords *c);

/* The rank and size a task has on an axis, as RL_<AXIS>_RANK/SIZE give
 * them: EP from the expert grid, every other axis from the dense grid. */
void rl_layout_axis(const struct rl_layout *l, const struct rl_coords *c, enum rl_axis a, int *rank,
                    int *size);
/* "tp", "cp", "ep", "dp", "pp" */
const char *rl_axis_name(enum rl_axis a);

/* Masks are '-'-joined axis names, e.g. "tp", "tp-pp", "dp-cp". expert != 0
 * selects the expert grid (names "tp" for ETP, "ep", "dp" for EDP, "pp").
 * A mask is a set ("cp-dp" is "dp-cp"); repeated or unknown names are bad.
 * Fills members (capacity cap) with the ranks of the group that holds
 * rank, in increasing order; returns the group size, or -1 for a bad mask
 * or a too small cap. */
int rl_layout_group(const struct rl_layout *l, const char *mask, int expert, int rank, int *members,
                    int cap);

/* All groups of a mask, Megatron's generate_masked_orthogonal_rank_groups
 * order: ranks[g * group_size + i]. ranks needs world entries. Returns the
 * number of groups (world / group_size), or -1 for a bad mask. */
int rl_layout_groups(const struct rl_layout *l, const char *mask, int expert, int *ranks,
                     int *group_size);

/* "tp=2 cp=1 ep=1 dp=4 pp=2" (with "etp=.. edp=.." when experts differ). */
void rl_layout_describe(const struct rl_layout *l, char *buf, size_t len);

/* The groups of every axis, one line each ("tp 4 groups of 2: [0,1] ..."),
 * each line started with prefix (layout_print.c). */
void rl_layout_print_groups(const struct rl_layout *l, FILE *out, const char *prefix);

#endif
