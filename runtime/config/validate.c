/* The tree, checked key by key against the schema, into struct rl_config.
 * Defaults are stored first, from the same table, through the same code. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/config/internal.h"
#include "runtime/config/scalar.h"

static void *field(void *base, const struct rl_key *k)
{
	return (char *)base + k->offset;
}

static void bad(struct rl_diags *d, const struct rl_ynode *v, const char *path, const char *what)
{
	if (v->kind == RL_Y_SCALAR)
		rl_diag_add(d, v->file, v->line, v->col, path, "expected %s, got %s%s%s", what,
		            v->plain ? "" : "\"", v->text, v->plain ? "" : "\"");
	else
		rl_diag_add(d, v->file, v->line, v->col, path, "expected %s, got a %s", what,
		            v->kind == RL_Y_MAP ? "mapping" : "list");
}

static bool in_range(const struct rl_key *k, double x)
{
	if (k->flags & RL_K_MIN_OPEN ? !(x > k->min) : !(x >= k->min))
		return false;
	return x <= k->max;
}

static void range_error(struct rl_diags *d, const struct rl_ynode *v, const char *path,
                        const struct rl_key *k)
{
	char range[80];
	rl_key_range_text(k, range, sizeof(range));
	rl_diag_add(d, v->file, v->line, v->col, path, "%s is out of range: expected a value in %s",
	            v->text, range);
}

static bool read_int(const struct rl_key *k, const struct rl_ynode *v, const char *path,
                     int64_t *out, struct rl_diags *d)
{
	/* *out changes only for a valid value: later code may read the field */
	int64_t x;
	if (v->kind != RL_Y_SCALAR || !v->plain || !rl_scalar_int(v->text, &x)) {
		bad(d, v, path, "an integer");
		return false;
	}
	if (!in_range(k, (double)x)) {
		range_error(d, v, path, k);
		return false;
	}
	*out = x;
	return true;
}

static bool read_float(const struct rl_key *k, const struct rl_ynode *v, const char *path,
                       double *out, struct rl_diags *d)
{
	double x;
	if (v->kind != RL_Y_SCALAR || !v->plain || !rl_scalar_float(v->text, &x)) {
		bad(d, v, path, "a number");
		return false;
	}
	if (!in_range(k, x)) {
		range_error(d, v, path, k);
		return false;
	}
	*out = x;
	return true;
}

static bool choice_ok(const char *choices, const char *s)
{
	size_t n = strlen(s);
	for (const char *c = choices; c; c = strchr(c, '|')) {
		if (*c == '|')
			c++;
		if (strncmp(c, s, n) == 0 && (c[n] == '|' || c[n] == '\0'))
			return true;
	}
	return false;
}

static bool read_string(const struct rl_key *k, const struct rl_ynode *v, const char *path,
                        char **out, struct rl_diags *d)
{
	if (rl_yscalar_is_null(v) && (k->flags & RL_K_NULLABLE)) {
		free(*out);
		*out = NULL;
		return true;
	}
	if (v->kind != RL_Y_SCALAR || rl_yscalar_is_null(v)) {
		bad(d, v, path, k->type == RL_T_ENUM ? "one of the words below" : "a string");
		if (k->type == RL_T_ENUM)
			rl_diag_add(d, v->file, v->line, v->col, path, "allowed: %s", k->choices);
		return false;
	}
	if (k->type == RL_T_ENUM && !choice_ok(k->choices, v->text)) {
		rl_diag_add(d, v->file, v->line, v->col, path, "expected one of %s, got %s",
		            k->choices, v->text);
		return false;
	}
	char *s = strdup(v->text);
	if (!s)
		return false;
	free(*out);
	*out = s;
	return true;
}

