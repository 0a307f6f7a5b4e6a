/* The parser: tokens to a tree, with Jinja's grammar and precedence (lowest
 * first): "x if c else y", or, and, not, comparisons and in, + -, ~,
 * * / // %, **, unary - +, then a primary with its attributes, subscripts,
 * calls, filters (|) and tests (is). Statements: if/elif/else, for (with
 * tuple targets and else), set (names, tuples, namespace attributes),
 * break, continue and transformers' {% generation %}. Every other tag is
 * refused by name, so nothing a template means is silently dropped. */
#define _GNU_SOURCE
#include <string.h>

#include "runtime/chat/internal.h"

#define MAX_NESTING 200

struct parser {
	struct arena *a;
	const struct token *t;
	size_t n, i;
	struct jerr *e;
	int depth;
	int loops; /* for loops around the current statement */
};

static const struct token *cur(struct parser *p)
{
	return &p->t[p->i < p->n ? p->i : p->n - 1];
}
static bool is_op(struct parser *p, const char *op)
{
	return cur(p)->t == T_OP && !strcmp(cur(p)->s, op);
}
static bool is_name(struct parser *p, const char *name)
{
	return cur(p)->t == T_NAME && !strcmp(cur(p)->s, name);
}
static int fail(struct parser *p, const char *fmt, const char *arg)
{
	return jfail(p->e, cur(p)->line, cur(p)->col, fmt, arg);
}
static const char *tok_text(const struct token *t)
{
	switch (t->t) {
	case T_EOF:
		return "the end of the template";
	case T_DATA:
		return "text";
	case T_BLOCK_BEGIN:
		return "{%";
	case T_BLOCK_END:
		return "%}";
	case T_VAR_BEGIN:
		return "{{";
	case T_VAR_END:
		return "}}";
	case T_STRING:
		return "a string";
	default:
		return t->s;
	}
}
static int expect_op(struct parser *p, const char *op)
{
	if (!is_op(p, op)) {
		jfail(p->e, cur(p)->line, cur(p)->col, "expected '%s', found '%s'", op,
		      tok_text(cur(p)));
		return -1;
	}
	p->i++;
	return 0;
}

static struct node *mk(struct parser *p, enum nkind k, const struct token *at)
{
	struct node *n = arena_alloc(p->a, sizeof *n);

	if (!n) {
		jfail(p->e, at->line, at->col, "out of memory");
		return NULL;
	}
	n->k = k, n->line = at->line, n->col = at->col;
	return n;
}

/* a growing array of node pointers (and names) in the arena */
struct vec {
	struct node **v;
	const char **kw;
	size_t n, cap;
};
static int push(struct parser *p, struct vec *v, struct node *n, const char *kw)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 4;
		struct node **nv = arena_alloc(p->a, cap * sizeof *nv);
		const char **nk = arena_alloc(p->a, cap * sizeof *nk);

		if (!nv || !nk)
			return jfail(p->e, cur(p)->line, cur(p)->col, "out of memory");
		if (v->n) {
			memcpy(nv, v->v, v->n * sizeof *nv);
			memcpy(nk, v->kw, v->n * sizeof *nk);
		}
		v->v = nv, v->kw = nk, v->cap = cap;
	}
	v->kw[v->n] = kw;
	v->v[v->n++] = n;
	return 0;
}

static struct node *expr(struct parser *p);
static struct node *or_expr(struct parser *p);
static struct node *unary(struct parser *p, bool with_filter);

/* "(a, b=c)" after the '(' has been seen; arguments into n's kids and kw */
static int call_args(struct parser *p, struct node *n)
{
	struct vec v = {0};

	if (expect_op(p, "("))
		return -1;
	while (!is_op(p, ")")) {
		const char *kw = NULL;
		struct node *arg;

		if (v.n && expect_op(p, ","))
			return -1;
		if (is_op(p, ")"))
			break;
		if (is_op(p, "*") || is_op(p, "**"))
			return fail(p, "%s arguments are not supported", cur(p)->s);
		if (cur(p)->t == T_NAME && p->i + 1 < p->n && p->t[p->i + 1].t == T_OP &&
		    !strcmp(p->t[p->i + 1].s, "=")) {
			kw = cur(p)->s;
			p->i += 2;
		} else {
			for (size_t k = 0; k < v.n; k++)
				if (v.kw[k])
					return fail(p, "%s",
					            "a positional argument after a keyword one");
		}
		if (!(arg = expr(p)) || push(p, &v, arg, kw))
			return -1;
	}
	p->i++;
	n->kids = v.v, n->kw = v.kw, n->nkids = v.n;
	return 0;
}

