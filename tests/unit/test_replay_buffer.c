/* The replay buffer file of asynchronous GRPO (replay_buffer.h): rollouts
 * built here go through the file and come back field for field, in order,
 * with the steps of the weights that generated them; a version 1 file
 * (one rollout), laid out here by hand, is still read; a file of other
 * steps, cut short or damaged is refused with its path and what is
 * wrong. */
#include "tests/unit/helpers.h"

#include "runtime/rollout/replay_buffer.h"

enum { GROUPS = 3, GROUP_SIZE = 2, MAX_LEN = 64 };

/* sample i: prompt of 2 + g tokens, response of i % 4 tokens (an empty
 * one among them), each value a function of (i, j, salt) */
static void build_salted(struct rl_rollout *r, int salt)
{
	cr_assert_eq(rl_rollout_alloc(r, GROUPS, GROUP_SIZE), 0);
	for (int g = 0; g < GROUPS; g++)
		cr_assert_geq(
		    asprintf(&r->prompts[g], "prompt %d: what is %d + %d?", g, g, 2 * g + salt), 0);
	for (int i = 0; i < r->n; i++) {
		struct rl_sample *s = &r->s[i];
		int n_resp = i % 4;

		s->prompt_len = 2 + s->group;
		s->len = s->prompt_len + n_resp;
		s->ids = malloc((size_t)s->len * sizeof *s->ids);
		s->gen_lp = calloc((size_t)n_resp + 1, sizeof *s->gen_lp);
		cr_assert(s->ids && s->gen_lp);
		for (int j = 0; j < s->len; j++)
			s->ids[j] = 1000 * i + j + 100000 * salt;
		for (int j = 0; j < n_resp; j++)
			s->gen_lp[j] = -0.125f * (float)(i + 1) - (float)j / 3.0f - (float)salt;
		cr_assert_geq(asprintf(&s->response, "answer %d of %d", i, salt), 0);
		s->truncated = i % 2;
		s->loss_mult = i == 4 ? 0 : 1;
	}
}

static void build(struct rl_rollout *r)
{
	build_salted(r, 0);
}

/* The file read and parsed, as a resume does on one rank. */
static int read_buffer(const char *dir, int64_t step, int max_len, struct rl_buffered **b, int *n,
                       char *err, size_t errlen)
{
	size_t len;
	unsigned char *bytes = rl_replay_buffer_load(dir, &len, err, errlen);

	*b = NULL;
	*n = 0;
	if (!bytes)
		return -1;
	int rc = rl_replay_buffer_parse(bytes, len, dir, step, max_len, b, n, err, errlen);
	free(bytes);
	return rc;
}

static char *write_bytes(const struct rl_wire *w)
{
	char *dir = tmp_dir(), path[4200];

	snprintf(path, sizeof path, "%s/%s", dir, RL_CKPT_ROLLOUT_BUFFER);
	FILE *f = fopen(path, "wb");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(w->buf, 1, w->len, f), w->len);
	cr_assert_eq(fclose(f), 0);
	return dir;
}

/* n rollouts r[k] for steps step + k, generated after step + k - 2 (or 0) */
static char *write_buffer_of(const struct rl_rollout *r, int n, int64_t step,
                             const struct rl_wire_info *info, size_t *len)
{
	struct rl_wire w = {0};

	cr_assert_eq(rl_replay_buffer_begin(&w, n), 0);
	for (int k = 0; k < n; k++)
		cr_assert_eq(rl_replay_buffer_pack(&w, &r[k], step + k,
		                                   step + k >= 2 ? step + k - 2 : 0, info),
		             0);
	char *dir = write_bytes(&w);
	*len = w.len;
	rl_wire_free(&w);
	return dir;
}

static char *write_buffer(const struct rl_rollout *r, int64_t step, const struct rl_wire_info *info,
                          size_t *len)
{
	return write_buffer_of(r, 1, step, info, len);
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
	struct rl_buffered *back;
	int n;
	char err[1024] = "";

	cr_expect_eq(read_buffer(dir, step, MAX_LEN, &back, &n, err, sizeof err), -1,
	             "a damaged buffer was read (%s)", why);
	expect_contains(err, RL_CKPT_ROLLOUT_BUFFER);
	expect_contains(err, why);
	cr_expect_null(back, "a refused buffer leaves no rollouts");
	cr_expect_eq(n, 0);
}

