/* The TensorBoard event file writer against TensorBoard's own: the same
 * scalars written by tests/fixtures/make_tensorboard_fixture.py with
 * TensorBoard's RecordWriter and Event classes (the reference file) and by
 * rl_tb_*, compared byte for byte, so the framing, both CRCs and the
 * protocol buffer encoding are TensorBoard's. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/logger/tensorboard.h"
#include "tests/unit/helpers.h"

/* the SCALARS, FIRST_WALL_TIME and PURGE of the fixture's script */
static const struct {
	double wall;
	int64_t step;
	const char *tag;
	double value;
} scalars[] = {
    {1700000000.5, 1, "train/reward", 0.125},
    {1700000000.5, 1, "train/loss", -0.03125},
    {1700000000.5, 1, "train/grad_norm", 0.0},
    {1700000001.25, 2, "train/reward", 0.75},
    {1700000001.25, 2, "timing/train/total_step_time", 1.5},
    {1700000001.25, 2, "validation/accuracy", 1.0 / 3.0},
    {1700000002.0, 300, "train/lr", 1e-6},
    {1700000002.0, 300, "ray/node.0.gpu.3.mem_gb", 71.25},
    {1700000002.0, 4294967296, "performance/tokens_per_sec", 12345.678},
    {1700000003.0, 5, "train/reward", 1e30},
};

Test(tensorboard, crc32c_check_value)
{
	/* the CRC-32C check value of RFC 3720 (iSCSI), B.4 */
	cr_assert_eq(rl_tb_crc32c("123456789", 9), 0xe3069283u);
	unsigned char zeros[32] = {0};
	cr_assert_eq(rl_tb_crc32c(zeros, 32), 0x8a9136aau);
}

Test(tensorboard, same_bytes_as_tensorboards_writer)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *dir = tmp_dir(), *ours, *ref, err[512];
	struct rl_tb_writer w;
	size_t n_ours, n_ref;

	cr_assert_geq(asprintf(&ours, "%s/events.out.tfevents.test", dir), 0);
	cr_assert_geq(asprintf(&ref, "%s/tests/fixtures/tensorboard/reference.tfevents", top), 0);
	cr_assert_eq(rl_tb_open_file(&w, ours, 1700000000.0, err, sizeof err), 0, "%s", err);
	for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++)
		cr_assert_eq(rl_tb_scalar(&w, scalars[i].tag, scalars[i].value, scalars[i].step,
		                          scalars[i].wall, err, sizeof err),
		             0, "%s", err);
	cr_assert_eq(rl_tb_purge_from(&w, 7, 1700000004.0, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_tb_flush(&w, err, sizeof err), 0, "%s", err);
	rl_tb_close(&w);

	char *a = slurp(ours, &n_ours), *b = slurp(ref, &n_ref);
	cr_assert_eq(n_ours, n_ref, "%zu bytes written, TensorBoard's file has %zu", n_ours, n_ref);
	for (size_t i = 0; i < n_ref; i++)
		cr_assert_eq(a[i], b[i], "byte %zu: 0x%02x, TensorBoard wrote 0x%02x", i,
		             (unsigned char)a[i], (unsigned char)b[i]);
	unlink(ours);
	rmdir(dir);
	free(a), free(b), free(ours), free(ref), free(dir);
}

Test(tensorboard, a_new_file_each_open_named_as_tensorboard_names_them)
{
	char *dir = tmp_dir(), *sub, err[512], host[256];
	struct rl_tb_writer w1, w2;

	cr_assert_geq(asprintf(&sub, "%s/a/tensorboard", dir), 0);
	cr_assert_eq(rl_tb_open(&w1, sub, 1700000000.0, err, sizeof err), 0, "%s", err);
	gethostname(host, sizeof host);
	char *want;
	cr_assert_geq(asprintf(&want, "%s/events.out.tfevents.1700000000.%s.%ld.0", sub, host,
	                       (long)getpid()),
	              0);
	cr_assert_str_eq(w1.path, want);
	/* the same second, host and process: refused, never overwritten */
	cr_assert_eq(rl_tb_open(&w2, sub, 1700000000.0, err, sizeof err), -1);
	cr_assert(strstr(err, "events.out.tfevents.1700000000") && strstr(err, "exists"), "%s",
	          err);
	cr_assert_eq(rl_tb_open(&w2, sub, 1700000001.0, err, sizeof err), 0, "%s", err);
	struct stat st;
	cr_assert_eq(stat(w1.path, &st), 0);
	cr_assert_gt(st.st_size, 0, "the first record is on disk at once");
	unlink(w1.path), unlink(w2.path);
	rl_tb_close(&w1), rl_tb_close(&w2);
	rmdir(sub);
	*strrchr(sub, '/') = '\0';
	rmdir(sub);
	rmdir(dir);
	free(sub), free(want), free(dir);
}

Test(tensorboard, a_directory_that_cannot_be_made_names_the_key)
{
	char err[512];
	struct rl_tb_writer w;

	cr_assert_eq(rl_tb_open(&w, "/proc/no/such", 1.0, err, sizeof err), -1);
	cr_assert(strstr(err, "logger.tensorboard.log_dir"), "%s", err);
}
