/* When a generated sequence ends: an EOS id, another stop token id, a stop
 * string in the decoded text, or the token budget, checked in vLLM's order
 * after every new token.
 * defines: enum rl_stop_reason, struct rl_stop, struct rl_stop_seq,
 * struct rl_stop_hit, rl_stop_validate, rl_stop_check, rl_stop_reason_name */
#ifndef RL_GENERATE_STOP_H
#define RL_GENERATE_STOP_H

#include <stddef.h>
#include <stdint.h>

enum rl_stop_reason {
	RL_STOP_NONE = 0,
	RL_STOP_EOS,        /* the token is one of eos_ids */
	RL_STOP_TOKEN,      /* the token is one of stop_token_ids */
	RL_STOP_STRING,     /* a stop string ends in the newly decoded text */
	RL_STOP_MAX_TOKENS, /* max_new_tokens tokens have been generated */
};

/* Shared by all sequences of a request; the arrays are borrowed and must
 * outlive the checks. Stop strings are byte strings (UTF-8 in practice),
 * NUL-terminated, not empty. */
struct rl_stop {
	const int32_t *eos_ids;
	size_t n_eos_ids;
	const int32_t *stop_token_ids;
	size_t n_stop_token_ids;
	const char *const *stop_strings;
	size_t n_stop_strings;
	size_t max_new_tokens; /* >= 1 */
};

/* Per sequence; all zero (= {0}) at the start of a generation. */
struct rl_stop_seq {
	size_t n_tokens;   /* tokens checked so far */
	size_t stable_len; /* bytes of text that later tokens cannot change */
};

struct rl_stop_hit {
	enum rl_stop_reason reason;
	/* RL_STOP_STRING: where the stop string begins in text, i.e. the
	 * length of the text to keep (vLLM leaves the stop string out of the
	 * output). Otherwise the whole text's length. */
	size_t offset;
	size_t string_index; /* RL_STOP_STRING: which of stop_strings */
	int32_t token;       /* the token checked */
};

/* Returns -1 with a message naming the field for max_new_tokens 0, a NULL
 * array with a nonzero count, or a NULL or empty stop string. */
int rl_stop_validate(const struct rl_stop *stop, char *err, size_t errlen);

/* Call once after each token is appended. text[0..len) is the decoded text
 * of everything generated so far (the caller decodes; NUL bytes are allowed
 * in it). The checks run in vLLM's order: EOS, stop token, stop string,
 * token budget, so a stop string completed by the last allowed token is
 * reported as a stop string.
 *
 * Stop strings may straddle token boundaries. Only the text after what
 * earlier calls had already searched is new, so the search covers that tail
 * plus the longest stop string's length minus one before it: O(tail) per
 * token, not O(len). Trailing U+FFFD characters are not counted as searched,
 * because they are what a decoder shows for a character whose remaining
 * bytes are in tokens still to come; the next call searches them again.
 * Among matches the one starting earliest wins; at the same start the
 * shortest (it would have completed first), then the lowest index.
 *
 * Returns -1 only for invalid arguments (see rl_stop_validate, and a NULL
 * text with len > 0); *hit says whether and why the sequence stops. */
int rl_stop_check(const struct rl_stop *stop, struct rl_stop_seq *seq, int32_t token,
                  const char *text, size_t len, struct rl_stop_hit *hit, char *err, size_t errlen);

/* "none", "eos", "stop_token", "stop_string", "max_tokens" (vLLM's
 * finish_reason is "stop" for the first three and "length" for the last). */
const char *rl_stop_reason_name(enum rl_stop_reason reason);

#endif
