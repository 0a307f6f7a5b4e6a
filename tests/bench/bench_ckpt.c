/* Checkpoint throughput beside dd on the same disk, and what an
 * asynchronous save costs training.
 *
 *   bench_ckpt [DIR]      DIR: where to write (default ./bench-ckpt.tmp),
 *                         removed at the end; BENCH_CKPT_MB: the size of the
 *                         shard (default 1024)
 *
 * Save: the writer the trainer's thread runs (rl_ckpt_shard_write: the
 * bytes, their XXH3, fsync) beside `dd conv=fsync` of as many bytes. Load:
 * what a resume does (every tensor filled from the mapping while a thread
 * checks the file against the manifest) beside `dd` reading as many bytes,
 * both with the files evicted from the page cache first. Blocked: `rlrun train`
 * on a random 18M-parameter Llama, saving every other step, with
 * checkpointing.async_save true and false; the `checkpointing` timer of
 * metrics.jsonl is the time the step waited for the save. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/ckpt/manifest.h"
#include "runtime/ckpt/reshard.h"
#include "runtime/ckpt/shard.h"
#include "runtime/ckpt/verify.h"
#include "tests/bench/random_llama.h"
#include "tests/bench/clock.h"

enum { TENSORS = 16, COLS = 4096, REPS = 5 };

/* vocab_size 512: the tokenizer of tests/fixtures/models/llama */
static const char model_json[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\",\n"
    " \"vocab_size\": 512, \"hidden_size\": 512, \"intermediate_size\": 1408,\n"
    " \"num_hidden_layers\": 6, \"num_attention_heads\": 8, \"num_key_value_heads\": 4,\n"
    " \"max_position_embeddings\": 1024, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0,\n"
    " \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"bos_token_id\": 0,\n"
    " \"eos_token_id\": 1, \"torch_dtype\": \"float32\"}\n";

static void die(const char *what, const char *err)
{
	fprintf(stderr, "bench_ckpt: %s: %s\n", what, err);
	exit(1);
}

/* The file's pages out of the page cache, so that the next read is the
 * disk's (clean pages go; the file was fsync'd). */
static void evict(const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		die(path, strerror(errno));
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0)
		die(path, "posix_fadvise(DONTNEED) failed");
	close(fd);
}

static double run_timed(const char *cmd)
{
	fflush(stdout);
	double t0 = bench_now();

	if (system(cmd) != 0)
		die("command failed", cmd);
	return bench_now() - t0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v)
{
	qsort(v, REPS, sizeof *v, cmp_double);
	return v[REPS / 2];
}

struct shard_bench {
	struct rl_ckpt_piece pieces[TENSORS];
	char names[TENSORS][32];
	float *data, *back;
	int64_t rows;
	size_t bytes; /* of the tensors */
};

static void make_pieces(struct shard_bench *b, size_t mb)
{
	uint32_t seed = 7;

	b->rows = (int64_t)(mb << 20) / TENSORS / COLS / (int64_t)sizeof(float);
	size_t per = (size_t)(b->rows * COLS);
	b->bytes = per * TENSORS * sizeof(float);
	b->data = malloc(b->bytes);
	b->back = malloc(b->bytes);
	if (!b->data || !b->back)
		die("memory", "cannot allocate the tensors");
	for (size_t i = 0; i < per * TENSORS; i++)
		b->data[i] = (float)(bench_rng_next(&seed) >> 8) / 16777216.0f;
	for (int t = 0; t < TENSORS; t++) {
		struct rl_ckpt_piece *p = &b->pieces[t];

		memset(p, 0, sizeof *p);
		snprintf(b->names[t], sizeof b->names[t], "model.layers.%d.weight", t);
		snprintf(p->tensor, sizeof p->tensor, "%s", b->names[t]);
		p->kind = RL_CKPT_WEIGHT;
		p->ndim = 2;
		p->global_shape[0] = p->block_shape[0] = b->rows;
		p->global_shape[1] = p->block_shape[1] = COLS;
		p->flat_len = b->rows * COLS;
		p->data = b->data + (size_t)t * per;
	}
}

