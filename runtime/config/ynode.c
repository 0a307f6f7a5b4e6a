#define _GNU_SOURCE
#include "runtime/config/ynode.h"

#include "runtime/config/scalar.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Bounds that keep a hostile or broken file from exhausting the stack or
 * memory: configs are a few hundred nodes deep and wide at most. */
enum { MAX_DEPTH = 64, MAX_NODES = 200000 };

const char *rl_ysources_intern(struct rl_ysources *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], name) == 0)
			return s->v[i];
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		char **v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return "<out of memory>";
		s->v = v;
		s->cap = cap;
	}
	char *copy = strdup(name);
	if (!copy)
		return "<out of memory>";
	s->v[s->n++] = copy;
	return copy;
}

void rl_ysources_free(struct rl_ysources *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	*s = (struct rl_ysources){0};
}

struct rl_ynode *rl_ynode_new(enum rl_ykind kind, const char *file, int line, int col)
{
	struct rl_ynode *n = calloc(1, sizeof(*n));
	if (n) {
		n->kind = kind;
		n->file = file;
		n->line = line;
		n->col = col;
	}
	return n;
}

void rl_ynode_free(struct rl_ynode *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++) {
		free(n->items[i].key);
		rl_ynode_free(n->items[i].value);
	}
	free(n->items);
	free(n->index);
	free(n->text);
	free(n);
}

static bool push_item(struct rl_ynode *n, char *key, int line, int col, struct rl_ynode *value)
{
	if (n->n == n->cap) {
		size_t cap = n->cap ? 2 * n->cap : 4;
		struct rl_yentry *v = realloc(n->items, cap * sizeof(*v));
		if (!v)
			return false;
		n->items = v;
		n->cap = cap;
	}
	n->items[n->n++] = (struct rl_yentry){.key = key, .line = line, .col = col, .value = value};
	return true;
}

struct rl_ynode *rl_ynode_copy(const struct rl_ynode *src)
{
	struct rl_ynode *n = rl_ynode_new(src->kind, src->file, src->line, src->col);
	if (!n)
		return NULL;
	n->plain = src->plain;
	n->reported = src->reported;
	n->resolved = src->resolved;
	if (src->text && !(n->text = strdup(src->text)))
		goto fail;
	for (size_t i = 0; i < src->n; i++) {
		const struct rl_yentry *e = &src->items[i];
		char *key = e->key ? strdup(e->key) : NULL;
		struct rl_ynode *v = rl_ynode_copy(e->value);
		if ((e->key && !key) || !v || !push_item(n, key, e->line, e->col, v)) {
			free(key);
			rl_ynode_free(v);
			goto fail;
		}
	}
	return n;
fail:
	rl_ynode_free(n);
	return NULL;
}

/* Small mappings are searched in order; the index starts at this size. */
enum { INDEX_FROM = 16 };

static size_t hash_key(const char *s)
{
	size_t h = 1469598103934665603u; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211u;
	return h;
}

static void index_drop(struct rl_ynode *map)
{
	free(map->index);
	map->index = NULL;
	map->index_cap = map->indexed = 0;
}

/* Brings the index up to date with items[0 .. n); false when out of
 * memory (the caller then searches in order). */
static bool index_update(struct rl_ynode *map)
{
	if (map->indexed == map->n && map->index)
		return true;
	if (2 * map->n >= map->index_cap) {
		size_t cap = map->index_cap ? map->index_cap : 64;
		while (2 * map->n >= cap)
			cap *= 2;
		size_t *v = calloc(cap, sizeof(*v));
		if (!v)
			return false;
		free(map->index);
		map->index = v;
		map->index_cap = cap;
		map->indexed = 0;
	}
	for (; map->indexed < map->n; map->indexed++) {
		size_t h = hash_key(map->items[map->indexed].key) & (map->index_cap - 1);
		while (map->index[h])
			h = (h + 1) & (map->index_cap - 1);
		map->index[h] = map->indexed + 1;
	}
	return true;
}

