/* DAPO's reward scaling and shaping (see reward_shaping.h). */
#include "runtime/grpo/reward_shaping.h"

double rl_reward_scale(double reward, const struct rl_cfg_reward_scaling *c)
{
	double x = reward < c->source_min   ? c->source_min
	           : reward > c->source_max ? c->source_max
	                                    : reward;

	return c->target_min + (x - c->source_min) / (c->source_max - c->source_min) *
	                           (c->target_max - c->target_min);
}

double rl_overlong_penalty(int64_t len, int64_t max_len, int64_t buffer_len, double penalty)
{
	int64_t expected = max_len - buffer_len;

	if (len <= expected)
		return 0.0;
	if (len > max_len)
		return -penalty;
	return (double)(expected - len) / (double)buffer_len * penalty;
}

void rl_grpo_shape_rewards(struct rl_rollout *r, const struct rl_cfg_grpo *c, double *unshaped)
{
	const struct rl_cfg_reward_shaping *s = &c->reward_shaping;

	for (int i = 0; i < r->n; i++) {
		struct rl_sample *x = &r->s[i];

		if (c->reward_scaling.enabled)
			x->reward = rl_reward_scale(x->reward, &c->reward_scaling);
		if (unshaped)
			unshaped[i] = x->reward;
		if (!s->enabled)
			continue;
		/* NeMo-RL: stop_properly_penalty_coef, when set, replaces the
		 * overlong penalty */
		if (s->stop_properly_penalty_coef.set) {
			if (x->truncated)
				x->reward *= s->stop_properly_penalty_coef.value;
		} else {
			x->reward += rl_overlong_penalty(
			    x->len - x->prompt_len, s->max_response_length.value,
			    s->overlong_buffer_length.value, s->overlong_buffer_penalty.value);
		}
	}
}
