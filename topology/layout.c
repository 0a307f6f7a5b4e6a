/* The layout as Megatron-Core's RankGenerator computes it. Both grids use the
 * same axis order (RL_LAYOUT_ORDER, leftmost fastest), so a rank's
 * coordinate on an axis is (rank / stride) % size with stride the product
 * of the sizes to its left, and a group is every rank that agrees with a
 * given one on the axes outside the mask. */
#include "topology/layout.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *const axis_name[RL_N_AXES] = {"tp", "cp", "ep", "dp", "pp"};

const char *rl_axis_name(enum rl_axis a)
{
	return axis_name[a];
}

void rl_layout_axis(const struct rl_layout *l, const struct rl_coords *c, enum rl_axis a, int *rank,
                    int *size)
{
	/* experts live in their own grid over the same ranks */
	bool expert = a == RL_AXIS_EP;
	*rank = expert ? c->expert_rank[a] : c->rank[a];
	*size = expert ? l->expert_size[a] : l->size[a];
}

static const int *grid_sizes(const struct rl_layout *l, int expert)
{
	return expert ? l->expert_size : l->size;
}

static void grid_strides(const int *size, int *stride)
{
	int s = 1;

	for (int a = 0; a < RL_N_AXES; a++) {
		stride[a] = s;
		s *= size[a];
	}
}

/* a x b x c, or world + 1 once it passes world: three sizes near INT_MAX
 * would overflow even a long long */
static long long product(int a, int b, int c, int world)
{
	long long p = a;

	p = p > world ? world + 1LL : p * b;
	p = p > world ? world + 1LL : p * c;
	return p > world ? world + 1LL : p;
}

static void not_divisible(char *err, size_t errlen, int world, const char *names, int a, int b,
                          int c, long long p)
{
	if (p > world)
		snprintf(err, errlen, "layout: world size %d is smaller than %s = %d x %d x %d",
		         world, names, a, b, c);
	else
		snprintf(err, errlen,
		         "layout: world size %d is not divisible by %s = %d x %d x %d = %lld",
		         world, names, a, b, c, p);
}

int rl_layout_init(struct rl_layout *l, int world, int tp, int pp, int cp, int ep, int etp,
                   char *err, size_t errlen)
{
	const char *names[] = {"world", "tp", "pp", "cp", "ep", "etp"};
	const int values[] = {world, tp, pp, cp, ep, etp};

	memset(l, 0, sizeof(*l));
	for (int i = 0; i < 6; i++) {
		if (values[i] < 1) {
			snprintf(err, errlen, "layout: %s must be at least 1 (got %d)", names[i],
			         values[i]);
			return -1;
		}
	}
	long long dense = product(tp, cp, pp, world), expert = product(etp, ep, pp, world);
	if (world % dense != 0) {
		not_divisible(err, errlen, world, "tp x cp x pp", tp, cp, pp, dense);
		return -1;
	}
	if (world % expert != 0) {
		not_divisible(err, errlen, world, "etp x ep x pp", etp, ep, pp, expert);
		return -1;
	}
	l->world = world;
	l->size[RL_AXIS_TP] = tp;
	l->size[RL_AXIS_CP] = cp;
	l->size[RL_AXIS_EP] = 1;
	l->size[RL_AXIS_DP] = (int)(world / dense);
	l->size[RL_AXIS_PP] = pp;
	l->expert_size[RL_AXIS_TP] = etp;
	l->expert_size[RL_AXIS_CP] = 1;
	l->expert_size[RL_AXIS_EP] = ep;
	l->expert_size[RL_AXIS_DP] = (int)(world / expert);
	l->expert_size[RL_AXIS_PP] = pp;
	return 0;
}

void rl_layout_coords(const struct rl_layout *l, int rank, struct rl_coords *c)
{
	int stride[RL_N_AXES], estride[RL_N_AXES];

	if (rank < 0 || rank >= l->world) {
		for (int a = 0; a < RL_N_AXES; a++)
			c->rank[a] = c->expert_rank[a] = -1;
		return;
	}
	grid_strides(l->size, stride);
	grid_strides(l->expert_size, estride);
	for (int a = 0; a < RL_N_AXES; a++) {
		c->rank[a] = rank / stride[a] % l->size[a];
		c->expert_rank[a] = rank / estride[a] % l->expert_size[a];
	}
}

