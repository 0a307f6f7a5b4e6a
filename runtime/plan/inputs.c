#define _GNU_SOURCE
/* The run's input files, readable where its tasks run: see inputs.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/model/builtin_files.h"
#include "runtime/plan/inputs.h"

/* path opens for reading as a regular file; else err names key and path */
static int readable(const char *key, const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;

	if (fd < 0) {
		snprintf(err, errlen, "%s: %s: %s", key, path, strerror(errno));
		return -1;
	}
	int rc = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? 0 : -1;
	close(fd);
	if (rc)
		snprintf(err, errlen, "%s: %s: not a regular file", key, path);
	return rc;
}

/* FILE in the directory name stands for (a hub name through the cache) */
static int model_file(const char *key, const char *name, const char *file,
                      const struct rl_hub_env *hub, char *err, size_t errlen)
{
	if (rl_builtin_is(name))
		return 0;
	char *dir = rl_hub_resolve(name, key, hub, err, errlen), *path = NULL;
	if (!dir)
		return -1;
	int rc = asprintf(&path, "%s/%s", dir, file) < 0 ? -1 : 0;
	free(dir);
	if (rc)
		snprintf(err, errlen, "%s: out of memory", key);
	else
		rc = readable(key, path, err, errlen);
	free(path);
	return rc;
}

int rl_plan_check_inputs(const struct rl_config *cfg, const struct rl_hub_env *hub, char *err,
                         size_t errlen)
{
	const struct rl_cfg_policy *p = &cfg->policy;
	const struct rl_cfg_data *d = &cfg->data;
	const char *tok = p->tokenizer_name ? p->tokenizer_name : p->model_name;
	bool same = p->model_name && strcmp(tok, p->model_name) == 0;

	if (!p->model_name) {
		snprintf(err, errlen, "policy.model_name: not set");
		return -1;
	}
	if (model_file("policy.model_name", p->model_name, "config.json", hub, err, errlen) ||
	    model_file(same ? "policy.model_name" : "policy.tokenizer.name", tok, "tokenizer.json",
	               hub, err, errlen))
		return -1;
	const struct {
		const char *key, *path;
	} files[] = {
	    {"data.train.path", d->train_path},
	    {"data.validation.path", d->validation_path},
	    {"data.prompt_file", d->prompt_file},
	    {"data.system_prompt_file", d->system_prompt_file},
	};
	for (size_t i = 0; i < sizeof files / sizeof *files; i++)
		if (files[i].path && readable(files[i].key, files[i].path, err, errlen))
			return -1;
	return 0;
}
