/* The learning rate of each optimizer step (policy.lr_schedule).
 * defines: struct rl_lr_schedule, rl_lr_schedule_init, rl_lr_at */
#ifndef RL_GRPO_SCHEDULE_H
#define RL_GRPO_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

enum rl_lr_kind { RL_LR_CONSTANT, RL_LR_LINEAR_WARMUP, RL_LR_COSINE };

struct rl_lr_schedule {
	enum rl_lr_kind kind;
	double peak, min;
	int64_t warmup;      /* optimizer steps */
	int64_t decay_steps; /* cosine: the step at which min is reached */
};

/* type is policy.lr_schedule.type; decay_steps <= 0 means "total_steps". */
int rl_lr_schedule_init(struct rl_lr_schedule *s, const char *type, double peak, double min,
                        int64_t warmup, int64_t decay_steps, int64_t total_steps, char *err,
                        size_t errlen);

/* The rate of optimizer step k (0-based). Every type warms up linearly
 * over the first `warmup` steps, reaching peak * (k + 1) / warmup, so the
 * first update is never a zero step; constant and linear_warmup then hold
 * peak, cosine falls from peak to min by decay_steps and stays there. */
double rl_lr_at(const struct rl_lr_schedule *s, int64_t k);

#endif