struct rl_yentry *rl_ymap_find(const struct rl_ynode *cmap, const char *key)
{
	if (!cmap || cmap->kind != RL_Y_MAP)
		return NULL;
	/* the index is a cache: finding does not change the mapping */
	struct rl_ynode *map = (struct rl_ynode *)cmap;
	if (map->n >= INDEX_FROM && index_update(map)) {
		for (size_t h = hash_key(key) & (map->index_cap - 1); map->index[h];
		     h = (h + 1) & (map->index_cap - 1))
			if (strcmp(map->items[map->index[h] - 1].key, key) == 0)
				return &map->items[map->index[h] - 1];
		return NULL;
	}
	for (size_t i = 0; i < map->n; i++)
		if (strcmp(map->items[i].key, key) == 0)
			return &map->items[i];
	return NULL;
}

struct rl_yentry *rl_ymap_set(struct rl_ynode *map, const char *key, int line, int col,
                              struct rl_ynode *value)
{
	struct rl_yentry *e = rl_ymap_find(map, key);
	if (e) {
		rl_ynode_free(e->value);
		e->value = value;
		e->line = line;
		e->col = col;
		return e;
	}
	char *k = strdup(key);
	if (!k || !push_item(map, k, line, col, value)) {
		free(k);
		rl_ynode_free(value);
		return NULL;
	}
	return &map->items[map->n - 1];
}

struct rl_ynode *rl_ymap_take(struct rl_ynode *map, const char *key)
{
	struct rl_yentry *e = rl_ymap_find(map, key);
	if (!e)
		return NULL;
	struct rl_ynode *v = e->value;
	free(e->key);
	size_t i = (size_t)(e - map->items);
	memmove(&map->items[i], &map->items[i + 1], (map->n - i - 1) * sizeof(*e));
	map->n--;
	index_drop(map); /* positions moved */
	return v;
}

bool rl_yscalar_is_null(const struct rl_ynode *n)
{
	if (n->kind != RL_Y_SCALAR || !n->plain)
		return false;
	const char *t = n->text;
	return !*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") ||
	       !strcmp(t, "NULL");
}

struct rl_yentry *rl_ytree_find(const struct rl_ynode *root, const char *dotted)
{
	const struct rl_ynode *n = root;
	struct rl_yentry *e = NULL;

	while (n && *dotted) {
		size_t len = strcspn(dotted, ".");
		char *name = strndup(dotted, len);

		e = name ? rl_ymap_find(n, name) : NULL;
		free(name);
		if (!e)
			return NULL;
		n = e->value;
		dotted += len + (dotted[len] == '.');
	}
	return e;
}

bool rl_ynode_same_value(const struct rl_ynode *a, const struct rl_ynode *b)
{
	if (a->kind != b->kind || a->n != b->n)
		return false;
	if (a->kind != RL_Y_SCALAR) {
		for (size_t i = 0; i < a->n; i++)
			if ((a->kind == RL_Y_MAP &&
			     (!b->items[i].key || strcmp(a->items[i].key, b->items[i].key) != 0)) ||
			    !rl_ynode_same_value(a->items[i].value, b->items[i].value))
				return false;
		return true;
	}
	double x, y;
	bool p, q;
	if (a->plain && b->plain && rl_scalar_float(a->text, &x) && rl_scalar_float(b->text, &y))
		return x == y;
	if (a->plain && b->plain && rl_scalar_bool(a->text, &p) && rl_scalar_bool(b->text, &q))
		return p == q;
	if (rl_yscalar_is_null(a) || rl_yscalar_is_null(b))
		return rl_yscalar_is_null(a) && rl_yscalar_is_null(b);
	return strcmp(a->text, b->text) == 0;
}

/* ---- parsing ---- */

struct anchor {
	char *name;
	struct rl_ynode *node; /* borrowed: lives in the tree */
};

struct parse {
	yaml_parser_t parser;
	const char *file;
	struct rl_diags *diags;
	struct anchor *anchors;
	size_t n_anchors, cap_anchors;
	size_t n_nodes;
	bool failed;
};

static void perr(struct parse *p, int line, int col, const char *what)
{
	if (!p->failed)
		rl_diag_add(p->diags, p->file, line, col, NULL, "%s", what);
	p->failed = true;
}

