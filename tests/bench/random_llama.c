#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "runtime/model/model.h"
#include "runtime/model/safetensors.h"
#include "tests/bench/random_llama.h"

uint32_t bench_rng_next(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

int bench_write_random_llama(const char *dir, const char *config_json)
{
	char path[4096], err[512];
	struct rl_model probe = {0};
	FILE *f;

	snprintf(path, sizeof path, "%s/config.json", dir);
	if (!(f = fopen(path, "w")) || fputs(config_json, f) < 0 || fclose(f))
		return -1;
	if (rl_model_config_load(&probe.cfg, dir, err, sizeof err)) {
		fprintf(stderr, "bench: %s\n", err);
		return -1;
	}
	const struct rl_model_config *c = &probe.cfg;
	int64_t d = c->hidden_size, I = c->intermediate_size,
	        kv = (int64_t)c->n_kv_heads * c->head_dim;
	struct {
		const char *fmt;
		int64_t rows, cols;
	} per_layer[] = {
	    {"model.layers.%d.input_layernorm.weight", d, 0},
	    {"model.layers.%d.self_attn.q_proj.weight", d, d},
	    {"model.layers.%d.self_attn.k_proj.weight", kv, d},
	    {"model.layers.%d.self_attn.v_proj.weight", kv, d},
	    {"model.layers.%d.self_attn.o_proj.weight", d, d},
	    {"model.layers.%d.post_attention_layernorm.weight", d, 0},
	    {"model.layers.%d.mlp.gate_proj.weight", I, d},
	    {"model.layers.%d.mlp.up_proj.weight", I, d},
	    {"model.layers.%d.mlp.down_proj.weight", d, I},
	};
	int n_per = (int)(sizeof per_layer / sizeof *per_layer), n = 0;
	int total = 2 + c->n_layers * n_per;
	struct rl_st_source *src = calloc((size_t)total, sizeof *src);
	char(*names)[96] = calloc((size_t)total, sizeof *names);
	uint32_t seed = 12345;
	int rc = -1;

	for (int i = 0; i < total; i++) {
		int64_t rows, cols;

		if (i == 0) {
			snprintf(names[i], sizeof names[i], "model.embed_tokens.weight");
			rows = c->vocab_size, cols = d;
		} else if (i == total - 1) {
			snprintf(names[i], sizeof names[i], "model.norm.weight");
			rows = d, cols = 0;
		} else {
			int l = (i - 1) / n_per, p = (i - 1) % n_per;
			snprintf(names[i], sizeof names[i], per_layer[p].fmt, l);
			rows = per_layer[p].rows, cols = per_layer[p].cols;
		}
		int64_t numel = cols ? rows * cols : rows;
		float *v = malloc((size_t)numel * sizeof *v);
		for (int64_t k = 0; k < numel; k++)
			v[k] =
			    cols
			        ? 0.0346f *
			              ((float)(bench_rng_next(&seed) >> 8) / 16777216.0f - 0.5f) * 2
			        : 1.0f;
		src[n++] = (struct rl_st_source){names[i], RL_F32, cols ? 2 : 1, {rows, cols}, v};
	}
	rc = rl_st_write_dir(dir, src, n, 0, err, sizeof err);
	if (rc)
		fprintf(stderr, "bench: %s\n", err);
	for (int i = 0; i < n; i++)
		free((void *)src[i].data);
	free(src);
	free(names);
	return rc;
}
