/* The files a run reads before its first step, checked where its tasks
 * will run: the plugin does it in slurmstepd as the user (user_init, in
 * the step's working directory), so that a missing model or dataset fails
 * the step at srun time with the config key and the path, not a job that
 * waited in the queue.
 * defines: rl_plan_check_inputs */
#ifndef RL_PLAN_INPUTS_H
#define RL_PLAN_INPUTS_H

#include <stddef.h>

#include "runtime/config/config.h"
#include "runtime/model/hub.h"

/* policy.model_name's config.json, policy.tokenizer.name's tokenizer.json
 * (hub names through hub's cache; NULL: this process's environment; a
 * built-in model has no files), data.train.path, data.validation.path,
 * data.prompt_file and data.system_prompt_file when set: each opened for
 * reading with the process's effective ids (never access(2), which asks
 * for the real ones: root's in slurmstepd). Returns 0, or -1 with err
 * naming the first key that fails, its path and why. */
int rl_plan_check_inputs(const struct rl_config *cfg, const struct rl_hub_env *hub, char *err,
                         size_t errlen);

#endif
