/* Rewards computed by an external program, so that users can write them in
 * any language: items go to its stdin as JSON lines, rewards come back on its
 * stdout one per line. A misbehaving program costs the samples it failed on;
 * whether that stops the run is the caller's decision (train/score.c stops
 * it when every sample of a step failed). */
#ifndef RL_REWARD_COMMAND_H
#define RL_REWARD_COMMAND_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

struct rl_reward_item {
	const char *prompt;   /* the full prompt text given to the model */
	const char *problem;  /* the raw problem (may be NULL) */
	const char *response; /* the generated text */
	const char *expected; /* the reference answer (may be NULL) */
};

struct rl_reward_failures {
	size_t crashed;    /* scored 0: the program died (signal or exit) before answering it */
	size_t timed_out;  /* scored 0: no reward line came within the timeout */
	size_t bad_output; /* scored 0: the line was not a finite number */
	/* the first failure as logged, with the last line of that copy's
	 * stderr where it crashed ("" when none failed) */
	char first[320];
};

/* from's counts added into into's, and its first failure kept when
 * into has none yet. */
void rl_reward_failures_add(struct rl_reward_failures *into, const struct rl_reward_failures *from);

/* How the program runs. */
struct rl_reward_program {
	const char *command; /* run by /bin/sh -c */
	double timeout_s;
	int num_workers; /* < 1: rl_reward_workers(0) */
	/* the signals the job is stopped with (rlrun's stop signals), or
	 * NULL: Slurm sends them to every process of the step, a copy of the
	 * program included */
	const sigset_t *stop_signals;
	/* each reward's own bound, when shorter than timeout_s; <= 0: none
	 * but timeout_s */
	double sample_timeout_s;
};

/* The copies run at a time for num_workers: itself when >= 1, else the
 * CPUs this process may run on (sched_getaffinity: under Slurm, the
 * rank's), at least 1. */
int rl_reward_workers(int num_workers);

/* Scores n items with p->command, rl_reward_workers(p->num_workers) copies
 * in parallel (contiguous shares of the items, one share per copy).
 *
 * Protocol: the program reads one JSON object per line on stdin,
 * {"index":I,"prompt":...,"problem":...,"response":...,"expected_answer":...}
 * (null where NULL; invalid UTF-8 replaced by U+FFFD; I = the item's position
 * in the whole call), and writes one reward per line on stdout, in order, as a
 * number ("1", "0.5", "-1e-3"), flushing after each line. Its stdin is closed
 * after its last item. Its stderr goes through a pipe to log when the copy
 * ends, each distinct text once per call (at most a few; the last 16 KB of
 * each): a program that crashes on every item shows its traceback once.
 *
 * Failures score 0, are counted in *fail and logged to log (may be NULL), one
 * line each for the first ten, then one line for the rest. When the program
 * exits or dies before answering its whole share, the first unanswered item
 * is "crashed" and a fresh copy continues with the next one. When no line
 * comes within the timeout for one reward (sample_timeout_s where it is set
 * and shorter, else timeout_s) of the previous line (or of the start, or of
 * the caller running again after being held still past its wait: a job
 * suspended and resumed), the copy's process group is killed, the item is
 * "timed_out" and a fresh copy continues. timeout_s also bounds the whole
 * call (counted again from the caller's return after being held still): when
 * it is up, every copy still owing rewards is killed with its process group
 * and what it owes is "timed_out", so that a program that hangs costs at most
 * timeout_s per call, not per item. A line that is not a finite number is
 * "bad_output" and the program continues. Exit status 127 (the shell did not
 * find the command) scores the rest of that share as crashed without
 * restarting. A copy killed by one of p->stop_signals was stopped with the
 * job, not by its item: a fresh copy scores that item again (once per item),
 * so that the step a job is stopped in scores as it would have otherwise.
 * timeout_s <= 0 waits forever for rewards; a copy still running 5 s (or
 * timeout_s if shorter) after its last reward or after closing its stdout is
 * killed. Rewards are parsed with strtod (C locale expected).
 *
 * Returns 0 (also with failures), or -1 with a message in err when the program
 * could not be started even once (fork or pipe failure); all rewards are 0
 * then. No child or descriptor outlives the call; SIGPIPE is blocked in the
 * calling thread during the call and never delivered to the caller. */
int rl_reward_command(const struct rl_reward_program *p, const struct rl_reward_item *items,
                      size_t n, double *rewards, struct rl_reward_failures *fail, FILE *log,
                      char *err, size_t errlen);

#endif
