#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/synthetic.h"
#include "runtime/base/rng.h"

/* Problems draw from streams of their own, apart from sampling's. */
#define TASK_STREAM 0x7461736b00000000ull

/* The operands and the letters: small enough that a from-scratch model of
 * the built-in size learns them within the tiny run's steps. */
#define ARITH_MAX  4
#define LETTERS    "abcd"
#define STRING_MIN 2
#define STRING_MAX 3
/* calculator's operands: three digits each, more than a model of the
 * built-in size learns to add within a run, which the tool call fixes */
#define CALC_MIN 100
#define CALC_MAX 999
/* guess's secret: one digit */
#define GUESS_DIGITS 10

static const char *const names[] = {
    [RL_TASK_ARITHMETIC] = "arithmetic", [RL_TASK_COPY] = "copy",   [RL_TASK_SORT] = "sort",
    [RL_TASK_CALCULATOR] = "calculator", [RL_TASK_GUESS] = "guess",
};

int rl_task_parse(const char *name, enum rl_task_kind *kind)
{
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(name, names[i]) == 0) {
			*kind = (enum rl_task_kind)i;
			return 0;
		}
	return -1;
}

bool rl_task_multi_turn(enum rl_task_kind kind)
{
	return kind == RL_TASK_CALCULATOR || kind == RL_TASK_GUESS;
}

/* Uniform in [0, n): the multiply-shift map of 64 random bits, whose bias
 * (below 2^-59 for these n) does not matter for drawing problems. */
static unsigned below(struct rl_rng *rng, unsigned n)
{
	return (unsigned)(((unsigned __int128)rl_rng_next(rng) * n) >> 64);
}

static int by_char(const void *a, const void *b)
{
	return *(const char *)a - *(const char *)b;
}

int rl_task_make(enum rl_task_kind kind, uint64_t seed, uint64_t index, char **problem,
                 char **answer)
{
	struct rl_rng rng;
	char word[STRING_MAX + 1];
	int rc;

	rl_rng_seed(&rng, seed, TASK_STREAM + index);
	*problem = *answer = NULL;
	if (kind == RL_TASK_ARITHMETIC) {
		unsigned a = below(&rng, ARITH_MAX + 1), b = below(&rng, ARITH_MAX + 1);
		rc = asprintf(problem, "%u+%u=", a, b) < 0 || asprintf(answer, "%u", a + b) < 0;
	} else if (kind == RL_TASK_CALCULATOR) {
		unsigned a = CALC_MIN + below(&rng, CALC_MAX - CALC_MIN + 1);
		unsigned b = CALC_MIN + below(&rng, CALC_MAX - CALC_MIN + 1);
		rc = asprintf(problem, "%u+%u=", a, b) < 0 || asprintf(answer, "%u", a + b) < 0;
	} else if (kind == RL_TASK_GUESS) {
		rc = !(*problem = strdup("guess:")) ||
		     asprintf(answer, "%u", below(&rng, GUESS_DIGITS)) < 0;
	} else {
		unsigned len = STRING_MIN + below(&rng, STRING_MAX - STRING_MIN + 1);
		for (unsigned i = 0; i < len; i++)
			word[i] = LETTERS[below(&rng, sizeof LETTERS - 1)];
		word[len] = '\0';
		rc = asprintf(problem, "%s:%s=", names[kind], word) < 0;
		if (kind == RL_TASK_SORT)
			qsort(word, len, 1, by_char);
		rc = rc || !(*answer = strdup(word));
	}
	if (rc) {
		free(*problem);
		free(*answer);
		*problem = *answer = NULL;
		return -1;
	}
	return 0;
}

double rl_task_score(enum rl_task_kind kind, const char *response, const char *answer)
{
	size_t len, want = strlen(answer), right = 0;

	(void)kind;
	while (isspace((unsigned char)*response))
		response++;
	len = strlen(response);
	while (len > 0 && isspace((unsigned char)response[len - 1]))
		len--;
	/* credit for each character in its place, over the longer of the two:
	 * a from-scratch model finds the first digit long before it also
	 * learns to stop, and the partial score leads it there */
	for (size_t i = 0; i < len && i < want; i++)
		right += response[i] == answer[i];
	size_t longer = len > want ? len : want;
	return longer ? (double)right / (double)longer : 1.0;
}
