/* Relative paths in a config name files beside the config, wherever the
 * command runs (under the Slurm plugin, tasks run in srun's directory):
 * the input files a config names are resolved against the directory of the
 * file each was written in, as `defaults:` are; a path given as a KEY=VALUE
 * override, against the working directory. policy.model_name and
 * policy.tokenizer.name are resolved only where that path exists beside
 * the config: otherwise they may be Hugging Face hub names (Qwen/Qwen3-8B),
 * left as written. env.NAME.command resolves its program, the first word,
 * when it has a slash (./score.py, rewards/score.sh --strict), and
 * policy.tokenizer.chat_template when it names a .jinja file. Output
 * directories (checkpointing.checkpoint_dir, logger.log_dir) stay relative
 * to the working directory, as in NeMo-RL. Runs after references are
 * resolved, so a path built with ${...} resolves against the file of the
 * key that holds it. */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/config/internal.h"

/* JINJA: a path only when it ends in .jinja (else the template's own text) */
enum how { ALWAYS, IF_EXISTS, PROGRAM, JINJA };

static const struct {
	const char *path; /* `*` matches one name */
	enum how how;
} path_keys[] = {
    {"data.train.path", ALWAYS},      {"data.validation.path", ALWAYS},
    {"data.prompt_file", ALWAYS},     {"data.system_prompt_file", ALWAYS},
    {"policy.model_name", IF_EXISTS}, {"policy.tokenizer.name", IF_EXISTS},
    {"env.*.command", PROGRAM},       {"policy.tokenizer.chat_template", JINJA},
};

/* The absolute directory relative paths of `file` are read against, or
 * NULL where the node did not come from a file on disk (the built-in
 * config, a text loaded under a made-up name). */
static char *base_dir(const char *file)
{
	if (!file)
		return NULL;
	if (strcmp(file, "<command line>") == 0)
		return getcwd(NULL, 0);
	struct stat st;
	char real[PATH_MAX];
	if (stat(file, &st) != 0 || !S_ISREG(st.st_mode) || !realpath(file, real))
		return NULL;
	return strdup(dirname(real));
}

/* Characters a shell reads as themselves. */
static bool shell_plain(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strchr(
		        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./+-=:,@%",
		        s[i]))
			return false;
	return true;
}

static void resolve(struct rl_ynode *v, enum how how)
{
	if (v->kind != RL_Y_SCALAR || rl_yscalar_is_null(v) || !*v->text)
		return;
	const char *t = v->text;
	size_t n = strlen(t);
	if (how == JINJA && (n <= 6 || strcmp(t + n - 6, ".jinja") != 0))
		return;
	size_t word = how == PROGRAM ? strcspn(t, " \t") : strlen(t);
	if (t[0] == '/' || (how == PROGRAM && !memchr(t, '/', word)) ||
	    (how == IF_EXISTS && strncmp(t, "builtin:", 8) == 0))
		return;
	char *dir = base_dir(v->file);
	if (!dir)
		return;
	while (t[0] == '.' && t[1] == '/') {
		t += 2;
		word -= how == PROGRAM ? 2 : 0;
	}
	if (how != PROGRAM)
		word = strlen(t);
	char *joined = NULL;
	if (how == PROGRAM) {
		bool plain = shell_plain(dir, strlen(dir));
		/* the program as one shell word; its arguments as written */
		if (asprintf(&joined, "%s%s/%.*s%s%s", plain ? "" : "'", dir, (int)word, t,
		             plain ? "" : "'", t + word) < 0)
			joined = NULL;
	} else if (asprintf(&joined, "%s/%s", dir, t) < 0) {
		joined = NULL;
	}
	free(dir);
	if (!joined)
		return;
	if (how == IF_EXISTS && access(joined, F_OK) != 0) {
		free(joined);
		return;
	}
	free(v->text);
	v->text = joined;
	v->plain = false; /* a path is a string */
}

/* Visits the nodes at `pattern` below map, `rest` being what is left of it. */
static void visit(struct rl_ynode *map, const char *rest, enum how how)
{
	if (!map || map->kind != RL_Y_MAP)
		return;
	size_t len = strcspn(rest, ".");
	bool last = rest[len] == '\0';
	for (size_t i = 0; i < map->n; i++) {
		struct rl_yentry *e = &map->items[i];
		bool match = (len == 1 && rest[0] == '*') ||
		             (strlen(e->key) == len && strncmp(e->key, rest, len) == 0);
		if (!match)
			continue;
		if (last)
			resolve(e->value, how);
		else
			visit(e->value, rest + len + 1, how);
	}
}

void rl_cfg_resolve_paths(struct rl_ynode *root)
{
	for (size_t i = 0; i < sizeof(path_keys) / sizeof(path_keys[0]); i++)
		visit(root, path_keys[i].path, path_keys[i].how);
}
