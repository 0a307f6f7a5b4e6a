/* libFuzzer target for the checkpoint readers that take a file as it is on
 * disk: the bytes as a shard file (its pieces then assembled into each
 * tensor's whole, when small, as a resume would), as a manifest.json and as
 * a run_state.json. `make fuzz` runs it; make check feeds it its corpus
 * (fuzz_main.c), so that it keeps building. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/ckpt/manifest.h"
#include "runtime/ckpt/reshard.h"
#include "runtime/ckpt/run_state.h"
#include "runtime/ckpt/shard.h"

static char dir[64];

static void remove_dir(void)
{
	rmdir(dir);
}

static int write_file(const char *name, const uint8_t *data, size_t size)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (!(f = fopen(path, "wb")))
		return -1;
	size_t put = size ? fwrite(data, 1, size, f) : 0;
	return fclose(f) || put != size ? -1 : 0;
}

/* Every tensor of every kind, assembled whole from the pieces. */
static void fill_all(const struct rl_ckpt_shard *s)
{
	struct rl_ckpt_index ix;
	char err[512];

	if (rl_ckpt_index_build(&ix, s, 1, err, sizeof err))
		return;
	for (int i = 0; i < ix.n; i++) {
		const struct rl_ckpt_piece *p = ix.pieces[i];
		struct rl_ckpt_block b = {.tensor = p->tensor, .ndim = p->ndim};
		int64_t numel = 1;

		for (int d = 0; d < p->ndim; d++) {
			b.global_shape[d] = b.shape[d] = p->global_shape[d];
			numel *= p->global_shape[d]; /* each at most 2^31: no overflow */
		}
		if (numel > (1 << 20))
			continue;
		float *dst = calloc((size_t)numel, sizeof *dst);
		if (dst)
			rl_ckpt_fill(&ix, p->kind, &b, dst, err, sizeof err);
		free(dst);
	}
	rl_ckpt_index_free(&ix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rl_ckpt_shard s;
	struct rl_ckpt_manifest m;
	struct rl_ckpt_run_state st;
	char err[1024], path[128];

	if (!dir[0]) {
		snprintf(dir, sizeof dir, "/tmp/fuzz-ckpt-XXXXXX");
		if (!mkdtemp(dir))
			abort();
		atexit(remove_dir);
	}
	snprintf(path, sizeof path, "%s/rank-00000.safetensors", dir);
	if (write_file("rank-00000.safetensors", data, size) == 0 &&
	    rl_ckpt_shard_open(&s, path, err, sizeof err) == 0) {
		fill_all(&s);
		rl_ckpt_shard_close(&s);
	}
	unlink(path);
	if (write_file(RL_CKPT_MANIFEST, data, size) == 0 &&
	    rl_ckpt_manifest_read(dir, &m, err, sizeof err) == 0)
		rl_ckpt_manifest_free(&m);
	snprintf(path, sizeof path, "%s/%s", dir, RL_CKPT_MANIFEST);
	unlink(path);
	if (rl_ckpt_run_state_parse(&st, (const char *)data, size, "fuzz/run_state.json", err,
	                            sizeof err) == 0)
		json_decref(st.metrics);
	return 0;
}
