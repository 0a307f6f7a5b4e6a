/* The replay buffer file of asynchronous GRPO (replay_buffer.h): rollouts
 * built here go through the file and come back field for field, in order,
 * with the steps of the weights that generated them, episodes with their
 * loss masks, turns and environment's rewards; version 1 and 2 files, their
 * samples laid out here by hand in the old encoding, are still read; a
 * file of other steps, cut short or damaged (a length that would size an
 * allocation, a mask over the prompt) is refused with its path and what is
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
		/* every other sample an episode: its model's tokens the odd
		 * response positions, rewarded by its environment */
		if (i % 2 && n_resp) {
			s->loss_mask = calloc((size_t)s->len, 1);
			cr_assert_not_null(s->loss_mask);
			for (int j = s->prompt_len; j < s->len; j++)
				s->loss_mask[j] = (j - s->prompt_len) % 2 == 0;
			s->turns = 1 + i + salt;
			s->env_scored = true;
			s->reward = 0.375 * (i + 1) + salt;
		} else {
			/* a reward the trainer computes again: not carried */
			s->reward = 99;
		}
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
                             const struct rl_wire_info *info,
                             const struct rl_episodes_report *episodes, size_t *len)
{
	struct rl_wire w = {0};

	cr_assert_eq(rl_replay_buffer_begin(&w, n), 0);
	for (int k = 0; k < n; k++)
		cr_assert_eq(rl_replay_buffer_pack(&w, &r[k], step + k,
		                                   step + k >= 2 ? step + k - 2 : 0, info,
		                                   episodes ? &episodes[k] : NULL),
		             0);
	char *dir = write_bytes(&w);
	*len = w.len;
	rl_wire_free(&w);
	return dir;
}

