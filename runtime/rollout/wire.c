/* A packet: its head (the sample range and the truncated-prompt count),
 * then each sample's head, tokens, generation logprobs, loss mask (when it
 * has one), response text, and an episode's turns and reward (when it is
 * one), all in the host's byte order (the two ends are ranks of one run,
 * or a checkpoint's replay buffer read back on the machines that wrote
 * it). The head is version 1's, its truncated word now a set of flags
 * whose bit 0 is truncated: a single response is the same bytes in both
 * versions, so a packet of them is no larger than it was (a generation
 * rank's packet past the transport's eager size waits for that rank to
 * call into MPI again, after its next rollout: asynchronous GRPO would
 * no longer hide generation). Version 1 has no other flag. */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rollout/wire.h"

struct packet_head {
	int32_t lo, hi;
	struct rl_wire_info info;
};

struct sample_head {
	int32_t len, prompt_len, flags, text_len; /* flags: SAMPLE_* */
	double loss_mult;
};

#define SAMPLE_TRUNCATED  1 /* stopped by the token budget */
#define SAMPLE_ENV_SCORED 2 /* a double, the environment's reward, ends it */
#define SAMPLE_LOSS_MASK  4 /* len bytes of loss mask follow the logprobs */
#define SAMPLE_EPISODE    8 /* an int32, its turns, follows the text */
#define SAMPLE_FLAGS      (SAMPLE_TRUNCATED | SAMPLE_ENV_SCORED | SAMPLE_LOSS_MASK | SAMPLE_EPISODE)

int rl_wire_put(struct rl_wire *w, const void *p, size_t n)
{
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;

		while (cap < w->len + n)
			cap *= 2;
		unsigned char *grown = realloc(w->buf, cap);
		if (!grown)
			return -1;
		w->buf = grown;
		w->cap = cap;
	}
	if (n)
		memcpy(w->buf + w->len, p, n);
	w->len += n;
	return 0;
}

int rl_wire_pack(struct rl_wire *w, const struct rl_rollout *r, int lo, int hi,
                 const struct rl_wire_info *info)
{
	struct packet_head ph = {lo, hi, *info};

	if (rl_wire_put(w, &ph, sizeof ph))
		return -1;
	for (int i = lo; i < hi; i++) {
		const struct rl_sample *s = &r->s[i];
		size_t text_len = s->response ? strlen(s->response) : 0;
		int32_t turns = s->turns;
		double reward = s->reward;
		struct sample_head h = {
		    .len = s->len,
		    .prompt_len = s->prompt_len,
		    .flags = (s->truncated ? SAMPLE_TRUNCATED : 0) |
		             (s->env_scored ? SAMPLE_ENV_SCORED : 0) |
		             (s->loss_mask ? SAMPLE_LOSS_MASK : 0) |
		             (s->turns ? SAMPLE_EPISODE : 0),
		    .text_len = (int32_t)text_len,
		    .loss_mult = s->loss_mult,
		};

		if (text_len > INT32_MAX || rl_wire_put(w, &h, sizeof h) ||
		    rl_wire_put(w, s->ids, (size_t)s->len * sizeof *s->ids) ||
		    rl_wire_put(w, s->gen_lp,
		                (size_t)(s->len - s->prompt_len) * sizeof *s->gen_lp) ||
		    (s->loss_mask && rl_wire_put(w, s->loss_mask, (size_t)s->len)) ||
		    rl_wire_put(w, s->response, text_len) ||
		    (s->turns && rl_wire_put(w, &turns, sizeof turns)) ||
		    (s->env_scored && rl_wire_put(w, &reward, sizeof reward)))
			return -1;
	}
	return 0;
}

struct reader {
	const unsigned char *p, *end;
};

static int take(struct reader *rd, void *out, size_t n)
{
	if ((size_t)(rd->end - rd->p) < n)
		return -1;
	if (n)
		memcpy(out, rd->p, n);
	rd->p += n;
	return 0;
}

/* The loss mask just read: 0 or 1 everywhere, nothing of the prompt
 * (rollout.h's contract, which the loss relies on). */
static int check_mask(const uint8_t *mask, int prompt_len, int len, char *err, size_t errlen, int i)
{
	for (int t = 0; t < len; t++)
		if (mask[t] > 1 || (t < prompt_len && mask[t])) {
			snprintf(err, errlen,
			         "sample %d: its loss mask has %u at token %d (prompt of %d): "
			         "damaged",
			         i, mask[t], t, prompt_len);
			return -1;
		}
	return 0;
}

