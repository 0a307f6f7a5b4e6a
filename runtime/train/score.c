#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "runtime/rollout/episodes.h"
#include "runtime/rollout/share.h"
#include "runtime/train/score.h"
#include "runtime/train/train.h"

/* The samples [*lo, *hi) this rank scores: its part of its data-parallel
 * share, split over the ranks of its model replica. */
static void scoring_range(const struct rl_trainer *t, int n, int *lo, int *hi)
{
	int share_lo, share_hi;

	rl_share_range(t->dp, n, &share_lo, &share_hi);
	if (!t->dist) {
		*lo = share_lo;
		*hi = share_hi;
		return;
	}
	const int *size = t->dist->layout.size, *at = t->dist->coords.rank;
	int replica = size[RL_AXIS_TP] * size[RL_AXIS_CP] * size[RL_AXIS_PP];
	int me = (at[RL_AXIS_PP] * size[RL_AXIS_CP] + at[RL_AXIS_CP]) * size[RL_AXIS_TP] +
	         at[RL_AXIS_TP];

	rl_share_split(share_lo, share_hi, me, replica, lo, hi);
}

/* Samples [lo, hi) of r scored; *program: the reward program's failures.
 * An episode's reward came from its environment with it (env_scored):
 * nothing scores it again. */
static int score_range(struct rl_trainer *t, struct rl_rollout *r, int lo, int hi,
                       int64_t *failures, struct rl_reward_failures *program, char *err,
                       size_t errlen)
{
	size_t n = 0;
	struct rl_reward_item *items = calloc((size_t)(hi - lo) + 1, sizeof *items);
	double *rewards = calloc((size_t)(hi - lo) + 1, sizeof *rewards);
	int *which = calloc((size_t)(hi - lo) + 1, sizeof *which);
	int rc = -1;

	if (!items || !rewards || !which) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (int i = lo; i < hi; i++) {
		int g = r->s[i].group;
		if (r->s[i].env_scored)
			continue;
		which[n] = i;
		items[n++] = (struct rl_reward_item){r->prompts[g], r->problems[g],
		                                     r->s[i].response ? r->s[i].response : "",
		                                     r->answers[g]};
	}
	if (n && rl_rewards_score(&t->reward, items, n, rewards, failures, program, err, errlen))
		goto out;
	for (size_t k = 0; k < n; k++)
		r->s[which[k]].reward = rewards[k];
	rc = 0;
out:
	free(items);
	free(rewards);
	free(which);
	return rc;
}

/* The environment's failures on this rank's episodes since the last
 * step (its group's first rank has them) join the reward program's. */
static void episode_failures(struct rl_trainer *t, int64_t *failures,
                             struct rl_reward_failures *program)
{
	struct rl_reward_failures env = {0};

	rl_episodes_failures(t->episodes, &env);
	*failures += (int64_t)(env.crashed + env.timed_out + env.bad_output);
	rl_reward_failures_add(program, &env);
}

/* A reward program that failed on every sample of the rollout (all ranks'
 * counts, summed: the same on every rank) would have the run train on
 * reward 0: the run stops instead, every rank alike, the first one saying
 * why. */
static int every_sample_failed(struct rl_trainer *t, const struct rl_rollout *r,
                               const double sums[4], const struct rl_reward_failures *mine,
                               char *err, size_t errlen)
{
	double program = sums[1] + sums[2] + sums[3];

	if ((t->reward.kind != RL_REWARD_COMMAND && !t->episodes) || r->n == 0 || program < r->n)
		return 0;
	err[0] = '\0';
	if (rl_trainer_rank(t) == 0 && t->episodes)
		snprintf(err, errlen,
		         "the environment %s ('%s') failed on every one of the %d episodes (%.0f "
		         "crashed, %.0f timed out, %.0f bad output): stopping rather than training "
		         "on reward 0%s%s%s",
		         rl_episodes_name(t->episodes), rl_episodes_command(t->episodes), r->n,
		         sums[1], sums[2], sums[3], mine->first[0] ? "; the first: " : "",
		         mine->first, mine->first[0] ? " (its stderr is above)" : "");
	else if (rl_trainer_rank(t) == 0)
		snprintf(err, errlen,
		         "env.%s.command '%s' failed on every one of the %d samples (%.0f "
		         "crashed, %.0f timed out, %.0f not a number): stopping rather than "
		         "training on reward 0%s%s%s",
		         t->reward.name, t->reward.env->command, r->n, sums[1], sums[2], sums[3],
		         mine->first[0] ? "; the first: " : "", mine->first,
		         mine->first[0] ? " (its stderr is above)" : "");
	return RL_TRAIN_AGREED_FAILURE;
}

int rl_trainer_score(struct rl_trainer *t, struct rl_rollout *r, int64_t *reward_failures,
                     char *err, size_t errlen)
{
	struct rl_comm *world = t->dist ? t->dist->g[RL_G_WORLD] : NULL;
	struct rl_reward_failures program = {0};
	int64_t failures = 0;
	int lo, hi;

	scoring_range(t, r->n, &lo, &hi);
	if (hi > lo && score_range(t, r, lo, hi, &failures, &program, err, errlen))
		return -1;
	episode_failures(t, &failures, &program);
	if (rl_share_rewards(world, r, lo, hi, err, errlen))
		return -1;
	double sums[4] = {(double)failures, (double)program.crashed, (double)program.timed_out,
	                  (double)program.bad_output};
	rl_share_sum(world, sums, 4, "reward failures");
	*reward_failures += (int64_t)sums[0];
	return every_sample_failed(t, r, sums, &program, err, errlen);
}
