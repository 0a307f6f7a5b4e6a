/* The learning rate of each optimizer step (policy.lr_schedule, or
 * NeMo-RL's torch scheduler list policy.scheduler).
 * defines: struct rl_lr_schedule, struct rl_lr_phase, rl_lr_schedule_init,
 * rl_lr_schedule_torch, rl_lr_schedule_warmup_from, rl_lr_at */
#ifndef RL_GRPO_SCHEDULE_H
#define RL_GRPO_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum rl_lr_kind { RL_LR_CONSTANT, RL_LR_LINEAR_WARMUP, RL_LR_COSINE, RL_LR_LINEAR, RL_LR_TORCH };

/* One torch scheduler of a SequentialLR chain (NeMo-RL's policy.scheduler),
 * as a closed form of its own step count e:
 *   LinearLR:          peak * (a + (b - a) * min(e, n) / n)   a, b: start, end factor
 *   ConstantLR:        peak * (e < n ? a : 1)                 a: factor
 *   CosineAnnealingLR: b + (peak - b) * (1 + cos(pi * e / n)) / 2   b: eta_min, n: T_max */
enum rl_torch_phase_kind { RL_PHASE_LINEAR, RL_PHASE_CONSTANT, RL_PHASE_COSINE };
struct rl_lr_phase {
	enum rl_torch_phase_kind kind;
	double a, b;
	int64_t n;
};
enum { RL_LR_MAX_PHASES = 8 };

struct rl_lr_schedule {
	enum rl_lr_kind kind;
	double peak, min;
	int64_t warmup;      /* optimizer steps */
	int64_t decay_steps; /* cosine, linear: the step at which min is reached */
	/* Megatron's warmup (policy.lr_schedule.warmup_init set): step k < warmup
	 * uses warmup_init + (peak - warmup_init) * k / warmup */
	bool has_warmup_init;
	double warmup_init;
	/* RL_LR_TORCH: phase i runs from milestone[i - 1] (0 for the first) */
	int n_phases;
	struct rl_lr_phase phases[RL_LR_MAX_PHASES];
	int64_t milestones[RL_LR_MAX_PHASES];
};

/* type is policy.lr_schedule.type; decay_steps <= 0 means "total_steps". */
int rl_lr_schedule_init(struct rl_lr_schedule *s, const char *type, double peak, double min,
                        int64_t warmup, int64_t decay_steps, int64_t total_steps, char *err,
                        size_t errlen);

/* torch's SequentialLR over phases with n - 1 increasing milestones: step k
 * runs the phase i with milestones[i - 1] <= k < milestones[i], at its own
 * step k - milestones[i - 1]; torch restarts a scheduler that takes over at
 * its step 0 in closed form, from the optimizer's initial rate. */
int rl_lr_schedule_torch(struct rl_lr_schedule *s, double peak, const struct rl_lr_phase *phases,
                         int n, const int64_t *milestones, char *err, size_t errlen);

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
