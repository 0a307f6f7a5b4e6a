/* SFT's examples as NeMo-RL's sft_processor makes them, on the built-in
 * tiny model's character-level tokenizer (digits are ids 0-9, 'a'..'z'
 * 10-35, '+' 36, '=' 39, ':' 40, '.' 42, <|endoftext|> 45), so that every
 * expected id below is read off its vocabulary by hand. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/chat/chat_template.h"
#include "runtime/data/sft_example.h"
#include "runtime/model/builtin.h"

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
