#include "runtime/rollout/episodes.h"

/* SKELETON: issue 31 episodes */
extern int rl_rollout_episodes_skeleton_;
