/* The tokenizer against Hugging Face `tokenizers` 0.23: the fixtures under
 * tests/fixtures/tokenizer/ (written by tests/fixtures/fixture_tokenizer.py)
 * hold small Llama 3 and Qwen2 style tokenizer.json files, a hand-written
 * one, and for each text the ids and decodings `tokenizers` produced. Bytes
 * that are not UTF-8 cannot go through `tokenizers`; for those the ids must
 * spell the input back byte for byte, and decode must equal Python's lossy
 * UTF-8 decoding. Unsupported settings must be refused naming their JSON path. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/tokenizer/internal.h"
#include "runtime/tokenizer/tokenizer.h"

static char *fixture_path(const char *variant, const char *file)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *path = NULL;

	cr_assert_geq(asprintf(&path, "%s/tests/fixtures/tokenizer/%s%s%s", top, variant,
	                       file ? "/" : "", file ? file : ""),
	              0);
	return path;
}

static json_t *load_json(const char *variant, const char *file)
{
	char *path = fixture_path(variant, file);
	json_error_t e;
	json_t *j = json_load_file(path, JSON_ALLOW_NUL, &e);

	cr_assert_not_null(j, "%s:%d: %s", path, e.line, e.text);
	free(path);
	return j;
}

static struct rl_tokenizer *load_variant(const char *variant)
{
	char *dir = fixture_path(variant, NULL), err[512];
	struct rl_tokenizer *tok = NULL;

	cr_assert_eq(rl_tokenizer_load(&tok, dir, err, sizeof(err)), 0, "%s", err);
	free(dir);
	return tok;
}

static void expect_ids(const char *what, const char *name, const int32_t *got, size_t n,
                       json_t *want)
{
	bool same = n == json_array_size(want);

	for (size_t i = 0; same && i < n; i++)
		same = got[i] == json_integer_value(json_array_get(want, i));
	if (!same) {
		size_t i = 0;

		while (i < n && i < json_array_size(want) &&
		       got[i] == json_integer_value(json_array_get(want, i)))
			i++;
		cr_expect(0, "%s %s: %zu ids, want %zu; first difference at %zu: got %d want %lld",
		          name, what, n, json_array_size(want), i, i < n ? got[i] : -1,
		          (long long)json_integer_value(json_array_get(want, i)));
	}
}

static void expect_decode(const struct rl_tokenizer *tok, const char *name, const char *what,
                          json_t *ids, bool skip, json_t *want)
{
	size_t n = json_array_size(ids), len = 0;
	int32_t *v = malloc((n + 1) * sizeof(*v));
	char *text = NULL, err[512];

	for (size_t i = 0; i < n; i++)
		v[i] = (int32_t)json_integer_value(json_array_get(ids, i));
	cr_assert_eq(rl_tokenizer_decode(tok, v, n, skip, &text, &len, err, sizeof(err)), 0,
	             "%s: %s", name, err);
	cr_expect(len == json_string_length(want) &&
	              memcmp(text, json_string_value(want), len) == 0,
	          "%s %s:\n got  \"%s\"\n want \"%s\"", name, what, text, json_string_value(want));
	cr_expect_eq(text[len], 0);
	free(text);
	free(v);
}

static void check_cases(const char *variant)
{
	struct rl_tokenizer *tok = load_variant(variant);
	json_t *exp = load_json(variant, "expected.json"), *cases = json_object_get(exp, "cases");
	size_t i;
	json_t *c;

	cr_assert_gt(json_array_size(cases), 0);
	json_array_foreach(cases, i, c)
	{
		const char *name = json_string_value(json_object_get(c, "name"));
		json_t *text = json_object_get(c, "text");
		char err[512];

		for (int special = 0; special < 2; special++) {
			int32_t *ids = NULL;
			size_t n = 0;

			cr_assert_eq(rl_tokenizer_encode(tok, json_string_value(text),
			                                 json_string_length(text), special, &ids,
			                                 &n, err, sizeof(err)),
			             0, "%s: %s", name, err);
			expect_ids(special ? "(add_special)" : "", name, ids, n,
			           json_object_get(c, special ? "ids_special" : "ids"));
			free(ids);
		}
		expect_decode(tok, name, "decode(ids)", json_object_get(c, "ids"), false,
		              json_object_get(c, "decoded"));
		expect_decode(tok, name, "decode(ids_special)", json_object_get(c, "ids_special"),
		              false, json_object_get(c, "decoded_special"));
		expect_decode(tok, name, "decode(ids_special, skip_special)",
		              json_object_get(c, "ids_special"), true,
		              json_object_get(c, "decoded_special_skip"));
	}
	json_decref(exp);
	rl_tokenizer_free(tok);
}

Test(tokenizer, llama3_matches_tokenizers)
{
	check_cases("llama3");
}

Test(tokenizer, qwen2_matches_tokenizers)
{
	check_cases("qwen2");
}

Test(tokenizer, handmade_merges_match_tokenizers)
{
	check_cases("handmade");
}

static void check_vocab(const char *variant)
{
	struct rl_tokenizer *tok = load_variant(variant);
	json_t *exp = load_json(variant, "expected.json");
	json_t *tokens = json_object_get(exp, "id_to_token"),
	       *added = json_object_get(exp, "added");
	const char *key;
	json_t *v;

	cr_expect_eq(rl_tokenizer_vocab_size(tok),
	             json_integer_value(json_object_get(exp, "vocab_size")));
	cr_expect_eq(json_array_size(tokens), (size_t)rl_tokenizer_vocab_size(tok));
	for (size_t i = 0; i < json_array_size(tokens); i++) {
		const char *want = json_string_value(json_array_get(tokens, i));
		const char *got = rl_tokenizer_id_to_token(tok, (int32_t)i);

		cr_expect(got && strcmp(got, want) == 0, "id_to_token(%zu): got %s want %s", i,
		          got ? got : "NULL", want);
		cr_expect_eq(rl_tokenizer_token_to_id(tok, want), (int32_t)i, "token_to_id(%s)",
		             want);
	}
	json_object_foreach(added, key, v)
	{
		cr_expect_eq(rl_tokenizer_token_to_id(tok, key), json_integer_value(v), "%s", key);
	}
	cr_expect_null(rl_tokenizer_id_to_token(tok, -1));
	cr_expect_null(rl_tokenizer_id_to_token(tok, rl_tokenizer_vocab_size(tok)));
	cr_expect_eq(rl_tokenizer_token_to_id(tok, "<|no such token|>"), -1);
	cr_expect_eq(rl_tokenizer_token_to_id(tok, ""), -1);
	json_decref(exp);
	rl_tokenizer_free(tok);
}

Test(tokenizer, vocab_and_lookups)
{
	check_vocab("llama3");
	check_vocab("qwen2");
	check_vocab("handmade");
}

Test(tokenizer, stop_tokens_by_name)
{
	struct rl_tokenizer *l = load_variant("llama3"), *q = load_variant("qwen2");

	/* ids as written in the fixture's added_tokens */
	cr_expect_eq(rl_tokenizer_token_to_id(l, "<|begin_of_text|>"), 507);
	cr_expect_eq(rl_tokenizer_token_to_id(l, "<|end_of_text|>"), 508);
	cr_expect_eq(rl_tokenizer_token_to_id(l, "<|eot_id|>"), 509);
	cr_expect_eq(rl_tokenizer_token_to_id(q, "<|endoftext|>"), 508);
	cr_expect_eq(rl_tokenizer_token_to_id(q, "<|im_end|>"), 510);
	cr_expect_eq(rl_tokenizer_token_to_id(q, "<think>"), 511);
	cr_expect_eq(rl_tokenizer_vocab_size(l), 512);
	cr_expect_eq(rl_tokenizer_vocab_size(q), 512);
	rl_tokenizer_free(l);
	rl_tokenizer_free(q);
}

