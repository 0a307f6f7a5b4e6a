/* The learning rate of each optimizer step (policy.lr_schedule).
 * defines: struct rl_lr_schedule, rl_lr_schedule_init, rl_lr_at */
#ifndef RL_GRPO_SCHEDULE_H
#define RL_GRPO_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rl_lr_kind { RL_LR_CONSTANT, RL_LR_LINEAR_WARMUP, RL_LR_COSINE, RL_LR_LINEAR };

struct rl_lr_schedule {
	enum rl_lr_kind kind;
	double peak, min;
	int64_t warmup;      /* optimizer steps */
	int64_t decay_steps; /* cosine, linear: the step at which min is reached */
	/* Megatron's warmup (policy.lr_schedule.warmup_init set): step k < warmup
	 * uses warmup_init + (peak - warmup_init) * k / warmup */
	bool has_warmup_init;
	double warmup_init;
};

/* type is policy.lr_schedule.type; decay_steps <= 0 means "total_steps". */
int rl_lr_schedule_init(struct rl_lr_schedule *s, const char *type, double peak, double min,
                        int64_t warmup, int64_t decay_steps, int64_t total_steps, char *err,
                        size_t errlen);

/* Megatron's warmup from init instead of from peak / warmup (see the
 * struct); call after rl_lr_schedule_init. */
void rl_lr_schedule_warmup_from(struct rl_lr_schedule *s, double init);

/* The rate of optimizer step k (0-based). Every type warms up linearly
 * over the first `warmup` steps, reaching peak * (k + 1) / warmup, so the
 * first update is never a zero step (or from warmup_init, as Megatron);
 * constant and linear_warmup then hold peak, cosine falls from peak to min
 * by decay_steps as a half cosine and linear as a straight line (Megatron's
 * lr_decay_style cosine and linear), both staying at min after it. */
double rl_lr_at(const struct rl_lr_schedule *s, int64_t k);

#endif
