/* A training or validation set in memory: the problem and reference answer of
 * every example, read from a JSONL file (one JSON object per line), the format
 * NeMo-RL's ResponseDataset reads with input_key / output_key, or the
 * conversation of every example (NeMo-RL's openai_format: a list of
 * messages per line).
 * defines: struct rl_example, struct rl_dataset, rl_dataset_load_jsonl,
 * rl_dataset_load_chat, rl_dataset_free, rl_utf8_check */
#ifndef RL_DATA_DATASET_H
#define RL_DATA_DATASET_H

#include <stdbool.h>
#include <stddef.h>

struct json_t;

struct rl_example {
	char *problem; /* never NULL or empty; a conversation's first user message */
	char *answer;  /* NULL when the line has none and answers are optional */
	/* preference data (preference.h): problem is the prompt, answer the
	 * chosen response and this the rejected one; NULL otherwise */
	char *rejected;
	/* a chat data set's conversation: a JSON list of {"role", "content"};
	 * NULL otherwise */
	struct json_t *messages;
	/* a prompt data set's extra_env_info (NeMo-RL's name): what the row
	 * gives a multi-turn environment besides the problem, the JSON object
	 * as compact text; NULL when the row has none (or null) */
	char *metadata;
};

struct rl_dataset {
	size_t n; /* at least 1 after a successful load */
	struct rl_example *ex;
	char *path; /* as given, for messages */
};

/* Reads PATH (relative to the working directory) as JSONL.
 *
 * Lines that hold only whitespace are skipped; a trailing "\r" (CRLF files)
 * and a UTF-8 byte order mark at the start of the file are ignored. Lines may
 * be of any length. The problem is the string field INPUT_KEY, which must not
 * be empty. The answer is the field OUTPUT_KEY: a JSON string (taken as is),
 * an integer (decimal) or a real, written in the shortest %.Ng form that
 * reads back to the same double (0.1 -> "0.1", 2.0 -> "2", 1e300 ->
 * "1e+300"), so that the reward environment compares the answer as the file
 * meant it rather than as a printf default rounded it. With NEED_ANSWER false
 * an absent or null answer gives answer = NULL; with it true it is an error.
 * The field extra_env_info, when present and not null, must be a JSON
 * object: it is kept as compact JSON text (metadata) for the run's
 * environment, as NeMo-RL hands a row's extra_env_info to its environment.
 * Other fields are ignored.
 *
 * Every error names the file and the 1-based line, e.g.
 *   "data.jsonl:12: not valid JSON: <jansson's text> (column 7)"
 *   "data.jsonl:3: no field 'problem' (fields: question, answer)"
 *   "data.jsonl:4: field 'problem' is a number, expected a string"
 *   "data.jsonl:5: field 'extra_env_info' is a string, expected an object"
 * and a file with no examples at all is an error too. Returns 0 and fills
 * *ds, or -1 with the message in err and *ds zeroed. */
int rl_dataset_load_jsonl(const char *path, const char *input_key, const char *output_key,
                          bool need_answer, struct rl_dataset *ds, char *err, size_t errlen);

/* Reads PATH as JSONL of conversations, as rl_dataset_load_jsonl reads
 * (blank lines, CRLF, BOM, UTF-8, errors with FILE:LINE): each line's field
 * CHAT_KEY is a list of {"role", "content"} objects, roles system, user,
 * assistant or tool, contents strings, with at least one user and one
 * assistant message, e.g.
 *   "chat.jsonl:7: messages[1].content is an integer, expected a string".
 * Other fields of a line and of a message are ignored. */
int rl_dataset_load_chat(const char *path, const char *chat_key, struct rl_dataset *ds, char *err,
                         size_t errlen);

void rl_dataset_free(struct rl_dataset *ds);

/* Checks that s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or
 * code points past U+10FFFF) without NUL bytes: text that a tokenizer can take
 * and a C string can hold. Returns n when it is, else the offset of the first
 * bad byte. */
size_t rl_utf8_check(const char *s, size_t n);

#endif
