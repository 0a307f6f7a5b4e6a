/* A main for the fuzz targets without libFuzzer: every file named (or every
 * file of every directory named; with no arguments, FUZZ_CORPUS under
 * $top_srcdir) is fed to LLVMFuzzerTestOneInput once. make check builds the
 * targets with it and runs them on their corpora, so that CI, which has no
 * libFuzzer, still compiles them and replays every input that once found a
 * bug, under the sanitizers of the build. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, got;

	if (!f) {
		perror(path);
		return -1;
	}
	do {
		if (len == cap) {
			uint8_t *more = realloc(buf, cap = cap ? 2 * cap : 65536);
			if (!more) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = more;
		}
		got = fread(buf + len, 1, cap - len, f);
		len += got;
	} while (got);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

/* The number of files fed, or -1. */
static int run_path(const char *path)
{
	struct stat st;
	struct dirent **names;
	int n, fed = 0;

	if (stat(path, &st)) {
		perror(path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return run_file(path) ? -1 : 1;
	if ((n = scandir(path, &names, NULL, alphasort)) < 0) {
		perror(path);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char file[4200];

		snprintf(file, sizeof file, "%s/%s", path, names[i]->d_name);
		if (names[i]->d_name[0] != '.' && stat(file, &st) == 0 && S_ISREG(st.st_mode)) {
			if (run_file(file))
				fed = -1;
			else if (fed >= 0)
				fed++;
		}
		free(names[i]);
	}
	free(names);
	return fed;
}

int main(int argc, char **argv)
{
	char dflt[4200];
	const char *top = getenv("top_srcdir");
	int fed = 0;

	if (argc == 1) {
		snprintf(dflt, sizeof dflt, "%s/tests/fuzz/%s", top ? top : ".", FUZZ_CORPUS);
		int n = run_path(dflt);
		if (n <= 0) {
			fprintf(stderr, "%s: no input in %s\n", argv[0], dflt);
			return 1;
		}
		printf("%s: %d inputs of %s, none crashed\n", argv[0], n, dflt);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		int n = run_path(argv[i]);
		if (n < 0)
			return 1;
		fed += n;
	}
	printf("%s: %d inputs, none crashed\n", argv[0], fed);
	return 0;
}
