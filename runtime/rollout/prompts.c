#include <stdio.h>

#include "runtime/rollout/prompts.h"

int rl_rollout_take_prompts(struct rl_data_source *data, int n_groups, int group_size,
                            struct rl_rollout *r, char *err, size_t errlen)
{
	if (rl_rollout_alloc(r, n_groups, group_size)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int got = rl_data_source_next(data, r->n_groups, r->problems, r->answers, r->prompts,
	                              r->metadata, err, errlen);
	if (got <= 0)
		rl_rollout_free(r);
	return got < 0 ? -1 : got == 0 ? 1 : 0;
}
