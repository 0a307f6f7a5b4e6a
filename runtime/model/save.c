#define _GNU_SOURCE
/* Saving a model as a Hugging Face directory: the weights in the dtype
 * m->cfg.torch_dtype names (the source's config.json's, unless the caller
 * changed it), beside the source's own config, tokenizer and generation
 * files, so that transformers loads the result unchanged. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/base/durable.h"
#include "runtime/model/model.h"
#include "runtime/model/safetensors.h"

/* Copied when present; config.json must be. */
static const char *const side_files[] = {
    "config.json",           "generation_config.json",  "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", NULL,
};

/* The source's config.json, its dtype key (transformers 5's "dtype" or the
 * older "torch_dtype", whichever it has) naming the weights written. The
 * file is copied byte for byte when it already does. */
static int write_config(const struct rl_model *m, const char *from, const char *to, char *err,
                        size_t errlen)
{
	json_error_t jerr;
	json_t *root = json_load_file(from, 0, &jerr);
	const char *want = rl_dtype_torch_name(m->cfg.torch_dtype);
	int rc = -1;

	if (!root) {
		snprintf(err, errlen, "%s:%d: %s", from, jerr.line, jerr.text);
		return -1;
	}
	const char *key = json_object_get(root, "dtype") ? "dtype" : "torch_dtype";
	const char *have = json_string_value(json_object_get(root, key));
	if (have ? strcmp(have, want) == 0 : m->cfg.torch_dtype == RL_F32) {
		json_decref(root);
		return rl_copy_file_durable(from, to, err, errlen);
	}
	char *text = NULL;
	if (json_object_set_new(root, key, json_string(want)) ||
	    !(text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER))) {
		snprintf(err, errlen, "%s: out of memory", to);
		goto out;
	}
	size_t n = strlen(text);
	text[n] = '\n'; /* json_dumps leaves room for its NUL: the file ends in a newline */
	rc = rl_write_file_durable(to, text, n + 1, err, errlen);
out:
	free(text);
	json_decref(root);
	return rc;
}

int rl_model_save(const struct rl_model *m, const char *dir, size_t max_shard_bytes, char *err,
                  size_t errlen)
{
	struct rl_st_source *src = calloc((size_t)m->n_params, sizeof *src);
	const float *host = NULL;
	int n = 0, rc = -1;

	if (!src) {
		snprintf(err, errlen, "%s: out of memory", dir);
		return -1;
	}
	if (mkdir(dir, 0755) && errno != EEXIST) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (!(host = rl_model_host_weights(m))) {
		snprintf(err, errlen, "%s: cannot stage the weights in host memory", dir);
		goto out;
	}
	for (int i = 0; i < m->n_params; i++) {
		const struct rl_param *p = &m->params[i];

		src[n].name = p->name;
		src[n].dtype = m->cfg.torch_dtype;
		src[n].ndim = p->ndim;
		src[n].shape[0] = p->shape[0];
		src[n].shape[1] = p->shape[1];
		src[n].data = host + p->offset;
		n++;
	}
	if (rl_st_write_dir(dir, src, n, max_shard_bytes, err, errlen))
		goto out;
	for (int i = 0; side_files[i]; i++) {
		char from[4200], to[4200];

		if ((size_t)snprintf(from, sizeof from, "%s/%s", m->dir, side_files[i]) >=
		        sizeof from ||
		    (size_t)snprintf(to, sizeof to, "%s/%s", dir, side_files[i]) >= sizeof to) {
			snprintf(err, errlen, "%s: path too long", dir);
			goto out;
		}
		if (i > 0 && access(from, F_OK))
			continue;
		if (i == 0 ? write_config(m, from, to, err, errlen)
		           : strcmp(from, to) && rl_copy_file_durable(from, to, err, errlen))
			goto out;
	}
	rc = 0;
out:
	if (host)
		rl_model_host_weights_release(m, host);
	free(src);
	return rc;
}
