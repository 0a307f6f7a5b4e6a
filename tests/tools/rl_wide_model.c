/* rl_wide_model SRC OUT LAYERS INTERMEDIATE: a Hugging Face model directory
 * OUT shaped like SRC's (its config.json, tokenizer) but with LAYERS layers
 * and an MLP INTERMEDIATE wide, as many key/value heads as attention heads
 * (so that tensor parallelism can split it as far as the heads go), its
 * weights drawn at random and written as safetensors. The memory tests' model: as large as they
 * need, made at test time instead of committed. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime/base/durable.h"
#include "runtime/model/model.h"

static int die(const char *what, const char *why)
{
	fprintf(stderr, "rl_wide_model: %s: %s\n", what, why);
	return 1;
}

int main(int argc, char **argv)
{
	char err[1024], from[4096], to[4096];

	if (argc != 5)
		return die("usage", "rl_wide_model SRC OUT LAYERS INTERMEDIATE");
	long layers = strtol(argv[3], NULL, 10), inter = strtol(argv[4], NULL, 10);
	if (layers < 1 || inter < 1)
		return die("LAYERS and INTERMEDIATE", "must be positive");
	if (mkdir(argv[2], 0755) && errno != EEXIST)
		return die(argv[2], strerror(errno));
	snprintf(from, sizeof from, "%s/config.json", argv[1]);
	snprintf(to, sizeof to, "%s/config.json", argv[2]);
	json_error_t jerr;
	json_t *cfg = json_load_file(from, 0, &jerr);
	if (!cfg)
		return die(from, jerr.text);
	json_object_set_new(cfg, "num_hidden_layers", json_integer(layers));
	json_object_set_new(cfg, "intermediate_size", json_integer(inter));
	json_object_set(cfg, "num_key_value_heads", json_object_get(cfg, "num_attention_heads"));
	if (json_dump_file(cfg, to, JSON_INDENT(2)))
		return die(to, "cannot write");
	json_decref(cfg);
	snprintf(from, sizeof from, "%s/tokenizer.json", argv[1]);
	snprintf(to, sizeof to, "%s/tokenizer.json", argv[2]);
	if (rl_copy_file_durable(from, to, err, sizeof err))
		return die("tokenizer.json", err);

	struct rl_model_config c;
	struct rl_model *m;
	if (rl_model_config_load(&c, argv[2], err, sizeof err) ||
	    rl_model_new_random(&m, &c, argv[2], &rl_ops_cpu, 7, 0.02, err, sizeof err) ||
	    rl_model_save(m, argv[2], 0, err, sizeof err))
		return die(argv[2], err);
	rl_model_free(m);
	return 0;
}