static void expect_same(const struct rl_rollout *r, const struct rl_rollout *back)
{
	cr_assert_eq(back->n_groups, GROUPS);
	cr_assert_eq(back->group_size, GROUP_SIZE);
	for (int g = 0; g < GROUPS; g++)
		cr_expect_str_eq(back->prompts[g], r->prompts[g]);
	for (int i = 0; i < r->n; i++) {
		const struct rl_sample *a = &r->s[i], *b = &back->s[i];

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
}

Test(replay_buffer, a_rollout_comes_back_field_for_field)
{
	struct rl_rollout r;
	struct rl_buffered *back;
	struct rl_wire_info info = {.prompts_truncated = 2, .generation_s = 1.5};
	char err[1024] = "";
	size_t len;
	int n;

	build(&r);
	char *dir = write_buffer(&r, 7, &info, &len);
	cr_assert_eq(read_buffer(dir, 7, MAX_LEN, &back, &n, err, sizeof err), 0, "%s", err);
	cr_assert_eq(n, 1);
	cr_expect_eq(back[0].step, 7);
	cr_expect_eq(back[0].weights_step, 5);
	cr_expect_eq(back[0].info.prompts_truncated, 2);
	cr_expect_eq(back[0].info.generation_s, 1.5);
	expect_same(&r, &back[0].r);
	rl_replay_buffer_free(back, n);
	rl_rollout_free(&r);
	remove_tree(dir);
	free(dir);
}

Test(replay_buffer, several_rollouts_come_back_in_order)
{
	struct rl_rollout r[3];
	struct rl_buffered *back;
	struct rl_wire_info info = {.generation_s = 0.25};
	char err[1024] = "";
	size_t len;
	int n;

	for (int k = 0; k < 3; k++)
		build_salted(&r[k], k + 1);
	char *dir = write_buffer_of(r, 3, 4, &info, &len);
	cr_assert_eq(read_buffer(dir, 4, MAX_LEN, &back, &n, err, sizeof err), 0, "%s", err);
	cr_assert_eq(n, 3);
	for (int k = 0; k < 3; k++) {
		cr_expect_eq(back[k].step, 4 + k);
		cr_expect_eq(back[k].weights_step, 2 + k);
		expect_same(&r[k], &back[k].r);
	}
	rl_replay_buffer_free(back, n);
	/* the second rollout cut in its samples, then in its head */
	damage(dir, len - 5, NULL, 0);
	expect_refused(dir, 4, "rollout 3 of 3: cut short");
	damage(dir, len / 3 + 10, NULL, 0);
	expect_refused(dir, 4, "of 3: cut short");
	remove_tree(dir);
	free(dir);
	for (int k = 0; k < 3; k++)
		rl_rollout_free(&r[k]);
}

/* Version 1, laid out as session 3's rlrun wrote it: magic, the step, the
 * shape, the prompts' size, the prompts, one packet to the end. */
Test(replay_buffer, a_version_1_file_is_read_as_one_rollout_of_age_1)
{
	struct rl_rollout r;
	struct rl_wire w = {0};
	struct rl_wire_info info = {.prompts_truncated = 1};
	struct rl_buffered *back;
	struct rl_wire prompts = {0};
	char err[1024] = "";
	int n;

	build(&r);
	cr_assert_eq(rl_wire_pack_prompts(&prompts, &r), 0);
	int64_t step = 9, prompts_bytes = (int64_t)prompts.len;
	int32_t shape[2] = {GROUPS, GROUP_SIZE};
	cr_assert_eq(rl_wire_put(&w, "SRLROLL1", 8), 0);
	cr_assert_eq(rl_wire_put(&w, &step, sizeof step), 0);
	cr_assert_eq(rl_wire_put(&w, shape, sizeof shape), 0);
	cr_assert_eq(rl_wire_put(&w, &prompts_bytes, sizeof prompts_bytes), 0);
	cr_assert_eq(rl_wire_put(&w, prompts.buf, prompts.len), 0);
	cr_assert_eq(rl_wire_pack(&w, &r, 0, r.n, &info), 0);
	char *dir = write_bytes(&w);
	cr_assert_eq(read_buffer(dir, 9, MAX_LEN, &back, &n, err, sizeof err), 0, "%s", err);
	cr_assert_eq(n, 1);
	cr_expect_eq(back[0].step, 9);
	cr_expect_eq(back[0].weights_step, 7, "age 1: the weights of step 7 for step 9");
	cr_expect_eq(back[0].info.prompts_truncated, 1);
	expect_same(&r, &back[0].r);
	rl_replay_buffer_free(back, n);
	expect_refused(dir, 10,
	               "holds the rollout of step 9, but the checkpoint's next step is 10");
	remove_tree(dir);
	free(dir);
	rl_wire_free(&w);
	rl_wire_free(&prompts);
	rl_rollout_free(&r);
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
	expect_refused(dir, 7, "cut short");
	damage(dir, 60, NULL, 0); /* past the heads, in the prompts */
	expect_refused(dir, 7, "cut short");
	damage(dir, 5, NULL, 0);
	expect_refused(dir, 7, "not a rollout buffer");
	rl_rollout_free(&r);
	remove_tree(dir);
	free(dir);

	build(&r);
	dir = write_buffer(&r, 7, &info, &len);
	/* the file head (16 bytes), then the record's step, weights step, and
	 * number of prompts */
	int32_t groups = -4;
	damage(dir, 16 + 16, &groups, sizeof groups);
	expect_refused(dir, 7, "its head is damaged");
	remove_tree(dir);
	free(dir);

	dir = write_buffer(&r, 7, &info, &len);
	int64_t later = 7; /* generated by weights no older than the step itself */
	damage(dir, 16 + 8, &later, sizeof later);
	expect_refused(dir, 7, "its head is damaged");
	remove_tree(dir);
	free(dir);

	dir = write_buffer(&r, 7, &info, &len);
	int32_t count = 1000;
	damage(dir, 8, &count, sizeof count);
	expect_refused(dir, 7, "1000 rollouts");
	remove_tree(dir);
	free(dir);

	dir = write_buffer(&r, 7, &info, &len);
	damage(dir, 0, "XX", 2);
	expect_refused(dir, 7, "not a rollout buffer");
	remove_tree(dir);
	free(dir);

	/* a sample longer than the bound */
	dir = write_buffer(&r, 7, &info, &len);
	struct rl_buffered *back;
	int n;
	char err[1024] = "";
	cr_expect_eq(read_buffer(dir, 7, 4, &back, &n, err, sizeof err), -1);
	expect_contains(err, "(at most 4)");
	remove_tree(dir);
	free(dir);
	rl_rollout_free(&r);
}

Test(replay_buffer, a_missing_file_is_named)
{
	struct rl_buffered *back;
	int n;
	char err[1024] = "", *dir = tmp_dir();

	cr_expect_eq(read_buffer(dir, 1, MAX_LEN, &back, &n, err, sizeof err), -1);
	expect_contains(err, RL_CKPT_ROLLOUT_BUFFER);
	expect_contains(err, "No such file");
	remove_tree(dir);
	free(dir);
}
