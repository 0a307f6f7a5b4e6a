/* The row parsers of the two preference formats, over the data room's
 * JSONL reader (rows.h). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "runtime/base/json.h"
#include "runtime/data/preference.h"
#include "runtime/data/rows.h"

struct pref_keys {
	const char *prompt, *chosen, *rejected;
};

int rl_pref_format_parse(const char *dataset_name, enum rl_pref_format *f)
{
	if (strcmp(dataset_name, "BinaryPreferenceDataset") == 0)
		*f = RL_PREF_BINARY;
	else if (strcmp(dataset_name, "PreferenceDataset") == 0)
		*f = RL_PREF_RANKED;
	else
		return -1;
	return 0;
}

static int fill(const struct rl_rows *l, struct rl_example *ex, const char *prompt,
                const char *chosen, const char *rejected)
{
	ex->problem = strdup(prompt);
	ex->answer = strdup(chosen);
	ex->rejected = strdup(rejected);
	if (ex->problem && ex->answer && ex->rejected)
		return 0;
	free(ex->problem);
	free(ex->answer);
	free(ex->rejected);
	*ex = (struct rl_example){0};
	return rl_rows_fail(l, "out of memory");
}

/* A list of exactly one message of the given role: its non-empty content
 * (borrowed), or NULL with the message written. what names the list. */
static const char *one_message(const struct rl_rows *l, json_t *list, const char *what,
                               const char *role)
{
	json_t *msg, *r;
	const char *content;

	if (!json_is_array(list)) {
		rl_rows_fail(l, "field '%s' is %s, expected a list of messages", what,
		             rl_json_type_name(list));
		return NULL;
	}
	if (json_array_size(list) != 1) {
		rl_rows_fail(l,
		             "field '%s' has %zu messages; only a single %s message is supported "
		             "(multi-turn preference data is not implemented)",
		             what, json_array_size(list), role);
		return NULL;
	}
	msg = json_array_get(list, 0);
	if (!json_is_object(msg)) {
		rl_rows_fail(l, "field '%s[0]' is %s, expected a message object", what,
		             rl_json_type_name(msg));
		return NULL;
	}
	r = json_object_get(msg, "role");
	if (!json_is_string(r) || strcmp(json_string_value(r), role) != 0) {
		rl_rows_fail(l, "field '%s[0].role' is %s%s%s, expected \"%s\"", what,
		             json_is_string(r) ? "\"" : "",
		             json_is_string(r) ? json_string_value(r) : rl_json_type_name(r),
		             json_is_string(r) ? "\"" : "", role);
		return NULL;
	}
	char field[256];
	snprintf(field, sizeof field, "%s[0].content", what);
	json_t *c = json_object_get(msg, "content");
	if (!json_is_string(c) || json_string_length(c) == 0) {
		rl_rows_fail(l, "field '%s' is %s, expected a non-empty string", field,
		             c && json_is_string(c) ? "empty" : rl_json_type_name(c));
		return NULL;
	}
	content = json_string_value(c);
	return content;
}

static int parse_binary(const struct rl_rows *l, json_t *row, struct rl_example *ex, void *ctx)
{
	const struct pref_keys *k = ctx;
	const char *prompt, *chosen, *rejected;
	json_t *p = json_object_get(row, k->prompt);

	/* NeMo-RL takes the prompt as a string or as a list of messages */
	if (p && json_is_array(p)) {
		if (!(prompt = one_message(l, p, k->prompt, "user")))
			return -1;
	} else if (!rl_rows_take_string(l, row, k->prompt, &prompt)) {
		return -1;
	}
	if (!rl_rows_take_string(l, row, k->chosen, &chosen) ||
	    !rl_rows_take_string(l, row, k->rejected, &rejected))
		return -1;
	return fill(l, ex, prompt, chosen, rejected);
}

static int parse_ranked(const struct rl_rows *l, json_t *row, struct rl_example *ex, void *ctx)
{
	const char *prompt, *text[2];
	json_int_t rank[2];
	json_t *context = json_object_get(row, "context");
	json_t *comps = json_object_get(row, "completions");

	(void)ctx;
	if (!context)
		return rl_rows_missing_field(l, row, "context");
	if (!(prompt = one_message(l, context, "context", "user")))
		return -1;
	if (!comps)
		return rl_rows_missing_field(l, row, "completions");
	if (!json_is_array(comps))
		return rl_rows_fail(l, "field 'completions' is %s, expected a list",
		                    rl_json_type_name(comps));
	if (json_array_size(comps) != 2)
		return rl_rows_fail(l, "field 'completions' has %zu entries; DPO takes exactly 2",
		                    json_array_size(comps));
	for (int i = 0; i < 2; i++) {
		json_t *c = json_array_get(comps, (size_t)i), *r;
		char what[64];

		if (!json_is_object(c))
			return rl_rows_fail(l, "field 'completions[%d]' is %s, expected an object",
			                    i, rl_json_type_name(c));
		r = json_object_get(c, "rank");
		if (!json_is_integer(r))
			return rl_rows_fail(
			    l, "field 'completions[%d].rank' is %s, expected an integer", i,
			    rl_json_type_name(r));
		rank[i] = json_integer_value(r);
		snprintf(what, sizeof what, "completions[%d].completion", i);
		json_t *m = json_object_get(c, "completion");
		if (!m)
			return rl_rows_fail(l, "no field 'completions[%d].completion'", i);
		if (!(text[i] = one_message(l, m, what, "assistant")))
			return -1;
	}
	if (rank[0] == rank[1])
		return rl_rows_fail(l,
		                    "the two completions have the same rank %lld; ties are not "
		                    "supported (filter them out)",
		                    (long long)rank[0]);
	int c = rank[0] < rank[1] ? 0 : 1;
	return fill(l, ex, prompt, text[c], text[1 - c]);
}

int rl_dataset_load_preference(const char *path, enum rl_pref_format format, const char *prompt_key,
                               const char *chosen_key, const char *rejected_key,
                               struct rl_dataset *ds, char *err, size_t errlen)
{
	struct pref_keys k = {prompt_key, chosen_key, rejected_key};

	return rl_rows_load(path, format == RL_PREF_BINARY ? parse_binary : parse_ranked, &k, ds,
	                    err, errlen);
}
