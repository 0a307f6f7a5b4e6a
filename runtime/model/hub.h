/* Hugging Face hub names (ORG/NAME, as NeMo-RL's configs give
 * policy.model_name) found in the local Hugging Face cache, the one
 * huggingface_hub fills: never downloaded.
 * defines: struct rl_hub_env, rl_hub_env_process, rl_hub_resolve */
#ifndef RL_MODEL_HUB_H
#define RL_MODEL_HUB_H

#include <stddef.h>

/* The variables that say where the cache is, as huggingface_hub reads
 * them (NULL or "" when unset): HF_HUB_CACHE (or its older name
 * HUGGINGFACE_HUB_CACHE), else HF_HOME/hub, else
 * XDG_CACHE_HOME/huggingface/hub, else HOME/.cache/huggingface/hub. The
 * plugin fills them from the job's environment, not slurmstepd's. */
struct rl_hub_env {
	const char *hub_cache;
	const char *hf_home;
	const char *xdg_cache_home;
	const char *home;
};

/* From this process's environment. */
void rl_hub_env_process(struct rl_hub_env *env);

/* The directory a model or tokenizer name stands for, malloc'd:
 * - name itself when it is an existing directory, a built-in model
 *   (builtin:...), or anything that is not a hub name (the caller's open
 *   then says what is missing);
 * - for ORG/NAME or ORG/NAME@REVISION (a branch or tag under refs/, or a
 *   commit; main when not given) that is not a directory, the snapshot
 *   CACHE/models--ORG--NAME/snapshots/COMMIT, COMMIT read from
 *   refs/REVISION.
 * Returns NULL with err when a hub name is not in the cache: key (the
 * config key or option it came from), the path tried, and the command that
 * would fetch it. env NULL: this process's environment. */
char *rl_hub_resolve(const char *name, const char *key, const struct rl_hub_env *env, char *err,
                     size_t errlen);

#endif
