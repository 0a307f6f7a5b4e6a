/* The replay buffer file of asynchronous GRPO (replay_buffer.h): a rollout
 * built here goes through the file and comes back field for field; a file
 * of another step, cut short or damaged is refused with its path and what
 * is wrong. */
#include "tests/unit/helpers.h"

#include "runtime/grpo/replay_buffer.h"

enum { GROUPS = 3, GROUP_SIZE = 2, MAX_LEN = 64 };

/* sample i: prompt of 2 + g tokens, response of i % 4 tokens (an empty
 * one among them), each value a function of (i, j) */
static void build(struct rl_rollout *r)
{
	cr_assert_eq(rl_rollout_alloc(r, GROUPS, GROUP_SIZE), 0);
	for (int g = 0; g < GROUPS; g++)
		cr_assert_geq(asprintf(&r->prompts[g], "prompt %d: what is %d + %d?", g, g, 2 * g),
		              0);
	for (int i = 0; i < r->n; i++) {
		struct rl_sample *s = &r->s[i];
		int n_resp = i % 4;

		s->prompt_len = 2 + s->group;
		s->len = s->prompt_len + n_resp;
		s->ids = malloc((size_t)s->len * sizeof *s->ids);
		s->gen_lp = calloc((size_t)n_resp + 1, sizeof *s->gen_lp);
		cr_assert(s->ids && s->gen_lp);
		for (int j = 0; j < s->len; j++)
			s->ids[j] = 1000 * i + j;
		for (int j = 0; j < n_resp; j++)
			s->gen_lp[j] = -0.125f * (float)(i + 1) - (float)j / 3.0f;
		cr_assert_geq(asprintf(&s->response, "answer %d", i), 0);
		s->truncated = i % 2;
		s->loss_mult = i == 4 ? 0 : 1;
	}
}

/* The file read and parsed, as a resume does on one rank. */
static int read_buffer(const char *dir, int64_t step, int max_len, struct rl_rollout *r,
                       struct rl_wire_info *info, char *err, size_t errlen)
{
	size_t len;
	unsigned char *bytes = rl_replay_buffer_load(dir, &len, err, errlen);

	memset(r, 0, sizeof *r);
	if (!bytes)
		return -1;
	int rc = rl_replay_buffer_parse(bytes, len, dir, step, max_len, r, info, err, errlen);
	free(bytes);
	return rc;
}

static char *write_buffer(const struct rl_rollout *r, int64_t step, const struct rl_wire_info *info,
                          size_t *len)
{
	struct rl_wire w = {0};
	char *dir = tmp_dir(), path[4200];

	cr_assert_eq(rl_replay_buffer_pack(&w, r, step, info), 0);
	snprintf(path, sizeof path, "%s/%s", dir, RL_CKPT_ROLLOUT_BUFFER);
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(w.buf, 1, w.len, f), w.len);
	cr_assert_eq(fclose(f), 0);
	*len = w.len;
	rl_wire_free(&w);
	return dir;
}

/* A change to the file: n bytes of p at offset at, or the file cut to
 * at bytes (p NULL). */
static void damage(const char *dir, size_t at, const void *p, size_t n)
{
	char path[4200];

	snprintf(path, sizeof path, "%s/%s", dir, RL_CKPT_ROLLOUT_BUFFER);
	if (!p) {
		cr_assert_eq(truncate(path, (off_t)at), 0);
		return;
	}
	FILE *f = fopen(path, "r+b");
	cr_assert_not_null(f);
	cr_assert_eq(fseek(f, (long)at, SEEK_SET), 0);
	cr_assert_eq(fwrite(p, 1, n, f), n);
	cr_assert_eq(fclose(f), 0);
}

static void expect_refused(const char *dir, int64_t step, const char *why)
{
	struct rl_rollout back;
	struct rl_wire_info info;
	char err[1024] = "";

	cr_expect_eq(read_buffer(dir, step, MAX_LEN, &back, &info, err, sizeof err), -1,
	             "a damaged buffer was read (%s)", why);
	expect_contains(err, RL_CKPT_ROLLOUT_BUFFER);
	expect_contains(err, why);
	cr_expect_null(back.s, "a refused buffer leaves no samples");
}

