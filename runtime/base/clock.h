/* The clock every timer of a run reads: seconds on the monotonic clock,
 * which no change of the wall clock moves.
 * defines: rl_now */
#ifndef RL_BASE_CLOCK_H
#define RL_BASE_CLOCK_H

/* Seconds since an arbitrary start; only differences mean anything. */
double rl_now(void);

#endif
