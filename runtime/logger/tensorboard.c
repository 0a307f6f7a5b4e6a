#define _GNU_SOURCE
/* TFRecord framing, from TensorFlow's record_writer: a little-endian
 * uint64 length, the masked CRC-32C of those 8 bytes, the data, the masked
 * CRC-32C of the data. The data is an Event encoded by protobuf-c from
 * tb_event.proto. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/durable.h"
#include "runtime/logger/tb_event.pb-c.h"
#include "runtime/logger/tensorboard.h"

/* the reflected Castagnoli polynomial */
#define CRC32C_POLY 0x82f63b78u

uint32_t rl_tb_crc32c(const void *data, size_t n)
{
	const unsigned char *p = data;
	uint32_t crc = 0xffffffffu;

	/* bit by bit: records are a few dozen bytes, and no table to share */
	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ CRC32C_POLY : crc >> 1;
	}
	return crc ^ 0xffffffffu;
}

uint32_t rl_tb_masked_crc(const void *data, size_t n)
{
	uint32_t crc = rl_tb_crc32c(data, n);

	/* TFRecord's mask: rotate right by 15, add a constant */
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static int write_event(struct rl_tb_writer *w, const Tensorboard__Event *ev, char *err,
                       size_t errlen)
{
	size_t n = tensorboard__event__get_packed_size(ev);
	unsigned char head[12], foot[4];
	unsigned char *data = malloc(n ? n : 1);

	if (!data) {
		snprintf(err, errlen, "%s: out of memory", w->path);
		return -1;
	}
	tensorboard__event__pack(ev, data);
	put_le(head, n, 8);
	put_le(head + 8, rl_tb_masked_crc(head, 8), 4);
	put_le(foot, rl_tb_masked_crc(data, n), 4);
	bool ok = fwrite(head, 1, sizeof head, w->f) == sizeof head &&
	          fwrite(data, 1, n, w->f) == n &&
	          fwrite(foot, 1, sizeof foot, w->f) == sizeof foot;
	free(data);
	if (!ok) {
		snprintf(err, errlen, "%s: %s", w->path, strerror(errno));
		return -1;
	}
	return 0;
}

int rl_tb_open_file(struct rl_tb_writer *w, const char *path, double now, char *err, size_t errlen)
{
	Tensorboard__SourceMetadata src = TENSORBOARD__SOURCE_METADATA__INIT;
	Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;

	memset(w, 0, sizeof *w);
	if (!(w->path = strdup(path))) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || !(w->f = fdopen(fd, "wb"))) {
		snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	src.writer = "slurm-rl";
	ev.wall_time = now;
	ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
	ev.file_version = "brain.Event:2";
	ev.source_metadata = &src;
	if (write_event(w, &ev, err, errlen) || rl_tb_flush(w, err, errlen))
		goto fail;
	return 0;
fail:
	rl_tb_close(w);
	return -1;
}

int rl_tb_open(struct rl_tb_writer *w, const char *dir, double now, char *err, size_t errlen)
{
	char host[256], *path;

	memset(w, 0, sizeof *w);
	if (rl_make_dirs(dir, "logger.tensorboard.log_dir", err, errlen))
		return -1;
	if (gethostname(host, sizeof host))
		snprintf(host, sizeof host, "localhost");
	host[sizeof host - 1] = '\0';
	if (asprintf(&path, "%s/events.out.tfevents.%010lld.%s.%ld.0", dir, (long long)now, host,
	             (long)getpid()) < 0) {
		snprintf(err, errlen, "%s: out of memory", dir);
		return -1;
	}
	int rc = rl_tb_open_file(w, path, now, err, errlen);
	free(path);
	return rc;
}

int rl_tb_scalar(struct rl_tb_writer *w, const char *tag, double value, int64_t step,
                 double wall_time, char *err, size_t errlen)
{
	Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
	Tensorboard__Summary__Value *vs[1] = {&v};
	Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
	Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;

	v.tag = (char *)tag;
	v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
	v.simple_value = (float)value;
	sum.n_value = 1;
	sum.value = vs;
	ev.wall_time = wall_time;
	ev.step = step;
	ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
	ev.summary = &sum;
	return write_event(w, &ev, err, errlen);
}

int rl_tb_purge_from(struct rl_tb_writer *w, int64_t step, double wall_time, char *err,
                     size_t errlen)
{
	Tensorboard__SessionLog log = TENSORBOARD__SESSION_LOG__INIT;
	Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;

	log.status = TENSORBOARD__SESSION_LOG__SESSION_STATUS__START;
	ev.wall_time = wall_time;
	ev.step = step;
	ev.what_case = TENSORBOARD__EVENT__WHAT_SESSION_LOG;
	ev.session_log = &log;
	return write_event(w, &ev, err, errlen);
}

int rl_tb_flush(struct rl_tb_writer *w, char *err, size_t errlen)
{
	if (fflush(w->f)) {
		snprintf(err, errlen, "%s: %s", w->path, strerror(errno));
		return -1;
	}
	return 0;
}

void rl_tb_close(struct rl_tb_writer *w)
{
	if (w->f)
		fclose(w->f);
	free(w->path);
	memset(w, 0, sizeof *w);
}