/* GPT-2's bytes_to_unicode, written out independently of the library. */
static int char_to_byte(uint32_t cp)
{
	int n = 0;

	for (int b = 0; b < 256; b++) {
		bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
		uint32_t c = printable ? (uint32_t)b : 256u + (uint32_t)n++;

		if (c == cp)
			return b;
	}
	return -1;
}

/* The token strings of ids, mapped back to raw bytes (no U+FFFD anywhere). */
static size_t raw_bytes(const struct rl_tokenizer *tok, const int32_t *ids, size_t n,
                        unsigned char *out)
{
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		const unsigned char *s =
		    (const unsigned char *)rl_tokenizer_id_to_token(tok, ids[i]);

		cr_assert_not_null(s);
		while (*s) {
			uint32_t cp = *s++;

			if (cp >= 0xc0) { /* the byte-level alphabet stops below U+0800 */
				cp = (cp & 0x1f) << 6 | (*s++ & 0x3f);
			}
			int b = char_to_byte(cp);
			cr_assert_geq(b, 0, "id %d is not a byte-level token", ids[i]);
			out[len++] = (unsigned char)b;
		}
	}
	return len;
}

static void check_invalid_utf8(const char *variant)
{
	struct rl_tokenizer *tok = load_variant(variant);
	json_t *exp = load_json(variant, "expected.json");
	json_t *list = json_object_get(exp, "invalid_utf8"), *c;
	size_t i;

	cr_assert_gt(json_array_size(list), 0);
	json_array_foreach(list, i, c)
	{
		const char *hex = json_string_value(json_object_get(c, "hex"));
		size_t n = strlen(hex) / 2, n_ids, len;
		unsigned char in[256], back[1024];
		int32_t *ids;
		char *text, err[512];

		for (size_t k = 0; k < n; k++)
			cr_assert_eq(sscanf(hex + 2 * k, "%2hhx", &in[k]), 1);
		cr_assert_eq(rl_tokenizer_encode(tok, (const char *)in, n, false, &ids, &n_ids, err,
		                                 sizeof(err)),
		             0, "%s: %s", hex, err);
		/* added tokens are plain text, not byte-level: take them out of the comparison */
		size_t m = 0;
		for (size_t k = 0; k < n_ids; k++) {
			const char *t = rl_tokenizer_id_to_token(tok, ids[k]);

			if (json_object_get(json_object_get(exp, "added"), t)) {
				memcpy(back + m, t, strlen(t));
				m += strlen(t);
			} else {
				m += raw_bytes(tok, &ids[k], 1, back + m);
			}
		}
		cr_expect(m == n && memcmp(back, in, n) == 0, "%s: the ids do not spell the input",
		          hex);
		cr_assert_eq(
		    rl_tokenizer_decode(tok, ids, n_ids, false, &text, &len, err, sizeof(err)), 0,
		    "%s: %s", hex, err);
		json_t *lossy = json_object_get(c, "lossy");
		cr_expect(len == json_string_length(lossy) &&
		              memcmp(text, json_string_value(lossy), len) == 0,
		          "%s: decode gives \"%s\", want \"%s\"", hex, text,
		          json_string_value(lossy));
		free(text);
		free(ids);
	}
	json_decref(exp);
	rl_tokenizer_free(tok);
}

