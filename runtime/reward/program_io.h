/* What the reward program (reward_command.c) and the environment pool
 * (env/env_program.c) do alike with the copies of a user's program: start
 * one in its own process group with three pipes, keep the tail of its
 * stderr and show each distinct text once, log failures (the first ten,
 * then a count), write JSON text that survives invalid UTF-8, tell when
 * this process was held still, and keep SIGPIPE from the caller.
 * defines: struct rl_prog_copy, struct rl_prog_log, struct rl_prog_sigpipe,
 * RL_PROG_HELD_UP_S, rl_prog_spawn, rl_prog_kill, rl_prog_close_fd,
 * rl_prog_read_err, rl_prog_err_last_line, rl_prog_show_err,
 * rl_prog_log_line, rl_prog_log_failure, rl_prog_log_summary,
 * rl_prog_json_text, rl_prog_json_line, rl_prog_sigpipe_block,
 * rl_prog_sigpipe_restore */
#ifndef RL_REWARD_PROGRAM_IO_H
#define RL_REWARD_PROGRAM_IO_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "runtime/reward/reward_command.h"

/* A round of a poll loop takes this long past what it asked to wait only
 * when this process was not running: stopped with its job (scontrol
 * suspend, gang scheduling), or never scheduled. */
#define RL_PROG_HELD_UP_S 1.0

/* One running copy of a program. */
struct rl_prog_copy {
	pid_t pid;                 /* 0: none */
	int in_fd, out_fd, err_fd; /* our non-blocking ends of its stdin, stdout, stderr, or -1 */
	char *err_text;            /* the tail of its stderr */
	size_t err_len;
	bool err_cut; /* the head of its stderr was dropped */
};

/* Starts /bin/sh -c command in its own process group, with child_mask as
 * its signal mask and SIGPIPE's default action. c's descriptors must be
 * -1. Returns 0, or an errno value (nothing left open). */
int rl_prog_spawn(struct rl_prog_copy *c, const char *command, const sigset_t *child_mask);
/* Kills c's process group, closes its stdin and stdout and reaps it;
 * returns its wait status. Its stderr stays open for rl_prog_show_err. */
int rl_prog_kill(struct rl_prog_copy *c);
void rl_prog_close_fd(int *fd);
/* Reads what c's stderr holds now, keeping its last bytes; closes it at
 * its end. */
void rl_prog_read_err(struct rl_prog_copy *c);
/* The last non-blank line of c's stderr, into out ("" for none). */
void rl_prog_err_last_line(const struct rl_prog_copy *c, char *out, size_t len);

/* The failure lines and stderr texts of one call (reward program) or one
 * pool (environments). */
#define RL_PROG_MAX_STDERR_SHOWN 3
struct rl_prog_log {
	FILE *file;                      /* may be NULL */
	const char *prefix;              /* "reward command: " */
	struct rl_reward_failures *fail; /* where `first` is kept */
	size_t failure_lines, failures_unlisted;
	uint64_t shown[RL_PROG_MAX_STDERR_SHOWN]; /* hashes of the stderr texts shown */
	size_t n_shown, stderr_repeats, stderr_unshown;
};

void rl_prog_log_line(const struct rl_prog_log *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* One failure (or run of them): listed up to ten times; the first is kept
 * in fail->first with detail (the last line of the copy's stderr). */
void rl_prog_log_failure(struct rl_prog_log *l, const char *detail, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The ended copy's stderr, read to its end and closed, shown under the
 * line "<prefix><header>:" unless the same text was shown already; then
 * forgotten. */
void rl_prog_show_err(struct rl_prog_log *l, struct rl_prog_copy *c, const char *header);
/* The lines for what was not shown; bad_output_name names that count
 * ("not a number"). */
void rl_prog_log_summary(const struct rl_prog_log *l, const char *bad_output_name);

/* A JSON string for s (null for NULL); invalid UTF-8 bytes become U+FFFD,
 * as Python's "replace" does (generated text can end inside a
 * character). n is s's length. */
json_t *rl_prog_json_text(const char *s, size_t n);
/* o dumped compactly with a newline (o is released); NULL when out of
 * memory. */
char *rl_prog_json_line(json_t *o, size_t *len);

/* SIGPIPE blocked in the calling thread while writing to copies, so that
 * writes to a dead copy fail with EPIPE instead of killing the caller;
 * restore consumes a SIGPIPE our writes raised and sets the caller's mask
 * back. caller_mask is what the children get. */
struct rl_prog_sigpipe {
	sigset_t caller_mask;
	bool was_pending;
};
void rl_prog_sigpipe_block(struct rl_prog_sigpipe *s);
void rl_prog_sigpipe_restore(const struct rl_prog_sigpipe *s);

#endif
