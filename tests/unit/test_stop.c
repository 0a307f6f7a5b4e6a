/* Stop criteria: each reason, vLLM's precedence between them, stop strings
 * straddling tokens, the earliest of several stop strings, a stop string that
 * is a prefix of another, and text whose last character is still
 * incomplete. Expected offsets are counted by hand from the strings. */
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/generate/stop.h"

/* Feeds pieces as tokens (ids 1000, 1001, ...) of a growing text; returns
 * the index of the piece that stopped, or -1, and the hit. */
static int feed(const struct rl_stop *stop, const char *const *pieces, int n,
                struct rl_stop_hit *hit)
{
	struct rl_stop_seq seq = {0};
	char text[1024];
	size_t len = 0;
	char err[256];

	for (int i = 0; i < n; i++) {
		size_t l = strlen(pieces[i]);

		cr_assert_lt(len + l, sizeof(text));
		memcpy(text + len, pieces[i], l);
		len += l;
		cr_assert_eq(rl_stop_check(stop, &seq, 1000 + i, text, len, hit, err, sizeof(err)),
		             0, "%s", err);
		if (hit->reason != RL_STOP_NONE)
			return i;
	}
	return -1;
}

static const int32_t eos[2] = {2, 7};
static const int32_t stop_ids[2] = {100, 7};

