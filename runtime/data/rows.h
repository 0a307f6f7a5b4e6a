/* The JSONL reader under the data room's data sets: a file read a line at a
 * time (lines of any length, blank lines skipped, CRLF and a byte order
 * mark ignored), each line checked as UTF-8 and parsed by jansson into an
 * object, which a row parser turns into an example. Every message names
 * FILE:LINE. Used by the prompt data sets (jsonl.c) and the preference
 * pairs (preference.c).
 * defines: struct rl_rows, rl_row_parse, rl_rows_load, rl_rows_fail,
 * rl_rows_missing_field, rl_rows_take_string */
#ifndef RL_DATA_ROWS_H
#define RL_DATA_ROWS_H

#include <jansson.h>
#include <stddef.h>

#include "runtime/data/dataset.h"

/* Where the reader stands, for messages. */
struct rl_rows {
	const char *path;
	size_t lineno; /* 1-based; 0: the file as a whole */
	char *err;
	size_t errlen;
};

/* Fills *ex from the row's object; returns 0, or -1 with the message
 * written by rl_rows_fail (and nothing of *ex left allocated). */
typedef int (*rl_row_parse)(const struct rl_rows *l, json_t *row, struct rl_example *ex, void *ctx);

/* Reads PATH, one example per non-blank line; a file without any is an
 * error. Returns 0 and fills *ds, or -1 with the message in err. */
int rl_rows_load(const char *path, rl_row_parse parse, void *ctx, struct rl_dataset *ds, char *err,
                 size_t errlen);

/* "FILE:LINE: <message>" into the reader's err; returns -1. */
int rl_rows_fail(const struct rl_rows *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "FILE:LINE: no field 'KEY' (fields: a, b, c)"; returns -1. */
int rl_rows_missing_field(const struct rl_rows *l, json_t *obj, const char *key);

/* The non-empty string field KEY of obj (borrowed from it): 1, or 0 with
 * the message written (missing, not a string, empty). */
int rl_rows_take_string(const struct rl_rows *l, json_t *obj, const char *key, const char **out);

#endif