/* Lists: null reads as the empty list where the key allows any length. */
static bool read_list(const struct rl_key *k, const struct rl_ynode *v, const char *path, void *dst,
                      struct rl_diags *d)
{
	bool is_null = rl_yscalar_is_null(v);
	if (!is_null && v->kind != RL_Y_SEQ) {
		bad(d, v, path, "a list");
		return false;
	}
	size_t n = is_null ? 0 : v->n;
	if (k->list_len && n != k->list_len) {
		rl_diag_add(d, v->file, v->line, v->col, path,
		            "expected a list of %zu numbers, got %zu", k->list_len, n);
		return false;
	}
	bool ok = true;
	if (k->type == RL_T_STRING_LIST) {
		struct rl_str_list *l = dst, nl = {0};
		nl.v = calloc(n ? n : 1, sizeof(char *));
		for (size_t i = 0; nl.v && i < n; i++) {
			const struct rl_ynode *e = v->items[i].value;
			if (e->kind != RL_Y_SCALAR || rl_yscalar_is_null(e)) {
				bad(d, e, path, "a string");
				ok = false;
			} else if ((nl.v[nl.n] = strdup(e->text))) {
				nl.n++;
			}
		}
		for (size_t i = 0; i < l->n; i++)
			free(l->v[i]);
		free(l->v);
		*l = nl;
	} else if (k->type == RL_T_INT_LIST) {
		struct rl_int_list *l = dst;
		int64_t *nv = calloc(n ? n : 1, sizeof(*nv));
		for (size_t i = 0; nv && i < n; i++)
			ok = read_int(k, v->items[i].value, path, &nv[i], d) && ok;
		free(l->v);
		*l = (struct rl_int_list){.n = nv ? n : 0, .v = nv};
	} else {
		struct rl_float_list *l = dst;
		double *nv = calloc(n ? n : 1, sizeof(*nv));
		for (size_t i = 0; nv && i < n; i++)
			ok = read_float(k, v->items[i].value, path, &nv[i], d) && ok;
		free(l->v);
		*l = (struct rl_float_list){.n = nv ? n : 0, .v = nv};
	}
	return ok;
}

/* A YAML value as JSON text: scalars that read as null, a boolean or a
 * number (unquoted) become those, every other scalar a string. */
static void put_json(const struct rl_ynode *v, FILE *f)
{
	if (v->kind == RL_Y_MAP || v->kind == RL_Y_SEQ) {
		fputc(v->kind == RL_Y_MAP ? '{' : '[', f);
		for (size_t i = 0; i < v->n; i++) {
			const struct rl_yentry *e = &v->items[i];
			if (i)
				fputs(", ", f);
			if (v->kind == RL_Y_MAP) {
				struct rl_ynode key = {.kind = RL_Y_SCALAR, .text = e->key};
				put_json(&key, f);
				fputs(": ", f);
			}
			put_json(e->value, f);
		}
		fputc(v->kind == RL_Y_MAP ? '}' : ']', f);
		return;
	}
	bool b;
	int64_t i;
	double x;
	if (v->plain && rl_scalar_null_text(v->text))
		fputs("null", f);
	else if (v->plain && rl_scalar_bool(v->text, &b))
		fputs(b ? "true" : "false", f);
	else if (v->plain && rl_scalar_int(v->text, &i))
		fprintf(f, "%lld", (long long)i);
	else if (v->plain && rl_scalar_float(v->text, &x) && isfinite(x))
		fprintf(f, "%.17g", x);
	else {
		fputc('"', f);
		for (const unsigned char *c = (const unsigned char *)v->text; *c; c++) {
			if (*c == '"' || *c == '\\')
				fprintf(f, "\\%c", *c);
			else if (*c < 0x20)
				fprintf(f, "\\u%04x", *c);
			else
				fputc(*c, f);
		}
		fputc('"', f);
	}
}

static bool read_json_map(const struct rl_ynode *v, const char *path, char **out,
                          struct rl_diags *d)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	if (rl_yscalar_is_null(v)) {
		free(*out);
		*out = NULL;
		return true;
	}
	if (v->kind != RL_Y_MAP) {
		bad(d, v, path, "a mapping or null");
		return false;
	}
	f = open_memstream(&text, &len);
	if (!f)
		return false;
	put_json(v, f);
	if (fclose(f)) {
		free(text);
		return false;
	}
	free(*out);
	*out = text;
	return true;
}

