/* GRPO advantages (see advantage.h). */
#include "runtime/grpo/advantage.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

/* Mean and sample std (Bessel's n - 1, as NeMo-RL since it corrected the
 * bias; 0 for a single value) of group[0..n) without entry skip (skip = -1:
 * none). Two passes over the rewards shifted by the first one counted:
 * equal rewards then give a mean that is exactly that reward and a std of
 * exactly 0. The plain mean of seven rewards of 0.7 is 0.7 + 1e-16, which
 * would leave a std of 1e-16 and, after normalizing, an advantage of 1e15
 * for the one other reward of the group. */
static void mean_std_except(const double *group, int n, int skip, double *mean, double *std)
{
	double shift = group[skip == 0 ? 1 : 0], sum = 0.0, var = 0.0;
	int count = 0;

	for (int j = 0; j < n; j++)
		if (j != skip) {
			sum += group[j] - shift;
			count++;
		}
	double dev = sum / count;
	*mean = shift + dev;
	for (int j = 0; j < n; j++)
		if (j != skip)
			var += (group[j] - shift - dev) * (group[j] - shift - dev);
	*std = count > 1 ? sqrt(var / (count - 1)) : 0.0;
}

void rl_grpo_advantages(const double *rewards, int n_groups, int group_size, bool leave_one_out,
                        bool normalize, const struct rl_opt_float *clip_low,
                        const struct rl_opt_float *clip_high, double *advantages, double *baseline,
                        double *std)
{
	for (int g = 0; g < n_groups; g++) {
		const double *group = rewards + (size_t)g * (size_t)group_size;

		for (int i = 0; i < group_size; i++) {
			size_t k = (size_t)g * (size_t)group_size + (size_t)i;
			double b = group[i], s = 0.0, a;

			if (group_size > 1)
				mean_std_except(group, group_size, leave_one_out ? i : -1, &b, &s);
			a = group[i] - b;
			if (normalize && s > 0.0)
				a /= s;
			if (clip_low && clip_low->set && a < clip_low->value)
				a = clip_low->value;
			if (clip_high && clip_high->set && a > clip_high->value)
				a = clip_high->value;
			advantages[k] = a;
			if (baseline)
				baseline[k] = b;
			if (std)
				std[k] = s;
		}
	}
}

int rl_grpo_rollout_advantages(struct rl_rollout *r, const struct rl_cfg_grpo *g)
{
	/* zeroed: r->n is n_groups * group_size, which the compiler cannot
	 * know of a rollout */
	double *rewards = calloc((size_t)r->n + 1, sizeof *rewards);
	double *adv = calloc((size_t)r->n + 1, sizeof *adv);

	if (!rewards || !adv) {
		free(rewards);
		free(adv);
		return -1;
	}
	for (int i = 0; i < r->n; i++)
		rewards[i] = r->s[i].reward;
	rl_grpo_advantages(rewards, r->n_groups, r->group_size, g->use_leave_one_out_baseline,
	                   g->normalize_rewards, &g->advantage_clip_low, &g->advantage_clip_high,
	                   adv, NULL, NULL);
	for (int i = 0; i < r->n; i++)
		r->s[i].advantage = adv[i];
	free(rewards);
	free(adv);
	return 0;
}
