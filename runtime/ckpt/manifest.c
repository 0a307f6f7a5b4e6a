#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "runtime/ckpt/manifest.h"
#include "runtime/base/durable.h"

static int join(char *buf, size_t len, const char *dir, const char *name, char *err, size_t errlen)
{
	if ((size_t)snprintf(buf, len, "%s/%s", dir, name) < len)
		return 0;
	snprintf(err, errlen, "%s/%s: path too long", dir, name);
	return -1;
}

int rl_ckpt_write_file(const char *dir, const char *name, const void *data, size_t n,
                       struct rl_ckpt_file_sum *sum, char *err, size_t errlen)
{
	char path[4200];
	int fd;

	if (join(path, sizeof path, dir, name, err, errlen))
		return -1;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || rl_write_all(fd, data, n) || fsync(fd)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (close(fd)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	sum->bytes = n;
	sum->xxh3 = XXH3_64bits(data, n);
	return 0;
}

int rl_ckpt_manifest_write(const char *dir, const struct rl_ckpt_manifest *m, char *err,
                           size_t errlen)
{
	json_t *root = json_object(), *files = json_array();
	char path[4200], tmp[4300], hex[17];
	int rc = -1;

	json_object_set_new(root, "format", json_string(RL_CKPT_FORMAT));
	json_object_set_new(root, "step", json_integer(m->step));
	json_object_set_new(root, "world_size", json_integer(m->world_size));
	for (int i = 0; i < m->n_files; i++) {
		json_t *f = json_object();

		snprintf(hex, sizeof hex, "%016" PRIx64, m->files[i].sum.xxh3);
		json_object_set_new(f, "name", json_string(m->files[i].name));
		json_object_set_new(f, "bytes", json_integer((json_int_t)m->files[i].sum.bytes));
		json_object_set_new(f, "xxh3_64", json_string(hex));
		json_array_append_new(files, f);
	}
	json_object_set_new(root, "files", files);
	char *text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (join(path, sizeof path, dir, RL_CKPT_MANIFEST, err, errlen) ||
	    join(tmp, sizeof tmp, dir, RL_CKPT_MANIFEST ".tmp", err, errlen))
		goto out;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	bool written = fd >= 0 && rl_write_all(fd, text, strlen(text)) == 0 &&
	               rl_write_all(fd, "\n", 1) == 0 && fsync(fd) == 0;
	if (fd >= 0 && close(fd))
		written = false;
	if (!written || rename(tmp, path) || rl_sync_parent(path)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	free(text);
	return rc;
}

void rl_ckpt_manifest_free(struct rl_ckpt_manifest *m)
{
	free(m->files);
	memset(m, 0, sizeof *m);
}

static int parse_file(struct rl_ckpt_file *f, json_t *e)
{
	const char *name = json_string_value(json_object_get(e, "name"));
	const char *hex = json_string_value(json_object_get(e, "xxh3_64"));
	json_t *bytes = json_object_get(e, "bytes");
	char *end;

	/* the name must stay inside the step directory */
	if (!name || !*name || strlen(name) >= sizeof f->name || strchr(name, '/') ||
	    strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || !json_is_integer(bytes) ||
	    json_integer_value(bytes) < 0 || !hex || strlen(hex) != 16 ||
	    strspn(hex, "0123456789abcdefABCDEF") != 16)
		return -1;
	errno = 0;
	f->sum.xxh3 = strtoull(hex, &end, 16);
	if (errno || *end)
		return -1;
	strcpy(f->name, name);
	f->sum.bytes = (uint64_t)json_integer_value(bytes);
	return 0;
}

int rl_ckpt_manifest_read(const char *dir, struct rl_ckpt_manifest *m, char *err, size_t errlen)
{
	char path[4200];
	json_error_t jerr;
	int rc = -1;

	memset(m, 0, sizeof *m);
	if (join(path, sizeof path, dir, RL_CKPT_MANIFEST, err, errlen))
		return -1;
	json_t *root = json_load_file(path, 0, &jerr);
	if (!root) {
		snprintf(err, errlen, "%s:%d: %s", path, jerr.line, jerr.text);
		return -1;
	}
	const char *format = json_string_value(json_object_get(root, "format"));
	json_t *step = json_object_get(root, "step"), *world = json_object_get(root, "world_size");
	json_t *files = json_object_get(root, "files");
	if (!format || strcmp(format, RL_CKPT_FORMAT) != 0) {
		snprintf(err, errlen, "%s: format is %s, expected %s", path,
		         format ? format : "missing", RL_CKPT_FORMAT);
		goto out;
	}
	if (!json_is_integer(step) || json_integer_value(step) < 0 || !json_is_integer(world) ||
	    json_integer_value(world) < 1 || json_integer_value(world) > INT32_MAX ||
	    !json_is_array(files) || json_array_size(files) == 0 ||
	    json_array_size(files) > INT32_MAX) {
		snprintf(err, errlen, "%s: step, world_size or files missing or not valid", path);
		goto out;
	}
	m->step = json_integer_value(step);
	m->world_size = (int)json_integer_value(world);
	m->files = calloc(json_array_size(files), sizeof *m->files);
	if (!m->files) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	size_t i;
	json_t *e;
	json_array_foreach(files, i, e)
	{
		if (parse_file(&m->files[i], e)) {
			snprintf(err, errlen, "%s: files[%zu] is not a valid entry", path, i);
			goto out;
		}
		for (size_t k = 0; k < i; k++)
			if (strcmp(m->files[k].name, m->files[i].name) == 0) {
				snprintf(err, errlen, "%s: files[%zu] names %s again", path, i,
				         m->files[i].name);
				goto out;
			}
		m->n_files++;
	}
	rc = 0;
out:
	if (rc)
		rl_ckpt_manifest_free(m);
	json_decref(root);
	return rc;
}

/* Hashed from a mapping, not read into a buffer: one copy fewer, which a
 * resume (this, then the tensors copied out) feels (make bench). */
int rl_ckpt_file_verify(const char *dir, const struct rl_ckpt_file *f, char *err, size_t errlen)
{
	char path[4200];
	struct stat st;
	void *map = MAP_FAILED;
	int fd = -1, rc = -1;

	if (join(path, sizeof path, dir, f->name, err, errlen))
		goto out;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if ((uint64_t)st.st_size != f->sum.bytes) {
		snprintf(err, errlen, "%s: %" PRIu64 " bytes, the manifest says %" PRIu64, path,
		         (uint64_t)st.st_size, f->sum.bytes);
		goto out;
	}
	uint64_t got = XXH3_64bits(NULL, 0);
	if (st.st_size > 0) {
		map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
			goto out;
		}
		madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
		got = XXH3_64bits(map, (size_t)st.st_size);
	}
	if (got != f->sum.xxh3) {
		snprintf(err, errlen, "%s: xxh3 %016" PRIx64 ", the manifest says %016" PRIx64,
		         path, got, f->sum.xxh3);
		goto out;
	}
	rc = 0;
out:
	if (map != MAP_FAILED)
		munmap(map, (size_t)st.st_size);
	if (fd >= 0)
		close(fd);
	return rc;
}