/* a tuple "a, b" or one expression; explicit: inside parentheses */
static struct node *tuple(struct parser *p, bool explicit)
{
	const struct token *at = cur(p);
	struct node *first = expr(p), *t;
	struct vec v = {0};

	if (!first || !is_op(p, ","))
		return first;
	if (push(p, &v, first, NULL))
		return NULL;
	while (is_op(p, ",")) {
		struct node *x;

		p->i++;
		if (explicit ? is_op(p, ")") : (cur(p)->t == T_BLOCK_END || cur(p)->t == T_VAR_END))
			break;
		if (!(x = expr(p)) || push(p, &v, x, NULL))
			return NULL;
	}
	if (!(t = mk(p, N_TUPLE, at)))
		return NULL;
	t->kids = v.v, t->nkids = v.n;
	return t;
}

static struct node *primary(struct parser *p)
{
	const struct token *at = cur(p);
	struct node *n;
	struct vec v = {0};

	switch (at->t) {
	case T_NAME:
		p->i++;
		if (!(n = mk(p, N_LIT, at)))
			return NULL;
		if (!strcmp(at->s, "true") || !strcmp(at->s, "True"))
			n->lit = v_bool(true);
		else if (!strcmp(at->s, "false") || !strcmp(at->s, "False"))
			n->lit = v_bool(false);
		else if (!strcmp(at->s, "none") || !strcmp(at->s, "None"))
			n->lit = v_none();
		else
			n->k = N_NAME, n->s = at->s;
		return n;
	case T_STRING: {
		size_t len = 0;
		char *s;

		for (size_t i = p->i; i < p->n && p->t[i].t == T_STRING; i++)
			len += p->t[i].n;
		if (!(n = mk(p, N_LIT, at)) || !(s = arena_alloc(p->a, len + 1))) {
			jfail(p->e, at->line, at->col, "out of memory");
			return NULL;
		}
		len = 0;
		for (; cur(p)->t == T_STRING; p->i++) /* adjacent strings are one */
			memcpy(s + len, cur(p)->s, cur(p)->n), len += cur(p)->n;
		n->lit = v_str(s, len);
		return n;
	}
	case T_INT:
	case T_FLOAT:
		p->i++;
		if (!(n = mk(p, N_LIT, at)))
			return NULL;
		n->lit = at->t == T_INT ? v_int(at->i) : (struct val){.t = V_FLOAT, .u.f = at->f};
		return n;
	case T_OP:
		if (!strcmp(at->s, "(")) {
			p->i++;
			if (is_op(p, ")")) {
				p->i++;
				return mk(p, N_TUPLE, at);
			}
			n = tuple(p, true);
			if (!n || expect_op(p, ")"))
				return NULL;
			n->paren = true;
			return n;
		}
		if (!strcmp(at->s, "[") || !strcmp(at->s, "{")) {
			bool dict = at->s[0] == '{';
			const char *close = dict ? "}" : "]";

			p->i++;
			while (!is_op(p, close)) {
				struct node *x;

				if (v.n && expect_op(p, ","))
					return NULL;
				if (is_op(p, close))
					break;
				if (!(x = expr(p)) || push(p, &v, x, NULL))
					return NULL;
				if (dict &&
				    (expect_op(p, ":") || !(x = expr(p)) || push(p, &v, x, NULL)))
					return NULL;
			}
			p->i++;
			if (!(n = mk(p, dict ? N_DICT : N_LIST, at)))
				return NULL;
			n->kids = v.v, n->nkids = v.n;
			return n;
		}
		break;
	default:
		break;
	}
	jfail(p->e, at->line, at->col, "unexpected '%s'", tok_text(at));
	return NULL;
}

static struct node *subscript(struct parser *p, struct node *of, const struct token *at)
{
	struct node *n, *parts[3] = {NULL, NULL, NULL};
	int k = 0;

	p->i++; /* [ */
	if (!is_op(p, ":") && !(parts[0] = expr(p)))
		return NULL;
	if (is_op(p, ",")) {
		fail(p, "%s", "tuple subscripts are not supported");
		return NULL;
	}
	while (is_op(p, ":") && k < 2) {
		p->i++, k++;
		if (!is_op(p, ":") && !is_op(p, "]") && !(parts[k] = expr(p)))
			return NULL;
	}
	if (expect_op(p, "]") || !(n = mk(p, k ? N_SLICE : N_ITEM, at)))
		return NULL;
	n->line = of->line, n->col = of->col; /* errors point at the object */
	n->a = of, n->b = parts[0], n->c = parts[1], n->d = parts[2];
	return n;
}

