/* SFT's examples as NeMo-RL's sft_processor makes them, on the built-in
 * tiny model's character-level tokenizer (digits are ids 0-9, 'a'..'z'
 * 10-35, '+' 36, '=' 39, ':' 40, '.' 42, <|endoftext|> 45), so that every
 * expected id below is read off its vocabulary by hand. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "runtime/chat/chat_template.h"
#include "runtime/data/sft_example.h"
#include "runtime/model/builtin.h"
#include "tests/unit/helpers.h"

#define EOS 45

static struct rl_tokenizer *tok;
static struct rl_prompt plain = {.template_text = "{}"};

static void setup(void)
{
	char err[256];
	cr_assert_eq(rl_builtin_tokenizer("builtin:tiny-llama", &tok, err, sizeof err), 0, "%s",
	             err);
}

static void teardown(void)
{
	rl_tokenizer_free(tok);
}

static struct rl_sft_format format(const struct rl_prompt *p, const struct rl_chat_template *chat)
{
	return (struct rl_sft_format){.prompt = p,
	                              .chat = chat,
	                              .tok = tok,
	                              .bos_id = -1,
	                              .eos_id = EOS,
	                              .add_bos = true,
	                              .add_eos = true,
	                              .max_len = 64};
}

static void expect(const struct rl_sft_tokens *t, const int32_t *ids, const uint8_t *mask, int n)
{
	cr_assert_eq(t->len, n, "%d tokens, want %d", t->len, n);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(t->ids[i], ids[i], "id %d: %d, want %d", i, t->ids[i], ids[i]);
		cr_assert_eq(t->mask[i], mask[i], "mask %d: %d, want %d", i, t->mask[i], mask[i]);
	}
}

TestSuite(sft_example, .init = setup, .fini = teardown);

/* "3+4=" then "7" and EOS; the loss on the answer and EOS only */
Test(sft_example, problem_and_answer)
{
	struct rl_example ex = {.problem = "3+4=", .answer = "7"};
	struct rl_sft_format f = format(&plain, NULL);
	struct rl_sft_tokens t;
	char err[256];

	cr_assert_eq(rl_sft_encode(&f, &ex, &t, err, sizeof err), 0, "%s", err);
	expect(&t, (int32_t[]){3, 36, 4, 39, 7, EOS}, (uint8_t[]){0, 0, 0, 0, 1, 1}, 6);
	cr_assert(!t.overlong);
	rl_sft_tokens_free(&t);

	/* an answer that already ends with EOS before newlines gets none */
	ex.answer = "7<|endoftext|>";
	cr_assert_eq(rl_sft_encode(&f, &ex, &t, err, sizeof err), 0, "%s", err);
	expect(&t, (int32_t[]){3, 36, 4, 39, 7, EOS}, (uint8_t[]){0, 0, 0, 0, 1, 1}, 6);
	rl_sft_tokens_free(&t);

	/* train_on_inputs: every token but the first, which nothing predicts */
	ex.answer = "7";
	f.train_on_inputs = true;
	f.add_eos = false;
	cr_assert_eq(rl_sft_encode(&f, &ex, &t, err, sizeof err), 0, "%s", err);
	expect(&t, (int32_t[]){3, 36, 4, 39, 7}, (uint8_t[]){0, 1, 1, 1, 1}, 5);
	rl_sft_tokens_free(&t);
}

/* NeMo-RL's overlong example: 6 tokens with a limit of 6 is out of the
 * loss, each of its 2 turns cut to min(4, 6 / 2) = 3 tokens */
Test(sft_example, overlong_is_cut_and_masked)
{
	struct rl_example ex = {.problem = "3+4=", .answer = "7"};
	struct rl_sft_format f = format(&plain, NULL);
	struct rl_sft_tokens t;
	char err[256];

	f.max_len = 6;
	cr_assert_eq(rl_sft_encode(&f, &ex, &t, err, sizeof err), 0, "%s", err);
	cr_assert(t.overlong);
	expect(&t, (int32_t[]){3, 36, 4, 7, EOS}, (uint8_t[]){0, 0, 0, 1, 1}, 5);
	rl_sft_tokens_free(&t);
	f.max_len = 7;
	cr_assert_eq(rl_sft_encode(&f, &ex, &t, err, sizeof err), 0, "%s", err);
	cr_assert(!t.overlong);
	rl_sft_tokens_free(&t);
}

/* A conversation through the passthrough template: the turns are the
 * contents; the loss on both assistant turns (and the EOS), or with
 * only_unmask_final on the last message only. */