Test(stop, eos_and_stop_tokens)
{
	const struct rl_stop stop = {eos, 2, stop_ids, 2, NULL, 0, 100};
	struct rl_stop_seq seq = {0};
	struct rl_stop_hit hit;
	char err[256];

	cr_assert_eq(rl_stop_check(&stop, &seq, 5, "a", 1, &hit, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(hit.reason, RL_STOP_NONE);
	cr_assert_eq(rl_stop_check(&stop, &seq, 100, "ab", 2, &hit, err, sizeof(err)), 0);
	cr_expect_eq(hit.reason, RL_STOP_TOKEN);
	cr_expect_eq(hit.token, 100);
	cr_expect_eq(hit.offset, 2);
	cr_expect_str_eq(rl_stop_reason_name(hit.reason), "stop_token");
	/* 7 is in both lists: EOS is checked first, as in vLLM. */
	cr_assert_eq(rl_stop_check(&stop, &seq, 7, "ab", 2, &hit, err, sizeof(err)), 0);
	cr_expect_eq(hit.reason, RL_STOP_EOS);
	cr_assert_eq(rl_stop_check(&stop, &seq, 2, "ab", 2, &hit, err, sizeof(err)), 0);
	cr_expect_eq(hit.reason, RL_STOP_EOS);
	cr_expect_str_eq(rl_stop_reason_name(hit.reason), "eos");
}

Test(stop, max_tokens)
{
	const struct rl_stop stop = {eos, 2, NULL, 0, NULL, 0, 3};
	struct rl_stop_seq seq = {0};
	struct rl_stop_hit hit;
	char err[256];
	const enum rl_stop_reason want[3] = {RL_STOP_NONE, RL_STOP_NONE, RL_STOP_MAX_TOKENS};

	for (int i = 0; i < 3; i++) {
		cr_assert_eq(
		    rl_stop_check(&stop, &seq, 50, "xyz", (size_t)i + 1, &hit, err, sizeof(err)),
		    0);
		cr_expect_eq(hit.reason, want[i], "token %d", i + 1);
	}
	cr_expect_eq(hit.offset, 3);
	/* EOS as the last allowed token is reported as EOS. */
	struct rl_stop_seq seq2 = {0};
	for (int i = 0; i < 3; i++)
		cr_assert_eq(
		    rl_stop_check(&stop, &seq2, i == 2 ? 2 : 50, "", 0, &hit, err, sizeof(err)), 0);
	cr_expect_eq(hit.reason, RL_STOP_EOS);
}

Test(stop, string_spanning_tokens)
{
	const char *strs[1] = {"</answer>"};
	const struct rl_stop stop = {eos, 2, NULL, 0, strs, 1, 100};
	const char *pieces[] = {"The answer is 42", "</", "ans", "wer", "> and more"};
	struct rl_stop_hit hit;

	cr_expect_eq(feed(&stop, pieces, 5, &hit), 4);
	cr_expect_eq(hit.reason, RL_STOP_STRING);
	cr_expect_eq(hit.offset, 16); /* strlen("The answer is 42") */
	cr_expect_eq(hit.string_index, 0);
	cr_expect_str_eq(rl_stop_reason_name(hit.reason), "stop_string");
	/* Everything but the last '>': no stop. */
	cr_expect_eq(feed(&stop, pieces, 4, &hit), -1);
	cr_expect_eq(hit.reason, RL_STOP_NONE);
}

Test(stop, string_inside_a_long_text)
{
	/* Many tokens before the stop string: the incremental window must
	 * still see a string that began two tokens back. */
	const char *strs[1] = {"STOP"};
	const struct rl_stop stop = {NULL, 0, NULL, 0, strs, 1, 1000};
	const char *pieces[200];
	struct rl_stop_hit hit;

	for (int i = 0; i < 197; i++)
		pieces[i] = "ab";
	pieces[197] = "S";
	pieces[198] = "T";
	pieces[199] = "OP!";
	cr_expect_eq(feed(&stop, pieces, 200, &hit), 199);
	cr_expect_eq(hit.reason, RL_STOP_STRING);
	cr_expect_eq(hit.offset, 394);
}

Test(stop, earliest_string_wins)
{
	const char *strs[3] = {"world", "lo w", "zzz"};
	const struct rl_stop stop = {NULL, 0, NULL, 0, strs, 3, 100};
	const char *one[] = {"hello world"};
	const char *two[] = {"hel", "lo world"};
	struct rl_stop_hit hit;

	/* Both complete in the same token; "lo w" starts at 3, "world" at 6,
	 * although "world" comes first in the list. */
	cr_expect_eq(feed(&stop, one, 1, &hit), 0);
	cr_expect_eq(hit.reason, RL_STOP_STRING);
	cr_expect_eq(hit.offset, 3);
	cr_expect_eq(hit.string_index, 1);
	cr_expect_eq(feed(&stop, two, 2, &hit), 1);
	cr_expect_eq(hit.offset, 3);
	cr_expect_eq(hit.string_index, 1);
}

Test(stop, string_that_is_a_prefix_of_another)
{
	const char *strs[2] = {"<|end|>", "<|end"};
	const struct rl_stop stop = {NULL, 0, NULL, 0, strs, 2, 100};
	const char *whole[] = {"ok", "<|end|>"};
	const char *split[] = {"ok<|e", "nd", "|>"};
	struct rl_stop_hit hit;

	/* Both match at 2: the shorter one, which completes first. */
	cr_expect_eq(feed(&stop, whole, 2, &hit), 1);
	cr_expect_eq(hit.reason, RL_STOP_STRING);
	cr_expect_eq(hit.offset, 2);
	cr_expect_eq(hit.string_index, 1);
	/* Streaming, the prefix is seen a token before the longer string. */
	cr_expect_eq(feed(&stop, split, 3, &hit), 1);
	cr_expect_eq(hit.offset, 2);
	cr_expect_eq(hit.string_index, 1);

	/* A partial match of the longer one alone is not a stop. */
	const char *only_long[1] = {"<|end|>"};
	const struct rl_stop stop2 = {NULL, 0, NULL, 0, only_long, 1, 100};
	const char *partial[] = {"ok<|e", "nd", "|x"};
	cr_expect_eq(feed(&stop2, partial, 3, &hit), -1);
}

Test(stop, string_beats_max_tokens)
{
	const char *strs[1] = {"END"};
	const struct rl_stop stop = {NULL, 0, NULL, 0, strs, 1, 2};
	const char *pieces[] = {"E", "ND"};
	struct rl_stop_hit hit;

	cr_expect_eq(feed(&stop, pieces, 2, &hit), 1);
	cr_expect_eq(hit.reason, RL_STOP_STRING);
	cr_expect_eq(hit.offset, 0);
}

Test(stop, incomplete_character_is_searched_again)
{
	/* "\xe4\xb8\xad" is U+4E2D. Its first two bytes came in one token, so
	 * the decoder showed U+FFFD; the next token completes it and the text
	 * is rewritten from byte 1 on. The stop string begins at byte 1, more
	 * than len("\xe4\xb8\xad") - 1 bytes before the previous text's end. */
	const char *strs[1] = {"\xe4\xb8\xad"};
	const struct rl_stop stop = {NULL, 0, NULL, 0, strs, 1, 100};
	struct rl_stop_seq seq = {0};
	struct rl_stop_hit hit;
	char err[256];

	cr_assert_eq(rl_stop_check(&stop, &seq, 1, "x\xef\xbf\xbd", 4, &hit, err, sizeof(err)), 0);
	cr_expect_eq(hit.reason, RL_STOP_NONE);
	cr_assert_eq(rl_stop_check(&stop, &seq, 2, "x\xe4\xb8\xad", 4, &hit, err, sizeof(err)), 0);
	cr_expect_eq(hit.reason, RL_STOP_STRING);
	cr_expect_eq(hit.offset, 1);
}

Test(stop, bad_input)
{
	const char *empty[1] = {""};
	const char *null[1] = {NULL};
	struct rl_stop_seq seq = {0};
	struct rl_stop_hit hit;
	char err[256];

	struct rl_stop s = {eos, 2, NULL, 0, NULL, 0, 0};
	cr_expect_eq(rl_stop_validate(&s, err, sizeof(err)), -1);
	cr_expect(strstr(err, "max_new_tokens") != NULL, "%s", err);
	s.max_new_tokens = 10;
	cr_expect_eq(rl_stop_validate(&s, err, sizeof(err)), 0);
	s.stop_strings = empty;
	s.n_stop_strings = 1;
	cr_expect_eq(rl_stop_check(&s, &seq, 1, "a", 1, &hit, err, sizeof(err)), -1);
	cr_expect(strstr(err, "stop_strings[0]") != NULL, "%s", err);
	s.stop_strings = null;
	cr_expect_eq(rl_stop_validate(&s, err, sizeof(err)), -1);
	s.stop_strings = NULL;
	cr_expect_eq(rl_stop_validate(&s, err, sizeof(err)), -1);
	s.n_stop_strings = 0;
	s.eos_ids = NULL;
	cr_expect_eq(rl_stop_validate(&s, err, sizeof(err)), -1);
	cr_expect(strstr(err, "eos_ids") != NULL, "%s", err);
	s.n_eos_ids = 0;
	cr_expect_eq(rl_stop_check(&s, &seq, 1, NULL, 3, &hit, err, sizeof(err)), -1);
	cr_expect_eq(rl_stop_check(&s, &seq, 1, NULL, 0, &hit, err, sizeof(err)), 0);
}