static int unpack_sample(struct reader *rd, int version, struct rl_sample *s, int max_len,
                         char *err, size_t errlen, int i)
{
	struct sample_head h;

	if (take(rd, &h, sizeof h)) {
		snprintf(err, errlen, "sample %d: the packet ends in its head", i);
		return -1;
	}
	if (h.prompt_len < 1 || h.len < h.prompt_len || h.len > max_len || h.text_len < 0) {
		snprintf(err, errlen, "sample %d: %d tokens of which %d of prompt (at most %d)", i,
		         h.len, h.prompt_len, max_len);
		return -1;
	}
	if (h.flags & ~(version >= 2 ? SAMPLE_FLAGS : SAMPLE_TRUNCATED)) {
		snprintf(err, errlen, "sample %d: its head is damaged (flags %#x)", i,
		         (unsigned)h.flags);
		return -1;
	}
	size_t n_resp = (size_t)(h.len - h.prompt_len);
	size_t mask_len = (h.flags & SAMPLE_LOSS_MASK) ? (size_t)h.len : 0;
	/* every size that follows is checked against the bytes there before
	 * it sizes an allocation: the text's is bounded by nothing else */
	size_t data = (size_t)h.len * sizeof *s->ids + n_resp * sizeof *s->gen_lp + mask_len;
	if ((size_t)(rd->end - rd->p) < data + (size_t)h.text_len) {
		snprintf(err, errlen,
		         "sample %d: the packet ends in its data (%zu bytes announced, %zu left)",
		         i, data + (size_t)h.text_len, (size_t)(rd->end - rd->p));
		return -1;
	}
	s->len = h.len;
	s->prompt_len = h.prompt_len;
	s->truncated = (h.flags & SAMPLE_TRUNCATED) != 0;
	s->loss_mult = h.loss_mult;
	s->env_scored = (h.flags & SAMPLE_ENV_SCORED) != 0;
	s->ids = malloc((size_t)h.len * sizeof *s->ids);
	s->gen_lp = calloc(n_resp + 1, sizeof *s->gen_lp);
	s->prev_lp = calloc(n_resp + 1, sizeof *s->prev_lp);
	s->ref_lp = calloc(n_resp + 1, sizeof *s->ref_lp);
	s->response = malloc((size_t)h.text_len + 1);
	s->loss_mask = mask_len ? malloc(mask_len) : NULL;
	if (!s->ids || !s->gen_lp || !s->prev_lp || !s->ref_lp || !s->response ||
	    (mask_len && !s->loss_mask)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int32_t turns = 0;
	double reward = 0;
	if (take(rd, s->ids, (size_t)h.len * sizeof *s->ids) ||
	    take(rd, s->gen_lp, n_resp * sizeof *s->gen_lp) ||
	    (mask_len && take(rd, s->loss_mask, mask_len)) ||
	    take(rd, s->response, (size_t)h.text_len) ||
	    ((h.flags & SAMPLE_EPISODE) && take(rd, &turns, sizeof turns)) ||
	    ((h.flags & SAMPLE_ENV_SCORED) && take(rd, &reward, sizeof reward))) {
		snprintf(err, errlen, "sample %d: the packet ends in its data", i);
		return -1;
	}
	if (turns < 0 || ((h.flags & SAMPLE_EPISODE) && turns == 0) || !isfinite(reward)) {
		snprintf(err, errlen, "sample %d: damaged (%d turns, reward %g)", i, turns, reward);
		return -1;
	}
	s->turns = turns;
	s->reward = reward;
	s->response[h.text_len] = '\0';
	if (mask_len && check_mask(s->loss_mask, h.prompt_len, h.len, err, errlen, i))
		return -1;
	return 0;
}

int rl_wire_unpack(const unsigned char *buf, size_t len, struct rl_rollout *r, int max_len,
                   struct rl_wire_info *info, char *err, size_t errlen)
{
	return rl_wire_unpack_version(buf, len, RL_WIRE_VERSION, r, max_len, info, err, errlen);
}

int rl_wire_unpack_version(const unsigned char *buf, size_t len, int version, struct rl_rollout *r,
                           int max_len, struct rl_wire_info *info, char *err, size_t errlen)
{
	struct reader rd = {buf, buf + len};
	struct packet_head ph;

	if (version < 1 || version > RL_WIRE_VERSION) {
		snprintf(err, errlen, "a rollout packet of version %d (this rlrun reads 1 to %d)",
		         version, RL_WIRE_VERSION);
		return -1;
	}
	if (take(&rd, &ph, sizeof ph)) {
		snprintf(err, errlen, "a rollout packet of %zu bytes has no head", len);
		return -1;
	}
	if (ph.lo < 0 || ph.hi < ph.lo || ph.hi > r->n) {
		snprintf(err, errlen, "a rollout packet holds samples %d..%d of a step of %d",
		         ph.lo, ph.hi, r->n);
		return -1;
	}
	for (int i = ph.lo; i < ph.hi; i++) {
		if (r->s[i].ids) {
			snprintf(err, errlen, "sample %d arrived twice", i);
			return -1;
		}
		if (unpack_sample(&rd, version, &r->s[i], max_len, err, errlen, i))
			return -1;
	}
	if (rd.p != rd.end) {
		snprintf(err, errlen, "a rollout packet has %zu bytes past its samples",
		         (size_t)(rd.end - rd.p));
		return -1;
	}
	*info = ph.info;
	return 0;
}

int rl_wire_pack_prompts(struct rl_wire *w, const struct rl_rollout *r)
{
	for (int g = 0; g < r->n_groups; g++) {
		size_t len = strlen(r->prompts[g]);
		int32_t len32 = (int32_t)len;

		if (len > INT32_MAX || rl_wire_put(w, &len32, sizeof len32) ||
		    rl_wire_put(w, r->prompts[g], len))
			return -1;
	}
	return 0;
}

int rl_wire_unpack_prompts(const unsigned char *buf, size_t len, struct rl_rollout *r, char *err,
                           size_t errlen)
{
	struct reader rd = {buf, buf + len};

	for (int g = 0; g < r->n_groups; g++) {
		int32_t n;

		if (take(&rd, &n, sizeof n) || n < 0 || (size_t)(rd.end - rd.p) < (size_t)n) {
			snprintf(err, errlen, "the prompts are cut short at prompt %d of %d", g,
			         r->n_groups);
			return -1;
		}
		if (!(r->prompts[g] = strndup((const char *)rd.p, (size_t)n))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		rd.p += n;
	}
	if (rd.p != rd.end) {
		snprintf(err, errlen, "%zu bytes follow the %d prompts", (size_t)(rd.end - rd.p),
		         r->n_groups);
		return -1;
	}
	return 0;
}

/* A text as its int32 length (-1: NULL) and its bytes. */
static int put_text(struct rl_wire *w, const char *text)
{
	size_t len = text ? strlen(text) : 0;
	int32_t len32 = text ? (int32_t)len : -1;

	return len > INT32_MAX || rl_wire_put(w, &len32, sizeof len32) || rl_wire_put(w, text, len);
}

/* 0 with *out malloc'd (NULL for -1), or -1 when the length does not fit
 * the bytes left (checked before it sizes anything) or memory is out. */
static int take_text(struct reader *rd, bool nullable, char **out)
{
	int32_t n;

	*out = NULL;
	if (take(rd, &n, sizeof n) || n < -1 || (n == -1 && !nullable) ||
	    (size_t)(rd->end - rd->p) < (size_t)(n < 0 ? 0 : n))
		return -1;
	if (n < 0)
		return 0;
	if (!(*out = strndup((const char *)rd->p, (size_t)n)))
		return -1;
	rd->p += n;
	return 0;
}

int rl_wire_pack_groups(struct rl_wire *w, const struct rl_rollout *r)
{
	for (int g = 0; g < r->n_groups; g++)
		if (put_text(w, r->prompts[g]) || put_text(w, r->problems[g]) ||
		    put_text(w, r->answers[g]) || put_text(w, r->metadata[g]))
			return -1;
	return 0;
}

int rl_wire_unpack_groups(const unsigned char *buf, size_t len, struct rl_rollout *r, char *err,
                          size_t errlen)
{
	struct reader rd = {buf, buf + len};

	for (int g = 0; g < r->n_groups; g++)
		if (take_text(&rd, false, &r->prompts[g]) ||
		    take_text(&rd, true, &r->problems[g]) || take_text(&rd, true, &r->answers[g]) ||
		    take_text(&rd, true, &r->metadata[g])) {
			snprintf(err, errlen,
			         "the groups are cut short or damaged at group %d of %d", g,
			         r->n_groups);
			return -1;
		}
	if (rd.p != rd.end) {
		snprintf(err, errlen, "%zu bytes follow the %d groups", (size_t)(rd.end - rd.p),
		         r->n_groups);
		return -1;
	}
	return 0;
}

void rl_wire_free(struct rl_wire *w)
{
	free(w->buf);
	memset(w, 0, sizeof *w);
}
