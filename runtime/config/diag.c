#define _GNU_SOURCE
#include "runtime/config/diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* v (n elements of size elem, room for *cap; first when empty) with room
 * for one more: v itself, or a larger copy; NULL out of memory (v kept),
 * where losing a message beats crashing. */
static void *room_for_one(void *v, size_t n, size_t *cap, size_t elem, size_t first)
{
	if (n < *cap)
		return v;
	size_t grown = *cap ? 2 * *cap : first;
	void *p = realloc(v, grown * elem);
	if (p)
		*cap = grown;
	return p;
}

void rl_diag_add(struct rl_diags *d, const char *file, int line, int col, const char *key,
                 const char *fmt, ...)
{
	struct rl_diag *v = room_for_one(d->v, d->n, &d->cap, sizeof *v, 8);
	if (!v)
		return;
	d->v = v;
	va_list ap;
	va_start(ap, fmt);
	char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	d->v[d->n++] = (struct rl_diag){.file = dup_or_null(file),
	                                .line = line,
	                                .col = col,
	                                .key = dup_or_null(key),
	                                .msg = msg,
	                                .seq = d->n};
}

static int cmp_diag(const void *a, const void *b)
{
	const struct rl_diag *x = a, *y = b;
	int c = strcmp(x->file ? x->file : "", y->file ? y->file : "");
	if (c)
		return c;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void rl_diags_print(struct rl_diags *d, FILE *out)
{
	/* Sorted by position so that the output reads like the file, whatever
	 * order the checks ran in. */
	qsort(d->v, d->n, sizeof(*d->v), cmp_diag);
	size_t shown = d->n < RL_DIAGS_PRINT_MAX ? d->n : RL_DIAGS_PRINT_MAX;
	for (size_t i = 0; i < shown; i++) {
		const struct rl_diag *e = &d->v[i];
		if (e->line > 0)
			fprintf(out, "%s:%d:%d: error: ", e->file ? e->file : "<config>", e->line,
			        e->col);
		else
			fprintf(out, "%s: error: ", e->file ? e->file : "<config>");
		if (e->key)
			fprintf(out, "%s: ", e->key);
		fprintf(out, "%s\n", e->msg ? e->msg : "(out of memory)");
	}
	if (shown < d->n)
		fprintf(out, "... and %zu more error%s\n", d->n - shown,
		        d->n - shown == 1 ? "" : "s");
}

void rl_note_add(struct rl_diags *d, const char *fmt, ...)
{
	char **notes = room_for_one(d->notes, d->n_notes, &d->cap_notes, sizeof *notes, 4);
	if (!notes)
		return;
	d->notes = notes;
	va_list ap;
	va_start(ap, fmt);
	char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (msg)
		d->notes[d->n_notes++] = msg;
}

void rl_notes_print(const struct rl_diags *d, FILE *out)
{
	for (size_t i = 0; i < d->n_notes; i++)
		fprintf(out, "note: %s\n", d->notes[i]);
}

void rl_diags_free(struct rl_diags *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->v[i].file);
		free(d->v[i].key);
		free(d->v[i].msg);
	}
	free(d->v);
	for (size_t i = 0; i < d->n_notes; i++)
		free(d->notes[i]);
	free(d->notes);
	*d = (struct rl_diags){0};
}