Test(tokenizer, invalid_utf8_round_trips)
{
	check_invalid_utf8("llama3");
	check_invalid_utf8("qwen2");
}

Test(tokenizer, decode_refuses_unknown_ids)
{
	struct rl_tokenizer *tok = load_variant("llama3");
	const int32_t bad[][2] = {{65, 512}, {-1, 65}, {65, INT32_MAX}};
	char *text = (char *)"unchanged", err[512];
	size_t len = 7;

	for (size_t i = 0; i < 3; i++) {
		cr_expect_eq(
		    rl_tokenizer_decode(tok, bad[i], 2, false, &text, &len, err, sizeof(err)), -1);
		cr_expect_null(text);
		cr_expect(strstr(err, "is not in the vocabulary") != NULL, "%s", err);
	}
	cr_expect(strstr(err, "2147483647") != NULL && strstr(err, "position 1") != NULL, "%s",
	          err);
	rl_tokenizer_free(tok);
}

Test(tokenizer, long_inputs_round_trip)
{
	struct rl_tokenizer *tok = load_variant("qwen2");
	size_t n = 1 << 20, n_ids, len;
	char *in = malloc(n + 2), *text, err[512];
	int32_t *ids;

	/* long runs of whitespace are where PCRE2's JIT stack runs out */
	for (int pass = 0; pass < 3; pass++) {
		for (size_t i = 0; i < n; i++)
			in[i] = pass == 0 ? ' ' : pass == 1 ? "\r\n"[i % 2] : "ab"[i % 2];
		in[n] = 'x';
		cr_assert_eq(
		    rl_tokenizer_encode(tok, in, n + 1, false, &ids, &n_ids, err, sizeof(err)), 0,
		    "%s", err);
		cr_assert_eq(
		    rl_tokenizer_decode(tok, ids, n_ids, false, &text, &len, err, sizeof(err)), 0,
		    "%s", err);
		cr_expect(len == n + 1 && memcmp(text, in, len) == 0, "pass %d", pass);
		free(text);
		free(ids);
	}
	free(in);
	rl_tokenizer_free(tok);
}

