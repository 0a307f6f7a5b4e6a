/* The signals that ask a run to stop early: SIGTERM (what Slurm sends on
 * preemption, at the time limit and on scancel) and checkpointing.signal
 * (what `sbatch --signal` can send ahead of the time limit). The handler
 * only notes the signal; the run acts on it at the next step boundary.
 * defines: rl_stop_signal_arm, rl_stop_signal_disarm, rl_stop_signal_caught,
 * rl_stop_signal_set, rl_stop_signal_wait */
#ifndef RL_JOB_STOP_SIGNAL_H
#define RL_JOB_STOP_SIGNAL_H

#include <signal.h>
#include <stddef.h>

/* Catches SIGTERM and the signal named (SIGUSR1, ...; as the schema
 * spells them) from now on. */
int rl_stop_signal_arm(const char *name, char *err, size_t errlen);
/* Restores what was there before rl_stop_signal_arm and forgets what was
 * caught. */
void rl_stop_signal_disarm(void);
/* The first signal caught since arming, or 0. */
int rl_stop_signal_caught(void);
/* The signals armed now: empty when none is. */
void rl_stop_signal_set(sigset_t *set);
/* Returns once a signal is caught (at once when one was, or none is
 * armed). */
void rl_stop_signal_wait(void);

#endif
