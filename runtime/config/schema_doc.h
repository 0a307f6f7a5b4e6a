#ifndef RL_SCHEMA_DOC_H
#define RL_SCHEMA_DOC_H

#include <stdio.h>

enum rl_schema_format { RL_SCHEMA_TEXT, RL_SCHEMA_ROFF };

void rl_schema_print(FILE *out, enum rl_schema_format format);

#endif
