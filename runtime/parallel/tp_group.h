/* The model's tensor-parallel collectives (struct rl_tp_group) over a comm
 * group.
 * defines: rl_tp_group_bind */
#ifndef RL_PARALLEL_TP_GROUP_H
#define RL_PARALLEL_TP_GROUP_H

#include "runtime/comm/comm.h"
#include "runtime/model/model.h"

/* NULL c: one rank, no calls. */
void rl_tp_group_bind(struct rl_tp_group *g, struct rl_comm *c);

#endif
