/* Whether a reward program can run at all, asked before a run starts: a
 * program that is missing or not executable would otherwise fail on every
 * sample of every step, and the run would train on reward 0.
 * defines: rl_reward_program_check */
#ifndef RL_REWARD_PROGRAM_CHECK_H
#define RL_REWARD_PROGRAM_CHECK_H

#include <stddef.h>

/* The command is run by /bin/sh -c; its first word (after any VAR=value
 * assignments and an `exec`) is the program: with a '/' it must be an
 * executable file, without one a shell builtin or an executable file in
 * $PATH. When that program is an interpreter (python*, bash, sh, dash,
 * perl, ruby, node, Rscript) the script it is given as its first argument
 * must exist. A command the check cannot follow without running a shell
 * (expansions, redirections, pipelines, compound commands) passes; it still
 * fails loudly at its first step if it fails everywhere.
 * Returns 0, or -1 with why (e.g. "/x/judge.py is not executable") set. */
int rl_reward_program_check(const char *command, char *why, size_t whylen);

#endif
