#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "runtime/grpo/schedule.h"

int rl_lr_schedule_init(struct rl_lr_schedule *s, const char *type, double peak, double min,
                        int64_t warmup, int64_t decay_steps, int64_t total_steps, char *err,
                        size_t errlen)
{
	enum rl_lr_kind kind;
	if (strcmp(type, "constant") == 0)
		kind = RL_LR_CONSTANT;
	else if (strcmp(type, "linear_warmup") == 0)
		kind = RL_LR_LINEAR_WARMUP;
	else if (strcmp(type, "cosine") == 0)
		kind = RL_LR_COSINE;
	else if (strcmp(type, "linear") == 0)
		kind = RL_LR_LINEAR;
	else {
		snprintf(err, errlen, "policy.lr_schedule.type: unknown schedule '%s'", type);
		return -1;
	}
	*s = (struct rl_lr_schedule){.kind = kind};
	s->peak = peak;
	s->min = min;
	s->warmup = warmup;
	s->decay_steps = decay_steps > 0 ? decay_steps : total_steps;
	if ((s->kind == RL_LR_COSINE || s->kind == RL_LR_LINEAR) && s->decay_steps <= s->warmup) {
		snprintf(err, errlen,
		         "policy.lr_schedule: decay over %lld optimizer steps leaves nothing "
		         "after %lld warmup steps",
		         (long long)s->decay_steps, (long long)s->warmup);
		return -1;
	}
	return 0;
}

void rl_lr_schedule_warmup_from(struct rl_lr_schedule *s, double init)
{
	s->has_warmup_init = true;
	s->warmup_init = init;
}

double rl_lr_at(const struct rl_lr_schedule *s, int64_t k)
{
	if (k < s->warmup && s->has_warmup_init)
		return s->warmup_init + (s->peak - s->warmup_init) * (double)k / (double)s->warmup;
	if (k < s->warmup)
		return s->peak * (double)(k + 1) / (double)s->warmup;
	if (s->kind != RL_LR_COSINE && s->kind != RL_LR_LINEAR)
		return s->peak;
	if (k >= s->decay_steps)
		return s->min;
	double progress = (double)(k - s->warmup) / (double)(s->decay_steps - s->warmup);
	if (s->kind == RL_LR_LINEAR)
		return s->min + (s->peak - s->min) * (1.0 - progress);
	return s->min + (s->peak - s->min) * 0.5 * (1.0 + cos(M_PI * progress));
}
