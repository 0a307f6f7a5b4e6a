/* The Jinja engine's parts, shared by its files and by nothing else: the
 * arena every value and node lives in, values, the lexer's tokens and the
 * parser's tree.
 * defines: struct arena, struct val, struct node, struct jerr and the
 * functions of value.c, lex.c, parse.c, render.c, builtins.c, methods.c
 * and pystr.c */
#ifndef RL_CHAT_INTERNAL_H
#define RL_CHAT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors: "NAME:LINE:COL: message", kept in the caller's buffer ---- */
struct jerr {
	const char *name; /* the template's name for messages */
	char *buf;
	size_t len;
	bool set;
};
int jfail(struct jerr *e, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- the arena: bump allocation in chunks, bounded in total ---- */
struct arena {
	struct chunk *head;
	size_t used, limit; /* bytes handed out, and the most allowed */
};
void *arena_alloc(struct arena *a, size_t n); /* zeroed; NULL past the limit */
void arena_free(struct arena *a);

/* ---- values ---- */
enum vtype {
	V_UNDEF, /* s holds the name that was looked up, for messages */
	V_NONE,
	V_BOOL,
	V_INT,
	V_FLOAT,
	V_STR,
	V_LIST,
	V_DICT,
	V_NS,     /* namespace(): a dict whose attributes can be set */
	V_LOOP,   /* the loop variable of a for */
	V_FUNC,   /* a global function: i is its number */
	V_METHOD, /* a method bound to a string or dict: self and i */
	V_MACRO,  /* a {% macro %}: fn is its S_MACRO node */
};
struct list {
	size_t n;
	struct val *items;
	bool tuple; /* printed as (a, b) */
};
struct dict {
	size_t n, cap;
	struct val *keys, *vals; /* in insertion order; strings, numbers, booleans, none */
};
struct loopstate {
	int64_t index0, length;
	const struct list *items;
};
struct val {
	enum vtype t;
	union {
		bool b;
		int64_t i;
		double f;
		struct {
			const char *p;
			size_t n;
		} s;
		struct list *l;
		struct dict *d;
		struct loopstate *loop;
		const struct node *fn;
		struct {
			struct val *self;
			int i;
		} m;
	} u;
};

struct val v_none(void);
struct val v_bool(bool b);
struct val v_int(int64_t i);
struct val v_str(const char *p, size_t n);
struct val v_undef(const char *name);
bool v_truthy(struct val v);
bool v_equal(struct val a, struct val b);
const char *v_type_name(struct val v); /* "a string", "a list", ... */
/* a < b as Python orders numbers and strings; -2 when they cannot be */
int v_compare(struct val a, struct val b);
struct val *dict_get(const struct dict *d, const char *k, size_t n);
/* any key: strings by their bytes, numbers, booleans and none by == */
struct val *dict_find(const struct dict *d, struct val k);
int dict_set(struct arena *a, struct dict *d, struct val k, struct val v);

/* A growable text bounded by limit; false once out of memory or past it. */
struct sbuf {
	char *p;
	size_t n, cap, limit;
	bool over;
};
bool sb_put(struct sbuf *b, const char *s, size_t n);
bool sb_puts(struct sbuf *b, const char *s);
/* str(v) (Python's, as Jinja prints values) and repr(v), and json.dumps(v)
 * with transformers' settings (ensure_ascii off, indent < 0 for none).
 * False when a value has no such form (set *why) or the text is too long. */
bool v_to_str(struct sbuf *b, struct val v, const char **why);
bool v_repr(struct sbuf *b, struct val v, const char **why);
bool v_to_json(struct sbuf *b, struct val v, int indent, int depth, const char **why);

/* UTF-8: the number of code points, and the byte offset of code point i */
size_t u8_len(const char *s, size_t n);
size_t u8_offset(const char *s, size_t n, size_t i);

/* ---- tokens ---- */
enum ttype {
	T_EOF,
	T_DATA,        /* text between tags, whitespace control applied */
	T_BLOCK_BEGIN, /* {% */
	T_BLOCK_END,
	T_VAR_BEGIN, /* {{ */
	T_VAR_END,
	T_NAME,
	T_STRING, /* escapes resolved */
	T_INT,
	T_FLOAT,
	T_OP, /* s holds the operator: "+", "//", "==", "(", ... */
};
struct token {
	enum ttype t;
	int line, col;
	const char *s; /* in the arena, NUL-terminated */
	size_t n;
	int64_t i;
	double f;
};
struct tokens {
	struct token *v;
	size_t n;
};
int jinja_lex(struct arena *a, const char *src, size_t len, struct tokens *out, struct jerr *e);

/* ---- the tree ---- */
enum nkind {
	/* expressions */
	N_LIT,    /* lit */
	N_NAME,   /* s */
	N_LIST,   /* kids */
	N_TUPLE,  /* kids */
	N_DICT,   /* kids: key, value, key, value ... */
	N_ATTR,   /* a.s */
	N_ITEM,   /* a[b] */
	N_SLICE,  /* a[b:c:d], each of b, c, d may be NULL */
	N_CALL,   /* a(kids), kids named by kw[i] (NULL: positional) */
	N_FILTER, /* a | s(kids) */
	N_TEST,   /* a is [not: op] s(kids) */
	N_NEG,    /* -a, and +a with op '+' */
	N_NOT,
	N_AND,
	N_OR,
	N_BIN,  /* a op b, op one of + - * / // % ** ~ */
	N_CMP,  /* a op b: == != < <= > >= in (op 'i') not in (op 'n') */
	N_COND, /* a if b else c (c NULL: undefined) */
	/* statements */
	S_TEXT,  /* s */
	S_OUT,   /* {{ a }} */
	S_IF,    /* kids: cond, body, cond, body ... [NULL, else body] */
	S_FOR,   /* targets in kw (nkw), a: iterable, b: body, c: else body, d: filter */
	S_SET,   /* target s (attribute kw[0] when ns.attr), or targets kw; a: value,
	          * or b: the body whose text is the value ({% set x %}...{% endset %}) */
	S_MACRO, /* s: name, kw: parameters (nkw), kids: their defaults or NULL, b: body */
	S_BODY,  /* kids: statements */
	S_BREAK,
	S_CONTINUE,
};
struct node {
	enum nkind k;
	int line, col;
	int op;
	bool paren; /* written in parentheses: (a == b) != c is no chain */
	const char *s;
	struct node *a, *b, *c, *d;
	struct node **kids;
	size_t nkids;
	const char **kw;
	size_t nkw;
	struct val lit;
};
/* Parses the tokens into a body of statements. */
int jinja_parse(struct arena *a, const struct tokens *t, struct node **out, struct jerr *e);

/* ---- rendering ---- */
struct scope;
struct renderer {
	struct arena *a; /* this render's values */
	struct jerr *e;
	struct sbuf out;
	struct scope *scope;
	struct scope *top; /* the template's own: a macro's body runs over it */
	int depth, max_depth;
	uint64_t steps, max_steps;
	int64_t now; /* seconds since the epoch, for strftime_now */
};
/* Runs the template's body over vars (which it does not change). */
/* An error at node n: fmt with one string argument; the arena's limit
 * when memory runs out. Both return -1. */
int render_fail(struct renderer *r, const struct node *n, const char *fmt, const char *a);
int render_oom(struct renderer *r, const struct node *n);
int jinja_exec(struct renderer *r, const struct node *root, struct dict *vars);
int eval(struct renderer *r, const struct node *n, struct val *out);
/* filters, tests, global functions and methods (builtins.c) */
int call_filter(struct renderer *r, const struct node *n, struct val self, struct val *args,
                size_t nargs, const char **kw, struct val *out);
int call_test(struct renderer *r, const struct node *n, struct val self, struct val *args,
              size_t nargs, bool *out);
/* a {% macro %} called with these arguments: its body's text (render.c) */
int call_macro(struct renderer *r, const struct node *n, struct val f, struct val *args,
               size_t nargs, const char **kw, struct val *out);
int call_value(struct renderer *r, const struct node *n, struct val f, struct val *args,
               size_t nargs, const char **kw, struct val *out);
/* a's attribute name: a method of a string or dict, or a global's number */
bool builtin_method(struct val self, const char *name, int *which);
bool builtin_global(const char *name, int *which);
/* the arguments of a call: values, and their keyword names (NULL entries
 * and a NULL kw for positional ones) */
struct args {
	struct val *v;
	size_t n;
	const char **kw;
};
/* argument `pos` or keyword `name`; NULL when absent */
const struct val *arg_get(const struct args *a, size_t pos, const char *name);
/* an error for arguments past max positional ones or keywords not in names
 * ("a|b"); what names the callee */
int args_check(struct renderer *r, const struct node *n, const struct args *a, size_t max,
               const char *names, const char *what);
/* an error unless v is there and of type t */
int arg_want(struct renderer *r, const struct node *n, const struct val *v, enum vtype t,
             const char *what);
/* str(v) as a string value */
int val_to_string(struct renderer *r, const struct node *n, struct val v, struct val *out);
/* a list of n items (zeroed) in the render's arena; NULL past its limit */
struct list *list_new(struct renderer *r, size_t n);
/* Python's str methods (pystr.c); chars NULL: whitespace */
struct val py_strip(struct val s, const struct val *chars, bool left, bool right);
int py_split(struct renderer *r, const struct node *n, struct val s, const struct val *sep,
             int64_t maxsplit, struct val *out);
int py_replace(struct renderer *r, const struct node *n, struct val s, struct val from,
               struct val to, int64_t count, struct val *out);
int py_change_case(struct renderer *r, const struct node *n, struct val s, bool upper,
                   struct val *out);
/* a string built from the text of an sbuf copied into the arena */
int arena_str(struct renderer *r, const struct node *n, const char *p, size_t len, struct val *out);

#endif
