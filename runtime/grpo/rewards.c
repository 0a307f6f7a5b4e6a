#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/grpo/rewards.h"
#include "runtime/grpo/stop_signal.h"
#include "runtime/reward/math_answer.h"
#include "runtime/reward/reward_command.h"

int rl_rewarder_setup(struct rl_reward *r, const struct rl_config *cfg, char *err, size_t errlen)
{
	const char *name = cfg->data.env_name;
	bool jsonl = strcmp(cfg->data.dataset_name, "jsonl") == 0;

	memset(r, 0, sizeof *r);
	if (!name && !jsonl) {
		r->kind = RL_REWARD_TASK;
		r->name = cfg->data.dataset_name;
		if (rl_task_parse(cfg->data.dataset_name, &r->task)) {
			snprintf(err, errlen, "data.dataset_name: no built-in task '%s'",
			         cfg->data.dataset_name);
			return -1;
		}
		return 0;
	}
	if (!name)
		name = "math";
	r->name = name;
	r->env = rl_config_env(cfg, name);
	if (r->env && r->env->command) {
		r->kind = RL_REWARD_COMMAND;
		return 0;
	}
	if (strcmp(name, "math") == 0) {
		r->kind = RL_REWARD_MATH;
		return 0;
	}
	if (strcmp(name, "exact") == 0) {
		r->kind = RL_REWARD_EXACT;
		return 0;
	}
	snprintf(err, errlen,
	         "data.env_name: '%s' names no reward (math, exact, or an env.%s.command)", name,
	         name);
	return -1;
}

static int score_command(const struct rl_reward *r, struct rl_rollout *ro, int64_t *failures,
                         char *err, size_t errlen)
{
	struct rl_reward_item *items = calloc((size_t)ro->n, sizeof *items);
	double *rewards = calloc((size_t)ro->n, sizeof *rewards);
	struct rl_reward_failures f = {0};
	char msg[512];

	if (!items || !rewards) {
		free(items);
		free(rewards);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < ro->n; i++) {
		int g = ro->s[i].group;
		items[i] = (struct rl_reward_item){ro->prompts[g], ro->problems[g],
		                                   ro->s[i].response ? ro->s[i].response : "",
		                                   ro->answers[g]};
	}
	sigset_t stop_signals;
	rl_stop_signal_set(&stop_signals);
	struct rl_reward_program program = {r->env->command, r->env->timeout,
	                                    (int)r->env->num_workers, &stop_signals};
	/* a program that cannot even start is a failure of every sample, not
	 * of the run: the message goes to the log and they all score 0 */
	if (rl_reward_command(&program, items, (size_t)ro->n, rewards, &f, stderr, msg,
	                      sizeof msg)) {
		fprintf(stderr, "reward env.%s: %s; every sample of the step scores 0\n", r->name,
		        msg);
		f.crashed = (size_t)ro->n;
	}
	for (int i = 0; i < ro->n; i++)
		ro->s[i].reward = rewards[i];
	*failures += (int64_t)(f.crashed + f.timed_out + f.bad_output);
	free(items);
	free(rewards);
	return 0;
}

int rl_rewards_score(const struct rl_reward *r, struct rl_rollout *ro, int64_t *failures, char *err,
                     size_t errlen)
{
	if (r->kind == RL_REWARD_COMMAND)
		return score_command(r, ro, failures, err, errlen);
	for (int i = 0; i < ro->n; i++) {
		struct rl_sample *s = &ro->s[i];
		const char *answer = ro->answers[s->group];
		const char *response = s->response ? s->response : "";
		bool failed = false;

		if (!answer) {
			/* nothing to compare with: only a reward program could judge */
			s->reward = 0;
			(*failures)++;
			continue;
		}
		switch (r->kind) {
		case RL_REWARD_TASK:
			s->reward = rl_task_score(r->task, response, answer);
			break;
		case RL_REWARD_MATH:
			s->reward = rl_reward_math(response, answer, &failed);
			break;
		case RL_REWARD_EXACT:
			s->reward = rl_reward_exact(response, answer);
			break;
		case RL_REWARD_COMMAND:
			break;
		}
		*failures += failed;
	}
	return 0;
}
