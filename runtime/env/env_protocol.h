/* The lines of rl-env(7) as the pool writes and reads them: an episode's
 * start (with its transcript), a turn's step, an end, and the program's
 * answers, checked field by field.
 * defines: struct rl_env_turn, struct rl_env_reply, rl_env_line_start,
 * rl_env_line_step, rl_env_line_end, rl_env_reply_parse, rl_env_reply_free */
#ifndef RL_ENV_ENV_PROTOCOL_H
#define RL_ENV_ENV_PROTOCOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* One turn of a transcript: the model's message and the observation the
 * environment answered it with. */
struct rl_env_turn {
	char *message, *observation;
	size_t message_len, observation_len;
};

/* The lines, newline included (malloc'd; NULL when out of memory). Text
 * may be NULL (null) and is written with invalid UTF-8 replaced;
 * metadata is a JSON value or NULL. */
char *rl_env_line_start(long long id, const char *prompt, const char *problem, const char *expected,
                        json_t *metadata, const struct rl_env_turn *hist, int n_hist, size_t *len);
char *rl_env_line_step(long long id, int turn, const char *message, size_t message_len,
                       size_t *len);
char *rl_env_line_end(long long id, size_t *len);

/* One line of the program's, read. */
struct rl_env_reply {
	bool named; /* it names an episode: id */
	long long id;
	/* what is wrong with it as an answer ("is not JSON", "has no number
	 * \"reward\"", ...), or NULL; a line that is not JSON may still name
	 * its episode (Python's json.dumps writes NaN, which JSON has not) */
	const char *why;
	const char *observation; /* in o; "" when done and none given */
	size_t observation_len;
	double reward;
	bool done;
	json_t *o; /* the parsed line, or NULL */
};

/* line: len bytes, NUL-terminated. */
void rl_env_reply_parse(const char *line, size_t len, struct rl_env_reply *r);
void rl_env_reply_free(struct rl_env_reply *r);

#endif
