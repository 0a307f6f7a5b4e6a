/* Diagnostics: a list of FILE:LINE:COL: error: KEY: message, collected so that
 * one run reports every problem, printed sorted by position. */
#ifndef RL_DIAG_H
#define RL_DIAG_H

#include <stddef.h>
#include <stdio.h>

struct rl_diag {
	char *file;
	int line, col; /* 1-based; 0 when unknown */
	char *key;     /* dotted key path, or NULL */
	char *msg;
	size_t seq; /* insertion order, so equal positions print stably */
};

struct rl_diags {
	struct rl_diag *v;
	size_t n, cap;
	/* notes: lines that are not errors (what a NeMo-RL config had that is
	 * ignored or mapped here), printed once, in the order added */
	char **notes;
	size_t n_notes, cap_notes;
};

/* Errors printed at most; the rest are counted in one closing line, so that
 * a huge broken file cannot flood a terminal. */
enum { RL_DIAGS_PRINT_MAX = 20 };

#if defined(__GNUC__)
#define RL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define RL_PRINTF(a, b)
#endif

void rl_diag_add(struct rl_diags *d, const char *file, int line, int col, const char *key,
                 const char *fmt, ...) RL_PRINTF(6, 7);
void rl_note_add(struct rl_diags *d, const char *fmt, ...) RL_PRINTF(2, 3);
/* Prints the first RL_DIAGS_PRINT_MAX errors sorted by position, then
 * "... and N more errors". */
void rl_diags_print(struct rl_diags *d, FILE *out);
/* Prints each note as "note: TEXT". */
void rl_notes_print(const struct rl_diags *d, FILE *out);
void rl_diags_free(struct rl_diags *d);

#endif
