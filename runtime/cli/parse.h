/* Argument parsing shared by the model commands (forward, generate,
 * tokenize): numbers and id lists with messages naming the option.
 * defines: rl_parse_ids, rl_parse_long, rl_parse_float */
#ifndef RL_CLI_PARSE_H
#define RL_CLI_PARSE_H

#include <stddef.h>
#include <stdint.h>

/* "1,2, 3" -> malloc'd ids. Returns -1 with a message for an empty list, a
 * non-number or a value outside [0, 2^31). */
int rl_parse_ids(const char *opt, const char *text, int32_t **ids, size_t *n, char *err,
                 size_t errlen);
int rl_parse_long(const char *opt, const char *text, long lo, long hi, long *out, char *err,
                  size_t errlen);
int rl_parse_float(const char *opt, const char *text, double lo, double hi, float *out, char *err,
                   size_t errlen);

#endif
