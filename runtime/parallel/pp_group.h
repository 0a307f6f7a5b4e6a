/* The model's pipeline-parallel calls (struct rl_pp_group) over the run's
 * pipeline group and embedding group.
 * defines: rl_pp_group_bind */
#ifndef RL_PARALLEL_PP_GROUP_H
#define RL_PARALLEL_PP_GROUP_H

#include "runtime/comm/comm.h"
#include "runtime/model/model.h"

/* NULL pp: one stage, no calls. embedding: NULL on the stages between the
 * first and the last. */
void rl_pp_group_bind(struct rl_pp_group *g, struct rl_comm *pp, struct rl_comm *embedding);

#endif
