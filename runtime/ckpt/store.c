#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/ckpt/manifest.h"
#include "runtime/ckpt/store.h"
#include "runtime/base/durable.h"

#define TMP_PREFIX      "tmp_step_"
#define STEP_PREFIX     "step_"
#define REMOVING_PREFIX "removing_"

int rl_ckpt_path(char *buf, size_t len, const char *root, int64_t step, bool tmp, char *err,
                 size_t errlen)
{
	if ((size_t)snprintf(buf, len, "%s/%s%" PRId64, root, tmp ? TMP_PREFIX : STEP_PREFIX,
	                     step) < len)
		return 0;
	snprintf(err, errlen, "checkpointing.checkpoint_dir: %s: path too long", root);
	return -1;
}

/* N from PREFIX + N (decimal, no sign, no leading zero but "0"), or -1. */
static int64_t step_of(const char *name, const char *prefix)
{
	size_t n = strlen(prefix);
	int64_t v = 0;

	if (strncmp(name, prefix, n) != 0 || !name[n] || (name[n] == '0' && name[n + 1]))
		return -1;
	for (const char *c = name + n; *c; c++) {
		if (*c < '0' || *c > '9' || v > (INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (*c - '0');
	}
	return v;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

void rl_ckpt_listing_free(struct rl_ckpt_listing *l)
{
	for (int i = 0; i < l->n_leftovers; i++)
		free(l->leftovers[i]);
	free(l->leftovers);
	free(l->steps);
	memset(l, 0, sizeof *l);
}

static int push_leftover(struct rl_ckpt_listing *l, const char *name)
{
	char **more = realloc(l->leftovers, (size_t)(l->n_leftovers + 1) * sizeof *more);

	if (!more)
		return -1;
	l->leftovers = more;
	if (!(l->leftovers[l->n_leftovers] = strdup(name)))
		return -1;
	l->n_leftovers++;
	return 0;
}

static int push_step(struct rl_ckpt_listing *l, int64_t step)
{
	int64_t *more = realloc(l->steps, (size_t)(l->n + 1) * sizeof *more);

	if (!more)
		return -1;
	l->steps = more;
	l->steps[l->n++] = step;
	return 0;
}

int rl_ckpt_scan(const char *root, struct rl_ckpt_listing *l, char *err, size_t errlen)
{
	DIR *d = opendir(root);
	struct dirent *e;

	memset(l, 0, sizeof *l);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "checkpointing.checkpoint_dir: %s: %s", root,
		         strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		int64_t step = step_of(e->d_name, STEP_PREFIX);
		int failed = 0;

		if (step >= 0) {
			char manifest[4200];

			snprintf(manifest, sizeof manifest, "%s/%s/%s", root, e->d_name,
			         RL_CKPT_MANIFEST);
			/* a step_N without a manifest is not a checkpoint: never
			 * loaded, and left for the user to look at */
			if (access(manifest, F_OK) == 0)
				failed = push_step(l, step);
		} else if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0 ||
		           strncmp(e->d_name, REMOVING_PREFIX, strlen(REMOVING_PREFIX)) == 0 ||
		           strcmp(e->d_name, RL_CKPT_LATEST ".tmp") == 0) {
			failed = push_leftover(l, e->d_name);
		}
		if (failed) {
			closedir(d);
			rl_ckpt_listing_free(l);
			snprintf(err, errlen, "out of memory listing %s", root);
			return -1;
		}
	}
	closedir(d);
	if (l->n > 0) /* qsort(NULL, 0, ...) is undefined behaviour */
		qsort(l->steps, (size_t)l->n, sizeof *l->steps, cmp_i64);
	return 0;
}

int rl_ckpt_begin(const char *root, int64_t step, char *err, size_t errlen)
{
	char tmp[4200];

	if (rl_make_dirs(root, "checkpointing.checkpoint_dir", err, errlen) ||
	    rl_ckpt_path(tmp, sizeof tmp, root, step, true, err, errlen))
		return -1;
	if (mkdir(tmp, 0777) && errno != EEXIST) {
		snprintf(err, errlen, "checkpointing.checkpoint_dir: cannot create %s: %s", tmp,
		         strerror(errno));
		return -1;
	}
	return 0;
}

/* A directory of plain files, then the directory itself. */
static int remove_tree(const char *path, char *err, size_t errlen)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) && rc == 0) {
			snprintf(err, errlen, "%s/%s: %s", path, e->d_name, strerror(errno));
			rc = -1;
		}
	}
	closedir(d);
	if (rc == 0 && rmdir(path)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		rc = -1;
	}
	return rc;
}

