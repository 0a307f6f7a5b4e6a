/* The llama fixture's greedy generations by transformers
 * (tests/fixtures/models/llama.ref.json, "greedy"): two prompts and the
 * tokens transformers generated after each, for the generation tests.
 * defines: greedy_fixture_read */
#ifndef RL_TESTS_GREEDY_FIXTURE_H
#define RL_TESTS_GREEDY_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <jansson.h>

static inline void greedy_fixture_read(int32_t prompt[2][16], int prompt_len[2],
                                       int32_t want[2][16], int want_len[2])
{
	char path[4200];
	const char *top = getenv("top_srcdir") ? getenv("top_srcdir") : ".";
	json_error_t jerr;

	snprintf(path, sizeof path, "%s/tests/fixtures/models/llama.ref.json", top);
	json_t *meta = json_load_file(path, 0, &jerr);
	cr_assert_not_null(meta, "%s", jerr.text);
	json_t *gens = json_object_get(meta, "greedy");
	for (int g = 0; g < 2; g++) {
		json_t *p = json_object_get(json_array_get(gens, (size_t)g), "prompt");
		json_t *o = json_object_get(json_array_get(gens, (size_t)g), "output");
		prompt_len[g] = (int)json_array_size(p);
		want_len[g] = (int)json_array_size(o);
		cr_assert(prompt_len[g] <= 16 && want_len[g] <= 16, "greedy fixture %d too long",
		          g);
		for (int i = 0; i < prompt_len[g]; i++)
			prompt[g][i] = (int32_t)json_integer_value(json_array_get(p, (size_t)i));
		for (int i = 0; i < want_len[g]; i++)
			want[g][i] = (int32_t)json_integer_value(json_array_get(o, (size_t)i));
	}
	json_decref(meta);
}

#endif