static bool next_event(struct parse *p, yaml_event_t *ev)
{
	if (yaml_parser_parse(&p->parser, ev))
		return true;
	const yaml_mark_t *m = &p->parser.problem_mark;
	char msg[512];
	snprintf(msg, sizeof(msg), "YAML syntax: %s%s%s",
	         p->parser.problem ? p->parser.problem : "malformed document",
	         p->parser.context ? " " : "", p->parser.context ? p->parser.context : "");
	perr(p, (int)m->line + 1, (int)m->column + 1, msg);
	return false;
}

static void remember_anchor(struct parse *p, const yaml_char_t *anchor, struct rl_ynode *n)
{
	if (!anchor)
		return;
	if (p->n_anchors == p->cap_anchors) {
		size_t cap = p->cap_anchors ? 2 * p->cap_anchors : 8;
		struct anchor *v = realloc(p->anchors, cap * sizeof(*v));
		if (!v)
			return;
		p->anchors = v;
		p->cap_anchors = cap;
	}
	char *name = strdup((const char *)anchor);
	if (name)
		p->anchors[p->n_anchors++] = (struct anchor){.name = name, .node = n};
}

static size_t count_nodes(const struct rl_ynode *n)
{
	size_t c = 1;
	for (size_t i = 0; i < n->n; i++)
		c += count_nodes(n->items[i].value);
	return c;
}

static struct rl_ynode *parse_node(struct parse *p, yaml_event_t *ev, int depth);

/* Parses the items of a mapping or sequence until its end event. */
static bool parse_children(struct parse *p, struct rl_ynode *n, int depth)
{
	yaml_event_type_t end =
	    n->kind == RL_Y_MAP ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
	for (;;) {
		yaml_event_t ev;
		if (!next_event(p, &ev))
			return false;
		if (ev.type == end) {
			yaml_event_delete(&ev);
			return true;
		}
		int line = (int)ev.start_mark.line + 1, col = (int)ev.start_mark.column + 1;
		char *key = NULL;
		if (n->kind == RL_Y_MAP) {
			if (ev.type != YAML_SCALAR_EVENT) {
				perr(p, line, col, "a mapping key must be a plain string");
				yaml_event_delete(&ev);
				return false;
			}
			key = strdup((const char *)ev.data.scalar.value);
			yaml_event_delete(&ev);
			if (!key)
				return false;
			if (rl_ymap_find(n, key)) {
				rl_diag_add(p->diags, p->file, line, col, key, "duplicate key");
				p->failed = true;
			}
			if (!next_event(p, &ev)) {
				free(key);
				return false;
			}
		}
		struct rl_ynode *v = parse_node(p, &ev, depth + 1);
		if (!v || !push_item(n, key, line, col, v)) {
			free(key);
			rl_ynode_free(v);
			return false;
		}
	}
}

