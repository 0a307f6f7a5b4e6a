#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/grpo/dynamic_sampling.h"
#include "runtime/rollout/prompts.h"
#include "runtime/rollout/source.h"

void rl_rollout_source_open(struct rl_rollout_source *s, const struct rl_rollout_ctx *ctx,
                            bool remote, bool async)
{
	memset(s, 0, sizeof *s);
	s->ctx = *ctx;
	s->ops = async ? &rl_rollout_async : remote ? &rl_rollout_remote : &rl_rollout_colocated;
}

void rl_rollout_source_free(struct rl_rollout_source *s)
{
	for (int k = 0; k < s->ahead.n; k++)
		rl_rollout_free(&s->ahead.q[k].r);
	free(s->ahead.q);
	/* messages that did not complete may still read their memory: a
	 * rank that gets here with some is ending the run, and leaves them */
	rl_outbox_reap(&s->bridge_out);
	if (s->bridge_out.n == 0)
		rl_outbox_free(&s->bridge_out);
	memset(s, 0, sizeof *s);
}

int rl_rollout_begin(struct rl_rollout_source *s, int64_t done, char *err, size_t errlen)
{
	s->refit_step = done;
	return s->ops->send_weights ? s->ops->send_weights(s, err, errlen) : 0;
}

int rl_rollout_next(struct rl_rollout_source *s, int64_t step, struct rl_rollout *r,
                    struct rl_rollout_report *rep, char *err, size_t errlen)
{
	if (s->ops->next)
		return s->ops->next(s, step, r, rep, err, errlen);
	return rl_rollout_next_round(s, step, 0, s->ctx.n_groups, r, rep, err, errlen);
}

int rl_rollout_next_round(struct rl_rollout_source *s, int64_t step, int round, int n_groups,
                          struct rl_rollout *r, struct rl_rollout_report *rep, char *err,
                          size_t errlen)
{
	if (s->ops->next) {
		if (round == 0 && n_groups == s->ctx.n_groups)
			return s->ops->next(s, step, r, rep, err, errlen);
		snprintf(err, errlen,
		         "the asynchronous rollout source cannot generate a second round in a step "
		         "(grpo.use_dynamic_sampling with grpo.async_grpo.enabled)");
		return -1;
	}
	/* synchronous: the round's prompts, generated now */
	double t0 = rl_now();
	int got = rl_rollout_take_prompts(s->ctx.data, n_groups, s->ctx.group_size, r, err, errlen);

	if (got)
		return got;
	if (s->ops->generate(s, r, rl_round_seed(s->ctx.seed, step, round), &rep->prompts_truncated,
	                     err, errlen))
		return -1;
	rep->generation_s += rl_now() - t0;
	return 0;
}

int rl_rollout_generate(struct rl_rollout_source *s, struct rl_rollout *r, uint64_t seed,
                        int64_t *prompts_truncated, char *err, size_t errlen)
{
	return s->ops->generate(s, r, seed, prompts_truncated, err, errlen);
}

int rl_rollout_refit(struct rl_rollout_source *s, int64_t step, char *err, size_t errlen)
{
	if (s->ops->send_weights && s->ops->send_weights(s, err, errlen))
		return -1;
	s->refit_step = step;
	return 0;
}

int rl_rollout_settle(struct rl_rollout_source *s, char *err, size_t errlen)
{
	return s->ops->settle ? s->ops->settle(s, err, errlen) : 0;
}

int rl_rollout_save(struct rl_rollout_source *s, struct rl_wire *w,
                    struct rl_data_position *data_before)
{
	if (s->ops->save)
		return s->ops->save(s, w, data_before);
	rl_data_source_position(s->ctx.data, data_before);
	return 0;
}

int rl_rollout_adopt(struct rl_rollout_source *s, struct rl_buffered *b, int n, const char *dir,
                     int *kept, const char **why, char *err, size_t errlen)
{
	if (s->ops->adopt)
		return s->ops->adopt(s, b, n, dir, kept, why, err, errlen);
	*kept = 0;
	*why = "grpo.async_grpo.enabled is false";
	return 0;
}

void rl_rollout_end(struct rl_rollout_source *s)
{
	if (s->ops->end)
		s->ops->end(s);
}

bool rl_rollout_keeps_in_flight(const struct rl_rollout_source *s)
{
	return s->ops->adopt != NULL;
}
