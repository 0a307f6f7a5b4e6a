/* A rank's share of a rollout as multi-turn episodes: each sample is an
 * episode the model plays with the run's environment (env/env_program.h),
 * turn by turn, on one generation session (generate/session.h): the
 * model's turn, its message to the environment, the observation rendered
 * (the chat template's message of env.<name>.observation_role, or the text
 * itself) and appended to the sample's cache, the next turn, until the
 * environment says done or a limit (grpo.max_rollout_turns,
 * policy.max_total_sequence_length, policy.generation.max_new_tokens per
 * turn) ends it. The sample holds the whole transcript after its prompt,
 * its loss_mask on the model's tokens only, its reward the environment's
 * (the turns' rewards summed), env_scored set.
 * defines: (SKELETON: the helper owning issue 31's episodes writes this
 * header's API) */
#ifndef RL_ROLLOUT_EPISODES_H
#define RL_ROLLOUT_EPISODES_H

#endif
