/* Checking a checkpoint's files against its manifest in a thread, while
 * the caller reads the same files: a resume then reads each byte from the
 * disk once, and the check costs little more than the read (make bench).
 * defines: struct rl_ckpt_verify, rl_ckpt_verify_start, rl_ckpt_verify_join */
#ifndef RL_CKPT_VERIFY_H
#define RL_CKPT_VERIFY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "runtime/ckpt/manifest.h"

struct rl_ckpt_verify {
	pthread_t thread;
	bool started;
	const char *dir;
	const struct rl_ckpt_manifest *man;
	int first, stride;
	int rc;
	char why[1024];
};

/* Starts checking the files first, first + stride, ... of man in DIR
 * (rl_ckpt_file_verify); dir and man must live until the join. Without a
 * thread to be had, checks them before returning. */
void rl_ckpt_verify_start(struct rl_ckpt_verify *v, const char *dir,
                          const struct rl_ckpt_manifest *man, int first, int stride);
/* Waits for the check: 0 when every file matched, else -1 with the first
 * mismatch in why. */
int rl_ckpt_verify_join(struct rl_ckpt_verify *v, char *why, size_t whylen);

#endif
