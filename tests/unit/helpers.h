/* Test helpers: write a config into a fresh temporary directory, load it
 * with the real loader, and look at the diagnostics; read a file whole. */
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

/* The whole file, with *len its size, followed by a NUL (for text). */
static inline void *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	cr_assert_geq(n, 0);
	rewind(f);
	char *buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
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

/* A loader's error that names the file and the place: err starts with
 * "<path><where>" (where: ":12: ", say) and holds needle. */
static inline void expect_error_at(const char *err, const char *path, const char *where,
                                   const char *needle)
{
	char *prefix = NULL;

	cr_assert_geq(asprintf(&prefix, "%s%s", path, where), 0);
	cr_expect_eq(strncmp(err, prefix, strlen(prefix)), 0, "want prefix \"%s\" in:\n%s", prefix,
	             err);
	expect_contains(err, needle);
	free(prefix);
}

static inline const struct rl_diag *find_diag(const struct rl_diags *d, const char *key)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].key && strcmp(d->v[i].key, key) == 0)
			return &d->v[i];
	return NULL;
}

#endif
