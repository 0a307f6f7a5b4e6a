/* The key table as documentation: `rlrun config --schema` (text) and the
 * KEYS section of rl-config(5) (roff), both printed from rl_schema. */
#include <stdio.h>
#include <string.h>

#include "runtime/config/schema.h"
#include "runtime/config/schema_doc.h"

static void describe(const struct rl_key *k, char *out, size_t cap)
{
	char range[80];
	size_t n = 0;
	n += (size_t)snprintf(out + n, cap - n, "%s", rl_key_type_name(k));
	if (k->type == RL_T_ENUM)
		n += (size_t)snprintf(out + n, cap - n, ": %s", k->choices);
	if (rl_key_range_text(k, range, sizeof(range)) && n < cap)
		n += (size_t)snprintf(out + n, cap - n, " in %s", range);
	if (k->flags & RL_K_REQUIRED && n < cap)
		snprintf(out + n, cap - n, ", required");
	else if (k->def && n < cap)
		snprintf(out + n, cap - n, ", default %s", k->def);
}

/* roff treats a leading '.' or '\'' as a request and '\\' as an escape. */
static void roff_text(FILE *out, const char *s)
{
	if (*s == '.' || *s == '\'')
		fputs("\\&", out);
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\e", out);
		else if (*s == '-')
			fputs("\\-", out);
		else
			fputc(*s, out);
	}
}

void rl_schema_print(FILE *out, enum rl_schema_format format)
{
	for (size_t i = 0; i < rl_schema_len; i++) {
		const struct rl_key *k = &rl_schema[i];
		char what[256];
		if (k->type == RL_T_UNSUPPORTED && (k->flags & RL_K_NEMO))
			snprintf(what, sizeof(what), "NeMo-RL's; read into slurm-rl's keys");
		else if (k->type == RL_T_UNSUPPORTED && k->accept && strcmp(k->accept, "*") == 0)
			snprintf(what, sizeof(what), "NeMo-RL's; any value, no effect here");
		else if (k->type == RL_T_UNSUPPORTED)
			snprintf(what, sizeof(what), "not supported yet%s%s",
			         k->accept ? "; accepted only as " : "",
			         k->accept ? k->accept : "");
		else
			describe(k, what, sizeof(what));
		if (format == RL_SCHEMA_TEXT) {
			fprintf(out, "%s\n    %s\n    %s\n", k->path, what, k->doc);
			continue;
		}
		fputs(".TP\n.B ", out);
		roff_text(out, k->path);
		fputs("\n(", out);
		roff_text(out, what);
		fputs(")\n", out);
		roff_text(out, k->doc);
		fputc('\n', out);
	}
}