static struct node *postfix(struct parser *p, struct node *n)
{
	while (n) {
		const struct token *at = cur(p);
		struct node *m;

		if (is_op(p, ".")) {
			p->i++;
			if (cur(p)->t != T_NAME) {
				fail(p, "%s", "expected an attribute name after '.'");
				return NULL;
			}
			if (!(m = mk(p, N_ATTR, at)))
				return NULL;
			m->a = n, m->s = cur(p)->s;
			m->line = n->line, m->col = n->col; /* errors point at the object */
			p->i++;
		} else if (is_op(p, "[")) {
			m = subscript(p, n, at);
		} else if (is_op(p, "(")) {
			if (!(m = mk(p, N_CALL, at)) || call_args(p, m))
				return NULL;
			m->a = n;
			m->line = n->line, m->col = n->col; /* errors point at the callee */
		} else {
			return n;
		}
		n = m;
	}
	return NULL;
}

/* the dotted name of a filter or test */
static const char *dotted_name(struct parser *p)
{
	const char *name;

	if (cur(p)->t != T_NAME) {
		fail(p, "expected a filter or test name, found '%s'", tok_text(cur(p)));
		return NULL;
	}
	name = cur(p)->s;
	p->i++;
	if (is_op(p, ".")) {
		fail(p, "%s", "dotted filter and test names are not supported");
		return NULL;
	}
	return name;
}

static struct node *filters(struct parser *p, struct node *n)
{
	while (n) {
		const struct token *at = cur(p);
		struct node *m;
		bool neg = false;

		if (is_op(p, "|")) {
			p->i++;
			/* errors point at the filter's name */
			if (!(m = mk(p, N_FILTER, cur(p))) || !(m->s = dotted_name(p)))
				return NULL;
			if (is_op(p, "(") && call_args(p, m))
				return NULL;
		} else if (is_name(p, "is")) {
			p->i++;
			if (is_name(p, "not"))
				p->i++, neg = true;
			if (!(m = mk(p, N_TEST, cur(p)))) /* at the test's name */
				return NULL;
			m->op = neg;
			if (!(m->s = dotted_name(p)))
				return NULL;
			if (is_op(p, "(")) {
				if (call_args(p, m))
					return NULL;
			} else if ((cur(p)->t == T_NAME || cur(p)->t == T_STRING ||
			            cur(p)->t == T_INT || cur(p)->t == T_FLOAT || is_op(p, "[") ||
			            is_op(p, "{")) &&
			           !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
				struct node *arg = postfix(p, primary(p));

				if (!arg || !(m->kids = arena_alloc(p->a, sizeof *m->kids)) ||
				    !(m->kw = arena_alloc(p->a, sizeof *m->kw)))
					return NULL;
				m->kids[0] = arg, m->nkids = 1;
			}
		} else if (is_op(p, "(")) {
			if (!(m = mk(p, N_CALL, at)) || call_args(p, m))
				return NULL;
		} else {
			return n;
		}
		m->a = n;
		n = m;
	}
	return NULL;
}

static struct node *unary(struct parser *p, bool with_filter)
{
	const struct token *at = cur(p);
	struct node *n;

	if (++p->depth > MAX_NESTING) {
		fail(p, "%s", "expressions nested too deeply");
		return NULL;
	}
	if (is_op(p, "-") || is_op(p, "+")) {
		p->i++;
		if (!(n = mk(p, N_NEG, at)) || !(n->a = unary(p, false)))
			return NULL;
		n->op = at->s[0];
	} else {
		n = postfix(p, primary(p));
	}
	if (n && with_filter)
		n = filters(p, n);
	p->depth--;
	return n;
}

/* left-associative binary levels, from the tightest */
static struct node *binary(struct parser *p, int level)
{
	static const char *const levels[][5] = {
	    {"**", NULL}, {"*", "/", "//", "%", NULL}, {"~", NULL}, {"+", "-", NULL}};
	struct node *l = level < 0 ? unary(p, true) : binary(p, level - 1);