static char *write_buffer(const struct rl_rollout *r, int64_t step, const struct rl_wire_info *info,
                          size_t *len)
{
	return write_buffer_of(r, 1, step, info, NULL, len);
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
		cr_expect_eq(b->turns, a->turns, "sample %d's turns", i);
		cr_expect_eq(b->env_scored, a->env_scored, "sample %d", i);
		cr_expect_eq(b->reward, a->env_scored ? a->reward : 0, "sample %d's reward", i);
		if (a->loss_mask) {
			cr_assert_not_null(b->loss_mask, "sample %d lost its mask", i);
			cr_expect_eq(memcmp(b->loss_mask, a->loss_mask, (size_t)a->len), 0,
			             "sample %d's loss mask", i);
		} else {
			cr_expect_null(b->loss_mask, "sample %d", i);
		}
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

	/* each with its episodes' report: what the step that trains on it
	 * reports, whenever it was generated */
	struct rl_episodes_report rep[3] = {0};
	for (int k = 0; k < 3; k++) {
		build_salted(&r[k], k + 1);
		rep[k].stats = (struct rl_episode_stats){.episodes = 6,
		                                         .turns = 7 + k,
		                                         .max_turns = 2,
		                                         .natural = 5,
		                                         .failed = k,
		                                         .env_tokens = 30 + k};
		rep[k].crashed = k;
		snprintf(rep[k].first, sizeof rep[k].first, "episode %d crashed", k);
	}
	char *dir = write_buffer_of(r, 3, 4, &info, rep, &len);
	cr_assert_eq(read_buffer(dir, 4, MAX_LEN, &back, &n, err, sizeof err), 0, "%s", err);
	cr_assert_eq(n, 3);
	for (int k = 0; k < 3; k++) {
		cr_expect_eq(back[k].step, 4 + k);
		cr_expect_eq(back[k].weights_step, 2 + k);
		expect_same(&r[k], &back[k].r);
		cr_expect_eq(memcmp(&back[k].episodes.stats, &rep[k].stats, sizeof rep[k].stats), 0,
		             "rollout %d's episode stats", k);
		cr_expect_eq(back[k].episodes.crashed, k);
		cr_expect_str_eq(back[k].episodes.first, rep[k].first);
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

/* The samples of r as the wire's encoding 1 laid them out (before
 * episodes): the packet head (range, truncated prompts, generation
 * seconds), then per sample len, prompt_len, truncated, text_len (int32),
 * loss_mult (double), the tokens, the logprobs and the text. */
static void pack_encoding_1(struct rl_wire *w, const struct rl_rollout *r,
                            const struct rl_wire_info *info)
{
	int32_t range[2] = {0, r->n};

	cr_assert_eq(rl_wire_put(w, range, sizeof range), 0);
	cr_assert_eq(rl_wire_put(w, &info->prompts_truncated, sizeof(int64_t)), 0);
	cr_assert_eq(rl_wire_put(w, &info->generation_s, sizeof(double)), 0);
	for (int i = 0; i < r->n; i++) {
		const struct rl_sample *s = &r->s[i];
		int32_t head[4] = {s->len, s->prompt_len, s->truncated,
		                   (int32_t)strlen(s->response)};

		cr_assert_eq(rl_wire_put(w, head, sizeof head), 0);
		cr_assert_eq(rl_wire_put(w, &s->loss_mult, sizeof s->loss_mult), 0);
		cr_assert_eq(rl_wire_put(w, s->ids, (size_t)s->len * 4), 0);
		cr_assert_eq(rl_wire_put(w, s->gen_lp, (size_t)(s->len - s->prompt_len) * 4), 0);
		cr_assert_eq(rl_wire_put(w, s->response, strlen(s->response)), 0);
	}
}

/* r without what encoding 1 could not hold: what an old file gives back */
static void forget_episodes(struct rl_rollout *r)
{
	for (int i = 0; i < r->n; i++) {
		free(r->s[i].loss_mask);
		r->s[i].loss_mask = NULL;
		r->s[i].turns = 0;
		r->s[i].env_scored = false;
	}
}

/* Version 2, laid out as rlrun wrote it before episodes: magic, count,
 * then per rollout its record head (step, weights step, shape, the
 * prompts' and the samples' sizes), the prompts and an encoding-1 packet. */
Test(replay_buffer, a_version_2_file_is_read_without_episodes)
{
	struct rl_rollout r[2];
	struct rl_wire w = {0};
	struct rl_wire_info info = {.prompts_truncated = 3, .generation_s = 0.5};
	struct rl_buffered *back;
	char err[1024] = "";
	int n;

	cr_assert_eq(rl_wire_put(&w, "SRLROLL2", 8), 0);
	int32_t count[2] = {2, 0};
	cr_assert_eq(rl_wire_put(&w, count, sizeof count), 0);
	for (int k = 0; k < 2; k++) {
		struct rl_wire prompts = {0}, samples = {0};

		build_salted(&r[k], k + 1);
		forget_episodes(&r[k]);
		cr_assert_eq(rl_wire_pack_prompts(&prompts, &r[k]), 0);
		pack_encoding_1(&samples, &r[k], &info);
		int64_t steps[2] = {11 + k, 9 + k};
		int32_t shape[2] = {GROUPS, GROUP_SIZE};
		int64_t sizes[2] = {(int64_t)prompts.len, (int64_t)samples.len};
		cr_assert_eq(rl_wire_put(&w, steps, sizeof steps), 0);
		cr_assert_eq(rl_wire_put(&w, shape, sizeof shape), 0);
		cr_assert_eq(rl_wire_put(&w, sizes, sizeof sizes), 0);
		cr_assert_eq(rl_wire_put(&w, prompts.buf, prompts.len), 0);
		cr_assert_eq(rl_wire_put(&w, samples.buf, samples.len), 0);
		rl_wire_free(&prompts);
		rl_wire_free(&samples);
	}
	char *dir = write_bytes(&w);
	cr_assert_eq(read_buffer(dir, 11, MAX_LEN, &back, &n, err, sizeof err), 0, "%s", err);
	cr_assert_eq(n, 2);
	for (int k = 0; k < 2; k++) {
		cr_expect_eq(back[k].step, 11 + k);
		cr_expect_eq(back[k].weights_step, 9 + k);
		cr_expect_eq(back[k].info.prompts_truncated, 3);
		expect_same(&r[k], &back[k].r);
		rl_rollout_free(&r[k]);
	}
	rl_replay_buffer_free(back, n);
	remove_tree(dir);
	free(dir);
	rl_wire_free(&w);
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
	forget_episodes(&r);
	cr_assert_eq(rl_wire_pack_prompts(&prompts, &r), 0);
	int64_t step = 9, prompts_bytes = (int64_t)prompts.len;
	int32_t shape[2] = {GROUPS, GROUP_SIZE};
	cr_assert_eq(rl_wire_put(&w, "SRLROLL1", 8), 0);
	cr_assert_eq(rl_wire_put(&w, &step, sizeof step), 0);
	cr_assert_eq(rl_wire_put(&w, shape, sizeof shape), 0);
	cr_assert_eq(rl_wire_put(&w, &prompts_bytes, sizeof prompts_bytes), 0);
	cr_assert_eq(rl_wire_put(&w, prompts.buf, prompts.len), 0);
	pack_encoding_1(&w, &r, &info);
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

/* Where sample 0's head starts in a one-rollout file of build()'s
 * rollout: the file head (16), the record head (40), the episodes'
 * report, the prompts, the packet head (24). A sample's head: len,
 * prompt_len, flags, text_len (int32 each), loss_mult (double); then its
 * tokens, logprobs, mask (an episode's), text, and an episode's turns
 * (int32) and reward (double). */
static size_t first_sample_at(const struct rl_rollout *r)
{
	struct rl_wire prompts = {0};

	cr_assert_eq(rl_wire_pack_prompts(&prompts, r), 0);
	size_t at = 16 + 40 + sizeof(struct rl_episodes_report) + prompts.len + 24;
	rl_wire_free(&prompts);
	return at;
}

Test(replay_buffer, a_damaged_sample_is_refused_before_it_sizes_anything)
{
	struct rl_rollout r;
	struct rl_wire_info info = {0};
	size_t len;

	build(&r);
	size_t at = first_sample_at(&r);

	/* a text length of 2^31 - 1: refused for want of bytes, not
	 * allocated (a sanitizer build would report the 2 GiB malloc) */
	char *dir = write_buffer(&r, 7, &info, &len);
	int32_t huge = INT32_MAX;
	damage(dir, at + 12, &huge, sizeof huge);
	expect_refused(dir, 7, "sample 0: the packet ends in its data (2147483");
	remove_tree(dir);
	free(dir);

	/* flags no version has */
	dir = write_buffer(&r, 7, &info, &len);
	int32_t flags = 64;
	damage(dir, at + 8, &flags, sizeof flags);
	expect_refused(dir, 7, "sample 0: its head is damaged (flags 0x40)");
	remove_tree(dir);
	free(dir);

	/* sample 1, an episode: its mask, turns and reward */
	cr_assert(!r.s[0].loss_mask && !r.s[0].turns && r.s[1].env_scored && r.s[1].loss_mask);
	const struct rl_sample *s1 = &r.s[1];
	size_t at1 = at + 24 + (size_t)r.s[0].len * 4 +
	             (size_t)(r.s[0].len - r.s[0].prompt_len) * 4 + strlen(r.s[0].response);
	size_t mask_at = at1 + 24 + (size_t)s1->len * 4 + (size_t)(s1->len - s1->prompt_len) * 4;
	size_t turns_at = mask_at + (size_t)s1->len + strlen(s1->response);
	dir = write_buffer(&r, 7, &info, &len);
	int32_t turns = -1;
	damage(dir, turns_at, &turns, sizeof turns);
	expect_refused(dir, 7, "sample 1: damaged (-1 turns");
	remove_tree(dir);
	free(dir);
	dir = write_buffer(&r, 7, &info, &len);
	double nan = 0.0 / 0.0;
	damage(dir, turns_at + 4, &nan, sizeof nan);
	expect_refused(dir, 7, "sample 1: damaged (");
	remove_tree(dir);
	free(dir);

	/* a mask that marks a prompt token, and one that is not 0 or 1 */
	dir = write_buffer(&r, 7, &info, &len);
	damage(dir, mask_at, "\1", 1);
	expect_refused(dir, 7, "sample 1: its loss mask has 1 at token 0 (prompt of 2): damaged");
	remove_tree(dir);
	free(dir);
	dir = write_buffer(&r, 7, &info, &len);
	damage(dir, mask_at + (size_t)s1->prompt_len, "\2", 1);
	expect_refused(dir, 7, "sample 1: its loss mask has 2 at token 2");
	remove_tree(dir);
	free(dir);
	rl_rollout_free(&r);
}

/* A single response is the same bytes in both encodings: a packet of
 * them is no larger than before episodes (the generation ranks' packets
 * stay under the transport's eager size where they were). */
Test(wire, a_single_response_is_encoded_as_before)
{
	struct rl_rollout r;
	struct rl_wire now = {0}, before = {0};
	struct rl_wire_info info = {.prompts_truncated = 1, .generation_s = 2};

	build(&r);
	forget_episodes(&r);
	for (int i = 0; i < r.n; i++)
		r.s[i].env_scored = false;
	cr_assert_eq(rl_wire_pack(&now, &r, 0, r.n, &info), 0);
	pack_encoding_1(&before, &r, &info);
	cr_assert_eq(now.len, before.len);
	cr_expect_eq(memcmp(now.buf, before.buf, now.len), 0);
	rl_wire_free(&now);
	rl_wire_free(&before);
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

/* The groups a generation rank needs to play episodes (wire.h): each
 * group's prompt, problem, answer and metadata, NULLs kept, and a length
 * that does not fit refused before anything is allocated from it. */
Test(wire, groups_come_back_with_their_nulls)
{
	struct rl_rollout r, back;
	struct rl_wire w = {0};
	char err[512] = "";

	build(&r);
	for (int g = 0; g < GROUPS; g++) {
		cr_assert_geq(asprintf(&r.problems[g], "%d+%d=", g, g), 0);
		if (g != 1)
			cr_assert_geq(asprintf(&r.answers[g], "%d", 2 * g), 0);
		if (g == 2)
			r.metadata[g] = strdup("{\"secret\":\"7\",\"tools\":[\"c\"]}");
	}
	cr_assert_eq(rl_wire_pack_groups(&w, &r), 0);
	cr_assert_eq(rl_rollout_alloc(&back, GROUPS, GROUP_SIZE), 0);
	cr_assert_eq(rl_wire_unpack_groups(w.buf, w.len, &back, err, sizeof err), 0, "%s", err);
	for (int g = 0; g < GROUPS; g++) {
		cr_expect_str_eq(back.prompts[g], r.prompts[g]);
		cr_expect_str_eq(back.problems[g], r.problems[g]);
		if (g == 1)
			cr_expect_null(back.answers[g]);
		else
			cr_expect_str_eq(back.answers[g], r.answers[g]);
		if (g == 2)
			cr_expect_str_eq(back.metadata[g], r.metadata[g]);
		else
			cr_expect_null(back.metadata[g]);
	}
	rl_rollout_free(&back);

	/* cut short, one byte too many, and a length of 2^31 - 1 */
	cr_assert_eq(rl_rollout_alloc(&back, GROUPS, GROUP_SIZE), 0);
	cr_expect_eq(rl_wire_unpack_groups(w.buf, w.len - 1, &back, err, sizeof err), -1);
	expect_contains(err, "cut short or damaged at group 2 of 3");
	rl_rollout_free(&back);
	cr_assert_eq(rl_rollout_alloc(&back, GROUPS - 1, GROUP_SIZE), 0);
	cr_expect_eq(rl_wire_unpack_groups(w.buf, w.len, &back, err, sizeof err), -1);
	expect_contains(err, "follow the 2 groups");
	rl_rollout_free(&back);
	int32_t huge = INT32_MAX;
	memcpy(w.buf, &huge, sizeof huge);
	cr_assert_eq(rl_rollout_alloc(&back, GROUPS, GROUP_SIZE), 0);
	cr_expect_eq(rl_wire_unpack_groups(w.buf, w.len, &back, err, sizeof err), -1);
	expect_contains(err, "at group 0 of 3");
	rl_rollout_free(&back);
	rl_wire_free(&w);
	rl_rollout_free(&r);
}
