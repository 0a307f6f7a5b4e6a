/* "1 step", "2 steps": the ending of a count's noun in messages.
 * defines: rl_plural */
#ifndef RL_BASE_PLURAL_H
#define RL_BASE_PLURAL_H

/* "" for one, "s" for any other count (zero included: "0 steps") */
static inline const char *rl_plural(long long n)
{
	return n == 1 ? "" : "s";
}

#endif
