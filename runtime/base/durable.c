#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/durable.h"

int rl_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int rl_sync_parent(const char *path)
{
	char *dir = strdup(path);
	int rc = -1;

	if (!dir)
		return -1;
	char *slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		rc = fsync(fd);
		close(fd);
	}
	free(dir);
	return rc;
}

/* Writes DST through DST.tmp: fill(out, ctx) writes the bytes, then fsync,
 * rename and rl_sync_parent. what names the source in messages. */
static int write_durable(const char *dst, int (*fill)(int out, void *ctx), void *ctx,
                         const char *what, char *err, size_t errlen)
{
	char tmp[4200];
	int out, rc = -1;

	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", dst) >= sizeof tmp) {
		snprintf(err, errlen, "%s: path too long", dst);
		return -1;
	}
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (out < 0) {
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	if (fill(out, ctx)) {
		snprintf(err, errlen, "writing %s to %s: %s", what, tmp, strerror(errno));
		goto out;
	}
	if (fsync(out) || close(out)) {
		out = -1;
		snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	out = -1;
	if (rename(tmp, dst) || rl_sync_parent(dst)) {
		snprintf(err, errlen, "%s: %s", dst, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (out >= 0)
		close(out);
	if (rc)
		unlink(tmp);
	return rc;
}

static int fill_from_fd(int out, void *ctx)
{
	int in = *(int *)ctx;
	char buf[65536];
	ssize_t r;

	while ((r = read(in, buf, sizeof buf)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || rl_write_all(out, buf, (size_t)r))
			return -1;
	}
	return 0;
}

int rl_copy_file_durable(const char *src, const char *dst, char *err, size_t errlen)
{
	int in = open(src, O_RDONLY | O_CLOEXEC);

	if (in < 0) {
		snprintf(err, errlen, "%s: %s", src, strerror(errno));
		return -1;
	}
	int rc = write_durable(dst, fill_from_fd, &in, src, err, errlen);
	close(in);
	return rc;
}

struct bytes {
	const void *p;
	size_t n;
};

static int fill_from_bytes(int out, void *ctx)
{
	const struct bytes *b = ctx;

	return rl_write_all(out, b->p, b->n);
}

int rl_write_file_durable(const char *dst, const void *p, size_t n, char *err, size_t errlen)
{
	struct bytes b = {p, n};

	return write_durable(dst, fill_from_bytes, &b, "the new contents", err, errlen);
}

int rl_make_dirs(const char *dir, const char *key, char *err, size_t errlen)
{
	char *p = strdup(dir);

	if (!p) {
		snprintf(err, errlen, "%s: out of memory", dir);
		return -1;
	}
	for (char *c = p + 1;; c++) {
		if (*c != '/' && *c != '\0')
			continue;
		char was = *c;
		*c = '\0';
		if (mkdir(p, 0777) && errno != EEXIST) {
			snprintf(err, errlen, "%s: cannot create %s: %s", key, p, strerror(errno));
			free(p);
			return -1;
		}
		if (!(*c = was))
			break;
	}
	free(p);
	return 0;
}
