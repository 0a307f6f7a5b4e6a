/* The layout against published tables: DESIGN.md's example, the examples in
 * Megatron-LM's megatron/core/parallel_state.py docstrings, and the
 * "golden_rank_result_from_past_code" reference of Megatron-LM's
 * tests/unit_tests/test_parallel_state.py (test_rank_generator_for_tp_dp_pp),
 * ported below as loops independent of the mixed-radix code under test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "topology/layout.h"

static void init_ok(struct rl_layout *l, int world, int tp, int pp, int cp, int ep, int etp)
{
	char err[256] = "";

	cr_assert_eq(rl_layout_init(l, world, tp, pp, cp, ep, etp, err, sizeof(err)), 0, "%s", err);
}

/* Groups of mask as one flat table, compared with want (n_groups groups of
 * size each, in Megatron's order). */
static void expect_groups(const struct rl_layout *l, const char *mask, int expert, const int *want,
                          int n_groups, int size)
{
	int *got = calloc((size_t)l->world, sizeof(int)), gs = -1;

	cr_assert_not_null(got);
	cr_assert_eq(rl_layout_groups(l, mask, expert, got, &gs), n_groups, "mask %s", mask);
	cr_assert_eq(gs, size, "mask %s: group size %d, want %d", mask, gs, size);
	for (int i = 0; i < n_groups * size; i++)
		cr_expect_eq(got[i], want[i], "mask %s%s: group %d member %d is %d, want %d", mask,
		             expert ? " (expert)" : "", i / size, i % size, got[i], want[i]);
	free(got);
}

/* The group of every member of every wanted group is that group. */
static void expect_group_of_each(const struct rl_layout *l, const char *mask, int expert,
                                 const int *want, int n_groups, int size)
{
	int members[64];

	cr_assert_leq(size, 64);
	for (int g = 0; g < n_groups; g++)
		for (int i = 0; i < size; i++) {
			int r = want[g * size + i];
			cr_assert_eq(rl_layout_group(l, mask, expert, r, members, 64), size);
			for (int k = 0; k < size; k++)
				cr_expect_eq(members[k], want[g * size + k],
				             "mask %s rank %d: member %d is %d, want %d", mask, r,
				             k, members[k], want[g * size + k]);
		}
}

/* DESIGN.md, "Layout": world 16, TP2 PP2 DP4. */
Test(layout, design_md_table)
{
	struct rl_layout l;
	const int tp[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
	const int dp[] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
	const int pp[] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};

	init_ok(&l, 16, 2, 2, 1, 1, 2);
	cr_expect_eq(l.size[RL_AXIS_DP], 4);
	cr_expect_eq(l.size[RL_AXIS_EP], 1);
	expect_groups(&l, "tp", 0, tp, 8, 2);
	expect_groups(&l, "dp", 0, dp, 4, 4);
	expect_groups(&l, "pp", 0, pp, 8, 2);
	expect_group_of_each(&l, "tp", 0, tp, 8, 2);
	expect_group_of_each(&l, "dp", 0, dp, 4, 4);
	expect_group_of_each(&l, "pp", 0, pp, 8, 2);
}

/* parallel_state.py, initialize_model_parallel docstring: 16 GPUs, TP 2,
 * PP 4 (so DP 2). */
