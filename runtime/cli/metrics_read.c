/* Reading metrics.jsonl: strict about what is there (every error names the
 * file and the line, since the file is appended to by long runs and resumed
 * runs), lenient about what is not (timers a step did not run, keys added
 * later). */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/json.h"
#include "runtime/cli/metrics_read.h"

/* the row and where it came from, so that the later of two equal steps wins */
struct entry {
	struct rl_metric_row row;
	size_t line;
};

static int fail(char *err, size_t errlen, const char *path, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail(char *err, size_t errlen, const char *path, size_t line, const char *fmt, ...)
{
	va_list ap;
	int n = line ? snprintf(err, errlen, "%s:%zu: ", path, line)
	             : snprintf(err, errlen, "%s: ", path);

	if (n < 0 || (size_t)n >= errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* KEY as a number into *out. Absent: an error when REQUIRED, else *out =
 * DFLT and *present = false. Null (how `rlrun train` writes a NaN or an
 * infinity, which JSON lacks) is DFLT too: a diverged step stays plottable. */
static int number(const json_t *obj, const char *key, bool required, double dflt, double *out,
                  bool *present, const char *path, size_t line, char *err, size_t errlen)
{
	const json_t *v = json_object_get(obj, key);

	if (!v && required)
		return fail(err, errlen, path, line, "missing \"%s\"", key);
	if (!v || json_is_null(v)) {
		*out = dflt;
		if (present)
			*present = false;
		return 0;
	}
	if (!json_is_number(v))
		return fail(err, errlen, path, line, "\"%s\" is %s, not a number", key,
		            rl_json_type_name(v));
	*out = json_number_value(v);
	if (present)
		*present = true;
	return 0;
}

static int parse_row(const json_t *obj, struct rl_metric_row *r, const char *path, size_t line,
                     char *err, size_t errlen)
{
	static const struct {
		const char *key;
		size_t off;
	} timers[] = {
	    {"total_step_time", offsetof(struct rl_metric_row, total_step_time)},
	    {"generation", offsetof(struct rl_metric_row, generation)},
	    {"reward_calculation", offsetof(struct rl_metric_row, reward_calculation)},
	    {"policy_and_reference_logprobs",
	     offsetof(struct rl_metric_row, policy_and_reference_logprobs)},
	    {"policy_training", offsetof(struct rl_metric_row, policy_training)},
	    {"refit", offsetof(struct rl_metric_row, refit)},
	    {"checkpointing", offsetof(struct rl_metric_row, checkpointing)},
	};
	const json_t *step = json_object_get(obj, "step");

	if (!step || json_is_null(step))
		return fail(err, errlen, path, line, "missing \"step\"");
	/* step 0 is the validation before the first step (grpo.val_at_start) */
	if (!json_is_integer(step) || json_integer_value(step) < 0)
		return fail(err, errlen, path, line, "\"step\" must be an integer >= 0");
	r->step = json_integer_value(step);
	/* SFT's line: its loss in the reward's place, NaN (a gap) where the
	 * line is validation only */
	r->supervised = !json_object_get(obj, "reward_mean") &&
	                (json_object_get(obj, "loss") || json_object_get(obj, "val_loss"));
	if (r->supervised)
		return number(obj, "loss", false, NAN, &r->reward_mean, NULL, path, line, err,
		              errlen) ||
		               number(obj, "val_loss", false, 0, &r->val_reward, &r->has_val, path,
		                      line, err, errlen) ||
		               number(obj, "total_step_time", false, 0, &r->total_step_time, NULL,
		                      path, line, err, errlen) ||
		               number(obj, "data_processing", false, 0, &r->data_processing, NULL,
		                      path, line, err, errlen) ||
		               number(obj, "policy_training", false, 0, &r->policy_training, NULL,
		                      path, line, err, errlen) ||
		               number(obj, "checkpointing", false, 0, &r->checkpointing, NULL, path,
		                      line, err, errlen)
		           ? -1
		           : 0;
	/* a diverged reward is a gap in the plot, not a point at 0 */
	if (number(obj, "reward_mean", true, NAN, &r->reward_mean, NULL, path, line, err, errlen) ||
	    number(obj, "reward_std", false, 0, &r->reward_std, NULL, path, line, err, errlen) ||
	    number(obj, "val_reward", false, 0, &r->val_reward, &r->has_val, path, line, err,
	           errlen))
		return -1;
	for (size_t i = 0; i < sizeof timers / sizeof timers[0]; i++) {
		double *t = (double *)((char *)r + timers[i].off);
		if (number(obj, timers[i].key, false, 0, t, NULL, path, line, err, errlen))
			return -1;
	}
	return 0;
}

static int by_step_then_line(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->row.step != y->row.step)
		return x->row.step < y->row.step ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static bool blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!strchr(" \t\r\n", s[i]))
			return false;
	return true;
}

/* Lines of PATH into *entries, in file order. */
static int read_lines(const char *path, struct entry **entries, size_t *count, char *err,
                      size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0, alloc = 0, line = 0;
	struct entry *e = NULL;
	ssize_t len;
	int rc = -1;

	if (!f)
		return fail(err, errlen, path, 0, "%s", strerror(errno));
	while ((len = getline(&buf, &cap, f)) > 0) {
		json_error_t jerr;
		json_t *obj;

		line++;
		if (blank(buf, (size_t)len))
			continue;
		obj = json_loadb(buf, (size_t)len, JSON_DECODE_ANY, &jerr);
		if (!obj) {
			if (buf[len - 1] != '\n' && feof(f))
				break; /* `rlrun train` is writing this line right now */
			if (jerr.column > 0)
				snprintf(err, errlen, "%s:%zu:%d: not JSON (%s)", path, line,
				         jerr.column, jerr.text);
			else
				fail(err, errlen, path, line, "not JSON (%s)", jerr.text);
			goto out;
		}
		if (!json_is_object(obj)) {
			fail(err, errlen, path, line, "%s, not a JSON object",
			     rl_json_type_name(obj));
			json_decref(obj);
			goto out;
		}
		if (n == alloc) {
			size_t grown = alloc ? 2 * alloc : 64;
			struct entry *p = realloc(e, grown * sizeof *e);
			if (!p) {
				json_decref(obj);
				fail(err, errlen, path, line, "out of memory");
				goto out;
			}
			e = p;
			alloc = grown;
		}
		memset(&e[n], 0, sizeof e[n]);
		e[n].line = line;
		if (parse_row(obj, &e[n].row, path, line, err, errlen)) {
			json_decref(obj);
			goto out;
		}
		json_decref(obj);
		n++;
	}
	if (ferror(f)) {
		fail(err, errlen, path, 0, "read error: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(buf);
	fclose(f);
	if (rc) {
		free(e);
		e = NULL;
		n = 0;
	}
	*entries = e;
	*count = n;
	return rc;
}

int rl_metrics_read(const char *path, struct rl_metric_row **rows, size_t *n, char *err,
                    size_t errlen)
{
	struct entry *e;
	struct rl_metric_row *out;
	size_t count, kept = 0;

	*rows = NULL;
	*n = 0;
	if (read_lines(path, &e, &count, err, errlen))
		return -1;
	if (count == 0) {
		free(e);
		return fail(err, errlen, path, 0, "no steps yet");
	}
	qsort(e, count, sizeof *e, by_step_then_line);
	out = malloc(count * sizeof *out);
	if (!out) {
		free(e);
		return fail(err, errlen, path, 0, "out of memory");
	}
	for (size_t i = 0; i < count; i++) {
		if (i + 1 < count && e[i + 1].row.step == e[i].row.step)
			continue;
		out[kept++] = e[i].row;
	}
	free(e);
	*rows = out;
	*n = kept;
	return 0;
}