Test(sft_example, conversation_masks_assistant_turns)
{
	struct rl_chat_template *pass;
	char err[256];
	json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"1+1=\"},"
	                          "{\"role\":\"assistant\",\"content\":\"2\"},"
	                          "{\"role\":\"user\",\"content\":\"2+2=\"},"
	                          "{\"role\":\"assistant\",\"content\":\"4\"}]",
	                          0, NULL);
	struct rl_example ex = {.problem = "1+1=", .messages = msgs};
	struct rl_sft_tokens t;

	cr_assert_eq(rl_chat_template_from_text(&pass, RL_CHAT_PASSTHROUGH, "passthrough", NULL,
	                                        err, sizeof err),
	             0, "%s", err);
	struct rl_sft_format f = format(&plain, pass);
	const int32_t ids[] = {1, 36, 1, 39, 2, 2, 36, 2, 39, 4, EOS};
	cr_assert_eq(rl_sft_encode(&f, &ex, &t, err, sizeof err), 0, "%s", err);
	expect(&t, ids, (uint8_t[]){0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1}, 11);
	rl_sft_tokens_free(&t);
	f.only_unmask_final = true;
	cr_assert_eq(rl_sft_encode(&f, &ex, &t, err, sizeof err), 0, "%s", err);
	expect(&t, ids, (uint8_t[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, 11);
	rl_sft_tokens_free(&t);
	rl_chat_template_free(pass);
	json_decref(msgs);
}

/* With a chat template the prompt is GRPO's (the user's turn with the
 * generation prompt, "u:3+4=.a:") and the answer's turn is what the
 * template writes past it for the assistant ("7."), then EOS. In a
 * conversation without data.add_generation_prompt the assistant's header
 * "a:" is its turn's, and so trained on, as in NeMo-RL. */
Test(sft_example, chat_template_turns)
{
	const char *tpl = "{% for m in messages %}{{ m['role'][0] + ':' + m['content'] + '.' }}"
	                  "{% endfor %}{% if add_generation_prompt %}a:{% endif %}";
	struct rl_chat_template *chat;
	char err[256];

	cr_assert_eq(rl_chat_template_from_text(&chat, tpl, "test", NULL, err, sizeof err), 0, "%s",
	             err);
	struct rl_prompt p = {.template_text = "{}", .chat = chat};
	struct rl_sft_format f = format(&p, chat);
	struct rl_example ex = {.problem = "3+4=", .answer = "7"};
	struct rl_sft_tokens t;

	cr_assert_eq(rl_sft_encode(&f, &ex, &t, err, sizeof err), 0, "%s", err);
	/* u : 3 + 4 = . a : | 7 . EOS */
	expect(&t, (int32_t[]){30, 40, 3, 36, 4, 39, 42, 10, 40, 7, 42, EOS},
	       (uint8_t[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}, 12);
	rl_sft_tokens_free(&t);

	json_t *msgs = json_loads("[{\"role\":\"user\",\"content\":\"3+4=\"},"
	                          "{\"role\":\"assistant\",\"content\":\"7\"}]",
	                          0, NULL);
	struct rl_example conv = {.problem = "3+4=", .messages = msgs};
	cr_assert_eq(rl_sft_encode(&f, &conv, &t, err, sizeof err), 0, "%s", err);
	/* u : 3 + 4 = . | a : 7 . EOS */
	expect(&t, (int32_t[]){30, 40, 3, 36, 4, 39, 42, 10, 40, 7, 42, EOS},
	       (uint8_t[]){0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, 12);
	rl_sft_tokens_free(&t);
	f.add_generation_prompt = true;
	cr_assert_eq(rl_sft_encode(&f, &conv, &t, err, sizeof err), 0, "%s", err);
	expect(&t, (int32_t[]){30, 40, 3, 36, 4, 39, 42, 10, 40, 7, 42, EOS},
	       (uint8_t[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}, 12);
	rl_sft_tokens_free(&t);
	json_decref(msgs);
	rl_chat_template_free(chat);
}

/* ---- against transformers: real chat templates, real special tokens ----
 * tests/fixtures/sft/expected.json (tests/fixtures/make_sft_fixtures.py):
 * conversations through Qwen2.5's and Llama 3.1's templates with the
 * fixture models' tokenizers, cut, tokenized and masked by transformers as
 * NeMo-RL's sft_processor does; rl_sft_encode must give the same ids and
 * mask. The special tokens reach the template as tokenizer_config.json
 * gives them, written here. */

static char *fixture_path(const char *rel)
{
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	char *path = NULL;

	cr_assert_geq(asprintf(&path, "%s/tests/fixtures/%s", top, rel), 0);
	return path;
}

static int32_t id_of(const struct rl_tokenizer *t, const json_t *text)
{
	return json_is_string(text) ? rl_tokenizer_token_to_id(t, json_string_value(text)) : -1;
}

static void check_case(const json_t *c, size_t k)
{
	const char *model = json_string_value(json_object_get(c, "model"));
	char err[512], *rel = NULL, *dir = tmp_dir(), *cfg = NULL, *tpl_path, *tpl_text = NULL;
	struct rl_tokenizer *t;
	struct rl_chat_template *chat;
	size_t len = 0;

	cr_assert_geq(asprintf(&rel, "models/%s/tokenizer.json", model), 0);
	char *tok_path = fixture_path(rel);
	cr_assert_eq(rl_tokenizer_load(&t, tok_path, err, sizeof err), 0, "%s", err);
	json_t *special = json_pack("{s:O, s:O}", "bos_token", json_object_get(c, "bos_token"),
	                            "eos_token", json_object_get(c, "eos_token"));
	char *special_text = json_dumps(special, 0);
	cr_assert_geq(asprintf(&cfg, "%s/tokenizer_config.json", dir), 0);
	FILE *f = fopen(cfg, "w");
	cr_assert_not_null(f);
	fputs(special_text, f);
	fclose(f);
	free(rel);
	cr_assert_geq(
	    asprintf(&rel, "chat_templates/%s", json_string_value(json_object_get(c, "template"))),
	    0);
	tpl_path = fixture_path(rel);
	f = fopen(tpl_path, "r");
	cr_assert_not_null(f, "%s", tpl_path);
	cr_assert_geq(getdelim(&tpl_text, &len, '\0', f), 0);
	fclose(f);
	cr_assert_eq(rl_chat_template_from_text(&chat, tpl_text, tpl_path, dir, err, sizeof err), 0,
	             "%s", err);
	struct rl_prompt p = {.template_text = "{}", .chat = chat};
	struct rl_sft_format fm = {
	    .prompt = &p,
	    .chat = chat,
	    .tok = t,
	    .bos_id = id_of(t, json_object_get(c, "bos_token")),
	    .eos_id = id_of(t, json_object_get(c, "eos_token")),
	    .add_bos = true,
	    .add_eos = true,
	    .add_generation_prompt = json_is_true(json_object_get(c, "add_generation_prompt")),
	    .only_unmask_final = json_is_true(json_object_get(c, "only_unmask_final")),
	    .max_len = 100000,
	};
	json_t *msgs = json_object_get(c, "messages");
	struct rl_example ex = {.problem = "unused", .messages = msgs};
	struct rl_sft_tokens got;
	cr_assert_eq(rl_sft_encode(&fm, &ex, &got, err, sizeof err), 0, "%s", err);
	const json_t *ids = json_object_get(c, "ids"), *mask = json_object_get(c, "mask");
	cr_assert_eq((size_t)got.len, json_array_size(ids), "case %zu (%s): %d tokens, want %zu", k,
	             model, got.len, json_array_size(ids));
	for (int i = 0; i < got.len; i++) {
		cr_assert_eq(got.ids[i], json_integer_value(json_array_get(ids, (size_t)i)),
		             "case %zu (%s): token %d", k, model, i);
		cr_assert_eq(got.mask[i], json_integer_value(json_array_get(mask, (size_t)i)),
		             "case %zu (%s): mask %d", k, model, i);
	}
	rl_sft_tokens_free(&got);
	rl_chat_template_free(chat);
	rl_tokenizer_free(t);
	json_decref(special);
	free(special_text);
	free(tpl_text);
	free(tpl_path);
	free(tok_path);
	free(rel);
	unlink(cfg);
	free(cfg);
	remove_tree(dir);
	free(dir);
}

Test(sft_example, conversations_match_transformers)
{
	char *path = fixture_path("sft/expected.json");
	json_error_t je;
	json_t *cases = json_load_file(path, 0, &je), *c;
	size_t k;

	cr_assert_not_null(cases, "%s: %s", path, je.text);
	cr_assert_geq(json_array_size(cases), 16);
	json_array_foreach(cases, k, c) check_case(c, k);
	json_decref(cases);
	free(path);
}
