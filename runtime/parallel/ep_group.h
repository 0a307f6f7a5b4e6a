/* The model's expert-parallel collectives (struct rl_ep_group) over a comm
 * group.
 * defines: rl_ep_group_bind */
#ifndef RL_PARALLEL_EP_GROUP_H
#define RL_PARALLEL_EP_GROUP_H

#include "runtime/comm/comm.h"
#include "runtime/model/model.h"

/* NULL c: one rank, no calls. */
void rl_ep_group_bind(struct rl_ep_group *g, struct rl_comm *c);

#endif