/* A bit per axis, or -1. Megatron reads a mask as a set (the order string,
 * not the mask, fixes the member order), so "dp-cp" equals "cp-dp";
 * unknown, empty and repeated names are refused. */
static int parse_mask(const char *mask)
{
	int bits = 0;
	const char *p = mask;

	if (!mask)
		return -1;
	for (;;) {
		size_t n = strcspn(p, "-");
		int axis = -1;

		for (int a = 0; a < RL_N_AXES; a++)
			if (n == strlen(axis_name[a]) && strncmp(p, axis_name[a], n) == 0)
				axis = a;
		if (axis < 0 || (bits & (1 << axis)))
			return -1;
		bits |= 1 << axis;
		if (p[n] == '\0')
			return bits;
		p += n + 1;
	}
}

static int group_size_of(const int *size, int bits)
{
	int n = 1;

	for (int a = 0; a < RL_N_AXES; a++)
		if (bits & (1 << a))
			n *= size[a];
	return n;
}

/* The rank whose coordinates on the axes selected by sel are index taken
 * as a mixed-radix number (leftmost selected axis fastest), plus base. */
static int place_index(const int *size, const int *stride, int sel, int index, int base)
{
	int rank = base;

	for (int a = 0; a < RL_N_AXES; a++) {
		if (!(sel & (1 << a)))
			continue;
		rank += index % size[a] * stride[a];
		index /= size[a];
	}
	return rank;
}

/* Member order: the masked axes' mixed-radix index, as Megatron's
 * generate_masked_orthogonal_rank_groups. Because every masked stride is
 * at least the span of the masked axes to its left, that order is also
 * increasing rank order, for every mask. */
int rl_layout_group(const struct rl_layout *l, const char *mask, int expert, int rank, int *members,
                    int cap)
{
	const int *size = grid_sizes(l, expert);
	int stride[RL_N_AXES], bits = parse_mask(mask);

	if (bits < 0 || rank < 0 || rank >= l->world)
		return -1;
	int n = group_size_of(size, bits);
	if (n > cap)
		return -1;
	grid_strides(size, stride);
	int base = 0;
	for (int a = 0; a < RL_N_AXES; a++)
		if (!(bits & (1 << a)))
			base += rank / stride[a] % size[a] * stride[a];
	for (int i = 0; i < n; i++)
		members[i] = place_index(size, stride, bits, i, base);
	return n;
}

int rl_layout_groups(const struct rl_layout *l, const char *mask, int expert, int *ranks,
                     int *group_size)
{
	const int *size = grid_sizes(l, expert);
	int stride[RL_N_AXES], bits = parse_mask(mask);

	if (bits < 0)
		return -1;
	grid_strides(size, stride);
	int n = group_size_of(size, bits), n_groups = l->world / n;
	int rest = ((1 << RL_N_AXES) - 1) & ~bits;
	for (int g = 0; g < n_groups; g++) {
		int base = place_index(size, stride, rest, g, 0);
		for (int i = 0; i < n; i++)
			ranks[g * n + i] = place_index(size, stride, bits, i, base);
	}
	if (group_size)
		*group_size = n;
	return n_groups;
}

void rl_layout_describe(const struct rl_layout *l, char *buf, size_t len)
{
	const int *s = l->size, *e = l->expert_size;
	int n;

	if (len == 0)
		return;
	n = snprintf(buf, len, "tp=%d cp=%d ep=%d dp=%d pp=%d", s[RL_AXIS_TP], s[RL_AXIS_CP],
	             e[RL_AXIS_EP], s[RL_AXIS_DP], s[RL_AXIS_PP]);
	if (n < 0 || (size_t)n >= len)
		return;
	if (e[RL_AXIS_TP] != s[RL_AXIS_TP] || e[RL_AXIS_DP] != s[RL_AXIS_DP])
		snprintf(buf + n, len - (size_t)n, " etp=%d edp=%d", e[RL_AXIS_TP], e[RL_AXIS_DP]);
}