	for (;;) {
		const struct token *at = cur(p);
		const char *op = NULL;
		struct node *n;

		if (!l)
			return NULL;
		for (int k = 0; level >= 0 && levels[level][k]; k++)
			if (is_op(p, levels[level][k]))
				op = levels[level][k];
		if (!op)
			return l;
		p->i++;
		if (!(n = mk(p, N_BIN, at)) || !(n->b = level < 0 ? NULL : binary(p, level - 1)))
			return NULL;
		/* the operator's characters: '*','/','~','+','-','%', "//" as 'f', "**" as 'p' */
		n->op = !strcmp(op, "//") ? 'f' : !strcmp(op, "**") ? 'p' : op[0];
		n->a = l;
		l = n;
	}
}

static struct node *compare(struct parser *p)
{
	static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">=", NULL};
	struct node *l = binary(p, 3);

	for (;;) {
		const struct token *at = cur(p);
		struct node *n;
		int op = 0;

		if (!l)
			return NULL;
		for (int k = 0; ops[k]; k++)
			if (is_op(p, ops[k]))
				op = k + 1;
		if (is_name(p, "in")) {
			op = 'i';
		} else if (is_name(p, "not") && p->i + 1 < p->n && p->t[p->i + 1].t == T_NAME &&
		           !strcmp(p->t[p->i + 1].s, "in")) {
			op = 'n';
			p->i++;
		}
		if (!op)
			return l;
		p->i++;
		if (!(n = mk(p, N_CMP, at)) || !(n->b = binary(p, 3)))
			return NULL;
		if (l->k == N_CMP && !l->paren && l->op != 'i' && l->op != 'n' && op != 'i' &&
		    op != 'n') {
			jfail(p->e, at->line, at->col, "%s",
			      "chained comparisons (a < b < c) are not supported");
			return NULL;
		}
		n->op = op, n->a = l;
		l = n;
	}
}

static struct node *not_expr(struct parser *p)
{
	const struct token *at = cur(p);
	struct node *n;

	if (!is_name(p, "not"))
		return compare(p);
	p->i++;
	if (++p->depth > MAX_NESTING) {
		fail(p, "%s", "expressions nested too deeply");
		return NULL;
	}
	if (!(n = mk(p, N_NOT, at)) || !(n->a = not_expr(p)))
		return NULL;
	p->depth--;
	return n;
}

static struct node *logic(struct parser *p, bool is_or)
{
	struct node *l = is_or ? logic(p, false) : not_expr(p);

	while (l && is_name(p, is_or ? "or" : "and")) {
		struct node *n = mk(p, is_or ? N_OR : N_AND, cur(p));

		p->i++;
		if (!n || !(n->b = is_or ? logic(p, false) : not_expr(p)))
			return NULL;
		n->a = l;
		l = n;
	}
	return l;
}

static struct node *or_expr(struct parser *p)
{
	return logic(p, true);
}

static struct node *expr(struct parser *p)
{
	struct node *l = or_expr(p);

	while (l && is_name(p, "if")) {
		struct node *n = mk(p, N_COND, cur(p));

		p->i++;
		if (!n || !(n->b = or_expr(p)))
			return NULL;
		if (is_name(p, "else")) {
			p->i++;
			if (!(n->c = expr(p)))
				return NULL;
		}
		n->a = l;
		l = n;
	}
	return l;
}

/* ---- statements ---- */
static struct node *body(struct parser *p, const char *const *ends, const struct token *opener);

static int block_end(struct parser *p)
{
	if (cur(p)->t != T_BLOCK_END)
		return jfail(p->e, cur(p)->line, cur(p)->col, "expected '%%}', found '%s'",
		             tok_text(cur(p)));
	p->i++;
	return 0;
}

/* names "a" or "a, b" (for loops and set), into n->kw */
static int targets(struct parser *p, struct node *n)
{
	struct vec v = {0};

	do {
		if (v.n)
			p->i++;
		if (cur(p)->t != T_NAME)
			return fail(p, "expected a variable name, found '%s'", tok_text(cur(p)));
		if (push(p, &v, NULL, cur(p)->s))
			return -1;
		p->i++;
	} while (is_op(p, ","));
	n->kw = v.kw, n->nkw = v.n;
	return 0;
}

static struct node *stmt_if(struct parser *p, const struct token *at)
{
	static const char *const ends[] = {"elif", "else", "endif", NULL};
	struct node *n = mk(p, S_IF, at), *c, *b;
	struct vec v = {0};