bool rl_cfg_store(const struct rl_key *k, const struct rl_ynode *v, void *base, const char *path,
                  struct rl_diags *d)
{
	void *dst = field(base, k);
	switch (k->type) {
	case RL_T_BOOL: {
		bool b;
		if (v->kind != RL_Y_SCALAR || !v->plain || !rl_scalar_bool(v->text, &b)) {
			bad(d, v, path, "true or false");
			return false;
		}
		*(bool *)dst = b;
		return true;
	}
	case RL_T_INT:
		return read_int(k, v, path, dst, d);
	case RL_T_FLOAT:
		return read_float(k, v, path, dst, d);
	case RL_T_OPT_INT: {
		struct rl_opt_int *o = dst;
		if (rl_yscalar_is_null(v)) {
			*o = (struct rl_opt_int){0};
			return true;
		}
		o->set = read_int(k, v, path, &o->value, d);
		return o->set;
	}
	case RL_T_OPT_FLOAT: {
		struct rl_opt_float *o = dst;
		if (rl_yscalar_is_null(v)) {
			*o = (struct rl_opt_float){0};
			return true;
		}
		o->set = read_float(k, v, path, &o->value, d);
		return o->set;
	}
	case RL_T_STRING:
	case RL_T_ENUM:
		return read_string(k, v, path, dst, d);
	case RL_T_INT_LIST:
	case RL_T_FLOAT_LIST:
	case RL_T_STRING_LIST:
		return read_list(k, v, path, dst, d);
	case RL_T_JSON_MAP:
		return read_json_map(v, path, dst, d);
	case RL_T_SCHEDULERS:
		return rl_cfg_read_schedulers(v, path, dst, d);
	case RL_T_AUTO_SECTION:
	case RL_T_UNSUPPORTED:
		break;
	}
	return false;
}

/* ---- walking the tree ---- */

struct walk {
	const struct rl_ynode *root;
	char *ignored;  /* "a, b, c": switched-off blocks, for one note */
	char *inert;    /* "a, b": NeMo-RL keys that change nothing here */
	size_t unknown; /* unknown keys so far */
	struct rl_config *cfg;
	struct rl_key_pos *pos;
	struct rl_diags *d;
};

/* Stores the table's default of every key of the config (env false) or of
 * one env entry (env true) at base. A default that does not validate is a
 * bug in the table, reported like any error. */
static void store_defaults(void *base, bool env, struct rl_diags *d)
{
	for (size_t i = 0; i < rl_schema_len; i++) {
		const struct rl_key *k = &rl_schema[i];
		if (!k->def || !(k->flags & RL_K_IN_ENV) != !env || k->type == RL_T_UNSUPPORTED ||
		    k->type == RL_T_AUTO_SECTION)
			continue;
		struct rl_ysources src = {0};
		struct rl_ynode *v =
		    rl_yaml_parse_value(&src, "<schema default>", k->def, strlen(k->def), d);
		if (v)
			rl_cfg_store(k, v, base, k->path, d);
		rl_ynode_free(v);
		rl_ysources_free(&src);
	}
}

/* The entry of env.NAME. The walk visits env.NAME once (a mapping's keys
 * are unique), creating it (`fresh`), and its keys right after: looking at
 * the newest entry first keeps a config of many envs linear. */
static struct rl_cfg_env *env_entry(struct rl_config *cfg, const char *name, bool fresh,
                                    struct rl_diags *d)
{
	if (cfg->n_env && strcmp(cfg->env[cfg->n_env - 1].name, name) == 0)
		return &cfg->env[cfg->n_env - 1];
	const struct rl_cfg_env *found = fresh ? NULL : rl_config_env(cfg, name);
	if (found)
		return (struct rl_cfg_env *)found; /* cfg is ours to change */
	struct rl_cfg_env *v = cfg->env;
	if ((cfg->n_env & (cfg->n_env - 1)) == 0) {
		/* capacity doubles at each power of two */
		v = realloc(cfg->env, (cfg->n_env ? 2 * cfg->n_env : 1) * sizeof(*v));
		if (!v)
			return NULL;
	}
	cfg->env = v;
	struct rl_cfg_env *e = &v[cfg->n_env];
	*e = (struct rl_cfg_env){.name = strdup(name)};
	if (!e->name)
		return NULL;
	cfg->n_env++;
	/* an env starts from the table's defaults, like the rest of the config */
	store_defaults(e, true, d);
	return e;
}

