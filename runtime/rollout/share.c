/* Shares travel as fixed-size records (a sample is at most max_len tokens)
 * in one all-gather: rank k's block holds the records of its share, padded
 * to the largest share. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rollout/share.h"

void rl_share_split(int first, int last, int index, int parts, int *lo, int *hi)
{
	int64_t n = last - first;

	*lo = first + (int)(n * index / parts);
	*hi = first + (int)(n * (index + 1) / parts);
}

void rl_share_range(const struct rl_comm *group, int n, int *lo, int *hi)
{
	rl_share_split(0, n, group ? rl_comm_rank(group) : 0, group ? rl_comm_size(group) : 1, lo,
	               hi);
}

struct sample_head {
	int32_t len, prompt_len, truncated, pad;
	double reward, loss_mult;
	/* an episode's (rollout/episodes.h): its turns, whether the
	 * environment scored it, and whether a loss mask follows */
	int32_t turns, env_scored, has_mask, pad2;
};

/* head, max_len tokens, max_len logprobs, max_len loss-mask bytes */
static size_t sample_record(int max_len)
{
	return sizeof(struct sample_head) +
	       (size_t)max_len * (sizeof(int32_t) + sizeof(float) + sizeof(uint8_t));
}

static void pack_sample(const struct rl_sample *s, unsigned char *rec, const void *arg)
{
	int max_len = *(const int *)arg;
	struct sample_head h = {
	    s->len,   s->prompt_len, s->truncated,         0, s->reward, s->loss_mult,
	    s->turns, s->env_scored, s->loss_mask != NULL, 0};
	int n_resp = s->len - s->prompt_len;

	memcpy(rec, &h, sizeof h);
	rec += sizeof h;
	memcpy(rec, s->ids, (size_t)s->len * sizeof(int32_t));
	rec += (size_t)max_len * sizeof(int32_t);
	memcpy(rec, s->gen_lp, (size_t)n_resp * sizeof(float));
	rec += (size_t)max_len * sizeof(float);
	if (s->loss_mask)
		memcpy(rec, s->loss_mask, (size_t)s->len);
}

/* Fills a sample another rank made; its response text stays NULL (only
 * the owner scores it). */
static int unpack_sample(struct rl_sample *s, const unsigned char *rec, const void *arg)
{
	int max_len = *(const int *)arg;
	struct sample_head h;

	memcpy(&h, rec, sizeof h);
	rec += sizeof h;
	if (h.len < h.prompt_len || h.len > max_len || h.prompt_len < 0)
		return -1;
	int n_resp = h.len - h.prompt_len;
	s->len = h.len;
	s->prompt_len = h.prompt_len;
	s->truncated = h.truncated != 0;
	s->reward = h.reward;
	s->loss_mult = h.loss_mult;
	s->turns = h.turns;
	s->env_scored = h.env_scored != 0;
	if (h.has_mask && !(s->loss_mask = malloc((size_t)h.len + 1)))
		return -1;
	s->ids = malloc((size_t)h.len * sizeof *s->ids + 1);
	s->gen_lp = calloc((size_t)n_resp + 1, sizeof *s->gen_lp);
	s->prev_lp = calloc((size_t)n_resp + 1, sizeof *s->prev_lp);
	s->ref_lp = calloc((size_t)n_resp + 1, sizeof *s->ref_lp);
	if (!s->ids || !s->gen_lp || !s->prev_lp || !s->ref_lp)
		return -1;
	memcpy(s->ids, rec, (size_t)h.len * sizeof(int32_t));
	rec += (size_t)max_len * sizeof(int32_t);
	memcpy(s->gen_lp, rec, (size_t)n_resp * sizeof(float));
	rec += (size_t)max_len * sizeof(float);
	if (s->loss_mask)
		memcpy(s->loss_mask, rec, (size_t)h.len);
	return 0;
}

/* The all-gather both exchanges share: pack(s) for each sample of this
 * rank's share, unpack(s) for each sample of the others'. */
