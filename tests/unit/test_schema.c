#define _GNU_SOURCE
/* The key table is the single source of the validator, the defaults, the
 * printer and the docs; these checks keep it well-formed. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/config/config.h"
#include "runtime/config/schema.h"
#include "runtime/config/schema_doc.h"

Test(schema, paths_unique_documented_and_typed)
{
	for (size_t i = 0; i < rl_schema_len; i++) {
		const struct rl_key *k = &rl_schema[i];
		cr_expect(k->doc && *k->doc, "%s has no doc", k->path);
		for (size_t j = 0; j < i; j++)
			cr_expect(strcmp(k->path, rl_schema[j].path) != 0, "%s twice", k->path);
		if (k->type == RL_T_ENUM) {
			cr_expect_not_null(k->choices, "%s: enum without choices", k->path);
		}
		bool numeric = k->type == RL_T_INT || k->type == RL_T_OPT_INT ||
		               k->type == RL_T_FLOAT || k->type == RL_T_OPT_FLOAT ||
		               k->type == RL_T_INT_LIST || k->type == RL_T_FLOAT_LIST;
		if (numeric)
			cr_expect(k->min <= k->max, "%s: empty range", k->path);
		cr_expect(!(k->flags & RL_K_REQUIRED) == (k->def != NULL) ||
		              k->type == RL_T_UNSUPPORTED,
		          "%s: a key has either a default or is required", k->path);
		if (k->type != RL_T_UNSUPPORTED && !(k->flags & RL_K_IN_ENV))
			cr_expect_leq(k->offset, sizeof(struct rl_config) - 1, "%s: offset",
			              k->path);
	}
}

/* The printer nests sections by walking the table in order: a section that
 * reappears after another one would be printed twice. */
Test(schema, sections_are_contiguous)
{
	for (size_t i = 1; i < rl_schema_len; i++) {
		const char *prev = rl_schema[i - 1].path, *cur = rl_schema[i].path;
		size_t common = 0;
		while (prev[common] && prev[common] == cur[common])
			common++;
		/* every section of cur below the shared prefix must be new */
		for (const char *dot = strchr(cur + common, '.'); dot; dot = strchr(dot + 1, '.')) {
			size_t len = (size_t)(dot - cur);
			for (size_t j = 0; j + 1 < i; j++)
				cr_expect(!(strncmp(rl_schema[j].path, cur, len) == 0 &&
				            rl_schema[j].path[len] == '.' &&
				            strncmp(rl_schema[i - 1].path, cur, len) != 0),
				          "section %.*s of %s reopens after %s", (int)len, cur, cur,
				          prev);
		}
	}
}

Test(schema, find_matches_wildcards_and_unsupported_sections)
{
	cr_expect_not_null(rl_schema_find("grpo.seed"));
	cr_expect_not_null(rl_schema_find("env.anything.command"));
	cr_expect_null(rl_schema_find("env.anything"));
	cr_expect(rl_schema_is_section("env.anything"));
	cr_expect(rl_schema_is_section("policy.generation.colocated"));
	cr_expect(!rl_schema_is_section("grpo.seed"));
	const struct rl_key *k = rl_schema_find("policy.megatron_cfg.optimizer.lr");
	cr_assert_not_null(k);
	cr_expect_eq(k->type, RL_T_UNSUPPORTED);
	cr_expect_null(rl_schema_find("grpo.seedx"));
	char near[128];
	cr_expect(rl_schema_suggest("grpo.sed", near, sizeof(near)));
	cr_expect_str_eq(near, "grpo.seed");
	cr_expect(rl_schema_suggest("polcy", near, sizeof(near)));
	cr_expect_str_eq(near, "policy");
	cr_expect(!rl_schema_suggest("completely.unrelated.thing", near, sizeof(near)));
}

Test(schema, text_and_roff_docs_list_every_key)
{
	char *text = NULL, *roff = NULL;
	size_t n1 = 0, n2 = 0;
	FILE *f = open_memstream(&text, &n1);
	rl_schema_print(f, RL_SCHEMA_TEXT);
	fclose(f);
	f = open_memstream(&roff, &n2);
	rl_schema_print(f, RL_SCHEMA_ROFF);
	fclose(f);
	for (size_t i = 0; i < rl_schema_len; i++) {
		char line[300];
		snprintf(line, sizeof(line), "\n%s\n", rl_schema[i].path);
		cr_expect(strstr(text, line) || strncmp(text, line + 1, strlen(line + 1)) == 0,
		          "%s missing from --schema", rl_schema[i].path);
	}
	cr_expect(strstr(roff, ".B policy.generation.top_p\n(float in (0, 1], default 1.0)") !=
	              NULL,
	          "%s", roff);
	cr_expect(strstr(roff, "\\-") != NULL, "hyphens are escaped for roff");
	free(text);
	free(roff);
}
