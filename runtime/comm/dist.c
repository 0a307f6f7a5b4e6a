/* The run's groups from the layout library's masks. A group's color is
 * its index in the layout's list of groups for the mask, its key the
 * rank's place in it: the members come out in the layout's order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/dist.h"

static const struct {
	const char *name;
	const char *mask; /* NULL: not a mask of the dense grid */
	int expert;
} groups[RL_N_GROUPS] = {
    [RL_G_WORLD] = {"world", NULL, 0},
    [RL_G_TP] = {"tp", "tp", 0},
    [RL_G_CP] = {"cp", "cp", 0},
    [RL_G_DP] = {"dp", "dp", 0},
    [RL_G_PP] = {"pp", "pp", 0},
    [RL_G_DP_CP] = {"dp-cp", "dp-cp", 0},
    [RL_G_TP_DP] = {"tp-dp", "tp-dp", 0},
    [RL_G_MP] = {"tp-pp", "tp-pp", 0},
    [RL_G_EP] = {"ep", "ep", 1},
    [RL_G_EDP] = {"edp", "dp", 1},
    [RL_G_EXPERT_MP] = {"expert-mp", "tp-ep-pp", 1},
    [RL_G_EMBEDDING] = {"embedding", NULL, 0},
};

const char *rl_group_name(enum rl_group g)
{
	return g >= 0 && g < RL_N_GROUPS ? groups[g].name : "?";
}

/* The color and key of rank in the mask's groups. */
static int place(const struct rl_layout *l, const char *mask, int expert, int rank, int *color,
                 int *key, char *err, size_t errlen)
{
	int *ranks = malloc((size_t)l->world * sizeof *ranks), size = 0;
	int n = ranks ? rl_layout_groups(l, mask, expert, ranks, &size) : -1;

	*color = *key = -1;
	for (int i = 0; n > 0 && i < l->world; i++)
		if (ranks[i] == rank) {
			*color = i / size;
			*key = i % size;
		}
	free(ranks);
	if (*color < 0) {
		snprintf(err, errlen, "rank %d is in no %s group of the layout", rank, mask);
		return -1;
	}
	return 0;
}

/* Megatron's embedding group: the first and the last stage of each
 * pipeline, which hold the two copies of tied embeddings. */
static void embedding_place(const struct rl_dist *d, int *color, int *key)
{
	int pp = d->coords.rank[RL_AXIS_PP], n_pp = d->layout.size[RL_AXIS_PP];
	int first = pp == 0, last = pp == n_pp - 1;

	*color = first || last ? d->rank % (d->size / n_pp) : -1;
	*key = pp == 0 ? 0 : 1;
}

/* The role's own world, the bridge, and a generation rank's layout. */
static int split_roles(struct rl_dist *d, const struct rl_layout *train,
                       const struct rl_dist_roles *roles, char *err, size_t errlen)
{
	int me = d->all_rank, gen_rank = me - train->world;
	bool bridged = me == 0 || d->generation;

	if (rl_comm_split(d->all, d->generation, me, d->generation ? "generation" : "training",
	                  &d->g[RL_G_WORLD], err, errlen) ||
	    rl_comm_split(d->all, bridged ? 0 : -1, d->generation ? 1 + gen_rank : 0, "bridge",
	                  &d->bridge, err, errlen))
		return -1;
	if (d->generation) {
		char why[256];

		if (rl_layout_init(&d->layout, roles->generation_ranks, roles->generation_tp, 1, 1,
		                   1, 1, why, sizeof why)) {
			snprintf(err, errlen, "the generation ranks: %s", why);
			return -1;
		}
	}
	return 0;
}

int rl_dist_init(struct rl_dist *d, const struct rl_layout *l, const struct rl_dist_roles *roles,
                 int expect_rank, double timeout_s, char *err, size_t errlen)
{
	int n_gen = roles ? roles->generation_ranks : 0;

	memset(d, 0, sizeof *d);
	d->layout = *l;
	if (rl_comm_world_init(&d->world, &d->all, l->world + n_gen, timeout_s, err, errlen))
		return -1;
	d->all_rank = rl_comm_rank(d->all);
	d->all_size = rl_comm_size(d->all);
	if (expect_rank >= 0 && d->all_rank != expect_rank) {
		snprintf(err, errlen,
		         "MPI gives this task rank %d but the launcher said %d: the tasks and the "
		         "MPI ranks must be numbered alike",
		         d->all_rank, expect_rank);
		goto fail;
	}
	d->generation = d->all_rank >= l->world;
	if (n_gen > 0 && split_roles(d, l, roles, err, errlen))
		goto fail;
	if (n_gen == 0)
		d->g[RL_G_WORLD] = d->all;
	d->rank = rl_comm_rank(d->g[RL_G_WORLD]);
	d->size = rl_comm_size(d->g[RL_G_WORLD]);
	rl_layout_coords(&d->layout, d->rank, &d->coords);
	d->color[RL_G_WORLD] = 0;
	d->key[RL_G_WORLD] = d->rank;
	for (int g = RL_G_WORLD + 1; g < RL_N_GROUPS; g++) {
		int color, key;

		if (g == RL_G_EMBEDDING)
			embedding_place(d, &color, &key);
		else if ((g == RL_G_EDP || g == RL_G_EXPERT_MP) &&
		         d->layout.expert_size[RL_AXIS_EP] == 1)
			color = key = -1; /* the experts are dense tensors then */
		else if (place(&d->layout, groups[g].mask, groups[g].expert, d->rank, &color, &key,
		               err, errlen))
			goto fail;
		d->color[g] = color;
		d->key[g] = key;
		if (rl_comm_split(d->g[RL_G_WORLD], color, key, groups[g].name, &d->g[g], err,
		                  errlen))
			goto fail;
	}
	return 0;
fail:
	rl_dist_finalize(d);
	return -1;
}

int rl_dist_connect_devices(struct rl_dist *d, enum rl_comm_transport t,
                            const struct rl_comm_stage *stage, char *err, size_t errlen)
{
	struct rl_comm *root = d->g[RL_G_WORLD];

	if (rl_comm_connect_device(NULL, root, 0, d->rank, t, stage, err, errlen))
		return -1;
	for (int g = RL_G_WORLD + 1; g < RL_N_GROUPS; g++)
		if (rl_comm_connect_device(root, d->g[g], d->color[g], d->key[g], t, stage, err,
		                           errlen))
			return -1;
	return 0;
}

void rl_dist_finalize(struct rl_dist *d)
{
	/* the world frees every group still open */
	rl_comm_world_finalize(d->world);
	memset(d, 0, sizeof *d);
}
