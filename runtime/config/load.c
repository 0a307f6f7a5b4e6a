/* Loading: read FILE, merge its `defaults:` chain under it, apply overrides,
 * resolve references, then validate. The order is the contract: overrides
 * reach inherited keys, references see overridden values, and validation sees
 * the final tree (NeMo-RL's users were bitten by each of these in the wrong
 * order). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/config/internal.h"

enum { MAX_DEFAULTS_DEPTH = 32, MAX_FILE_BYTES = 16 << 20 };

struct load {
	struct rl_ysources src;
	struct rl_diags *diags;
	const char *stack[MAX_DEFAULTS_DEPTH]; /* realpaths of the files being loaded */
	int depth;
};

/* Reads a whole regular file. On error adds a diagnostic at the including
 * position (or against the file itself) and returns NULL. */
static char *read_file(struct load *ld, const char *path, const struct rl_ynode *from, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	const char *why = NULL;
	char *buf = NULL;
	if (fd < 0)
		why = strerror(errno);
	else if (fstat(fd, &st) < 0)
		why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_size > MAX_FILE_BYTES)
		why = "larger than 16 MiB";
	else if (!(buf = malloc((size_t)st.st_size + 1)))
		why = "out of memory";
	else {
		size_t got = 0;
		while (got < (size_t)st.st_size) {
			ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				why = r < 0 ? strerror(errno) : "file shrank while being read";
				break;
			}
			got += (size_t)r;
		}
		*len = got;
		buf[got] = '\0';
	}
	if (fd >= 0)
		close(fd);
	if (!why)
		return buf;
	free(buf);
	if (from)
		rl_diag_add(ld->diags, from->file, from->line, from->col, "defaults",
		            "cannot read %s: %s", path, why);
	else
		rl_diag_add(ld->diags, path, 0, 0, NULL, "cannot read config: %s", why);
	return NULL;
}

/* Deep merge: src's keys win; mappings merge key by key. Consumes src. */
static void merge_into(struct rl_ynode *dst, struct rl_ynode *src)
{
	for (size_t i = 0; i < src->n; i++) {
		struct rl_yentry *e = &src->items[i];
		struct rl_yentry *d = rl_ymap_find(dst, e->key);
		if (d && d->value->kind == RL_Y_MAP && e->value->kind == RL_Y_MAP)
			merge_into(d->value, e->value);
		else
			rl_ymap_set(dst, e->key, e->line, e->col, e->value);
		e->value = NULL;
	}
	rl_ynode_free(src);
}

static struct rl_ynode *load_tree(struct load *ld, const char *name, const char *text, size_t len,
                                  const char *dir, const char *id);

static bool adopt_parent(struct rl_ynode *merged, struct rl_ynode *parent)
{
	if (merged && parent) {
		merge_into(merged, parent);
		return true;
	}
	rl_ynode_free(parent);
	return false;
}

/* A file on disk: its `defaults:` resolve against the directory of its real
 * path, which also identifies it on the cycle-detection stack. */
static struct rl_ynode *load_resolved(struct load *ld, const char *name, const char *text,
                                      size_t len, const char *real)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", real);
	return load_tree(ld, name, text, len, dirname(dir), real);
}

/* Loads one `defaults:` entry, a file name relative to the including file. */
static struct rl_ynode *load_parent(struct load *ld, const struct rl_ynode *entry, const char *dir)
{
	if (entry->kind != RL_Y_SCALAR || rl_yscalar_is_null(entry)) {
		rl_diag_add(ld->diags, entry->file, entry->line, entry->col, "defaults",
		            "expected a file name or a list of file names");
		return NULL;
	}
	char path[PATH_MAX];
	int n = entry->text[0] == '/'
	            ? snprintf(path, sizeof(path), "%s", entry->text)
	            : snprintf(path, sizeof(path), "%s/%s", dir ? dir : ".", entry->text);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		rl_diag_add(ld->diags, entry->file, entry->line, entry->col, "defaults",
		            "path too long");
		return NULL;
	}
	char real[PATH_MAX];
	if (!realpath(path, real)) {
		rl_diag_add(ld->diags, entry->file, entry->line, entry->col, "defaults",
		            "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	for (int i = 0; i < ld->depth; i++) {
		if (strcmp(ld->stack[i], real) != 0)
			continue;
		char chain[2048] = "";
		for (int j = i; j < ld->depth; j++) {
			strncat(chain, ld->stack[j], sizeof(chain) - strlen(chain) - 1);
			strncat(chain, " -> ", sizeof(chain) - strlen(chain) - 1);
		}
		strncat(chain, real, sizeof(chain) - strlen(chain) - 1);
		rl_diag_add(ld->diags, entry->file, entry->line, entry->col, "defaults",
		            "cycle in defaults: %s", chain);
		return NULL;
	}
	if (ld->depth == MAX_DEFAULTS_DEPTH) {
		rl_diag_add(ld->diags, entry->file, entry->line, entry->col, "defaults",
		            "defaults nested deeper than %d files", MAX_DEFAULTS_DEPTH);
		return NULL;
	}
	size_t len = 0;
	char *text = read_file(ld, path, entry, &len);
	if (!text)
		return NULL;
	struct rl_ynode *t = load_resolved(ld, path, text, len, real);
	free(text);
	return t;
}

