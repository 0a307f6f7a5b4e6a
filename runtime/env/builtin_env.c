/* The built-in environments (builtin_env.h), written as a user's program
 * would be: read a line, answer a line, flush. Their rules are the
 * built-in tasks' (README, rl-env(7)). Their state is what an episode's
 * start says and, for the calculator, what its display shows: a start
 * carrying a history rebuilds it by judging the history's messages again,
 * answering none of them. */
#define _GNU_SOURCE
#include "runtime/env/builtin_env.h"

#include <ctype.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/synthetic.h"

struct live {
	long long id;
	char *problem, *expected;
	char shown[32]; /* calculator: its display, the last result ("" before a call) */
};

struct game {
	const char *name;
	bool calculator; /* else guess */
	struct live *eps;
	size_t n, cap;
	FILE *out, *err;
	size_t line_no;
};

bool rl_env_builtin_known(const char *name)
{
	return name && (strcmp(name, "calculator") == 0 || strcmp(name, "guess") == 0);
}

static int fail(struct game *g, const char *fmt, const char *detail)
{
	fprintf(g->err, "rlrun env %s: stdin line %zu: ", g->name, g->line_no);
	fprintf(g->err, fmt, detail);
	fputc('\n', g->err);
	return -1;
}

static struct live *find(struct game *g, long long id)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->eps[i].id == id)
			return &g->eps[i];
	return NULL;
}

static void drop(struct game *g, struct live *l)
{
	free(l->problem);
	free(l->expected);
	*l = g->eps[--g->n];
}

static int answer(struct game *g, long long id, const char *observation, double reward, bool done)
{
	json_t *o = json_pack("{s:I, s:s, s:f, s:b}", "episode", (json_int_t)id, "observation",
	                      observation, "reward", reward, "done", done);
	int rc = o ? json_dumpf(o, g->out, JSON_COMPACT) : -1;

	json_decref(o);
	if (rc != 0 || fputc('\n', g->out) == EOF || fflush(g->out) != 0) {
		fprintf(g->err, "rlrun env %s: cannot write the answer to stdout\n", g->name);
		return -1;
	}
	return 0;
}

/* The message as the rules read it: whitespace-trimmed. */
static void trimmed(const char *s, const char **begin, size_t *len)
{
	size_t n = strlen(s);

	while (n && isspace((unsigned char)*s))
		s++, n--;
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	*begin = s;
	*len = n;
}

/* "A+B" (each a run of digits) as its sum's digits into out; false when
 * the problem is not a sum. */
static bool sum_of(const char *problem, char *out, size_t len)
{
	char *end;
	unsigned long long a, b;

	if (!problem || !isdigit((unsigned char)problem[0]))
		return false;
	a = strtoull(problem, &end, 10);
	if (*end != '+' || !isdigit((unsigned char)end[1]))
		return false;
	b = strtoull(end + 1, &end, 10);
	if (*end != '\0')
		return false;
	snprintf(out, len, "%llu", a + b);
	return true;
}

/* One model message of episode l: its observation, reward and whether
 * it is done. */
static void judge(const struct game *g, struct live *l, const char *message, char *obs,
                  size_t obs_len, double *reward, bool *done)
{
	const char *m;
	size_t n;

	trimmed(message, &m, &n);
	obs[0] = '\0';
	*reward = 0.0;
	*done = false;
	if (g->calculator) {
		if (n > 0 && m[0] == '=') { /* the answer is what the display shows */
			*reward = l->shown[0]
			              ? rl_task_score(RL_TASK_ARITHMETIC, l->shown, l->expected)
			              : 0.0;
			*done = true;
			return;
		}
		if (n == 0 || !isdigit((unsigned char)m[0])) { /* the tool: the sum */
			if (!sum_of(l->problem, obs, obs_len))
				snprintf(obs, obs_len, "%s", l->expected);
			snprintf(l->shown, sizeof l->shown, "%s", obs);
			return;
		}
		char *final = strndup(m, n); /* the final answer, written out */

		*reward = final ? rl_task_score(RL_TASK_ARITHMETIC, final, l->expected) : 0.0;
		*done = true;
		free(final);
		return;
	}
	if (n == 0 || !isdigit((unsigned char)m[0])) {
		snprintf(obs, obs_len, "digit");
		return;
	}
	int guess = m[0] - '0', secret = l->expected[0] - '0';

	if (guess == secret) {
		*reward = 1.0;
		*done = true;
		return;
	}
	snprintf(obs, obs_len, "%s", secret > guess ? "higher" : "lower");
}