Test(layout, megatron_docstring_tp2_pp4)
{
	struct rl_layout l;
	const int dp[] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
	const int tp[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
	const int pp[] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

	init_ok(&l, 16, 2, 4, 1, 1, 2);
	expect_groups(&l, "dp", 0, dp, 8, 2);
	expect_groups(&l, "tp", 0, tp, 8, 2);
	expect_groups(&l, "pp", 0, pp, 4, 4);
}

/* parallel_state.py, context_parallel_size docstring: 8 GPUs, TP 4, CP 2:
 * CP groups [0,4] [1,5] [2,6] [3,7]. */
Test(layout, megatron_docstring_cp)
{
	struct rl_layout l;
	const int cp[] = {0, 4, 1, 5, 2, 6, 3, 7};
	const int tp[] = {0, 1, 2, 3, 4, 5, 6, 7};

	init_ok(&l, 8, 4, 1, 2, 1, 4);
	cr_expect_eq(l.size[RL_AXIS_DP], 1);
	expect_groups(&l, "cp", 0, cp, 4, 2);
	expect_groups(&l, "tp", 0, tp, 2, 4);
}

/* parallel_state.py, generate_masked_orthogonal_rank_groups docstring:
 * [tp, dp, pp] = [2, 3, 4], mask dp: dp_group[0] = [0,2,4], [1] = [1,3,5],
 * [7] = [19,21,23]. */
Test(layout, megatron_docstring_masked_groups)
{
	struct rl_layout l;
	int ranks[24], gs;

	init_ok(&l, 24, 2, 4, 1, 1, 2);
	cr_assert_eq(rl_layout_groups(&l, "dp", 0, ranks, &gs), 8);
	cr_assert_eq(gs, 3);
	const int g0[] = {0, 2, 4}, g1[] = {1, 3, 5}, g7[] = {19, 21, 23};
	for (int i = 0; i < 3; i++) {
		cr_expect_eq(ranks[0 * 3 + i], g0[i]);
		cr_expect_eq(ranks[1 * 3 + i], g1[i]);
		cr_expect_eq(ranks[7 * 3 + i], g7[i]);
	}
}

/* Hand-computed: world 16, TP2 CP2 DP2 PP2, rank = tp + 2 cp + 4 dp + 8 pp.
 * Groups are enumerated by the unmasked axes (leftmost fastest). */
Test(layout, mask_combinations)
{
	struct rl_layout l;
	/* unmasked cp, dp: index cp + 2 dp */
	const int tp_pp[] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
	/* unmasked dp, pp: index dp + 2 pp */
	const int tp_cp[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
	/* unmasked tp, pp: index tp + 2 pp */
	const int dp_cp[] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
	const int dp[] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};
	const int cp[] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
	/* unmasked cp, pp: index cp + 2 pp */
	const int tp_dp[] = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};

	init_ok(&l, 16, 2, 2, 2, 1, 2);
	cr_expect_eq(l.size[RL_AXIS_DP], 2);
	expect_groups(&l, "tp-pp", 0, tp_pp, 4, 4);
	expect_groups(&l, "pp-tp", 0, tp_pp, 4, 4);
	expect_groups(&l, "tp-cp", 0, tp_cp, 4, 4);
	expect_groups(&l, "dp-cp", 0, dp_cp, 4, 4);
	expect_groups(&l, "cp-dp", 0, dp_cp, 4, 4);
	expect_groups(&l, "dp", 0, dp, 8, 2);
	expect_groups(&l, "cp", 0, cp, 8, 2);
	expect_groups(&l, "tp-dp", 0, tp_dp, 4, 4);
	expect_group_of_each(&l, "tp-pp", 0, tp_pp, 4, 4);
	expect_group_of_each(&l, "dp-cp", 0, dp_cp, 4, 4);

	/* every axis: one group of everyone; ep (size 1) changes nothing */
	int all[16];
	for (int i = 0; i < 16; i++)
		all[i] = i;
	expect_groups(&l, "tp-cp-ep-dp-pp", 0, all, 1, 16);
	expect_groups(&l, "pp-dp-cp-tp", 0, all, 1, 16);
	const int tp[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
	expect_groups(&l, "tp-ep", 0, tp, 8, 2);
}

/* Expert grid, hand-computed. World 16, PP 2, EP 2, ETP 1: EDP 4 and the
 * expert rank = ep + 2 edp + 8 pp. */
Test(layout, expert_grid_etp1)
{
	struct rl_layout l;
	const int ep[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
	const int edp[] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
	const int pp[] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};
	int single[16];

	init_ok(&l, 16, 2, 2, 1, 2, 1);
	cr_expect_eq(l.expert_size[RL_AXIS_TP], 1);
	cr_expect_eq(l.expert_size[RL_AXIS_CP], 1);
	cr_expect_eq(l.expert_size[RL_AXIS_EP], 2);
	cr_expect_eq(l.expert_size[RL_AXIS_DP], 4);
	cr_expect_eq(l.expert_size[RL_AXIS_PP], 2);
	for (int i = 0; i < 16; i++)
		single[i] = i;
	expect_groups(&l, "ep", 1, ep, 8, 2);
	expect_groups(&l, "dp", 1, edp, 4, 4);
	expect_groups(&l, "tp", 1, single, 16, 1);
	/* PP groups are the same in both grids (Megatron asserts it) */
	expect_groups(&l, "pp", 1, pp, 8, 2);
	expect_groups(&l, "pp", 0, pp, 8, 2);
	expect_group_of_each(&l, "dp", 1, edp, 4, 4);
}

/* World 16, PP 1, EP 2, ETP 2 (TP 4): EDP 4 and the expert rank =
 * etp + 2 ep + 4 edp. */
Test(layout, expert_grid_etp2)
{
	struct rl_layout l;
	/* unmasked etp, edp: index etp + 2 edp */
	const int ep[] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
	const int tp_ep[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
	const int edp[] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
	/* dense: TP 4, DP 4 */
	const int dense_dp[] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

	init_ok(&l, 16, 4, 1, 1, 2, 2);
	cr_expect_eq(l.expert_size[RL_AXIS_DP], 4);
	expect_groups(&l, "ep", 1, ep, 8, 2);
	expect_groups(&l, "tp-ep", 1, tp_ep, 4, 4);
	expect_groups(&l, "dp", 1, edp, 4, 4);
	expect_groups(&l, "dp", 0, dense_dp, 4, 4);
	expect_group_of_each(&l, "ep", 1, ep, 8, 2);

	struct rl_coords c;
	rl_layout_coords(&l, 13, &c); /* 13 = 1 + 2*0 + 4*3; dense 1 + 4*3 */
	cr_expect_eq(c.expert_rank[RL_AXIS_TP], 1);
	cr_expect_eq(c.expert_rank[RL_AXIS_EP], 0);
	cr_expect_eq(c.expert_rank[RL_AXIS_DP], 3);
	cr_expect_eq(c.rank[RL_AXIS_TP], 1);
	cr_expect_eq(c.rank[RL_AXIS_DP], 3);
}

/* ---- Megatron's golden reference, test_parallel_state.py ---- */

struct list {
	int *v;
	int n;
};

static void push(struct list *l, int x)
{
	l->v = realloc(l->v, (size_t)(l->n + 1) * sizeof(int));
	cr_assert_not_null(l->v);
	l->v[l->n++] = x;
}

static void push_range(struct list *l, int start, int end, int step)
{
	for (int r = start; r < end; r += step)
		push(l, r);
}

static void check_golden(int world, int tp, int pp, int cp, int ep)
{
	struct rl_layout l;
	struct list dp_g = {0}, dpcp_g = {0}, cp_g = {0}, mp_g = {0}, tp_g = {0}, pp_g = {0};
	struct list tpdp_g = {0}, tpdpcp_g = {0}, etpep_g = {0}, edp_g = {0};
	int dp = world / (tp * pp * cp), npp = world / pp, ntp = world / tp;
	int edp = world / (tp * pp * ep), tdc = tp * dp * cp;

	init_ok(&l, world, tp, pp, cp, ep, tp);
	for (int i = 0; i < pp; i++) {
		int start = i * npp, end = (i + 1) * npp;
		for (int j = 0; j < cp * tp; j++)
			push_range(&dp_g, start + j, end, cp * tp);
		for (int j = 0; j < tp; j++)
			push_range(&dpcp_g, start + j, end, tp);
	}
	for (int i = 0; i < pp; i++)
		for (int j = 0; j < dp; j++) {
			int start = i * npp + j * tp * cp, end = i * npp + (j + 1) * tp * cp;
			for (int k = 0; k < tp; k++)
				push_range(&cp_g, start + k, end, tp);
		}
	/* mp group i: element i of every dp-with-cp group (dp * cp long each) */
	for (int i = 0; i < dp * cp; i++)
		for (int g = 0; g < pp * tp; g++)
			push(&mp_g, dpcp_g.v[g * dp * cp + i]);
	for (int i = 0; i < ntp; i++)
		push_range(&tp_g, i * tp, (i + 1) * tp, 1);
	for (int i = 0; i < npp; i++)
		push_range(&pp_g, i, world, npp);
	for (int i = 0; i < world / tdc; i++) {
		push_range(&tpdpcp_g, i * tdc, (i + 1) * tdc, 1);
		for (int j = 0; j < cp; j++)
			for (int k = 0; k < dp; k++) {
				int start = i * tdc + j * tp + k * tp * cp;
				push_range(&tpdp_g, start, start + tp, 1);
			}
	}
	/* all_ranks reshaped (pp, edp, ep, tp); tp-ep: rows of (pp*edp, ep*tp);
	 * edp: permuted to (pp, ep, tp, edp) */
	push_range(&etpep_g, 0, world, 1);
	for (int p = 0; p < pp; p++)
		for (int e = 0; e < ep; e++)
			for (int t = 0; t < tp; t++)
				for (int d = 0; d < edp; d++)
					push(&edp_g, t + tp * (e + ep * (d + edp * p)));

	expect_groups(&l, "dp", 0, dp_g.v, world / dp, dp);
	expect_groups(&l, "dp-cp", 0, dpcp_g.v, world / (dp * cp), dp * cp);
	expect_groups(&l, "cp", 0, cp_g.v, world / cp, cp);
	expect_groups(&l, "tp-pp", 0, mp_g.v, world / (tp * pp), tp * pp);
	expect_groups(&l, "tp", 0, tp_g.v, world / tp, tp);
	expect_groups(&l, "pp", 0, pp_g.v, world / pp, pp);
	expect_groups(&l, "tp-dp", 0, tpdp_g.v, world / (tp * dp), tp * dp);
	expect_groups(&l, "tp-dp-cp", 0, tpdpcp_g.v, world / tdc, tdc);
	expect_groups(&l, "tp-ep", 1, etpep_g.v, world / (tp * ep), tp * ep);
	expect_groups(&l, "dp", 1, edp_g.v, world / edp, edp);

	struct list *all[] = {&dp_g, &dpcp_g, &cp_g,     &mp_g,    &tp_g,
	                      &pp_g, &tpdp_g, &tpdpcp_g, &etpep_g, &edp_g};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		free(all[i]->v);
}

/* (nodes, gpus per node, tp, pp, cp, ep) rows of test_rank_generator_for_tp_dp_pp */
Test(layout, megatron_golden_reference)
{
	static const int rows[][6] = {
	    {1, 1, 1, 1, 1, 1},  {1, 8, 8, 1, 1, 1},  {1, 8, 2, 2, 1, 1},  {1, 8, 2, 4, 1, 1},
	    {3, 8, 8, 3, 1, 1},  {4, 8, 2, 4, 1, 1},  {8, 8, 8, 8, 1, 1},  {8, 8, 2, 1, 1, 4},
	    {8, 8, 2, 2, 2, 4},  {8, 8, 2, 1, 4, 8},  {8, 8, 2, 2, 2, 8},  {16, 8, 4, 8, 1, 4},
	    {16, 8, 4, 8, 4, 1}, {32, 8, 8, 8, 4, 1}, {64, 8, 4, 2, 8, 8}, {96, 8, 4, 8, 1, 1},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		check_golden(rows[i][0] * rows[i][1], rows[i][2], rows[i][3], rows[i][4],
		             rows[i][5]);
}

/* ---- coordinates ---- */

static void check_round_trip(int world, int tp, int pp, int cp, int ep, int etp)
{
	struct rl_layout l;
	struct rl_coords c;
	const int *s = l.size, *e = l.expert_size;

	init_ok(&l, world, tp, pp, cp, ep, etp);
	for (int r = 0; r < world; r++) {
		rl_layout_coords(&l, r, &c);
		const int *d = c.rank, *x = c.expert_rank;
		for (int a = 0; a < RL_N_AXES; a++) {
			cr_assert(d[a] >= 0 && d[a] < s[a], "rank %d axis %d: %d", r, a, d[a]);
			cr_assert(x[a] >= 0 && x[a] < e[a], "rank %d expert axis %d: %d", r, a,
			          x[a]);
		}
		cr_expect_eq(d[RL_AXIS_EP], 0);
		cr_expect_eq(x[RL_AXIS_CP], 0);
		cr_expect_eq(d[RL_AXIS_PP], x[RL_AXIS_PP]);
		/* DESIGN.md's formula */
		int back = d[RL_AXIS_TP] +
		           tp * (d[RL_AXIS_CP] +
		                 cp * (d[RL_AXIS_EP] +
		                       1 * (d[RL_AXIS_DP] + s[RL_AXIS_DP] * d[RL_AXIS_PP])));
		int eback =
		    x[RL_AXIS_TP] +
		    etp * (x[RL_AXIS_EP] + ep * (x[RL_AXIS_DP] + e[RL_AXIS_DP] * x[RL_AXIS_PP]));
		cr_expect_eq(back, r, "world %d tp %d pp %d cp %d: rank %d -> %d", world, tp, pp,
		             cp, r, back);
		cr_expect_eq(eback, r, "world %d etp %d ep %d: rank %d -> %d", world, etp, ep, r,
		             eback);
	}
}

Test(layout, coords_round_trip)
{
	check_round_trip(16, 2, 2, 1, 1, 2);
	check_round_trip(16, 2, 2, 2, 2, 1);
	check_round_trip(48, 2, 3, 2, 4, 2);
	check_round_trip(64, 4, 2, 2, 8, 1);
	check_round_trip(7, 1, 7, 1, 1, 1);
	check_round_trip(1, 1, 1, 1, 1, 1);
}

Test(layout, coords_table)
{
	struct rl_layout l;
	struct rl_coords c;

	/* world 16, TP2 CP2 DP2 PP2: 13 = 1 + 2*0 + 4*1 + 8*1 */
	init_ok(&l, 16, 2, 2, 2, 1, 2);
	rl_layout_coords(&l, 13, &c);
	cr_expect_eq(c.rank[RL_AXIS_TP], 1);
	cr_expect_eq(c.rank[RL_AXIS_CP], 0);
	cr_expect_eq(c.rank[RL_AXIS_EP], 0);
	cr_expect_eq(c.rank[RL_AXIS_DP], 1);
	cr_expect_eq(c.rank[RL_AXIS_PP], 1);
	rl_layout_coords(&l, 16, &c);
	cr_expect_eq(c.rank[RL_AXIS_TP], -1, "out of range rank gives -1");
	rl_layout_coords(&l, -1, &c);
	cr_expect_eq(c.expert_rank[RL_AXIS_PP], -1);
}

/* ---- errors and text ---- */

Test(layout, invalid_sizes)
{
	struct rl_layout l;
	char err[256];

	err[0] = '\0';
	cr_expect_eq(rl_layout_init(&l, 12, 8, 1, 1, 1, 8, err, sizeof(err)), -1);
	cr_expect_str_eq(err,
	                 "layout: world size 12 is not divisible by tp x cp x pp = 8 x 1 x 1 = 8");
	err[0] = '\0';
	cr_expect_eq(rl_layout_init(&l, 16, 2, 3, 1, 1, 2, err, sizeof(err)), -1);
	cr_expect(strstr(err, "16") && strstr(err, "2 x 1 x 3 = 6"), "%s", err);
	err[0] = '\0';
	cr_expect_eq(rl_layout_init(&l, 16, 2, 2, 2, 1, 2, err, sizeof(err)), 0);
	cr_expect_eq(rl_layout_init(&l, 16, 2, 1, 1, 3, 2, err, sizeof(err)), -1);
	cr_expect(strstr(err, "etp x ep x pp = 2 x 3 x 1 = 6"), "%s", err);
	cr_expect_eq(rl_layout_init(&l, 8, 0, 1, 1, 1, 1, err, sizeof(err)), -1);
	cr_expect(strstr(err, "tp must be at least 1"), "%s", err);
	cr_expect_eq(rl_layout_init(&l, 8, 1, 1, 1, 1, -2, err, sizeof(err)), -1);
	cr_expect(strstr(err, "etp"), "%s", err);
	cr_expect_eq(rl_layout_init(&l, 0, 1, 1, 1, 1, 1, err, sizeof(err)), -1);
	cr_expect(strstr(err, "world"), "%s", err);
	/* products that would wrap an int, and a long long */
	cr_expect_eq(rl_layout_init(&l, 65536, 65536, 65536, 1, 1, 1, err, sizeof(err)), -1);
	cr_expect(strstr(err, "smaller than tp x cp x pp"), "%s", err);
	const int big = 2147483647;
	cr_expect_eq(rl_layout_init(&l, big, big, big, big, 1, 1, err, sizeof(err)), -1);
	cr_expect_eq(rl_layout_init(&l, big, 1, 1, 1, big, big, err, sizeof(err)), -1);
	cr_expect(strstr(err, "etp x ep x pp"), "%s", err);
	cr_expect_eq(rl_layout_init(&l, big, big, 1, 1, 1, big, err, sizeof(err)), 0);
	cr_expect_eq(rl_layout_init(&l, 8, 2, 1, 1, 1, 1, NULL, 0), 0, "err may be NULL");
}

Test(layout, bad_masks_and_caps)
{
	struct rl_layout l;
	int ranks[16], m[16], gs;
	const char *bad[] = {"", "xx", "tp-", "-tp", "tp--pp", "tp-tp", "TP", "tp pp", "etp"};

	init_ok(&l, 16, 2, 2, 1, 1, 2);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(rl_layout_groups(&l, bad[i], 0, ranks, &gs), -1, "mask \"%s\"",
		             bad[i]);
		cr_expect_eq(rl_layout_group(&l, bad[i], 0, 0, m, 16), -1, "mask \"%s\"", bad[i]);
	}
	cr_expect_eq(rl_layout_groups(&l, NULL, 0, ranks, &gs), -1);
	cr_expect_eq(rl_layout_group(&l, "dp", 0, 0, m, 3), -1, "cap 3 < group size 4");
	cr_expect_eq(rl_layout_group(&l, "dp", 0, 0, m, 4), 4);
	cr_expect_eq(rl_layout_group(&l, "dp", 0, 16, m, 16), -1, "rank past world");
	cr_expect_eq(rl_layout_group(&l, "dp", 0, -1, m, 16), -1);
	cr_expect_eq(rl_layout_groups(&l, "tp", 0, ranks, NULL), 8, "group_size may be NULL");
}

Test(layout, describe)
{
	struct rl_layout l;
	char buf[128];

	init_ok(&l, 16, 2, 2, 1, 1, 2);
	rl_layout_describe(&l, buf, sizeof(buf));
	cr_expect_str_eq(buf, "tp=2 cp=1 ep=1 dp=4 pp=2");
	init_ok(&l, 16, 2, 2, 1, 2, 1);
	rl_layout_describe(&l, buf, sizeof(buf));
	cr_expect_str_eq(buf, "tp=2 cp=1 ep=2 dp=4 pp=2 etp=1 edp=4");
	/* CP 2 and EP 2 with ETP = TP: EDP = DP = 4, nothing differs */
	init_ok(&l, 16, 2, 1, 2, 2, 2);
	rl_layout_describe(&l, buf, sizeof(buf));
	cr_expect_str_eq(buf, "tp=2 cp=2 ep=2 dp=4 pp=1");
	/* EP 2 with ETP = TP and no CP halves EDP */
	init_ok(&l, 16, 2, 1, 1, 2, 2);
	rl_layout_describe(&l, buf, sizeof(buf));
	cr_expect_str_eq(buf, "tp=2 cp=1 ep=2 dp=8 pp=1 etp=2 edp=4");
	rl_layout_describe(&l, buf, 8);
	cr_expect_str_eq(buf, "tp=2 cp");
	buf[0] = 'x';
	rl_layout_describe(&l, buf, 0);
	cr_expect_eq(buf[0], 'x');
}