int rl_ckpt_remove(const char *root, const char *name, char *err, size_t errlen)
{
	char from[4200], to[4300];
	struct stat st;

	snprintf(from, sizeof from, "%s/%s", root, name);
	if (lstat(from, &st) == 0 && !S_ISDIR(st.st_mode)) {
		if (unlink(from) == 0)
			return 0;
		snprintf(err, errlen, "%s: %s", from, strerror(errno));
		return -1;
	}
	if (strncmp(name, REMOVING_PREFIX, strlen(REMOVING_PREFIX)) == 0) {
		snprintf(to, sizeof to, "%s", from);
	} else {
		snprintf(to, sizeof to, "%s/%s%s", root, REMOVING_PREFIX, name);
		if (rename(from, to) || rl_sync_parent(to)) {
			snprintf(err, errlen, "cannot rename %s to %s: %s", from, to,
			         strerror(errno));
			return -1;
		}
	}
	return remove_tree(to, err, errlen);
}

static int write_latest(const char *root, int64_t step, char *err, size_t errlen)
{
	char path[4200], tmp[4300], text[64];
	int n = snprintf(text, sizeof text, STEP_PREFIX "%" PRId64 "\n", step);

	snprintf(path, sizeof path, "%s/%s", root, RL_CKPT_LATEST);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	bool written = fd >= 0 && rl_write_all(fd, text, (size_t)n) == 0 && fsync(fd) == 0;
	if (fd >= 0 && close(fd))
		written = false;
	if (!written || rename(tmp, path) || rl_sync_parent(path)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

int rl_ckpt_commit(const char *root, int64_t step, char *err, size_t errlen)
{
	char tmp[4200], final[4200];
	struct stat st;

	if (rl_ckpt_path(tmp, sizeof tmp, root, step, true, err, errlen) ||
	    rl_ckpt_path(final, sizeof final, root, step, false, err, errlen))
		return -1;
	/* the manifest's write made tmp_step_N's entries durable; the
	 * rename is made durable by syncing ROOT */
	if (lstat(final, &st) == 0) {
		/* a run that saves a step again: swap the two in one atomic
		 * move, so that step_N is whole at every moment, then remove
		 * the old one under the tmp name */
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) ||
		    rl_sync_parent(final)) {
			snprintf(err, errlen, "cannot exchange %s and %s: %s", tmp, final,
			         strerror(errno));
			return -1;
		}
		if (write_latest(root, step, err, errlen))
			return -1;
		return rl_ckpt_remove(root, strrchr(tmp, '/') + 1, err, errlen);
	}
	if (rename(tmp, final) || rl_sync_parent(final)) {
		snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
		return -1;
	}
	return write_latest(root, step, err, errlen);
}

int rl_ckpt_clean_leftovers(const char *root, char *err, size_t errlen)
{
	struct rl_ckpt_listing l;
	int rc = 0;

	if (rl_ckpt_scan(root, &l, err, errlen))
		return -1;
	for (int i = 0; i < l.n_leftovers && rc == 0; i++)
		rc = rl_ckpt_remove(root, l.leftovers[i], err, errlen);
	rl_ckpt_listing_free(&l);
	return rc;
}
