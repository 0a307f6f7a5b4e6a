#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rollout/observation.h"

/* Stands for the model's last turn while the template renders: what comes
 * after it is the template's, whatever the turn said (an empty turn, or
 * one repeating text of the conversation, is found all the same). No
 * whitespace: templates trim the content (Llama 3's). */
static const char sentinel[] = "@@rl-episode-turn-5f1c@@";

/* messages with the last one's content the sentinel, then extra (or
 * none): a new array. */
static json_t *stand_in(const json_t *messages, json_t *extra)
{
	json_t *a = json_array();
	size_t n = json_array_size(messages);

	for (size_t i = 0; a && i + 1 < n; i++)
		json_array_append(a, json_array_get(messages, i));
	json_t *last = json_deep_copy(json_array_get(messages, n - 1));
	if (!a || !last || json_object_set_new(last, "content", json_string(sentinel)) ||
	    json_array_append_new(a, last) || (extra && json_array_append(a, extra))) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static int templated(const struct rl_observation *o, const json_t *messages, const char *turn_end,
                     const char *obs, size_t len, char **text, char *err, size_t errlen)
{
	json_t *msg = json_pack("{s:s, s:s%}", "role", o->role, "content", obs, len);
	json_t *before = msg ? stand_in(messages, NULL) : NULL;
	json_t *after = before ? stand_in(messages, msg) : NULL;
	char *a = NULL, *b = NULL;
	size_t a_len, b_len;
	int rc = -1;

	if (!after) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (rl_chat_template_apply(o->chat, before, o->vars, false, &a, &a_len, err, errlen) ||
	    rl_chat_template_apply(o->chat, after, o->vars, true, &b, &b_len, err, errlen))
		goto out;
	char *at_a = strstr(a, sentinel), *at_b = strstr(b, sentinel);
	if (!at_a || !at_b || at_a - a != at_b - b || memcmp(a, b, (size_t)(at_a - a)) != 0) {
		snprintf(err, errlen,
		         "the chat template %s renders the conversation before an observation "
		         "differently once the observation follows: its tokens cannot be appended",
		         rl_chat_template_source(o->chat));
		goto out;
	}
	const char *tail_a = at_a + strlen(sentinel), *tail_b = at_b + strlen(sentinel);
	/* the model's end-of-turn token is in the sequence already; a
	 * template that does not write it (NeMo-RL's passthrough) has the
	 * observation follow the turn's content */
	size_t skip = turn_end ? strlen(turn_end) : 0;
	if (skip && (strncmp(tail_a, turn_end, skip) != 0 || strncmp(tail_b, turn_end, skip) != 0))
		skip = 0;
	if (!(*text = strdup(tail_b + skip))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	rc = 0;
out:
	free(a);
	free(b);
	json_decref(before);
	json_decref(after);
	json_decref(msg);
	return rc;
}

int rl_observation_render(const struct rl_observation *o, const json_t *messages,
                          const char *turn_end, const char *obs, size_t len, int32_t **ids,
                          size_t *n_ids, char **text, char *err, size_t errlen)
{
	*ids = NULL;
	*n_ids = 0;
	*text = NULL;
	if (o->chat) {
		if (templated(o, messages, turn_end, obs, len, text, err, errlen))
			return -1;
	} else if (!(*text = strndup(obs, len))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* the text is a plain observation, or the template's: its special
	 * tokens are written in it, the tokenizer adds none */
	if (rl_tokenizer_encode(o->tok, *text, strlen(*text), false, ids, n_ids, err, errlen)) {
		free(*text);
		*text = NULL;
		return -1;
	}
	return 0;
}