	for (bool more = true; more && n;) {
		if (!(c = expr(p)) || block_end(p) || !(b = body(p, ends, at)) ||
		    push(p, &v, c, NULL) || push(p, &v, b, NULL))
			return NULL;
		if (is_name(p, "elif")) {
			p->i++;
		} else {
			more = false;
		}
	}
	if (is_name(p, "else")) {
		static const char *const end[] = {"endif", NULL};

		p->i++;
		if (block_end(p) || !(b = body(p, end, at)) || push(p, &v, NULL, NULL) ||
		    push(p, &v, b, NULL))
			return NULL;
	}
	p->i++; /* endif */
	if (!n || block_end(p))
		return NULL;
	n->kids = v.v, n->nkids = v.n;
	return n;
}

static struct node *stmt_for(struct parser *p, const struct token *at)
{
	static const char *const ends[] = {"else", "endfor", NULL}, *const end[] = {"endfor", NULL};
	struct node *n = mk(p, S_FOR, at);

	if (!n || targets(p, n))
		return NULL;
	if (!is_name(p, "in")) {
		fail(p, "expected 'in', found '%s'", tok_text(cur(p)));
		return NULL;
	}
	p->i++;
	if (!(n->a = or_expr(p)))
		return NULL;
	if (is_name(p, "if")) { /* the items the body sees: those that pass */
		p->i++;
		if (!(n->d = expr(p)))
			return NULL;
	}
	if (is_name(p, "recursive")) {
		fail(p, "'for ... %s' is not supported", cur(p)->s);
		return NULL;
	}
	p->loops++;
	if (block_end(p) || !(n->b = body(p, ends, at)))
		return NULL;
	p->loops--;
	if (is_name(p, "else")) {
		p->i++;
		if (block_end(p) || !(n->c = body(p, end, at)))
			return NULL;
	}
	p->i++;
	return block_end(p) ? NULL : n;
}

static struct node *stmt_set(struct parser *p, const struct token *at)
{
	struct node *n = mk(p, S_SET, at);

	if (!n)
		return NULL;
	if (cur(p)->t == T_NAME && p->i + 2 < p->n && p->t[p->i + 1].t == T_OP &&
	    !strcmp(p->t[p->i + 1].s, ".") && p->t[p->i + 2].t == T_NAME) {
		n->s = cur(p)->s; /* ns.attr = value */
		if (!(n->kw = arena_alloc(p->a, sizeof *n->kw)))
			return NULL;
		n->kw[0] = p->t[p->i + 2].s;
		p->i += 3;
	} else if (targets(p, n)) {
		return NULL;
	}
	if (!is_op(p, "=")) { /* {% set x %}...{% endset %}: the body's text */
		static const char *const end[] = {"endset", NULL};

		if (n->s || n->nkw != 1) {
			fail(p, "%s", "a {% set %} block sets one name");
			return NULL;
		}
		if (cur(p)->t == T_OP && !strcmp(cur(p)->s, "|")) {
			fail(p, "%s", "filtered {% set %} blocks are not supported");
			return NULL;
		}
		if (block_end(p) || !(n->b = body(p, end, at)))
			return NULL;
		p->i++;
		return block_end(p) ? NULL : n;
	}
	p->i++;
	if (!(n->a = tuple(p, false)))
		return NULL;
	return block_end(p) ? NULL : n;
}

/* {% macro name(a, b=default) %}...{% endmacro %} */
static struct node *stmt_macro(struct parser *p, const struct token *at)
{
	static const char *const end[] = {"endmacro", NULL};
	struct node *n = mk(p, S_MACRO, at);
	struct vec v = {0};
	int loops;

	if (!n)
		return NULL;
	if (cur(p)->t != T_NAME) {
		fail(p, "expected the macro's name, found '%s'", tok_text(cur(p)));
		return NULL;
	}
	n->s = cur(p)->s;
	p->i++;
	if (expect_op(p, "("))
		return NULL;
	while (!is_op(p, ")")) {
		struct node *def = NULL;
		const char *name;

		if (v.n && expect_op(p, ","))
			return NULL;
		if (cur(p)->t != T_NAME) {
			fail(p, "expected a parameter name, found '%s'", tok_text(cur(p)));
			return NULL;
		}
		name = cur(p)->s;
		p->i++;
		if (is_op(p, "=")) {
			p->i++;
			if (!(def = expr(p)))
				return NULL;
		} else if (v.n && v.v[v.n - 1]) {
			fail(p, "%s", "a parameter without a default after one with a default");
			return NULL;
		}
		if (push(p, &v, def, name))
			return NULL;
	}
	p->i++;
	n->kids = v.v, n->nkids = v.n, n->kw = v.kw, n->nkw = v.n;
	loops = p->loops;
	p->loops = 0; /* a macro's body is outside any loop around it */
	if (block_end(p) || !(n->b = body(p, end, at)))
		return NULL;
	p->loops = loops;
	p->i++;
	if (cur(p)->t == T_NAME && !strcmp(cur(p)->s, n->s)) /* {% endmacro name %} */
		p->i++;
	return block_end(p) ? NULL : n;
}

