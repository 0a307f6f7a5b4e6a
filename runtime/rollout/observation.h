/* An environment's observation as the tokens appended to an episode after
 * the model's turn. With a chat template the observation is a message of
 * the environment's role (env.<name>.observation_role), and the tokens are
 * exactly what the template adds after the model's turn, the next
 * assistant header included: the conversation is rendered without the new
 * message and with it (add_generation_prompt), and the text after the
 * assistant turn's end is taken (its end-of-turn token is in the sequence
 * already, when the turn stopped on it and the template writes it). Without a template the
 * observation's text is tokenized as it is, with no special tokens.
 * defines: struct rl_observation, rl_observation_render */
#ifndef RL_ROLLOUT_OBSERVATION_H
#define RL_ROLLOUT_OBSERVATION_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "runtime/chat/chat_template.h"
#include "runtime/tokenizer/tokenizer.h"

/* How observations are rendered: chat NULL renders the text itself. */
struct rl_observation {
	const struct rl_chat_template *chat;
	const json_t *vars; /* the template's variables, or NULL */
	const char *role;   /* the observation's message role */
	const struct rl_tokenizer *tok;
};

/* The observation obs[0..len) after the conversation messages (a JSON
 * array ending with the model's turn, an assistant message; not changed),
 * whose turn ended with the token text turn_end (the model's end-of-turn
 * token as decoded, or NULL when the turn stopped otherwise: the
 * template's end of the assistant turn then comes with the observation).
 * *ids (n_ids) and *text (what the tokens say) are malloc'd. Returns 0, or
 * -1 with err (a template that renders the conversation before the
 * observation differently once it is there). */
int rl_observation_render(const struct rl_observation *o, const json_t *messages,
                          const char *turn_end, const char *obs, size_t len, int32_t **ids,
                          size_t *n_ids, char **text, char *err, size_t errlen);

#endif
