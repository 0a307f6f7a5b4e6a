#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "runtime/grpo/schedule.h"
#include "runtime/base/plural.h"

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
		         "policy.lr_schedule: decay over %lld optimizer step%s leaves nothing "
		         "after %lld warmup step%s",
		         (long long)s->decay_steps, rl_plural(s->decay_steps), (long long)s->warmup,
		         rl_plural(s->warmup));
		return -1;
	}
	return 0;
}

void rl_lr_schedule_warmup_from(struct rl_lr_schedule *s, double init)
{
	s->has_warmup_init = true;
	s->warmup_init = init;
}

int rl_lr_schedule_torch(struct rl_lr_schedule *s, double peak, const struct rl_lr_phase *phases,
                         int n, const int64_t *milestones, char *err, size_t errlen)
{
	if (n < 1 || n > RL_LR_MAX_PHASES) {
		snprintf(err, errlen, "policy.scheduler: %d schedulers (1 to %d)", n,
		         RL_LR_MAX_PHASES);
		return -1;
	}
	*s = (struct rl_lr_schedule){.kind = RL_LR_TORCH, .peak = peak, .n_phases = n};
	for (int i = 0; i < n; i++) {
		s->phases[i] = phases[i];
		if ((phases[i].kind == RL_PHASE_LINEAR || phases[i].kind == RL_PHASE_COSINE) &&
		    phases[i].n < 1) {
			snprintf(err, errlen,
			         "policy.scheduler[%d]: total_iters / T_max must be >= 1", i);
			return -1;
		}
		if (i + 1 < n) {
			s->milestones[i] = milestones[i];
			if (milestones[i] < 0 || (i > 0 && milestones[i] <= milestones[i - 1])) {
				snprintf(err, errlen, "policy.scheduler: milestones must increase");
				return -1;
			}
		}
	}
	return 0;
}

static double torch_at(const struct rl_lr_schedule *s, int64_t k)
{
	int i = 0;
	while (i + 1 < s->n_phases && k >= s->milestones[i])
		i++;
	const struct rl_lr_phase *p = &s->phases[i];
	int64_t e = i ? k - s->milestones[i - 1] : k;
	switch (p->kind) {
	case RL_PHASE_LINEAR:
		return s->peak *
		       (p->a + (p->b - p->a) * (double)(e < p->n ? e : p->n) / (double)p->n);
	case RL_PHASE_CONSTANT:
		return s->peak * (e < p->n ? p->a : 1.0);
	case RL_PHASE_COSINE:
		return p->b + (s->peak - p->b) * (1.0 + cos(M_PI * (double)e / (double)p->n)) / 2;
	}
	return s->peak;
}

double rl_lr_at(const struct rl_lr_schedule *s, int64_t k)
{
	if (s->kind == RL_LR_TORCH)
		return torch_at(s, k);
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