/* Builds the node that starts with *ev (consumed). */
static struct rl_ynode *parse_node(struct parse *p, yaml_event_t *ev, int depth)
{
	int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
	struct rl_ynode *n = NULL;
	if (depth > MAX_DEPTH || ++p->n_nodes > MAX_NODES) {
		perr(p, line, col,
		     depth > MAX_DEPTH ? "nesting deeper than 64 levels" : "document too large");
		yaml_event_delete(ev);
		return NULL;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		n = rl_ynode_new(RL_Y_SCALAR, p->file, line, col);
		if (n) {
			n->text =
			    strndup((const char *)ev->data.scalar.value, ev->data.scalar.length);
			n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
			if (!n->text) {
				rl_ynode_free(n);
				n = NULL;
			} else if (strlen(n->text) != ev->data.scalar.length) {
				perr(p, line, col, "NUL byte inside a scalar");
			}
			if (n)
				remember_anchor(p, ev->data.scalar.anchor, n);
		}
		yaml_event_delete(ev);
		return n;
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT: {
		bool map = ev->type == YAML_MAPPING_START_EVENT;
		n = rl_ynode_new(map ? RL_Y_MAP : RL_Y_SEQ, p->file, line, col);
		const yaml_char_t *anchor =
		    map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
		if (n)
			remember_anchor(p, anchor, n);
		yaml_event_delete(ev);
		if (!n || !parse_children(p, n, depth)) {
			/* The anchor table may point into n: forget those before freeing. */
			for (size_t i = 0; i < p->n_anchors; i++)
				p->anchors[i].node = NULL;
			rl_ynode_free(n);
			return NULL;
		}
		return n;
	}
	case YAML_ALIAS_EVENT: {
		const char *name = (const char *)ev->data.alias.anchor;
		for (size_t i = p->n_anchors; i-- > 0;) {
			if (strcmp(p->anchors[i].name, name) != 0 || !p->anchors[i].node)
				continue;
			/* Aliases copy: count the copy so that nested aliases cannot
			 * blow up memory exponentially ("billion laughs"). */
			p->n_nodes += count_nodes(p->anchors[i].node);
			if (p->n_nodes > MAX_NODES) {
				perr(p, line, col,
				     "document too large (aliases expand past the limit)");
				yaml_event_delete(ev);
				return NULL;
			}
			n = rl_ynode_copy(p->anchors[i].node);
			if (n) {
				n->line = line;
				n->col = col;
			}
			yaml_event_delete(ev);
			return n;
		}
		perr(p, line, col, "YAML alias to an unknown anchor");
		yaml_event_delete(ev);
		return NULL;
	}
	default:
		perr(p, line, col, "unexpected YAML event");
		yaml_event_delete(ev);
		return NULL;
	}
}

static struct rl_ynode *parse_document(struct rl_ysources *src, const char *file, const char *text,
                                       size_t len, bool mapping_root, struct rl_diags *diags)
{
	struct parse p = {.file = rl_ysources_intern(src, file), .diags = diags};
	struct rl_ynode *root = NULL;
	if (!yaml_parser_initialize(&p.parser)) {
		rl_diag_add(diags, p.file, 0, 0, NULL, "cannot initialise the YAML parser");
		return NULL;
	}
	yaml_parser_set_input_string(&p.parser, (const unsigned char *)text, len);

	yaml_event_t ev;
	bool have_doc = false;
	while (!p.failed && next_event(&p, &ev)) {
		yaml_event_type_t t = ev.type;
		int line = (int)ev.start_mark.line + 1, col = (int)ev.start_mark.column + 1;
		if (t == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (t == YAML_DOCUMENT_START_EVENT && have_doc) {
			perr(&p, line, col, "more than one YAML document in a config file");
			yaml_event_delete(&ev);
			break;
		}
		if (t == YAML_DOCUMENT_START_EVENT)
			have_doc = true;
		if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_START_EVENT ||
		    t == YAML_DOCUMENT_END_EVENT) {
			yaml_event_delete(&ev);
			continue;
		}
		root = parse_node(&p, &ev, 0);
		if (!root)
			break;
		if (!mapping_root)
			continue;
		if (root->kind != RL_Y_MAP && !rl_yscalar_is_null(root)) {
			perr(&p, root->line, root->col, "a config file must be a mapping of keys");
			break;
		}
		if (root->kind != RL_Y_MAP) {
			rl_ynode_free(root);
			root = rl_ynode_new(RL_Y_MAP, p.file, line, col);
		}
	}
	if (!p.failed && !root)
		root = mapping_root ? rl_ynode_new(RL_Y_MAP, p.file, 1, 1) : NULL;
	if (p.failed) {
		rl_ynode_free(root);
		root = NULL;
	}
	for (size_t i = 0; i < p.n_anchors; i++)
		free(p.anchors[i].name);
	free(p.anchors);
	yaml_parser_delete(&p.parser);
	return root;
}

struct rl_ynode *rl_yaml_parse(struct rl_ysources *src, const char *file, const char *text,
                               size_t len, struct rl_diags *diags)
{
	return parse_document(src, file, text, len, true, diags);
}

struct rl_ynode *rl_yaml_parse_value(struct rl_ysources *src, const char *file, const char *text,
                                     size_t len, struct rl_diags *diags)
{
	return parse_document(src, file, text, len, false, diags);
}
