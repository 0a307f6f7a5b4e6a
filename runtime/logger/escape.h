/* Text a run prints on one terminal line (a validation sample): control
 * characters shown escaped as in C, so that a response's newlines, tabs,
 * carriage returns or terminal escapes cannot break the line or drive
 * the terminal.
 * defines: rl_fputs_escaped */
#ifndef RL_LOGGER_ESCAPE_H
#define RL_LOGGER_ESCAPE_H

#include <stdio.h>

/* Writes s to out with \n, \r and \t for those three, \xNN (two lowercase
 * hex digits) for every other byte below 0x20 and for 0x7f; every other
 * byte, a backslash and UTF-8 included, as it is. */
void rl_fputs_escaped(const char *s, FILE *out);

#endif
