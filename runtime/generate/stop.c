/* Stop criteria for one generated sequence, checked after each token. The
 * stop-string search is incremental so that a long generation costs O(tail)
 * per token rather than rescanning the whole text. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "runtime/generate/stop.h"

int rl_stop_validate(const struct rl_stop *stop, char *err, size_t errlen)
{
	if (!stop) {
		snprintf(err, errlen, "stop: criteria are NULL");
		return -1;
	}
	if (stop->max_new_tokens == 0) {
		snprintf(err, errlen, "stop: max_new_tokens must be >= 1");
		return -1;
	}
	if (!stop->eos_ids && stop->n_eos_ids) {
		snprintf(err, errlen, "stop: eos_ids is NULL with n_eos_ids = %zu",
		         stop->n_eos_ids);
		return -1;
	}
	if (!stop->stop_token_ids && stop->n_stop_token_ids) {
		snprintf(err, errlen, "stop: stop_token_ids is NULL with n_stop_token_ids = %zu",
		         stop->n_stop_token_ids);
		return -1;
	}
	if (!stop->stop_strings && stop->n_stop_strings) {
		snprintf(err, errlen, "stop: stop_strings is NULL with n_stop_strings = %zu",
		         stop->n_stop_strings);
		return -1;
	}
	for (size_t i = 0; i < stop->n_stop_strings; i++) {
		if (!stop->stop_strings[i] || !stop->stop_strings[i][0]) {
			/* An empty string would match everywhere and stop at once. */
			snprintf(err, errlen, "stop: stop_strings[%zu] is %s", i,
			         stop->stop_strings[i] ? "empty" : "NULL");
			return -1;
		}
	}
	return 0;
}

static bool has_id(const int32_t *ids, size_t n, int32_t token)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == token)
			return true;
	return false;
}

/* The length of text without its trailing U+FFFD (EF BF BD) characters. */
static size_t stable_end(const char *text, size_t len)
{
	while (len >= 3 && memcmp(text + len - 3, "\xef\xbf\xbd", 3) == 0)
		len -= 3;
	return len;
}

/* Length of s if it occurs at text[pos..len), else 0. */
static size_t match_at(const char *text, size_t len, size_t pos, const char *s)
{
	size_t j = 0;

	for (; s[j]; j++)
		if (pos + j >= len || text[pos + j] != s[j])
			return 0;
	return j;
}

/* The earliest stop string that ends after byte `from` (everything ending
 * earlier was searched by earlier calls). */
static bool find_stop_string(const struct rl_stop *stop, const char *text, size_t len, size_t from,
                             size_t *offset, size_t *index)
{
	size_t longest = 0, start;

	for (size_t i = 0; i < stop->n_stop_strings; i++) {
		size_t l = strlen(stop->stop_strings[i]);

		if (l > longest)
			longest = l;
	}
	if (longest == 0)
		return false;
	start = from > longest - 1 ? from - (longest - 1) : 0;
	for (size_t pos = start; pos < len; pos++) {
		size_t best_len = 0;

		for (size_t i = 0; i < stop->n_stop_strings; i++) {
			size_t l = match_at(text, len, pos, stop->stop_strings[i]);

			if (l && pos + l > from && (!best_len || l < best_len)) {
				best_len = l;
				*index = i;
			}
		}
		if (best_len) {
			*offset = pos;
			return true;
		}
	}
	return false;
}

int rl_stop_check(const struct rl_stop *stop, struct rl_stop_seq *seq, int32_t token,
                  const char *text, size_t len, struct rl_stop_hit *hit, char *err, size_t errlen)
{
	size_t from;

	if (rl_stop_validate(stop, err, errlen))
		return -1;
	if (!seq || !hit || (!text && len)) {
		snprintf(err, errlen, "stop: %s is NULL", !seq ? "seq" : !hit ? "hit" : "text");
		return -1;
	}
	/* A text shorter than before means the caller restarted; search it all
	 * rather than miss a match. */
	from = seq->stable_len <= len ? seq->stable_len : 0;
	seq->stable_len = len ? stable_end(text, len) : 0;
	seq->n_tokens++;

	hit->reason = RL_STOP_NONE;
	hit->offset = len;
	hit->string_index = 0;
	hit->token = token;
	if (has_id(stop->eos_ids, stop->n_eos_ids, token))
		hit->reason = RL_STOP_EOS;
	else if (has_id(stop->stop_token_ids, stop->n_stop_token_ids, token))
		hit->reason = RL_STOP_TOKEN;
	else if (find_stop_string(stop, text, len, from, &hit->offset, &hit->string_index))
		hit->reason = RL_STOP_STRING;
	else if (seq->n_tokens >= stop->max_new_tokens)
		hit->reason = RL_STOP_MAX_TOKENS;
	return 0;
}

const char *rl_stop_reason_name(enum rl_stop_reason reason)
{
	switch (reason) {
	case RL_STOP_NONE:
		return "none";
	case RL_STOP_EOS:
		return "eos";
	case RL_STOP_TOKEN:
		return "stop_token";
	case RL_STOP_STRING:
		return "stop_string";
	case RL_STOP_MAX_TOKENS:
		return "max_tokens";
	}
	return "unknown";
}
