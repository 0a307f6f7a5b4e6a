/* A packet: its head (the sample range and the truncated-prompt count),
 * then each sample's head, tokens, generation logprobs and response text,
 * all in the host's byte order (the two ends are ranks of one run). */
#define _GNU_SOURCE
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
	int32_t len, prompt_len, truncated, text_len;
	double loss_mult;
};

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
		struct sample_head h = {s->len, s->prompt_len, s->truncated, (int32_t)text_len,
		                        s->loss_mult};

		if (rl_wire_put(w, &h, sizeof h) ||
		    rl_wire_put(w, s->ids, (size_t)s->len * sizeof *s->ids) ||
		    rl_wire_put(w, s->gen_lp,
		                (size_t)(s->len - s->prompt_len) * sizeof *s->gen_lp) ||
		    rl_wire_put(w, s->response, text_len))
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

static int unpack_sample(struct reader *rd, struct rl_sample *s, int max_len, char *err,
                         size_t errlen, int i)
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
	size_t n_resp = (size_t)(h.len - h.prompt_len);
	s->len = h.len;
	s->prompt_len = h.prompt_len;
	s->truncated = h.truncated != 0;
	s->loss_mult = h.loss_mult;
	s->ids = malloc((size_t)h.len * sizeof *s->ids);
	s->gen_lp = calloc(n_resp + 1, sizeof *s->gen_lp);
	s->prev_lp = calloc(n_resp + 1, sizeof *s->prev_lp);
	s->ref_lp = calloc(n_resp + 1, sizeof *s->ref_lp);
	s->response = malloc((size_t)h.text_len + 1);
	if (!s->ids || !s->gen_lp || !s->prev_lp || !s->ref_lp || !s->response) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (take(rd, s->ids, (size_t)h.len * sizeof *s->ids) ||
	    take(rd, s->gen_lp, n_resp * sizeof *s->gen_lp) ||
	    take(rd, s->response, (size_t)h.text_len)) {
		snprintf(err, errlen, "sample %d: the packet ends in its data", i);
		return -1;
	}
	s->response[h.text_len] = '\0';
	return 0;
}

int rl_wire_unpack(const unsigned char *buf, size_t len, struct rl_rollout *r, int max_len,
                   struct rl_wire_info *info, char *err, size_t errlen)
{
	struct reader rd = {buf, buf + len};
	struct packet_head ph;

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
		if (unpack_sample(&rd, &r->s[i], max_len, err, errlen, i))
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

void rl_wire_free(struct rl_wire *w)
{
	free(w->buf);
	memset(w, 0, sizeof *w);
}
