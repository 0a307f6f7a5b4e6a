#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/reward/math_answer.h"
#include "runtime/reward/program_check.h"
#include "runtime/reward/rewarder.h"

int rl_rewarder_setup(struct rl_reward *r, const struct rl_config *cfg,
                      const sigset_t *stop_signals, char *err, size_t errlen)
{
	const char *name = cfg->data.env_name;
	bool jsonl = strcmp(cfg->data.dataset_name, "jsonl") == 0;

	memset(r, 0, sizeof *r);
	if (stop_signals)
		r->stop_signals = *stop_signals;
	else
		sigemptyset(&r->stop_signals);
	if (!name && !jsonl) {
		r->kind = RL_REWARD_TASK;
		r->name = cfg->data.dataset_name;
		if (rl_task_parse(cfg->data.dataset_name, &r->task)) {
			snprintf(err, errlen, "data.dataset_name: no built-in task '%s'",
			         cfg->data.dataset_name);
			return -1;
		}
		r->multi_turn = rl_task_multi_turn(r->task);
		return 0;
	}
	if (!name)
		name = "math";
	r->name = name;
	r->env = rl_config_env(cfg, name);
	if (r->env && r->env->command) {
		char why[4400];

		r->kind = RL_REWARD_COMMAND;
		r->multi_turn = r->env->multi_turn;
		if (rl_reward_program_check(r->env->command, why, sizeof why)) {
			snprintf(err, errlen, "env.%s.command '%s' cannot run: %s", name,
			         r->env->command, why);
			return -1;
		}
		return 0;
	}
	if (r->env && r->env->multi_turn) {
		snprintf(err, errlen,
		         "data.env_name: env.%s is multi_turn but has no command (the program that "
		         "plays its episodes)",
		         name);
		return -1;
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

static void score_command(const struct rl_reward *r, const struct rl_reward_item *items, size_t n,
                          double *rewards, int64_t *failures, struct rl_reward_failures *f)
{
	/* null: as many at a time as this rank has CPUs */
	int workers = r->env->num_workers.set ? (int)r->env->num_workers.value : 0;
	struct rl_reward_program program = {
	    r->env->command, r->env->timeout, workers, &r->stop_signals,
	    r->env->sample_timeout.set ? r->env->sample_timeout.value : 0};
	char msg[512];

	/* a program that cannot even start fails every sample: they score 0,
	 * and the caller decides (a step whose samples all failed stops) */
	if (rl_reward_command(&program, items, n, rewards, f, stderr, msg, sizeof msg)) {
		fprintf(stderr, "reward env.%s: %s; every sample scores 0\n", r->name, msg);
		f->crashed = n;
		snprintf(f->first, sizeof f->first, "%.300s", msg);
	}
	*failures += (int64_t)(f->crashed + f->timed_out + f->bad_output);
}

int rl_rewards_score(const struct rl_reward *r, const struct rl_reward_item *items, size_t n,
                     double *rewards, int64_t *failures, struct rl_reward_failures *program,
                     char *err, size_t errlen)
{
	struct rl_reward_failures local;

	(void)err, (void)errlen;
	program = program ? program : &local;
	*program = (struct rl_reward_failures){0};
	if (r->kind == RL_REWARD_COMMAND) {
		score_command(r, items, n, rewards, failures, program);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		const char *answer = items[i].expected;
		const char *response = items[i].response ? items[i].response : "";
		bool failed = false;

		if (!answer) {
			/* nothing to compare with: only a reward program could judge */
			rewards[i] = 0;
			(*failures)++;
			continue;
		}
		switch (r->kind) {
		case RL_REWARD_TASK:
			rewards[i] = rl_task_score(r->task, response, answer);
			break;
		case RL_REWARD_MATH:
			rewards[i] = rl_reward_math(response, answer, &failed);
			break;
		case RL_REWARD_EXACT:
			rewards[i] = rl_reward_exact(response, answer);
			break;
		case RL_REWARD_COMMAND:
			break;
		}
		*failures += failed;
	}
	return 0;
}