static int exchange(struct rl_comm *group, struct rl_rollout *r, size_t rec_size,
                    void (*pack)(const struct rl_sample *, unsigned char *, const void *),
                    int (*unpack)(struct rl_sample *, const unsigned char *, const void *),
                    const void *arg, const char *what, char *err, size_t errlen)
{
	int p = rl_comm_size(group), me = rl_comm_rank(group), lo, hi;
	int per = (r->n + p - 1) / p;
	size_t block = (size_t)per * rec_size;
	unsigned char *all = calloc((size_t)p * block + 1, 1);

	if (!all) {
		snprintf(err, errlen, "out of memory sharing %d samples", r->n);
		return -1;
	}
	rl_share_range(group, r->n, &lo, &hi);
	for (int i = lo; i < hi; i++)
		pack(&r->s[i], all + (size_t)me * block + (size_t)(i - lo) * rec_size, arg);
	rl_comm_all_gather(group, all + (size_t)me * block, all, block, RL_COMM_U8, what);
	for (int k = 0; k < p; k++) {
		int klo, khi;

		rl_share_split(0, r->n, k, p, &klo, &khi);
		for (int i = klo; i < khi && k != me; i++)
			if (unpack(&r->s[i], all + (size_t)k * block + (size_t)(i - klo) * rec_size,
			           arg)) {
				snprintf(err, errlen,
				         "sample %d from data-parallel rank %d does not unpack", i,
				         k);
				free(all);
				return -1;
			}
	}
	free(all);
	return 0;
}

int rl_share_samples(struct rl_comm *group, struct rl_rollout *r, int max_len, char *err,
                     size_t errlen)
{
	if (!group || rl_comm_size(group) == 1)
		return 0;
	return exchange(group, r, sample_record(max_len), pack_sample, unpack_sample, &max_len,
	                "sharing the samples", err, errlen);
}

int rl_share_rewards(struct rl_comm *group, struct rl_rollout *r, int lo, int hi, char *err,
                     size_t errlen)
{
	if (!group || rl_comm_size(group) == 1)
		return 0;
	double *rewards = calloc((size_t)r->n, sizeof *rewards);
	if (!rewards) {
		snprintf(err, errlen, "out of memory sharing %d rewards", r->n);
		return -1;
	}
	/* a sum with one term: every other rank adds an exact zero */
	for (int i = lo; i < hi; i++)
		rewards[i] = r->s[i].reward;
	rl_comm_all_reduce(group, rewards, (size_t)r->n, RL_COMM_F64, RL_COMM_SUM,
	                   "sharing the rewards");
	for (int i = 0; i < r->n; i++)
		r->s[i].reward = rewards[i];
	free(rewards);
	return 0;
}

static float **logprob_field(struct rl_sample *s, size_t offset)
{
	return (float **)((char *)s + offset);
}

static void pack_lp(const struct rl_sample *s, unsigned char *rec, const void *arg)
{
	size_t offset = *(const size_t *)arg;

	memcpy(rec, *logprob_field((struct rl_sample *)s, offset),
	       (size_t)(s->len - s->prompt_len) * sizeof(float));
}

static int unpack_lp(struct rl_sample *s, const unsigned char *rec, const void *arg)
{
	size_t offset = *(const size_t *)arg;

	memcpy(*logprob_field(s, offset), rec, (size_t)(s->len - s->prompt_len) * sizeof(float));
	return 0;
}

int rl_share_logprobs(struct rl_comm *group, struct rl_rollout *r, size_t field_offset, int max_len,
                      char *err, size_t errlen)
{
	if (!group || rl_comm_size(group) == 1)
		return 0;
	return exchange(group, r, (size_t)max_len * sizeof(float), pack_lp, unpack_lp,
	                &field_offset, "sharing the logprobs", err, errlen);
}

int rl_share_stage_logprobs(struct rl_comm *pp, struct rl_rollout *r, size_t field_offset, int lo,
                            int hi, char *err, size_t errlen)
{
	size_t n = 0, at = 0;

	if (!pp || rl_comm_size(pp) == 1)
		return 0;
	for (int i = lo; i < hi; i++)
		n += (size_t)(r->s[i].len - r->s[i].prompt_len);
	float *all = malloc((n + 1) * sizeof *all);
	if (!all) {
		snprintf(err, errlen, "out of memory sharing %zu logprobs between stages", n);
		return -1;
	}
	for (int i = lo; i < hi; i++) {
		pack_lp(&r->s[i], (unsigned char *)(all + at), &field_offset);
		at += (size_t)(r->s[i].len - r->s[i].prompt_len);
	}
	rl_comm_broadcast(pp, all, n, RL_COMM_F32, rl_comm_size(pp) - 1,
	                  "logprobs from the last stage");
	at = 0;
	for (int i = lo; i < hi; i++) {
		unpack_lp(&r->s[i], (const unsigned char *)(all + at), &field_offset);
		at += (size_t)(r->s[i].len - r->s[i].prompt_len);
	}
	free(all);
	return 0;
}

void rl_share_sum(struct rl_comm *group, double *v, int n, const char *what)
{
	if (group && rl_comm_size(group) > 1)
		rl_comm_all_reduce(group, v, (size_t)n, RL_COMM_F64, RL_COMM_SUM, what);
}