static int on_start(struct game *g, json_t *o, long long id)
{
	json_t *prob = json_object_get(o, "problem"), *exp = json_object_get(o, "expected_answer"),
	       *hist = json_object_get(o, "history");

	if (find(g, id))
		return fail(g, "%s", "an episode started twice");
	if (!json_is_string(exp) || json_string_length(exp) == 0)
		return fail(g, "%s", "a start needs a non-empty string \"expected_answer\"");
	if (!g->calculator && !isdigit((unsigned char)json_string_value(exp)[0]))
		return fail(g, "%s", "guess's \"expected_answer\" must be the secret digit");
	if (hist && !json_is_null(hist) && !json_is_array(hist))
		return fail(g, "%s", "\"history\" must be an array");
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 16;
		struct live *grown = realloc(g->eps, cap * sizeof *grown);

		if (!grown)
			return fail(g, "%s", "out of memory");
		g->eps = grown;
		g->cap = cap;
	}
	struct live *l = &g->eps[g->n++];

	*l = (struct live){id, json_is_string(prob) ? strdup(json_string_value(prob)) : NULL,
	                   strdup(json_string_value(exp)), ""};
	size_t k;
	json_t *turn;

	/* the turns answered already, judged again for the state they left
	 * (the calculator's display), none answered (a history never holds a
	 * final turn) */
	json_array_foreach(hist, k, turn)
	{
		json_t *msg = json_object_get(turn, "message");
		char obs[64];
		double reward;
		bool done;

		if (!json_is_string(msg) || !json_is_string(json_object_get(turn, "observation")))
			return fail(g, "%s",
			            "each \"history\" entry needs string \"message\" and "
			            "\"observation\"");
		judge(g, l, json_string_value(msg), obs, sizeof obs, &reward, &done);
		if (done)
			return fail(g, "%s", "a \"history\" turn that ended the episode");
	}
	return 0;
}

static int on_line(struct game *g, const char *line)
{
	json_error_t je;
	json_t *o = json_loads(line, 0, &je);
	json_t *type = json_object_get(o, "type"), *ep = json_object_get(o, "episode");
	const char *t = json_string_value(type);
	int rc = -1;

	if (!o) {
		char why[200];

		snprintf(why, sizeof why, "not JSON (%s)", je.text);
		return fail(g, "%s", why);
	}
	if (!json_is_object(o) || !t || !json_is_integer(ep))
		rc = fail(g, "%s", "a message needs a string \"type\" and an integer \"episode\"");
	else if (strcmp(t, "start") == 0)
		rc = on_start(g, o, json_integer_value(ep));
	else if (strcmp(t, "step") == 0) {
		struct live *l = find(g, json_integer_value(ep));
		json_t *msg = json_object_get(o, "message");

		char obs[64];
		double reward;
		bool done;

		if (!l) {
			rc = fail(g, "%s", "a step for an episode that was not started");
		} else if (!json_is_string(msg)) {
			rc = fail(g, "%s", "a step needs a string \"message\"");
		} else {
			judge(g, l, json_string_value(msg), obs, sizeof obs, &reward, &done);
			rc = answer(g, l->id, obs, reward, done);
			if (done) /* the program forgets it; no end follows */
				drop(g, l);
		}
	} else if (strcmp(t, "end") == 0) {
		struct live *l = find(g, json_integer_value(ep));

		if (l) /* else it was done already */
			drop(g, l);
		rc = 0;
	} else {
		rc = fail(g, "unknown \"type\" \"%s\"", t);
	}
	json_decref(o);
	return rc;
}

int rl_env_builtin_run(const char *name, FILE *in, FILE *out, FILE *err_out)
{
	struct game g = {.name = name, .out = out, .err = err_out};
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int rc = 0;

	if (!rl_env_builtin_known(name)) {
		fprintf(err_out, "rlrun env: no built-in environment '%s' (calculator, guess)\n",
		        name ? name : "");
		return -1;
	}
	g.calculator = strcmp(name, "calculator") == 0;
	while (rc == 0 && (len = getline(&line, &cap, in)) >= 0) {
		g.line_no++;
		if (strspn(line, " \t\r\n") == (size_t)len)
			continue;
		rc = on_line(&g, line);
	}
	free(line);
	while (g.n)
		drop(&g, &g.eps[g.n - 1]);
	free(g.eps);
	return rc;
}
