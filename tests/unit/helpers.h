/* Test helpers: write a config into a fresh temporary directory, load it
 * with the real loader, and look at the diagnostics. */
#ifndef RL_TEST_HELPERS_H
#define RL_TEST_HELPERS_H

#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/config/config.h"

static inline char *tmp_dir(void)
{
	char *t = strdup("/tmp/rl-test-XXXXXX");
	cr_assert_not_null(mkdtemp(t));
	return t;
}

static inline char *write_file(const char *dir, const char *name, const char *text)
{
	char *path = NULL;
	cr_assert_geq(asprintf(&path, "%s/%s", dir, name), 0);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "cannot write %s", path);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
	return path;
}

static inline void remove_tree(const char *dir)
{
	char *cmd = NULL;
	cr_assert_geq(asprintf(&cmd, "rm -rf '%s'", dir), 0);
	cr_assert_eq(system(cmd), 0);
	free(cmd);
}

/* The diagnostics as printed, one string, for substring checks. */
static inline char *diag_text(struct rl_diags *d)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	rl_diags_print(d, f);
	fclose(f);
	return text;
}

#define expect_contains(text, needle)                                                              \
	cr_expect(strstr((text), (needle)) != NULL, "missing \"%s\" in:\n%s", (needle), (text))

static inline const struct rl_diag *find_diag(const struct rl_diags *d, const char *key)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].key && strcmp(d->v[i].key, key) == 0)
			return &d->v[i];
	return NULL;
}

#endif
