/* What the readers of JSON files (config.json, JSONL datasets,
 * metrics.jsonl) say about a value of the wrong type.
 * defines: rl_json_type_name */
#ifndef RL_BASE_JSON_H
#define RL_BASE_JSON_H

#include <jansson.h>

/* "an object", "an array", "a string", "an integer", "a number with a
 * fraction", "a boolean" or "null": a value's type as a message names it
 * ("expected a string, got an integer"). */
const char *rl_json_type_name(const json_t *v);

#endif
