/* DPO's preference pairs from JSONL in NeMo-RL's two formats: hand-written
 * files with the pairs they must give, and every error with the file, the
 * line and the field it must name. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/data/preference.h"
#include "tests/unit/helpers.h"

static char err[1024];

static char *write_text(const char *dir, const char *text)
{
	char *path = NULL;
	FILE *f;

	cr_assert_geq(asprintf(&path, "%s/pairs.jsonl", dir), 0);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fputs(text, f) >= 0, 1);
	cr_assert_eq(fclose(f), 0);
	return path;
}

static int load(const char *text, enum rl_pref_format fmt, const char *pk, const char *ck,
                const char *rk, struct rl_dataset *ds, char **path_out, char **dir_out)
{
	*dir_out = tmp_dir();
	*path_out = write_text(*dir_out, text);
	return rl_dataset_load_preference(*path_out, fmt, pk, ck, rk, ds, err, sizeof err);
}

static void expect_pair(const struct rl_example *ex, const char *p, const char *c, const char *r)
{
	cr_expect_str_eq(ex->problem, p);
	cr_expect_str_eq(ex->answer, c);
	cr_expect_str_eq(ex->rejected, r);
}

Test(preference, format_names)
{
	enum rl_pref_format f;

	cr_assert_eq(rl_pref_format_parse("BinaryPreferenceDataset", &f), 0);
	cr_expect_eq(f, RL_PREF_BINARY);
	cr_assert_eq(rl_pref_format_parse("PreferenceDataset", &f), 0);
	cr_expect_eq(f, RL_PREF_RANKED);
	cr_expect_eq(rl_pref_format_parse("jsonl", &f), -1);
}

Test(preference, binary_with_its_own_keys)
{
	const char text[] =
	    "{\"context\": \"2+2=\", \"good\": \"4\", \"bad\": \"5\", \"id\": 1}\n"
	    "\n"
	    "{\"bad\": \"no\", \"good\": \"yes\", \"context\": [{\"role\": \"user\", \"content\": "
	    "\"Is water wet?\"}]}\n";
	struct rl_dataset ds;
	char *path, *dir;

	cr_assert_eq(load(text, RL_PREF_BINARY, "context", "good", "bad", &ds, &path, &dir), 0,
	             "%s", err);
	cr_assert_eq(ds.n, 2);
	expect_pair(&ds.ex[0], "2+2=", "4", "5");
	/* the prompt as NeMo-RL also takes it: a list of one user message */
	expect_pair(&ds.ex[1], "Is water wet?", "yes", "no");
	rl_dataset_free(&ds);
	remove_tree(dir);
	free(dir);
	free(path);
}

Test(preference, ranked_lower_rank_is_chosen)
{
	const char text[] =
	    "{\"context\": [{\"role\": \"user\", \"content\": \"Capital of Germany?\"}], "
	    "\"completions\": [{\"rank\": 1, \"completion\": [{\"role\": \"assistant\", "
	    "\"content\": \"Munich\"}]}, {\"rank\": 0, \"completion\": [{\"role\": "
	    "\"assistant\", \"content\": \"Berlin\"}]}], \"task_name\": \"geo\"}\n";
	struct rl_dataset ds;
	char *path, *dir;

	cr_assert_eq(load(text, RL_PREF_RANKED, "prompt", "chosen", "rejected", &ds, &path, &dir),
	             0, "%s", err);
	cr_assert_eq(ds.n, 1);
	expect_pair(&ds.ex[0], "Capital of Germany?", "Berlin", "Munich");
	rl_dataset_free(&ds);
	remove_tree(dir);
	free(dir);
	free(path);
}

/* Loads TEXT and expects failure with "<path>:<line>: " and NEEDLE. */
static void expect_error(const char *text, enum rl_pref_format fmt, const char *line,
                         const char *needle)
{
	struct rl_dataset ds;
	char *path, *dir, where[32];

	cr_assert_eq(load(text, fmt, "prompt", "chosen", "rejected", &ds, &path, &dir), -1,
	             "loaded %s", text);
	snprintf(where, sizeof where, ":%s: ", line);
	expect_error_at(err, path, where, needle);
	cr_expect_eq(ds.n, 0);
	free(path);
	remove_tree(dir);
	free(dir);
}

Test(preference, binary_errors)
{
	const char ok[] = "{\"prompt\": \"p\", \"chosen\": \"c\", \"rejected\": \"r\"}\n";
	char buf[512];

	snprintf(buf, sizeof buf, "%s{\"prompt\": \"p\", \"chosen\": \"c\"}\n", ok);
	expect_error(buf, RL_PREF_BINARY, "2", "no field 'rejected' (fields: prompt, chosen)");
	snprintf(buf, sizeof buf, "%s%s{\"prompt\": \"p\", \"chosen\": 3, \"rejected\": \"r\"}\n",
	         ok, ok);
	expect_error(buf, RL_PREF_BINARY, "3", "field 'chosen' is an integer, expected a string");
	expect_error("{\"prompt\": \"\", \"chosen\": \"c\", \"rejected\": \"r\"}\n", RL_PREF_BINARY,
	             "1", "field 'prompt' is empty");
	expect_error("{\"prompt\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": "
	             "\"assistant\", \"content\": \"b\"}], \"chosen\": \"c\", \"rejected\": "
	             "\"r\"}\n",
	             RL_PREF_BINARY, "1",
	             "field 'prompt' has 2 messages; only a single user message is supported");
	expect_error("[1, 2]\n", RL_PREF_BINARY, "1", "expected a JSON object");
}

Test(preference, ranked_errors)
{
	const char *user = "\"context\": [{\"role\": \"user\", \"content\": \"q\"}]";
	char buf[1024];

	snprintf(buf, sizeof buf, "{%s}\n", user);
	expect_error(buf, RL_PREF_RANKED, "1", "no field 'completions'");
	snprintf(buf, sizeof buf,
	         "{%s, \"completions\": [{\"rank\": 0, \"completion\": [{\"role\": "
	         "\"assistant\", \"content\": \"a\"}]}]}\n",
	         user);
	expect_error(buf, RL_PREF_RANKED, "1",
	             "field 'completions' has 1 entries; DPO takes exactly 2");
	snprintf(buf, sizeof buf,
	         "{%s, \"completions\": [{\"rank\": 0, \"completion\": [{\"role\": "
	         "\"assistant\", \"content\": \"a\"}]}, {\"rank\": 0, \"completion\": [{\"role\": "
	         "\"assistant\", \"content\": \"b\"}]}]}\n",
	         user);
	expect_error(buf, RL_PREF_RANKED, "1", "the same rank 0; ties are not supported");
	snprintf(buf, sizeof buf,
	         "{%s, \"completions\": [{\"rank\": \"0\", \"completion\": []}, {}]}\n", user);
	expect_error(buf, RL_PREF_RANKED, "1",
	             "field 'completions[0].rank' is a string, expected an integer");
	snprintf(buf, sizeof buf,
	         "{%s, \"completions\": [{\"rank\": 0, \"completion\": [{\"role\": "
	         "\"user\", \"content\": \"a\"}]}, {\"rank\": 1, \"completion\": []}]}\n",
	         user);
	expect_error(
	    buf, RL_PREF_RANKED, "1",
	    "field 'completions[0].completion[0].role' is \"user\", expected \"assistant\"");
	expect_error("{\"context\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": "
	             "\"user\", \"content\": \"q\"}], \"completions\": []}\n",
	             RL_PREF_RANKED, "1",
	             "field 'context' has 2 messages; only a single user message is supported "
	             "(multi-turn preference data is not implemented)");
}
