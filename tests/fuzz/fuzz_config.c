/* libFuzzer target for the config loader: any bytes as a config, plus the
 * first line (when it looks like one) as an override, through the whole
 * pipeline (parse, defaults, overrides, references, validation, printing).
 * `make fuzz` builds and runs it; not part of CI. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	char *override = NULL;
	const char *nl = memchr(text, '\n', size);
	if (nl && memchr(text, '=', (size_t)(nl - text)) && text[0] == '#' && text[1] == '!')
		override = strndup(text + 2, (size_t)(nl - text - 2));
	char *ov[] = {override};
	struct rl_config cfg;
	struct rl_diags diags = {0};
	/* a base directory that does not exist: `defaults:` fail cleanly */
	if (rl_config_load_text("fuzz.yaml", text, size, "/nonexistent-fuzz-dir", ov,
	                        override ? 1 : 0, &cfg, &diags) == 0) {
		FILE *devnull = fopen("/dev/null", "w");
		if (devnull) {
			rl_config_write_yaml(&cfg, devnull);
			fclose(devnull);
		}
		rl_config_free(&cfg);
	} else {
		FILE *devnull = fopen("/dev/null", "w");
		if (devnull) {
			rl_diags_print(&diags, devnull);
			fclose(devnull);
		}
	}
	rl_diags_free(&diags);
	free(override);
	free(text);
	return 0;
}