/* a resume's read: every tensor filled from the mapping while a thread
 * checks the file against the manifest (runtime/train/resume.c) */
static void load(struct shard_bench *b, const char *dir, const struct rl_ckpt_manifest *man)
{
	struct rl_ckpt_shard_set set;
	struct rl_ckpt_verify v;
	char err[1024];
	size_t per = (size_t)(b->rows * COLS);

	rl_ckpt_verify_start(&v, dir, man, 0, 1);
	if (rl_ckpt_shard_set_open(&set, dir, man, err, sizeof err))
		die("open", err);
	for (int t = 0; t < TENSORS; t++) {
		struct rl_ckpt_block want = {
		    b->names[t], 2, {b->rows, COLS}, {0, 0}, {b->rows, COLS}};

		if (rl_ckpt_fill(&set.ix, RL_CKPT_WEIGHT, &want, b->back + (size_t)t * per, err,
		                 sizeof err))
			die("fill", err);
	}
	rl_ckpt_shard_set_close(&set);
	if (rl_ckpt_verify_join(&v, err, sizeof err))
		die("verify", err);
}

static void throughput(const char *dir, size_t mb)
{
	struct shard_bench b;
	char shard_dir[4200], shard[4300], dd_file[4300], cmd[9000], err[1024];
	double save[REPS], dd_write[REPS], loads[REPS], dd_read[REPS];

	make_pieces(&b, mb);
	snprintf(shard_dir, sizeof shard_dir, "%s/step", dir);
	snprintf(shard, sizeof shard, "%s/rank-00000.safetensors", shard_dir);
	snprintf(dd_file, sizeof dd_file, "%s/dd.bin", dir);
	if (mkdir(shard_dir, 0755) != 0 && errno != EEXIST)
		die(shard_dir, strerror(errno));
	/* the disk may still be busy with the last write when the next
	 * begins: who goes first alternates */
	for (int r = 0; r < REPS; r++) {
		struct rl_ckpt_file file = {.name = "rank-00000.safetensors"};
		struct rl_ckpt_manifest man = {
		    .step = 1, .world_size = 1, .files = &file, .n_files = 1};
		size_t dd_mb = b.bytes >> 20;
		double t0;

		for (int turn = 0; turn < 2; turn++) {
			if ((turn + r) % 2 == 0) {
				unlink(shard);
				t0 = bench_now();
				if (rl_ckpt_shard_write(shard, b.pieces, TENSORS, &file.sum, err,
				                        sizeof err))
					die("write", err);
				save[r] = bench_now() - t0;
			} else {
				unlink(dd_file); /* as the shard: a new file, no blocks to free */
				snprintf(cmd, sizeof cmd,
				         "dd if=/dev/zero of='%s' bs=1M count=%zu conv=fsync "
				         "status=none",
				         dd_file, dd_mb);
				dd_write[r] = run_timed(cmd);
			}
		}
		if (rl_ckpt_manifest_write(shard_dir, &man, err, sizeof err))
			die("manifest", err);
		evict(shard);
		evict(dd_file);
		for (int turn = 0; turn < 2; turn++) {
			if ((turn + r) % 2 == 0) {
				t0 = bench_now();
				load(&b, shard_dir, &man);
				loads[r] = bench_now() - t0;
				if (memcmp(b.data, b.back, b.bytes) != 0)
					die("load",
					    "the tensors read back differ from those written");
				memset(b.back, 0, b.bytes);
			} else {
				snprintf(cmd, sizeof cmd,
				         "dd if='%s' of=/dev/null bs=1M status=none", dd_file);
				dd_read[r] = run_timed(cmd);
			}
		}
	}
	/* the shard is the tensors and a header of a few kB: dd moves the
	 * tensors' bytes */
	double mbs = (double)b.bytes / 1048576.0;
	double s = median(save), dw = median(dd_write), l = median(loads), dr = median(dd_read);
	printf("checkpoint shard of %.0f MiB in %s (median of %d)\n", mbs, dir, REPS);
	printf("%-44s %10s %10s %8s\n", "", "MiB/s", "dd MiB/s", "ratio");
	printf("%-44s %10.0f %10.0f %7.0f%%\n", "save: write + XXH3 + fsync", mbs / s, mbs / dw,
	       100.0 * dw / s);
	printf("%-44s %10.0f %10.0f %7.0f%%\n", "load: fill + XXH3 verify, cold cache", mbs / l,
	       mbs / dr, 100.0 * dr / l);
	free(b.data);
	free(b.back);
}