static bool matches_accept(const struct rl_key *k, const struct rl_ynode *v)
{
	if (!k->accept)
		return false;
	if (strcmp(k->accept, "*") == 0)
		return true;
	if (strcmp(k->accept, "{}") == 0)
		return (v->kind == RL_Y_MAP && v->n == 0) || rl_yscalar_is_null(v);
	if (strcmp(k->accept, "null") == 0)
		return rl_yscalar_is_null(v);
	if (v->kind != RL_Y_SCALAR || !v->plain)
		return false;
	/* the same value in another spelling: 0.0 for 0, False for false */
	double x, y;
	bool p, q;
	if (rl_scalar_float(v->text, &x) && rl_scalar_float(k->accept, &y))
		return x == y;
	if (rl_scalar_bool(v->text, &p) && rl_scalar_bool(k->accept, &q))
		return p == q;
	return strcmp(v->text, k->accept) == 0;
}

/* The env name in "env.NAME" or "env.NAME.key", or NULL. */
static char *env_name(const char *path)
{
	if (strncmp(path, "env.", 4) != 0)
		return NULL;
	return strndup(path + 4, strcspn(path + 4, "."));
}

static void walk_map(struct walk *w, const struct rl_ynode *map, const char *prefix);

/* A block that NeMo-RL switches with a boolean is off when that boolean is
 * false or absent (NeMo-RL's default), or when the block is empty. */
static bool switched_off(const struct walk *w, const char *path, const struct rl_ynode *v)
{
	const char *sw = rl_schema_switch(path);
	if (!sw)
		return false;
	if (rl_yscalar_is_null(v) || (v->kind == RL_Y_MAP && v->n == 0))
		return true;
	const struct rl_yentry *e;
	if (strchr(sw, '.'))
		e = rl_ytree_find(w->root, sw);
	else if (v->kind == RL_Y_MAP)
		e = rl_ytree_find(v, sw);
	else
		return false;
	const struct rl_ynode *flag = e ? e->value : NULL;
	bool on = false;
	if (!flag || rl_yscalar_is_null(flag))
		return true;
	return flag->kind == RL_Y_SCALAR && flag->plain && rl_scalar_bool(flag->text, &on) && !on;
}

static void list_add(char **list, const char *path)
{
	char *more = NULL;
	if (asprintf(&more, "%s%s%s", *list ? *list : "", *list ? ", " : "", path) < 0)
		return;
	free(*list);
	*list = more;
}

static void visit(struct walk *w, const struct rl_yentry *e, const char *path)
{
	const struct rl_ynode *v = e->value;
	if (v->reported)
		return;
	if (strcmp(path, "defaults") == 0) {
		rl_diag_add(w->d, v->file, e->line, e->col, path,
		            "defaults can only be given in a file, not as an override");
		return;
	}
	const struct rl_key *k = rl_schema_find(path);
	if ((!k || k->type == RL_T_UNSUPPORTED) && switched_off(w, path, v)) {
		list_add(&w->ignored, path);
		return;
	}
	if (!k) {
		if (rl_schema_is_section(path)) {
			char *env = env_name(path);
			if (env && !strchr(path + 4, '.') && !env_entry(w->cfg, env, true, w->d))
				rl_diag_add(w->d, v->file, e->line, e->col, path, "out of memory");
			free(env);
			if (v->kind == RL_Y_MAP)
				walk_map(w, v, path);
			else if (!rl_yscalar_is_null(v))
				bad(w->d, v, path, "a mapping of keys");
			return;
		}
		/* a suggestion compares against every key: past the errors anyone
		 * reads, a huge broken file would spend its time there */
		char near[256];
		if (++w->unknown <= 4 * RL_DIAGS_PRINT_MAX &&
		    rl_schema_suggest(path, near, sizeof(near)))
			rl_diag_add(w->d, v->file, e->line, e->col, path,
			            "unknown key; did you mean %s?", near);
		else
			rl_diag_add(w->d, v->file, e->line, e->col, path, "unknown key");
		return;
	}
	if (k->type == RL_T_UNSUPPORTED) {
		if (!matches_accept(k, v))
			rl_diag_add(w->d, v->file, e->line, e->col, path, "not supported yet: %s",
			            k->doc);
		else if (strcmp(k->accept, "*") == 0)
			list_add(&w->inert, path);
		return;
	}
	size_t idx = (size_t)(k - rl_schema);
	w->pos[idx] = (struct rl_key_pos){.file = v->file, .line = e->line, .col = e->col};
	if (k->type == RL_T_AUTO_SECTION) {
		bool *autoplan = field(w->cfg, k);
		if (v->kind == RL_Y_SCALAR && v->plain && strcmp(v->text, "auto") == 0) {
			*autoplan = true;
		} else if (v->kind == RL_Y_MAP) {
			*autoplan = false;
			walk_map(w, v, path);
		} else if (!rl_yscalar_is_null(v)) {
			bad(w->d, v, path, "`auto` or a mapping of sizes");
		}
		return;
	}
	void *base = w->cfg;
	if (k->flags & RL_K_IN_ENV) {
		char *env = env_name(path);
		base = env ? env_entry(w->cfg, env, false, w->d) : NULL;
		free(env);
		if (!base) {
			rl_diag_add(w->d, v->file, e->line, e->col, path, "out of memory");
			return;
		}
	}
	rl_cfg_store(k, v, base, path, w->d);
}

