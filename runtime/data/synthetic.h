/* Built-in tasks whose problems are made from the seed and whose answers a
 * checker verifies, so a run needs no dataset and a model can learn them
 * from scratch on a CPU:
 *   arithmetic  "3+4="     -> "7"    (single-digit sums)
 *   copy        "copy:cab=" -> "cab"
 *   sort        "sort:cab=" -> "abc"
 *   calculator  "472+385=" -> "857"  (three-digit sums; multi-turn: the
 *                                     model may call the calculator tool)
 *   guess       "guess:"   -> "7"    (a secret digit; multi-turn: the
 *                                     environment says higher or lower)
 * The last two are the tasks of the built-in environments of the same
 * names (env/builtin_env.h), which play them as episodes.
 * The answer is the whole response: the checker compares it, trimmed of
 * surrounding whitespace, with the expected text, character by character.
 * defines: enum rl_task_kind, rl_task_parse, rl_task_make, rl_task_score */
#ifndef RL_DATA_SYNTHETIC_H
#define RL_DATA_SYNTHETIC_H

#include <stdbool.h>
#include <stdint.h>

enum rl_task_kind {
	RL_TASK_ARITHMETIC,
	RL_TASK_COPY,
	RL_TASK_SORT,
	RL_TASK_CALCULATOR,
	RL_TASK_GUESS
};

/* -1 when name is not a built-in task. */
int rl_task_parse(const char *name, enum rl_task_kind *kind);
/* Whether the task is played as episodes by its built-in environment
 * (calculator, guess) rather than scored from one response. */
bool rl_task_multi_turn(enum rl_task_kind kind);
/* Problem number `index` of the task under seed, with its answer; both
 * malloc'd. The same (seed, index) always makes the same problem. */
int rl_task_make(enum rl_task_kind kind, uint64_t seed, uint64_t index, char **problem,
                 char **answer);
/* The fraction of the answer's characters the response has in their
 * place, over the longer of the two: 1.0 only for the exact answer, 0.5
 * for "77" against "7". */
double rl_task_score(enum rl_task_kind kind, const char *response, const char *answer);

#endif