Test(replay_buffer, a_rollout_comes_back_field_for_field)
{
	struct rl_rollout r, back;
	struct rl_wire_info info = {.prompts_truncated = 2, .generation_s = 1.5}, got;
	char err[1024] = "";
	size_t len;

	build(&r);
	char *dir = write_buffer(&r, 7, &info, &len);
	cr_assert_eq(read_buffer(dir, 7, MAX_LEN, &back, &got, err, sizeof err), 0, "%s", err);
	cr_assert_eq(back.n_groups, GROUPS);
	cr_assert_eq(back.group_size, GROUP_SIZE);
	cr_expect_eq(got.prompts_truncated, 2);
	cr_expect_eq(got.generation_s, 1.5);
	for (int g = 0; g < GROUPS; g++)
		cr_expect_str_eq(back.prompts[g], r.prompts[g]);
	for (int i = 0; i < r.n; i++) {
		const struct rl_sample *a = &r.s[i], *b = &back.s[i];

		cr_expect_eq(b->group, a->group);
		cr_expect_eq(b->len, a->len, "sample %d", i);
		cr_expect_eq(b->prompt_len, a->prompt_len);
		cr_expect_eq(b->truncated, a->truncated);
		cr_expect_eq(b->loss_mult, a->loss_mult);
		cr_expect_str_eq(b->response, a->response);
		cr_expect_eq(memcmp(b->ids, a->ids, (size_t)a->len * sizeof *a->ids), 0);
		cr_expect_eq(memcmp(b->gen_lp, a->gen_lp,
		                    (size_t)(a->len - a->prompt_len) * sizeof *a->gen_lp),
		             0, "sample %d's generation logprobs", i);
		/* what training fills in later starts empty */
		cr_expect_not_null(b->prev_lp);
		cr_expect_not_null(b->ref_lp);
	}
	rl_rollout_free(&back);
	rl_rollout_free(&r);
	remove_tree(dir);
	free(dir);
}

Test(replay_buffer, another_step_a_cut_or_a_damage_is_refused_by_name)
{
	struct rl_rollout r;
	struct rl_wire_info info = {0};
	size_t len;

	build(&r);
	char *dir = write_buffer(&r, 7, &info, &len);
	expect_refused(dir, 8, "holds the rollout of step 7, but the checkpoint's next step is 8");
	damage(dir, len - 3, NULL, 0);
	expect_refused(dir, 7, "ends in its data");
	damage(dir, 40, NULL, 0); /* past the head, in the prompts */
	expect_refused(dir, 7, "cut short");
	damage(dir, 5, NULL, 0);
	expect_refused(dir, 7, "not a rollout buffer");
	rl_rollout_free(&r);
	remove_tree(dir);
	free(dir);

	build(&r);
	dir = write_buffer(&r, 7, &info, &len);
	int32_t groups = -4;
	damage(dir, 16, &groups, sizeof groups); /* the head's number of prompts */
	expect_refused(dir, 7, "its head is damaged");
	remove_tree(dir);
	free(dir);

	dir = write_buffer(&r, 7, &info, &len);
	damage(dir, 0, "XX", 2);
	expect_refused(dir, 7, "not a rollout buffer");
	remove_tree(dir);
	free(dir);

	/* a sample longer than the bound */
	dir = write_buffer(&r, 7, &info, &len);
	struct rl_rollout back;
	char err[1024] = "";
	cr_expect_eq(read_buffer(dir, 7, 4, &back, &info, err, sizeof err), -1);
	expect_contains(err, "(at most 4)");
	remove_tree(dir);
	free(dir);
	rl_rollout_free(&r);
}

Test(replay_buffer, a_missing_file_is_named)
{
	struct rl_rollout back;
	struct rl_wire_info info;
	char err[1024] = "", *dir = tmp_dir();

	cr_expect_eq(read_buffer(dir, 1, MAX_LEN, &back, &info, err, sizeof err), -1);
	expect_contains(err, RL_CKPT_ROLLOUT_BUFFER);
	expect_contains(err, "No such file");
	remove_tree(dir);
	free(dir);
}