static void walk_map(struct walk *w, const struct rl_ynode *map, const char *prefix)
{
	for (size_t i = 0; i < map->n; i++) {
		const struct rl_yentry *e = &map->items[i];
		char *path = NULL;
		if (asprintf(&path, "%s%s%s", prefix, *prefix ? "." : "", e->key) < 0)
			return;
		visit(w, e, path);
		free(path);
	}
}

/* Where a missing key should have been: its innermost section present in
 * the tree, else the top of the file. */
static struct rl_key_pos section_position(const struct rl_ynode *root, const char *path)
{
	struct rl_key_pos at = {.file = root->file, .line = 1, .col = 1};
	const struct rl_ynode *map = root;
	const char *part = path;
	for (const char *dot; (dot = strchr(part, '.')); part = dot + 1) {
		char name[128];
		size_t n = (size_t)(dot - part);
		if (n >= sizeof(name))
			break;
		memcpy(name, part, n);
		name[n] = '\0';
		const struct rl_yentry *e = rl_ymap_find(map, name);
		if (!e || e->value->kind != RL_Y_MAP)
			break;
		at = (struct rl_key_pos){.file = e->value->file, .line = e->line, .col = e->col};
		map = e->value;
	}
	return at;
}

/* Keys whose null default means "derived from other keys". */
static void derive(struct rl_config *cfg, struct rl_diags *d)
{
	struct rl_cfg_policy *p = &cfg->policy;
	if (!p->tokenizer_name && p->model_name && !(p->tokenizer_name = strdup(p->model_name)))
		rl_diag_add(d, cfg->source, 0, 0, NULL, "out of memory");
	struct rl_opt_int *derived[] = {
	    &p->generation.max_new_tokens, &cfg->data.max_input_seq_length,
	    &p->sequence_packing.train_mb_tokens, &p->sequence_packing.logprob_mb_tokens};
	int64_t values[] = {p->max_total_sequence_length, p->max_total_sequence_length,
	                    p->max_total_sequence_length * p->train_micro_batch_size,
	                    p->max_total_sequence_length * p->logprob_batch_size};
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		if (!derived[i]->set)
			*derived[i] = (struct rl_opt_int){.set = true, .value = values[i]};
}

void rl_cfg_from_tree(const struct rl_ynode *root, struct rl_config *cfg, struct rl_key_pos *pos,
                      struct rl_diags *diags)
{
	size_t errors_before = diags->n;
	store_defaults(cfg, false, diags);
	struct walk w = {.root = root, .cfg = cfg, .pos = pos, .d = diags};
	walk_map(&w, root, "");
	if (w.ignored)
		rl_note_add(diags, "ignored (switched off): %s", w.ignored);
	free(w.ignored);
	if (w.inert)
		rl_note_add(diags, "no effect here: %s", w.inert);
	free(w.inert);
	for (size_t i = 0; i < rl_schema_len; i++) {
		const struct rl_key *k = &rl_schema[i];
		if (!(k->flags & RL_K_REQUIRED) || pos[i].file)
			continue;
		struct rl_key_pos at = section_position(root, k->path);
		rl_diag_add(diags, at.file, at.line, at.col, k->path, "missing required key (%s)",
		            k->doc);
	}
	/* derived values are computed from a config known to be valid */
	if (diags->n == errors_before)
		derive(cfg, diags);
}
