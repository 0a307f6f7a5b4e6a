/* The subcommands of rl_compare (tests/tools/rl_compare.c) kept in files of
 * their own; each returns 0 (within), 1 (not) or 2 (could not compare).
 * defines: rl_compare_rollout */
#ifndef RL_TESTS_TOOLS_RL_COMPARE_H
#define RL_TESTS_TOOLS_RL_COMPARE_H

/* Rollout index (from 1) of STEP_DIR/rollout_buffer.bin: its generation
 * logprobs against model_dir's, within tol. */
int rl_compare_rollout(const char *step_dir, int index, const char *model_dir, double tol);

#endif
