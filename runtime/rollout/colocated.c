/* Colocated generation: every training rank generates its data-parallel
 * share of the step's samples with the very model it trains (so a refit
 * is nothing), and the shares are put together on every rank. A
 * multi-turn run plays its share's episodes instead. */
#define _GNU_SOURCE
#include "runtime/rollout/episodes.h"
#include "runtime/rollout/generate.h"
#include "runtime/rollout/share.h"
#include "runtime/rollout/source.h"

static int colocated_generate(struct rl_rollout_source *s, struct rl_rollout *r, uint64_t seed,
                              int64_t *prompts_truncated, char *err, size_t errlen)
{
	const struct rl_rollout_ctx *c = &s->ctx;

	if (c->episodes ? rl_rollout_episodes_share(c->episodes, c->model, c->tok, c->gen, c->dp, r,
	                                            seed, prompts_truncated, err, errlen)
	                : rl_rollout_generate_share(c->model, c->tok, c->gen, c->dp, r, seed,
	                                            prompts_truncated, err, errlen))
		return -1;
	return rl_share_samples(c->dp, r, (int)c->gen->max_total_tokens, err, errlen);
}

const struct rl_rollout_source_ops rl_rollout_colocated = {
    .generate = colocated_generate,
};
