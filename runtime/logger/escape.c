#include "runtime/logger/escape.h"

void rl_fputs_escaped(const char *s, FILE *out)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '\n')
			fputs("\\n", out);
		else if (*p == '\r')
			fputs("\\r", out);
		else if (*p == '\t')
			fputs("\\t", out);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(out, "\\x%02x", *p);
		else
			fputc(*p, out);
	}
}
