/* How a YAML scalar reads as a value: the spellings of null, booleans and
 * numbers the config language accepts (YAML 1.2 core schema). */
#ifndef RL_SCALAR_H
#define RL_SCALAR_H

#include <stdbool.h>
#include <stdint.h>

bool rl_scalar_bool(const char *text, bool *out);
bool rl_scalar_int(const char *text, int64_t *out);
/* Any finite or infinite number; NaN is refused. */
bool rl_scalar_float(const char *text, double *out);
bool rl_scalar_null_text(const char *text);
/* True when a string would read back as something else if written plain. */
bool rl_scalar_needs_quotes(const char *text);

#endif
