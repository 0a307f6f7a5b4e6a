#define _GNU_SOURCE
#include <stdio.h>

#include "runtime/ckpt/verify.h"

static void *check(void *arg)
{
	struct rl_ckpt_verify *v = arg;

	v->rc = 0;
	for (int i = v->first; i < v->man->n_files && v->rc == 0; i += v->stride)
		v->rc = rl_ckpt_file_verify(v->dir, &v->man->files[i], v->why, sizeof v->why);
	return NULL;
}

void rl_ckpt_verify_start(struct rl_ckpt_verify *v, const char *dir,
                          const struct rl_ckpt_manifest *man, int first, int stride)
{
	v->dir = dir;
	v->man = man;
	v->first = first;
	v->stride = stride > 0 ? stride : 1;
	v->why[0] = '\0';
	v->started = pthread_create(&v->thread, NULL, check, v) == 0;
	if (!v->started)
		check(v);
}

int rl_ckpt_verify_join(struct rl_ckpt_verify *v, char *why, size_t whylen)
{
	if (v->started)
		pthread_join(v->thread, NULL);
	v->started = false;
	if (v->rc)
		snprintf(why, whylen, "%s", v->why);
	return v->rc;
}
