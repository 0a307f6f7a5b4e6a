/* OpenMP's wait policy, chosen before libgomp reads it.
 * defines: rl_omp_passive_reexec */
#ifndef RL_BASE_OMP_POLICY_H
#define RL_BASE_OMP_POLICY_H

/* When OMP_WAIT_POLICY is unset, sets it to PASSIVE and re-executes the
 * program with the same arguments; returns only when no re-exec happened
 * (the variable was set, or exec failed, which is harmless). Must run first
 * thing in main().
 *
 * Why: libgomp reads the variable once, when it is loaded, and by default
 * idle threads spin. Between the many short parallel regions of a decode
 * step the spinning threads take the cores (or, on virtual machines and
 * shared nodes, the host's cores) from the thread doing the work: generation
 * ran 5x slower here. A user who sets the variable keeps their choice. */
void rl_omp_passive_reexec(char **argv);

#endif