/* mean of the `checkpointing` timer over the steps that saved */
static double blocked_per_save(const char *log_dir, int period)
{
	char path[8192], line[8192];
	double sum = 0;
	int n = 0;

	snprintf(path, sizeof path, "%s/metrics.jsonl", log_dir);
	FILE *f = fopen(path, "r");
	if (!f)
		die(path, strerror(errno));
	while (fgets(line, sizeof line, f)) {
		const char *s = strstr(line, "\"step\":"), *c = strstr(line, "\"checkpointing\":");
		if (!s || !c)
			continue;
		if (atol(s + 7) % period == 0) {
			sum += strtod(c + 16, NULL);
			n++;
		}
	}
	fclose(f);
	if (!n)
		die(path, "no step that saved");
	return sum / n;
}

static void blocked(const char *dir, const char *rlrun, const char *srcdir)
{
	char model[4200], cmd[16384], log_dir[4300];
	double per[2];
	const int period = 2;

	snprintf(model, sizeof model, "%s/model", dir);
	if (mkdir(model, 0755) != 0 && errno != EEXIST)
		die(model, strerror(errno));
	if (bench_write_random_llama(model, model_json))
		die(model, "cannot write the model");
	snprintf(cmd, sizeof cmd, "cp '%s/tests/fixtures/models/llama/tokenizer.json' '%s/'",
	         srcdir, model);
	run_timed(cmd);
	for (int async = 1; async >= 0; async--) {
		snprintf(log_dir, sizeof log_dir, "%s/run-%d", dir, async);
		snprintf(
		    cmd, sizeof cmd,
		    "'%s' train '%s/etc/examples/grpo-tiny.yaml' policy.model_name='%s' "
		    "grpo.max_num_steps=6 grpo.num_prompts_per_step=4 "
		    "grpo.num_generations_per_prompt=4 policy.train_global_batch_size=16 "
		    "policy.train_micro_batch_size=4 policy.logprob_batch_size=8 "
		    "checkpointing.enabled=true checkpointing.save_period=%d "
		    "checkpointing.keep_top_k=1 checkpointing.async_save=%s "
		    "checkpointing.checkpoint_dir='%s/ck-%d' logger.log_dir='%s' >'%s.log' 2>&1",
		    rlrun, srcdir, model, period, async ? "true" : "false", dir, async, log_dir,
		    log_dir);
		run_timed(cmd);
		per[async] = blocked_per_save(log_dir, period);
	}
	printf("\nrlrun train, random 18M-parameter Llama (a 216 MB checkpoint), a save every %d "
	       "steps\n",
	       period);
	printf("%-44s %10s\n", "", "ms/save");
	printf("%-44s %10.1f\n", "training blocked, async_save: true", 1e3 * per[1]);
	printf("%-44s %10.1f\n", "training blocked, async_save: false", 1e3 * per[0]);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "bench-ckpt.tmp";
	const char *mb = getenv("BENCH_CKPT_MB");
	const char *srcdir = getenv("top_srcdir");
	const char *rlrun = getenv("RLRUN");
	char cmd[4300];

	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		die(dir, strerror(errno));
	throughput(dir, mb ? strtoul(mb, NULL, 10) : 1024);
	blocked(dir, rlrun ? rlrun : "./rlrun", srcdir ? srcdir : ".");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) != 0;
}
