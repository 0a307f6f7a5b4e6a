#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "runtime/env/env_program.h"

/* SKELETON: the environment pool lands with issue 31's env work. */
int rl_env_pool_open(const struct rl_env_program *p, int n_episodes, FILE *log,
                     struct rl_env_pool **out, char *err, size_t errlen)
{
	(void)p;
	(void)n_episodes;
	(void)log;
	*out = NULL;
	snprintf(err, errlen, "multi-turn environments are not implemented yet");
	return -1;
}

int rl_env_begin(struct rl_env_pool *pool, int e, const struct rl_env_start *s, char *err,
                 size_t errlen)
{
	(void)pool;
	(void)e;
	(void)s;
	snprintf(err, errlen, "multi-turn environments are not implemented yet");
	return -1;
}

int rl_env_act(struct rl_env_pool *pool, int e, const char *message, size_t len, char *err,
               size_t errlen)
{
	(void)pool;
	(void)e;
	(void)message;
	(void)len;
	snprintf(err, errlen, "multi-turn environments are not implemented yet");
	return -1;
}

void rl_env_end(struct rl_env_pool *pool, int e)
{
	(void)pool;
	(void)e;
}

int rl_env_wait(struct rl_env_pool *pool, double wait_s, struct rl_env_answer *out, int cap,
                int *n, char *err, size_t errlen)
{
	(void)pool;
	(void)wait_s;
	(void)out;
	(void)cap;
	*n = 0;
	snprintf(err, errlen, "multi-turn environments are not implemented yet");
	return -1;
}

void rl_env_pool_failures(struct rl_env_pool *pool, struct rl_reward_failures *fail)
{
	(void)pool;
	(void)fail;
}

void rl_env_pool_close(struct rl_env_pool *pool)
{
	(void)pool;
}
