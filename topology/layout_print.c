#define _GNU_SOURCE
/* The groups of a layout as text, for `rlrun plan` and `srun --rl-plan`. */
#include <stdio.h>
#include <stdlib.h>

#include "topology/layout.h"

static void print_mask(const struct rl_layout *l, const char *mask, int expert, FILE *out,
                       const char *prefix)
{
	enum { GROUPS_SHOWN = 8, MEMBERS_SHOWN = 16 };
	int *ranks = malloc((size_t)l->world * sizeof *ranks);
	int size = 0;
	int n = ranks ? rl_layout_groups(l, mask, expert, ranks, &size) : -1;
	if (n > 0) {
		fprintf(out, "%s%-3s %d group%s of %d:", prefix, mask, n, n == 1 ? "" : "s", size);
		for (int g = 0; g < n && g < GROUPS_SHOWN; g++) {
			fputs(" [", out);
			for (int i = 0; i < size && i < MEMBERS_SHOWN; i++)
				fprintf(out, "%s%d", i ? "," : "", ranks[g * size + i]);
			fputs(size > MEMBERS_SHOWN ? ",...]" : "]", out);
		}
		fputs(n > GROUPS_SHOWN ? " ...\n" : "\n", out);
	}
	free(ranks);
}

void rl_layout_print_groups(const struct rl_layout *l, FILE *out, const char *prefix)
{
	print_mask(l, "tp", 0, out, prefix);
	print_mask(l, "cp", 0, out, prefix);
	print_mask(l, "dp", 0, out, prefix);
	print_mask(l, "pp", 0, out, prefix);
	print_mask(l, "ep", 1, out, prefix);
}
