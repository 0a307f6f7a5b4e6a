/* The environments built into rlrun, each a program speaking rl-env(7)
 * on stdin and stdout (`rlrun env NAME`), so that the built-in examples
 * take the very path a user's environment takes:
 *   calculator  a sum the model may answer itself, or hand to the
 *               calculator tool and answer with its display ("=");
 *   guess       a number to find in a few guesses, told higher or lower.
 * Their tasks' prompts are data/synthetic.h's (the same names).
 * defines: rl_env_builtin_known, rl_env_builtin_run */
#ifndef RL_ENV_BUILTIN_ENV_H
#define RL_ENV_BUILTIN_ENV_H

#include <stdbool.h>
#include <stdio.h>

bool rl_env_builtin_known(const char *name);
/* Plays the protocol on in and out until in ends. Returns 0, or -1 with
 * a message on err_out for a line it cannot take (as a user's program
 * would fail). */
int rl_env_builtin_run(const char *name, FILE *in, FILE *out, FILE *err_out);

#endif
