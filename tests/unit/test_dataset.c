/* JSONL loading: hand-written files with the values they must give, and
 * every error with the file and line it must name. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "runtime/data/dataset.h"
#include "tests/unit/helpers.h"

static char err[1024];

/* Writes TEXT (LEN bytes, may hold NULs) to DIR/data.jsonl. */
static char *write_bytes(const char *dir, const char *text, size_t len)
{
	char *path = NULL;
	FILE *f;

	cr_assert_geq(asprintf(&path, "%s/data.jsonl", dir), 0);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(text, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
	return path;
}

/* Loads TEXT and expects failure with "<path>:<where>" and NEEDLE. */
static void expect_error(const char *text, size_t len, bool need_answer, const char *where,
                         const char *needle)
{
	char *dir = tmp_dir(), *path = write_bytes(dir, text, len);
	struct rl_dataset ds;

	cr_assert_eq(rl_dataset_load_jsonl(path, "problem", "expected_answer", need_answer, &ds,
	                                   err, sizeof err),
	             -1, "loaded %s", text);
	expect_error_at(err, path, where, needle);
	cr_expect_eq(ds.n, 0);
	cr_expect_null(ds.ex);
	cr_expect_null(ds.path);
	free(path);
	remove_tree(dir);
	free(dir);
}

#define ERR(text, need, where, needle) expect_error(text, sizeof(text) - 1, need, where, needle)

Test(dataset, happy_path)
{
	const char text[] =
	    "\xef\xbb\xbf{\"problem\": \"What is 6*7?\", \"expected_answer\": 42}\n"
	    "\n"
	    "   \t \n"
	    "{\"expected_answer\": \"x = 3\", \"problem\": \"Solve x+1=4\", \"id\": 7}\r\n"
	    "{\"problem\": \"caf\\u00e9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\", "
	    "\"expected_answer\": 0.1}\r\n"
	    "{\"problem\": \"a\\nb\\\"c\", \"expected_answer\": 2.0}\n"
	    "{\"problem\": \"neg\", \"expected_answer\": -17}\n"
	    "{\"problem\": \"big\", \"expected_answer\": 1e300}\n"
	    "{\"problem\": \"small\", \"expected_answer\": 1.5e-7}\n"
	    "{\"problem\": \"third\", \"expected_answer\": 0.3333333333333333}\n"
	    "{\"problem\": \"tail\", \"expected_answer\": \"\"}"; /* no final newline */
	const char *want[][2] = {
	    {"What is 6*7?", "42"},
	    {"Solve x+1=4", "x = 3"},
	    {"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "0.1"},
	    {"a\nb\"c", "2"},
	    {"neg", "-17"},
	    {"big", "1e+300"},
	    {"small", "1.5e-07"},
	    {"third", "0.3333333333333333"},
	    {"tail", ""},
	};
	char *dir = tmp_dir(), *path = write_bytes(dir, text, sizeof text - 1);
	struct rl_dataset ds;

	cr_assert_eq(
	    rl_dataset_load_jsonl(path, "problem", "expected_answer", true, &ds, err, sizeof err),
	    0, "%s", err);
	cr_assert_eq(ds.n, 9);
	cr_expect_str_eq(ds.path, path);
	for (size_t i = 0; i < ds.n; i++) {
		cr_expect_str_eq(ds.ex[i].problem, want[i][0], "example %zu", i);
		cr_expect_str_eq(ds.ex[i].answer, want[i][1], "example %zu", i);
	}
	rl_dataset_free(&ds);
	cr_expect_eq(ds.n, 0);
	free(path);
	remove_tree(dir);
	free(dir);
}

Test(dataset, other_keys_and_optional_answers)
{
	const char text[] = "{\"question\": \"q1\", \"answer\": \"a1\"}\n"
	                    "{\"question\": \"q2\"}\n"
	                    "{\"question\": \"q3\", \"answer\": null}\n";
	char *dir = tmp_dir(), *path = write_bytes(dir, text, sizeof text - 1);
	struct rl_dataset ds;

	cr_assert_eq(rl_dataset_load_jsonl(path, "question", "answer", false, &ds, err, sizeof err),
	             0, "%s", err);
	cr_assert_eq(ds.n, 3);
	cr_expect_str_eq(ds.ex[0].problem, "q1");
	cr_expect_str_eq(ds.ex[0].answer, "a1");
	cr_expect_str_eq(ds.ex[1].problem, "q2");
	cr_expect_null(ds.ex[1].answer);
	cr_expect_null(ds.ex[2].answer);
	rl_dataset_free(&ds);
	free(path);
	remove_tree(dir);
	free(dir);
}

Test(dataset, one_mebibyte_line)
{
	const size_t big = 1 << 20;
	char *problem = malloc(big + 1), *text = NULL, *dir = tmp_dir(), *path;
	struct rl_dataset ds;
	int len;

	cr_assert_not_null(problem);
	for (size_t i = 0; i < big; i++)
		problem[i] = (char)('a' + i % 26);
	problem[big] = '\0';
	len = asprintf(&text,
	               "{\"problem\": \"short\", \"expected_answer\": 1}\n"
	               "{\"problem\": \"%s\", \"expected_answer\": \"long\"}\n"
	               "{\"problem\": \"after\", \"expected_answer\": 3}\n",
	               problem);
	cr_assert_gt(len, 0);
	path = write_bytes(dir, text, (size_t)len);
	cr_assert_eq(
	    rl_dataset_load_jsonl(path, "problem", "expected_answer", true, &ds, err, sizeof err),
	    0, "%s", err);
	cr_assert_eq(ds.n, 3);
	cr_expect_eq(strlen(ds.ex[1].problem), big);
	cr_expect_eq(strcmp(ds.ex[1].problem, problem), 0);
	cr_expect_str_eq(ds.ex[2].problem, "after");
	rl_dataset_free(&ds);
	free(problem);
	free(text);
	free(path);
	remove_tree(dir);
	free(dir);
}

Test(dataset, many_lines)
{
	/* More rows than the first allocation, so the array must grow. */
	char *dir = tmp_dir(), *path = NULL, *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct rl_dataset ds;
	char want[32];

	for (int i = 0; i < 1000; i++)
		fprintf(f, "{\"problem\": \"p%d\", \"expected_answer\": %d}\n", i, i * 3);
	fclose(f);
	path = write_bytes(dir, text, len);
	cr_assert_eq(
	    rl_dataset_load_jsonl(path, "problem", "expected_answer", true, &ds, err, sizeof err),
	    0, "%s", err);
	cr_assert_eq(ds.n, 1000);
	snprintf(want, sizeof want, "%d", 999 * 3);
	cr_expect_str_eq(ds.ex[999].answer, want);
	cr_expect_str_eq(ds.ex[500].problem, "p500");
	rl_dataset_free(&ds);
	free(text);
	free(path);
	remove_tree(dir);
	free(dir);
}

Test(dataset, invalid_json_names_line_and_column)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	/* 11 good lines, one blank among them, then a bad 12th line. */
	for (int i = 0; i < 10; i++)
		fprintf(f, "{\"problem\": \"p\", \"expected_answer\": 1}\n");
	fprintf(f, "\n{\"problem\": }\n{\"problem\": \"p\", \"expected_answer\": 1}\n");
	fclose(f);
	expect_error(text, len, true, ":12: not valid JSON: ", "(column ");
	free(text);
}

Test(dataset, trailing_garbage)
{
	ERR("{\"problem\": \"p\", \"expected_answer\": 1} x\n", true,
	    ":1: not valid JSON: ", "column");
}

Test(dataset, missing_problem_lists_fields)
{
	ERR("{\"problem\": \"p\", \"expected_answer\": 1}\n\n{\"question\": \"q\", \"answer\": "
	    "2}\n",
	    true, ":3: ", "no field 'problem' (fields: question, answer)");
}

Test(dataset, missing_problem_many_fields)
{
	ERR("{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"e\": 5, \"f\": 6, \"g\": 7}\n", true,
	    ":1: ", "no field 'problem' (fields: a, b, c, d, e, and 2 more)");
}

Test(dataset, empty_object)
{
	ERR("{}\n", true, ":1: ", "no field 'problem' (the object is empty)");
}

Test(dataset, problem_wrong_type)
{
	ERR("{\"problem\": \"p\", \"expected_answer\": 1}\n"
	    "{\"problem\": \"p\", \"expected_answer\": 1}\n"
	    "{\"problem\": \"p\", \"expected_answer\": 1}\n"
	    "{\"problem\": 12, \"expected_answer\": 1}\n",
	    true, ":4: ", "field 'problem' is an integer, expected a string");
	ERR("{\"problem\": [\"p\"], \"expected_answer\": 1}\n", true,
	    ":1: ", "field 'problem' is an array, expected a string");
}

Test(dataset, not_an_object)
{
	ERR("[1, 2]\n", true, ":1: ", "the line is an array, expected a JSON object");
	ERR("{\"problem\": \"p\", \"expected_answer\": 1}\n\"text\"\n", true,
	    ":2: ", "the line is a string, expected a JSON object");
}

Test(dataset, empty_problem)
{
	ERR("{\"problem\": \"\", \"expected_answer\": 1}\n", true,
	    ":1: ", "field 'problem' is empty");
}

Test(dataset, answer_errors)
{
	ERR("{\"problem\": \"p\"}\n", true, ":1: ", "no field 'expected_answer' (fields: problem)");
	ERR("{\"problem\": \"p\", \"expected_answer\": null}\n", true,
	    ":1: ", "field 'expected_answer' is null, expected a string or a number");
	ERR("{\"problem\": \"p\", \"expected_answer\": true}\n", false,
	    ":1: ", "field 'expected_answer' is a boolean, expected a string or a number");
	ERR("{\"problem\": \"p\", \"expected_answer\": {\"v\": 1}}\n", false,
	    ":1: ", "field 'expected_answer' is an object, expected a string or a number");
}

/* extra_env_info (NeMo-RL's key): an object kept as compact JSON text in
 * the file's key order, for the episode's environment; absent or null: none. */
Test(dataset, extra_env_info_kept_as_json_text)
{
	const char text[] = "{\"problem\": \"p1\", \"extra_env_info\": {\"z\": 1, \"a\": [true, "
	                    "null, \"s\\u00e9\"],"
	                    " \"n\": {\"k\": 2.5}}}\n"
	                    "{\"problem\": \"p2\"}\n"
	                    "{\"problem\": \"p3\", \"extra_env_info\": null}\n"
	                    "{\"problem\": \"p4\", \"extra_env_info\": {}}\n";
	char *dir = tmp_dir(), *path = write_bytes(dir, text, sizeof text - 1);
	struct rl_dataset ds;

	cr_assert_eq(
	    rl_dataset_load_jsonl(path, "problem", "expected_answer", false, &ds, err, sizeof err),
	    0, "%s", err);
	cr_assert_eq(ds.n, 4);
	cr_expect_str_eq(ds.ex[0].metadata,
	                 "{\"z\":1,\"a\":[true,null,\"s\xc3\xa9\"],\"n\":{\"k\":2.5}}");
	cr_expect_null(ds.ex[1].metadata);
	cr_expect_null(ds.ex[2].metadata);
	cr_expect_str_eq(ds.ex[3].metadata, "{}");
	rl_dataset_free(&ds);
	free(path);
	remove_tree(dir);
	free(dir);
}

Test(dataset, extra_env_info_errors_name_the_line)
{
	ERR("{\"problem\": \"p\"}\n{\"problem\": \"q\", \"extra_env_info\": \"x\"}\n", false,
	    ":2: ", "field 'extra_env_info' is a string, expected an object");
	ERR("{\"problem\": \"p\", \"extra_env_info\": [1]}\n", false,
	    ":1: ", "field 'extra_env_info' is an array, expected an object");
	ERR("{\"problem\": \"p\", \"extra_env_info\": 3}\n", false,
	    ":1: ", "field 'extra_env_info' is an integer, expected an object");
}

Test(dataset, invalid_utf8)
{
	ERR("{\"problem\": \"p\", \"expected_answer\": 1}\n{\"problem\": \"\xff\", "
	    "\"expected_answer\": 1}\n",
	    true, ":2: ", "not valid UTF-8 at byte 14 of the line");
	/* an overlong '/' */
	ERR("{\"problem\": \"\xc0\xaf\", \"expected_answer\": 1}\n", true,
	    ":1: ", "not valid UTF-8 at byte 14");
}

Test(dataset, nul_byte)
{
	const char text[] = "{\"problem\": \"a\0b\", \"expected_answer\": 1}\n";

	expect_error(text, sizeof text - 1, true, ":1: ", "a NUL byte at byte 15 of the line");
}

Test(dataset, no_examples)
{
	ERR("\n  \n\t\r\n", true, ": ", "no examples");
	ERR("", true, ": ", "no examples");
}

Test(dataset, cannot_open)
{
	struct rl_dataset ds;

	cr_assert_eq(rl_dataset_load_jsonl("/nonexistent-dir/train.jsonl", "problem", "a", true,
	                                   &ds, err, sizeof err),
	             -1);
	cr_expect_str_eq(err,
	                 "/nonexistent-dir/train.jsonl: cannot open: No such file or directory");
}

Test(dataset, directory)
{
	char *dir = tmp_dir();
	struct rl_dataset ds;

	cr_assert_eq(rl_dataset_load_jsonl(dir, "problem", "a", true, &ds, err, sizeof err), -1);
	expect_contains(err, dir);
	remove_tree(dir);
	free(dir);
}

Test(dataset, utf8_check_table)
{
	static const struct {
		const char *s;
		size_t n, want;
	} cases[] = {
	    {"plain", 5, 5},
	    {"\xc3\xa9", 2, 2},         /* U+00E9 */
	    {"\xe2\x82\xac", 3, 3},     /* U+20AC */
	    {"\xf0\x9f\x98\x80", 4, 4}, /* U+1F600 */
	    {"\xf4\x8f\xbf\xbf", 4, 4}, /* U+10FFFF, the last */
	    {"ab\x80", 3, 2},           /* lone continuation byte */
	    {"\xc1\xbf", 2, 0},         /* overlong U+007F */
	    {"\xe0\x9f\xbf", 3, 0},     /* overlong U+07FF */
	    {"\xf0\x8f\xbf\xbf", 4, 0}, /* overlong U+FFFF */
	    {"x\xed\xa0\x80", 4, 1},    /* surrogate U+D800 */
	    {"\xf4\x90\x80\x80", 4, 0}, /* U+110000 */
	    {"\xf5\x80\x80\x80", 4, 0}, /* no such lead byte */
	    {"ok\xe2\x82", 4, 2},       /* truncated */
	    {"\xe2\x28\xa1", 3, 0},     /* bad continuation */
	    {"a\0b", 3, 1},             /* NUL */
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		cr_expect_eq(rl_utf8_check(cases[i].s, cases[i].n), cases[i].want,
		             "case %zu: %zu, want %zu", i, rl_utf8_check(cases[i].s, cases[i].n),
		             cases[i].want);
}

/* ---- chat datasets (openai_format): a conversation per line ---- */

static void expect_chat_error(const char *text, const char *where, const char *needle)
{
	char *dir = tmp_dir(), *path = write_bytes(dir, text, strlen(text));
	struct rl_dataset ds;

	cr_assert_eq(rl_dataset_load_chat(path, "messages", &ds, err, sizeof err), -1, "loaded %s",
	             text);
	expect_error_at(err, path, where, needle);
	cr_expect_eq(ds.n, 0);
	free(path);
	remove_tree(dir);
	free(dir);
}

Test(dataset, chat_conversations)
{
	const char text[] = "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
	                    " {\"role\": \"user\", \"content\": \"Hi\"},"
	                    " {\"role\": \"assistant\", \"content\": \"Hello\"}], \"id\": 1}\n"
	                    "\n"
	                    "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2=\", \"x\": 0},"
	                    " {\"role\": \"assistant\", \"content\": \"4\"}]}\n";
	char *dir = tmp_dir(), *path = write_bytes(dir, text, sizeof text - 1);
	struct rl_dataset ds;

	cr_assert_eq(rl_dataset_load_chat(path, "messages", &ds, err, sizeof err), 0, "%s", err);
	cr_assert_eq(ds.n, 2);
	/* the problem is the first user message, for messages and tables */
	cr_expect_str_eq(ds.ex[0].problem, "Hi");
	cr_expect_str_eq(ds.ex[1].problem, "2+2=");
	cr_expect_null(ds.ex[0].answer);
	cr_assert_eq(json_array_size(ds.ex[0].messages), 3);
	cr_expect_str_eq(
	    json_string_value(json_object_get(json_array_get(ds.ex[0].messages, 2), "content")),
	    "Hello");
	rl_dataset_free(&ds);
	free(path);
	remove_tree(dir);
	free(dir);
}

Test(dataset, chat_errors_name_line_and_message)
{
	expect_chat_error("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"},"
	                  " {\"role\": \"assistant\", \"content\": \"b\"}]}\n"
	                  "{\"msgs\": []}\n",
	                  ":2:", "no field 'messages' (fields: msgs)");
	expect_chat_error("{\"messages\": {\"role\": \"user\"}}\n",
	                  ":1:", "field 'messages' is an object, expected a list of messages");
	expect_chat_error("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, 3]}\n", ":1:",
	                  "messages[1] is an integer, expected an object with role and content");
	expect_chat_error("{\"messages\": [{\"role\": \"bot\", \"content\": \"a\"}]}\n",
	                  ":1:", "messages[0].role must be system, user, assistant or tool");
	expect_chat_error("{\"messages\": [{\"role\": \"user\"}]}\n",
	                  ":1:", "messages[0].content is missing, expected a string");
	expect_chat_error("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}\n",
	                  ":1:", "needs a user message and an assistant message");
}

/* The data source hands each row's extra_env_info out with its problem,
 * in the data order, as the rollout's per-group metadata. */
#include "runtime/config/diag.h"
#include "runtime/data/source.h"

Test(dataset, source_hands_out_metadata_with_the_problem)
{
	const char text[] = "{\"problem\": \"p0\", \"extra_env_info\": {\"i\": 0}}\n"
	                    "{\"problem\": \"p1\"}\n"
	                    "{\"problem\": \"p2\", \"extra_env_info\": {\"i\": 2}}\n";
	char *dir = tmp_dir(), *path = write_bytes(dir, text, sizeof text - 1), *yaml = NULL;
	struct rl_config cfg;
	struct rl_diags d = {0};
	struct rl_data_source src;
	char *prob[3], *ans[3], *prompt[3], *meta[3];

	cr_assert_geq(asprintf(&yaml,
	                       "policy:\n  model_name: builtin:tiny-llama\n"
	                       "data:\n  dataset_name: jsonl\n  shuffle: false\n"
	                       "  train:\n    path: %s\n  validation:\n    path: %s\n",
	                       path, path),
	              0);
	cr_assert_eq(rl_config_load_text("t.yaml", yaml, strlen(yaml), dir, NULL, 0, &cfg, &d), 0,
	             "%s", diag_text(&d));
	cr_assert_eq(rl_data_source_open(&src, &cfg, 3, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_data_source_next(&src, 3, prob, ans, prompt, meta, err, sizeof err), 1,
	             "%s", err);
	for (int i = 0; i < 3; i++) {
		char want[16];

		cr_expect_eq(prob[i][1] - '0', i, "row %d is %s", i, prob[i]);
		snprintf(want, sizeof want, "{\"i\":%d}", i);
		if (i == 1)
			cr_expect_null(meta[i]);
		else
			cr_expect_str_eq(meta[i], want);
		free(prob[i]), free(ans[i]), free(prompt[i]), free(meta[i]);
	}
	/* validation examples carry theirs too */
	char *vp, *va, *vprompt, *vmeta;
	cr_assert_eq(rl_data_source_val(&src, 2, &vp, &va, &vprompt, &vmeta, err, sizeof err), 0,
	             "%s", err);
	cr_expect_str_eq(vp, "p2");
	cr_expect_str_eq(vmeta, "{\"i\":2}");
	free(vp), free(va), free(vprompt), free(vmeta);
	cr_assert_eq(rl_data_source_val(&src, 1, &vp, &va, &vprompt, &vmeta, err, sizeof err), 0,
	             "%s", err);
	cr_expect_null(vmeta);
	free(vp), free(va), free(vprompt);
	rl_data_source_close(&src);
	rl_config_free(&cfg);
	rl_diags_free(&d);
	free(yaml);
	free(path);
	remove_tree(dir);
	free(dir);
}