static struct node *statement_inner(struct parser *p);

/* a statement, its nesting bounded: the tree's depth bounds the render's */
static struct node *statement(struct parser *p)
{
	struct node *n;

	if (++p->depth > MAX_NESTING) {
		fail(p, "%s", "blocks nested too deeply");
		return NULL;
	}
	n = statement_inner(p);
	p->depth--;
	return n;
}

static struct node *statement_inner(struct parser *p)
{
	static const char *const end_generation[] = {"endgeneration", NULL};
	const struct token *at = cur(p);
	const char *kw;
	struct node *n;

	if (at->t != T_NAME) {
		fail(p, "expected a statement name after {%%, found '%s'", tok_text(at));
		return NULL;
	}
	kw = at->s;
	p->i++;
	if (!strcmp(kw, "if"))
		return stmt_if(p, at);
	if (!strcmp(kw, "for"))
		return stmt_for(p, at);
	if (!strcmp(kw, "set"))
		return stmt_set(p, at);
	if (!strcmp(kw, "macro"))
		return stmt_macro(p, at);
	if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
		if (!p->loops) {
			p->i--;
			fail(p, "{%% %s %%} outside a for loop", kw);
			return NULL;
		}
		n = mk(p, kw[0] == 'b' ? S_BREAK : S_CONTINUE, at);
		return n && !block_end(p) ? n : NULL;
	}
	if (!strcmp(kw, "generation")) { /* transformers' assistant-mask tag: its body as is */
		if (block_end(p) || !(n = body(p, end_generation, at)))
			return NULL;
		p->i++;
		return block_end(p) ? NULL : n;
	}
	p->i--;
	jfail(p->e, at->line, at->col, "the {%% %s %%} statement is not supported", kw);
	return NULL;
}

/* statements up to one of `ends` (left at the end name) or the end; opener
 * is the block's statement, for the message when it is never closed */
static struct node *body(struct parser *p, const char *const *ends, const struct token *opener)
{
	const struct token *at = cur(p);
	struct vec v = {0};
	struct node *b, *n;

	for (;;) {
		const struct token *t = cur(p);

		if (t->t == T_EOF) {
			if (ends) {
				size_t last = 0;

				while (ends[last + 1])
					last++;
				jfail(p->e, opener->line, opener->col,
				      "this {%% %s %%} is never closed: expected {%% %s %%} before "
				      "the end",
				      opener->s, ends[last]);
				return NULL;
			}
			break;
		}
		if (t->t == T_DATA) {
			if (!(n = mk(p, S_TEXT, t)))
				return NULL;
			n->s = t->s, n->lit = v_str(t->s, t->n);
			p->i++;
		} else if (t->t == T_VAR_BEGIN) {
			p->i++;
			if (!(n = mk(p, S_OUT, t)) || !(n->a = tuple(p, false)))
				return NULL;
			if (cur(p)->t != T_VAR_END) {
				fail(p, "expected '}}', found '%s'", tok_text(cur(p)));
				return NULL;
			}
			p->i++;
		} else if (t->t == T_BLOCK_BEGIN) {
			p->i++;
			for (int k = 0; ends && ends[k]; k++)
				if (is_name(p, ends[k]))
					goto done;
			if (cur(p)->t == T_NAME && (!strncmp(cur(p)->s, "end", 3) ||
			                            is_name(p, "else") || is_name(p, "elif"))) {
				fail(p, "unexpected {%% %s %%}", cur(p)->s);
				return NULL;
			}
			if (!(n = statement(p)))
				return NULL;
		} else {
			fail(p, "unexpected '%s'", tok_text(t));
			return NULL;
		}
		if (push(p, &v, n, NULL))
			return NULL;
	}
done:
	if (!(b = mk(p, S_BODY, at)))
		return NULL;
	b->kids = v.v, b->nkids = v.n;
	return b;
}

int jinja_parse(struct arena *a, const struct tokens *t, struct node **out, struct jerr *e)
{
	struct parser p = {.a = a, .t = t->v, .n = t->n, .e = e};

	*out = body(&p, NULL, NULL);
	return *out ? 0 : -1;
}
