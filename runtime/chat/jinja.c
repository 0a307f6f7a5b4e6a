/* The engine's face: compile (lex, parse) once, render many times, each
 * render in its own bounded arena. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "runtime/chat/internal.h"
#include "runtime/chat/jinja.h"

struct rl_jinja {
	struct arena arena; /* the tokens and the tree */
	struct node *root;
	char *name;
};

int rl_jinja_compile(struct rl_jinja **out, const char *text, size_t len, const char *name,
                     char *err, size_t errlen)
{
	struct rl_jinja *t = calloc(1, sizeof *t);
	struct jerr e = {.name = name, .buf = err, .len = errlen};
	struct tokens toks;

	*out = NULL;
	if (!t || !(t->name = strdup(name))) {
		free(t);
		return jfail(&e, 0, 0, "out of memory");
	}
	t->arena.limit = 64u << 20;
	if (memchr(text, '\0', len)) {
		rl_jinja_free(t);
		return jfail(&e, 0, 0, "the template holds a NUL byte");
	}
	if (jinja_lex(&t->arena, text, len, &toks, &e) ||
	    jinja_parse(&t->arena, &toks, &t->root, &e)) {
		rl_jinja_free(t);
		return -1;
	}
	*out = t;
	return 0;
}

void rl_jinja_free(struct rl_jinja *t)
{
	if (!t)
		return;
	arena_free(&t->arena);
	free(t->name);
	free(t);
}

/* JSON to values: objects in their order, integers as integers */
static int from_json(struct renderer *r, const json_t *j, int depth, struct val *out)
{
	if (depth > 200)
		return jfail(r->e, 0, 0, "the variables are nested more than 200 deep");
	switch (json_typeof(j)) {
	case JSON_OBJECT: {
		struct dict *d = arena_alloc(r->a, sizeof *d);
		const char *k;
		json_t *v;

		if (!d)
			return jfail(r->e, 0, 0, "out of memory");
		json_object_foreach((json_t *)j, k, v)
		{
			struct val x;
			if (from_json(r, v, depth + 1, &x) ||
			    dict_set(r->a, d, v_str(k, strlen(k)), x))
				return jfail(r->e, 0, 0, "out of memory");
		}
		*out = (struct val){.t = V_DICT, .u.d = d};
		return 0;
	}
	case JSON_ARRAY: {
		struct list *l = arena_alloc(r->a, sizeof *l);
		size_t n = json_array_size(j);

		if (!l || (n && !(l->items = arena_alloc(r->a, n * sizeof *l->items))))
			return jfail(r->e, 0, 0, "out of memory");
		l->n = n;
		for (size_t i = 0; i < n; i++)
			if (from_json(r, json_array_get(j, i), depth + 1, &l->items[i]))
				return -1;
		*out = (struct val){.t = V_LIST, .u.l = l};
		return 0;
	}
	case JSON_STRING:
		*out = v_str(json_string_value(j), json_string_length(j));
		return 0;
	case JSON_INTEGER:
		*out = v_int((int64_t)json_integer_value(j));
		return 0;
	case JSON_REAL:
		*out = (struct val){.t = V_FLOAT, .u.f = json_real_value(j)};
		return 0;
	case JSON_TRUE:
	case JSON_FALSE:
		*out = v_bool(json_is_true(j));
		return 0;
	default:
		*out = v_none();
		return 0;
	}
}

int rl_jinja_render(const struct rl_jinja *t, const json_t *vars, int64_t now,
                    const struct rl_jinja_limits *limits, char **out, size_t *len, char *err,
                    size_t errlen)
{
	static const struct rl_jinja_limits defaults = RL_JINJA_LIMITS_DEFAULT;
	struct jerr e = {.name = t->name, .buf = err, .len = errlen};
	struct arena a = {0};
	struct renderer r = {.a = &a, .e = &e, .now = now};
	struct val top;
	int rc;

	if (!limits)
		limits = &defaults;
	a.limit = limits->max_memory;
	r.out.limit = limits->max_output;
	r.max_depth = limits->max_depth;
	r.max_steps = limits->max_steps;
	*out = NULL, *len = 0;
	if (!json_is_object(vars))
		return jfail(&e, 0, 0, "the variables must be a JSON object");
	rc = from_json(&r, vars, 0, &top);
	if (!rc)
		rc = jinja_exec(&r, t->root, top.u.d);
	arena_free(&a);
	if (rc) {
		free(r.out.p);
		return -1;
	}
	if (!r.out.p && !(r.out.p = calloc(1, 1)))
		return jfail(&e, 0, 0, "out of memory");
	*out = r.out.p, *len = r.out.n;
	return 0;
}
