/* ckpt_seal STEP_DIR STEP: makes a directory of hand-made files a committed
 * checkpoint, as a run's last rank would: a run_state.json of step STEP
 * (unless one is there) and a manifest.json of every file with its size and
 * checksum. The shell tests craft damaged shards and headers and need them
 * to pass the checksums, so that what is checked after them is reached. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "runtime/ckpt/manifest.h"
#include "runtime/ckpt/run_state.h"

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct rl_ckpt_file *)a)->name,
	              ((const struct rl_ckpt_file *)b)->name);
}

/* The size and XXH3 of DIR/NAME, read whole. */
static int sum_file(const char *dir, const char *name, struct rl_ckpt_file *f)
{
	char path[4300];
	size_t len;
	char err[512];

	snprintf(path, sizeof path, "%s/%s", dir, name);
	char *text = rl_ckpt_read_whole(path, (size_t)1 << 30, &len, err, sizeof err);
	if (!text) {
		fprintf(stderr, "ckpt_seal: %s\n", err);
		return -1;
	}
	if (strlen(name) >= sizeof f->name) {
		fprintf(stderr, "ckpt_seal: %s: name too long for a manifest\n", path);
		free(text);
		return -1;
	}
	memcpy(f->name, name, strlen(name) + 1);
	f->sum.bytes = len;
	f->sum.xxh3 = XXH3_64bits(text, len);
	free(text);
	return 0;
}

int main(int argc, char **argv)
{
	struct rl_ckpt_manifest m = {.world_size = 1};
	struct rl_ckpt_file_sum unused;
	char err[1024], path[4300];
	struct dirent *e;
	DIR *d;

	if (argc != 3) {
		fputs("usage: ckpt_seal STEP_DIR STEP\n", stderr);
		return 2;
	}
	m.step = strtoll(argv[2], NULL, 10);
	snprintf(path, sizeof path, "%s/%s", argv[1], RL_CKPT_RUN_STATE);
	struct stat st;
	if (stat(path, &st)) {
		struct rl_ckpt_run_state s = {.step = m.step,
		                              .world_size = 1,
		                              .tensor = 1,
		                              .pipeline = 1,
		                              .context = 1,
		                              .data = 1};
		snprintf(s.model_signature, sizeof s.model_signature, "crafted");
		char *text = rl_ckpt_run_state_json(&s);
		if (!text || rl_ckpt_write_file(argv[1], RL_CKPT_RUN_STATE, text, strlen(text),
		                                &unused, err, sizeof err)) {
			fprintf(stderr, "ckpt_seal: %s\n", text ? err : "out of memory");
			return 1;
		}
		free(text);
	}
	if (!(d = opendir(argv[1]))) {
		perror(argv[1]);
		return 1;
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strcmp(e->d_name, RL_CKPT_MANIFEST) == 0)
			continue;
		struct rl_ckpt_file *more =
		    realloc(m.files, (size_t)(m.n_files + 1) * sizeof *more);
		if (!more || sum_file(argv[1], e->d_name, &more[m.n_files]))
			return 1;
		m.files = more;
		m.n_files++;
	}
	closedir(d);
	qsort(m.files, (size_t)m.n_files, sizeof *m.files, by_name);
	if (rl_ckpt_manifest_write(argv[1], &m, err, sizeof err)) {
		fprintf(stderr, "ckpt_seal: %s\n", err);
		return 1;
	}
	free(m.files);
	return 0;
}