Test(tokenizer, file_path_and_empty_text)
{
	char *path = fixture_path("llama3", "tokenizer.json"), err[512];
	struct rl_tokenizer *tok;
	int32_t *ids = NULL;
	size_t n = 99;

	cr_assert_eq(rl_tokenizer_load(&tok, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(rl_tokenizer_encode(tok, NULL, 0, true, &ids, &n, err, sizeof(err)), 0);
	cr_expect_eq(n, 1);
	cr_expect_eq(ids[0], 507);
	free(ids);
	rl_tokenizer_free(tok);
	free(path);
}

/* The Split regex alone, as translated for PCRE2, against Oniguruma's pieces
 * for characters where the two engines' tables differ. */
static void check_split_probe(const char *variant)
{
	json_t *exp = load_json(variant, "expected.json");
	json_t *probe = json_object_get(exp, "split_probe"), *c;
	char why[256];
	char *pat = rl_tok_translate_pattern(json_string_value(json_object_get(probe, "pattern")),
	                                     why, sizeof(why));
	int code;
	PCRE2_SIZE at;
	size_t i;

	cr_assert_not_null(pat, "%s", why);
	pcre2_code *re =
	    pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
	                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &code, &at, NULL);
	cr_assert_not_null(re);
	pcre2_match_data *md = pcre2_match_data_create(1, NULL);
	cr_assert_gt(json_array_size(json_object_get(probe, "cases")), 100);
	json_array_foreach(json_object_get(probe, "cases"), i, c)
	{
		const char *s = json_string_value(json_object_get(c, "text"));
		json_t *want = json_object_get(c, "pieces");
		size_t len = strlen(s), pos = 0, prev = 0, k = 0;
		bool same = true;

		/* Isolated: the gaps and the matches, in order */
		while (same && pos < len &&
		       pcre2_match(re, (PCRE2_SPTR)s, len, pos, 0, md, NULL) >= 0) {
			PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
			size_t cut[2][2] = {{prev, ov[0]}, {ov[0], ov[1]}};

			for (int g = 0; g < 2 && same; g++) {
				const char *w = json_string_value(json_array_get(want, k));

				if (cut[g][1] == cut[g][0])
					continue;
				same = w && strlen(w) == cut[g][1] - cut[g][0] &&
				       memcmp(w, s + cut[g][0], strlen(w)) == 0;
				k++;
			}
			prev = pos = ov[1];
		}
		if (same && prev < len) {
			const char *w = json_string_value(json_array_get(want, k++));

			same = w && strcmp(w, s + prev) == 0;
		}
		cr_expect(same && k == json_array_size(want), "%s: pieces of \"%s\" differ at %zu",
		          variant, s, k);
	}
	pcre2_match_data_free(md);
	pcre2_code_free(re);
	free(pat);
	json_decref(exp);
}

Test(tokenizer, split_regex_matches_oniguruma)
{
	check_split_probe("llama3");
	check_split_probe("qwen2");
}

/* ---- what must be refused ---- */

static char *write_json(const char *dir, json_t *j)
{
	char *path = NULL;

	cr_assert_geq(asprintf(&path, "%s/tokenizer.json", dir), 0);
	cr_assert_eq(json_dump_file(j, path, 0), 0);
	return path;
}

static void expect_refused(const char *variant, const char *jpath, json_t *value,
                           const char *needle)
{
	json_t *root = load_json(variant, "tokenizer.json"), *parent = root;
	char dir[] = "/tmp/rl-tok-XXXXXX", err[1024] = "", key[128];
	const char *p = jpath;
	struct rl_tokenizer *tok = NULL;

	cr_assert_not_null(mkdtemp(dir));
	/* walk "a.b[2].c": every step but the last selects, the last is set */
	for (;;) {
		size_t k = strcspn(p, ".[");
		bool last;

		memcpy(key, p, k);
		key[k] = 0;
		p += k;
		last = *p == 0;
		if (key[0] && last) {
			if (value)
				json_object_set_new(parent, key, value);
			else
				json_object_del(parent, key);
			break;
		}
		if (key[0])
			parent = json_object_get(parent, key);
		if (*p == '.') {
			p++;
		} else if (*p == '[') {
			size_t idx = strtoul(p + 1, (char **)&p, 10);

			p++; /* ] */
			if (*p == 0) {
				if (idx == json_array_size(parent))
					json_array_append_new(parent, value);
				else
					json_array_set_new(parent, idx, value);
				break;
			}
			parent = json_array_get(parent, idx);
			if (*p == '.')
				p++;
		}
		cr_assert_not_null(parent, "%s", jpath);
	}
	char *path = write_json(dir, root);
	cr_expect_eq(rl_tokenizer_load(&tok, dir, err, sizeof(err)), -1, "%s accepted", jpath);
	cr_expect_null(tok);
	cr_expect(strstr(err, needle) != NULL, "%s: missing \"%s\" in: %s", jpath, needle, err);
	cr_expect(strstr(err, path) != NULL, "the message names no file: %s", err);
	unlink(path);
	rmdir(dir);
	free(path);
	json_decref(root);
}

Test(tokenizer, refuses_what_it_does_not_implement)
{
	expect_refused("llama3", "model.type", json_string("WordPiece"), "model.type");
	expect_refused("llama3", "model.byte_fallback", json_true(), "model.byte_fallback");
	expect_refused("llama3", "model.dropout", json_real(0.1), "model.dropout");
	expect_refused("llama3", "model.continuing_subword_prefix", json_string("##"),
	               "model.continuing_subword_prefix");
	expect_refused("llama3", "model.unk_token", json_string("<unk>"), "model.unk_token");
	expect_refused("llama3", "model.vocab.a", json_integer(-3), "model.vocab[\"a\"]");
	expect_refused("llama3", "model.vocab.a", json_integer(66), "id 66");
	expect_refused("llama3", "model.merges[251]", json_pack("[ss]", "a", "no such"),
	               "model.merges[251]");
	expect_refused("qwen2", "model.merges[3]", json_string("a b c"), "model.merges[3]");
	expect_refused("llama3", "normalizer", json_pack("{ss}", "type", "NFKC"),
	               "normalizer.type");
	expect_refused("qwen2", "normalizer",
	               json_pack("{ss s[{ss}{ss}]}", "type", "Sequence", "normalizers", "type",
	                         "NFC", "type", "Lowercase"),
	               "normalizer.normalizers[1].type");
	expect_refused("llama3", "pre_tokenizer.pretokenizers[0].behavior", json_string("Removed"),
	               "pre_tokenizer.pretokenizers[0].behavior");
	expect_refused("llama3", "pre_tokenizer.pretokenizers[0].invert", json_true(),
	               "pre_tokenizer.pretokenizers[0].invert");
	expect_refused("llama3", "pre_tokenizer.pretokenizers[0].pattern",
	               json_pack("{ss}", "String", " "), "pre_tokenizer.pretokenizers[0].pattern");
	expect_refused("llama3", "pre_tokenizer.pretokenizers[0].pattern",
	               json_pack("{ss}", "Regex", "\\w+|\\s+"), "\\w is not supported");
	expect_refused("llama3", "pre_tokenizer.pretokenizers[0].pattern",
	               json_pack("{ss}", "Regex", "\\s*"), "can match nothing");
	expect_refused("llama3", "pre_tokenizer.pretokenizers[0].pattern",
	               json_pack("{ss}", "Regex", "(ab"), "PCRE2");
	expect_refused("llama3", "pre_tokenizer.pretokenizers[1].add_prefix_space", json_true(),
	               "pre_tokenizer.pretokenizers[1].add_prefix_space");
	expect_refused("llama3", "pre_tokenizer.pretokenizers[1].use_regex", NULL,
	               "pre_tokenizer.pretokenizers[1].use_regex");
	expect_refused("qwen2", "pre_tokenizer.pretokenizers[1]",
	               json_pack("{ss}", "type", "Digits"), "must end with ByteLevel");
	expect_refused("qwen2", "pre_tokenizer", json_null(), "pre_tokenizer: null");
	expect_refused("llama3", "added_tokens[0].lstrip", json_true(), "added_tokens[0].lstrip");
	expect_refused("qwen2", "added_tokens[3].single_word", json_true(),
	               "added_tokens[3].single_word");
	expect_refused("llama3", "added_tokens[2].id", json_integer(600), "added_tokens[2].id");
	expect_refused("llama3", "added_tokens[1].content", json_string("<|begin_of_text|>"),
	               "listed twice");
	expect_refused("llama3", "post_processor", json_pack("{ss}", "type", "RobertaProcessing"),
	               "post_processor.type");
	expect_refused("llama3", "post_processor.processors[1].single[0].SpecialToken.id",
	               json_string("<|nope|>"), "post_processor.processors[1].single[0]");
	expect_refused("llama3", "decoder", json_null(), "decoder.type");
	expect_refused("llama3", "truncation", json_pack("{si}", "max_length", 8), "truncation");
	expect_refused("llama3", "padding", json_pack("{ss}", "strategy", "BatchLongest"),
	               "padding");
	expect_refused("llama3", "version", json_string("2.0"), "version");
}

Test(tokenizer, load_errors_name_the_file)
{
	char dir[] = "/tmp/rl-tok-XXXXXX", err[512], *path = NULL;
	struct rl_tokenizer *tok = NULL;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));
	cr_expect_eq(rl_tokenizer_load(&tok, dir, err, sizeof(err)), -1);
	cr_expect(strstr(err, dir) && strstr(err, "tokenizer.json"), "%s", err);
	cr_assert_geq(asprintf(&path, "%s/tokenizer.json", dir), 0);
	f = fopen(path, "w");
	fputs("{\"model\": {\"type\": \"BPE\",", f);
	fclose(f);
	cr_expect_eq(rl_tokenizer_load(&tok, path, err, sizeof(err)), -1);
	cr_expect(strstr(err, path) && strstr(err, "line 1"), "%s", err);
	cr_expect_null(tok);
	unlink(path);
	rmdir(dir);
	free(path);
}