/* Parses one file and merges its defaults chain underneath it. `id`
 * identifies it on the cycle-detection stack. */
static struct rl_ynode *load_tree(struct load *ld, const char *name, const char *text, size_t len,
                                  const char *dir, const char *id)
{
	struct rl_ynode *root = rl_yaml_parse(&ld->src, name, text, len, ld->diags);
	if (!root)
		return NULL;
	struct rl_ynode *defaults = rl_ymap_take(root, "defaults");
	if (!defaults)
		return root;
	if (rl_yscalar_is_null(defaults)) {
		rl_ynode_free(defaults);
		return root;
	}
	ld->stack[ld->depth++] = rl_ysources_intern(&ld->src, id);
	struct rl_ynode *merged = rl_ynode_new(RL_Y_MAP, root->file, root->line, root->col);
	bool ok = merged != NULL;
	if (defaults->kind == RL_Y_SEQ) {
		/* later entries win over earlier ones, the file itself over all */
		for (size_t i = 0; i < defaults->n; i++) {
			struct rl_ynode *parent = load_parent(ld, defaults->items[i].value, dir);
			ok = adopt_parent(merged, parent) && ok;
		}
	} else {
		struct rl_ynode *parent = load_parent(ld, defaults, dir);
		ok = adopt_parent(merged, parent) && ok;
	}
	ld->depth--;
	rl_ynode_free(defaults);
	if (!ok) {
		rl_ynode_free(merged);
		rl_ynode_free(root);
		return NULL;
	}
	merge_into(merged, root);
	return merged;
}

static int finish(struct load *ld, struct rl_ynode *root, const char *name, char *const *overrides,
                  size_t n_overrides, struct rl_config *cfg)
{
	*cfg = (struct rl_config){0};
	size_t errors_before = ld->diags->n;
	if (root) {
		rl_cfg_expand_merges(root);
		rl_cfg_apply_overrides(&ld->src, root, overrides, n_overrides, ld->diags);
		rl_cfg_resolve_refs(root, ld->diags);
		enum rl_algorithm algorithm;
		rl_cfg_algorithm_translate(root, &algorithm, ld->diags);
		rl_cfg_teacher_translate(root, ld->diags);
		rl_cfg_nemo_translate(root, algorithm, ld->diags);
		rl_cfg_resolve_paths(root);
		struct rl_key_pos *pos = calloc(rl_schema_len, sizeof(*pos));
		if (pos) {
			rl_cfg_from_tree(root, cfg, pos, ld->diags);
			cfg->algorithm = algorithm;
			if (ld->diags->n == errors_before)
				rl_cfg_check_rules(cfg, pos, root->file, ld->diags);
		} else {
			rl_diag_add(ld->diags, name, 0, 0, NULL, "out of memory");
		}
		free(pos);
	}
	int rc = root && ld->diags->n == errors_before ? 0 : -1;
	if (rc == 0)
		cfg->source = strdup(name);
	if (rc == 0 && !cfg->source) {
		rl_diag_add(ld->diags, name, 0, 0, NULL, "out of memory");
		rc = -1;
	}
	if (rc != 0)
		rl_config_free(cfg);
	rl_ynode_free(root);
	rl_ysources_free(&ld->src);
	return rc;
}

int rl_config_load_text(const char *name, const char *text, size_t len, const char *base_dir,
                        char *const *overrides, size_t n_overrides, struct rl_config *cfg,
                        struct rl_diags *diags)
{
	struct load ld = {.diags = diags};
	struct rl_ynode *root = load_tree(&ld, name, text, len, base_dir, name);
	return finish(&ld, root, name, overrides, n_overrides, cfg);
}

int rl_config_load(const char *path, char *const *overrides, size_t n_overrides,
                   struct rl_config *cfg, struct rl_diags *diags)
{
	struct load ld = {.diags = diags};
	size_t len = 0;
	char *text = read_file(&ld, path, NULL, &len);
	char real[PATH_MAX];
	struct rl_ynode *root = NULL;
	if (text && realpath(path, real)) {
		root = load_resolved(&ld, path, text, len, real);
	} else if (text) {
		rl_diag_add(diags, path, 0, 0, NULL, "cannot resolve path: %s", strerror(errno));
	}
	free(text);
	return finish(&ld, root, path, overrides, n_overrides, cfg);
}
