/* Model files. Loading refuses a broken directory with a message naming the
 * file or tensor. Saving writes the directory transformers wrote, byte for
 * byte (weights in the source's dtype, the same shards and index, the side
 * files copied), so that from_pretrained() reads our checkpoints as its own. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "runtime/model/model.h"
#include "tests/unit/helpers.h"

/* NULL, not a failed assertion, when PATH cannot be read: the caller
 * says which file is missing. */
static char *slurp_if_there(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

struct save_case {
	char model[32];
	size_t shard_bytes; /* what fixture_models.py gave save_pretrained */
};

static struct save_case cases[] = {
    {"llama", 0},            /* fp32, one file */
    {"llama-tied-rope3", 0}, /* bf16, tied: no lm_head.weight */
    {"qwen2", 0},            /* bf16, q/k/v biases */
    {"qwen3", 60000},        /* fp16, six shards and an index ("60KB") */
};

ParameterizedTestParameters(save, same_bytes_as_transformers)
{
	return cr_make_param_array(struct save_case, cases, sizeof cases / sizeof *cases);
}

ParameterizedTest(struct save_case *c, save, same_bytes_as_transformers)
{
	char src[4096], dst[4096], a[8300], b[8300], err[512];
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	struct rl_model *m;
	struct dirent *e;
	int compared = 0;

	snprintf(src, sizeof src, "%s/tests/fixtures/models/%s", top, c->model);
	char *tmp = tmp_dir();
	snprintf(dst, sizeof dst, "%s/out", tmp);
	free(tmp);
	cr_assert_eq(rl_model_load(&m, src, &rl_ops_cpu, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_model_save(m, dst, c->shard_bytes, err, sizeof err), 0, "%s", err);
	rl_model_free(m);

	DIR *d = opendir(src);
	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		size_t la, lb;

		if (e->d_name[0] == '.')
			continue;
		snprintf(a, sizeof a, "%s/%s", src, e->d_name);
		snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
		char *x = slurp_if_there(a, &la), *y = slurp_if_there(b, &lb);
		cr_expect_not_null(y, "%s: not written", b);
		if (x && y) {
			cr_expect(la == lb && memcmp(x, y, la) == 0, "%s differs from %s", b, a);
			compared++;
		}
		free(x);
		free(y);
	}
	closedir(d);
	cr_expect_geq(compared, 3, "only %d files compared", compared);

	/* and nothing more than transformers wrote (no stray temporaries) */
	d = opendir(dst);
	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(a, sizeof a, "%s/%s", src, e->d_name);
		cr_expect_eq(access(a, F_OK), 0, "%s/%s was not in the source", dst, e->d_name);
	}
	closedir(d);
}

/* A copy of the llama fixture with config.json's text edited and the
 * weights file cut to keep_bytes (0: whole). */
static char *broken_copy(const char *from, const char *to, size_t keep_bytes)
{
	char path[4300], *dir = malloc(4096);
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	size_t len;

	char *tmp = tmp_dir();
	snprintf(dir, 4096, "%s/broken", tmp);
	free(tmp);
	cr_assert_eq(mkdir(dir, 0755), 0);
	snprintf(path, sizeof path, "%s/tests/fixtures/models/llama/config.json", top);
	char *cfg = slurp(path, &len);
	cr_assert_not_null(cfg);
	cfg[len] = '\0';
	char *at = strstr(cfg, from);
	cr_assert_not_null(at, "config.json has no %s", from);
	snprintf(path, sizeof path, "%s/config.json", dir);
	FILE *f = fopen(path, "w");
	fprintf(f, "%.*s%s%s", (int)(at - cfg), cfg, to, at + strlen(from));
	fclose(f);
	free(cfg);

	snprintf(path, sizeof path, "%s/tests/fixtures/models/llama/model.safetensors", top);
	char *w = slurp(path, &len);
	cr_assert_not_null(w);
	snprintf(path, sizeof path, "%s/model.safetensors", dir);
	f = fopen(path, "wb");
	fwrite(w, 1, keep_bytes ? keep_bytes : len, f);
	fclose(f);
	free(w);
	return dir;
}

Test(load, mis_shaped_tensor_is_named)
{
	char err[512];
	struct rl_model *m;
	char *dir = broken_copy("\"intermediate_size\": 96", "\"intermediate_size\": 64", 0);

	cr_assert_eq(rl_model_load(&m, dir, &rl_ops_cpu, err, sizeof err), -1);
	cr_expect_null(m);
	cr_expect(strstr(err, "mlp.") && strstr(err, "shape"), "message: %s", err);
	free(dir);
}

Test(load, truncated_weights_name_the_file)
{
	char err[512];
	struct rl_model *m;
	char *dir = broken_copy("\"rms_norm_eps\"", "\"rms_norm_eps\"", 4000);

	cr_assert_eq(rl_model_load(&m, dir, &rl_ops_cpu, err, sizeof err), -1);
	cr_expect(strstr(err, "model.safetensors"), "message: %s", err);
	free(dir);
}

Test(load, unsupported_architecture_is_refused)
{
	char err[512];
	struct rl_model *m;
	char *dir = broken_copy("LlamaForCausalLM", "MistralForCausalLM", 0);

	cr_assert_eq(rl_model_load(&m, dir, &rl_ops_cpu, err, sizeof err), -1);
	cr_expect(strstr(err, "MistralForCausalLM") && strstr(err, "not supported"), "message: %s",
	          err);
	free(dir);
}
