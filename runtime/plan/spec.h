/* A config's side of a step's plan: the parallel sizes, the backend and the
 * model's shape, read the same way by the plugin (in slurmstepd, as the
 * user), by `rlrun plan` and by rlrun.
 * defines: rl_plan_model_load, rl_plan_uses_gpus, rl_plan_step_shape,
 * rl_job_spec_from_config */
#ifndef RL_PLAN_SPEC_H
#define RL_PLAN_SPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/config/config.h"
#include "runtime/model/hub.h"
#include "runtime/plan/job.h"
#include "topology/topology.h"

/* The shape of policy.model_name: its config.json (a hub name found in the
 * local Hugging Face cache of hub, NULL: this process's environment), or a
 * built-in model's; src gets the file read (or the built-in name). Returns
 * 0, or -1 with err naming policy.model_name and the file. */
int rl_plan_model_load(const char *model_name, const struct rl_hub_env *hub,
                       struct rl_plan_model *out, char *src, size_t srclen, char *err,
                       size_t errlen);

/* Whether the step's tasks each take a GPU: policy.backend cuda, or auto on
 * a node (topo; NULL when unknown) that has any. */
bool rl_plan_uses_gpus(const struct rl_config *cfg, const struct rl_topo *topo);

/* The step a config describes when no Slurm step is there to say
 * (`rlrun plan`): *n_nodes and *tasks_per_node, each kept when already
 * above 0, else cluster.num_nodes (1 when unset), and
 * cluster.gpus_per_node, else one task per GPU of topo when the tasks use
 * GPUs, else 1. */
void rl_plan_step_shape(const struct rl_config *cfg, const struct rl_topo *topo, long *n_nodes,
                        long *tasks_per_node);

/* Fills spec for a step of world tasks on n_nodes nodes (at most
 * tasks_per_node on one). policy.backend auto means GPUs when topo (the
 * node's, NULL when unknown) has any. The model's config.json is read (a
 * hub name through hub's cache, NULL: this process's environment), for
 * the layout's check, the memory estimate and auto; a model that cannot
 * be read is an error for auto on GPUs, and otherwise leaves
 * spec->have_model false with the reason in spec->model_error (the
 * caller decides: the plugin refuses, rlrun plan warns). */
int rl_job_spec_from_config(const struct rl_config *cfg, int world, int n_nodes, int tasks_per_node,
                            const struct rl_topo *topo, const struct rl_hub_env *hub,
                            struct rl_job_spec *spec, char *err, size_t errlen);

#endif
