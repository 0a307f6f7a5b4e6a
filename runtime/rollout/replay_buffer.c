#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/run_state.h"
#include "runtime/rollout/replay_buffer.h"

/* "slurm-rl rollouts", version 3: version 2's layout, its samples in the
 * wire's encoding 2 (episodes: loss masks, turns, the environment's
 * rewards); version 2's are in encoding 1, as are version 1's, which held
 * one rollout */
static const char magic[8] = {'S', 'R', 'L', 'R', 'O', 'L', 'L', '3'};
static const char magic_v2[8] = {'S', 'R', 'L', 'R', 'O', 'L', 'L', '2'};
static const char magic_v1[8] = {'S', 'R', 'L', 'R', 'O', 'L', 'L', '1'};

struct file_head {
	char magic[8];
	int32_t count, pad;
};

struct record_head {
	int64_t step, weights_step;
	int32_t n_groups, group_size;
	int64_t prompts_bytes, samples_bytes;
};

/* version 1: the whole file, its packet running to the end */
struct head_v1 {
	char magic[8];
	int64_t step;
	int32_t n_groups, group_size;
	int64_t prompts_bytes;
};

int rl_replay_buffer_begin(struct rl_wire *w, int count)
{
	struct file_head h = {.count = count};

	memcpy(h.magic, magic, sizeof magic);
	return rl_wire_put(w, &h, sizeof h);
}

int rl_replay_buffer_pack(struct rl_wire *w, const struct rl_rollout *r, int64_t step,
                          int64_t weights_step, const struct rl_wire_info *info,
                          const struct rl_episodes_report *episodes)
{
	struct rl_episodes_report none = {0};
	struct record_head h = {.step = step,
	                        .weights_step = weights_step,
	                        .n_groups = r->n_groups,
	                        .group_size = r->group_size};
	size_t at = w->len;

	/* the sizes are known once the parts are in: the head goes first and
	 * is filled in after */
	if (rl_wire_put(w, &h, sizeof h) ||
	    rl_wire_put(w, episodes ? episodes : &none, sizeof none))
		return -1;
	size_t prompts_at = w->len;
	if (rl_wire_pack_prompts(w, r))
		return -1;
	h.prompts_bytes = (int64_t)(w->len - prompts_at);
	if (rl_wire_pack(w, r, 0, r->n, info))
		return -1;
	h.samples_bytes = (int64_t)(w->len - prompts_at) - h.prompts_bytes;
	memcpy(w->buf + at, &h, sizeof h);
	return 0;
}

/* DIR's buffer file, for messages */
static void path_of(char *path, size_t n, const char *dir)
{
	snprintf(path, n, "%s/%s", dir, RL_CKPT_ROLLOUT_BUFFER);
}

unsigned char *rl_replay_buffer_load(const char *dir, size_t *len, char *err, size_t errlen)
{
	char path[4200];

	path_of(path, sizeof path, dir);
	/* a rollout of a few thousand long samples is hundreds of MB */
	return (unsigned char *)rl_ckpt_read_whole(path, (size_t)1 << 40, len, err, errlen);
}

void rl_replay_buffer_free(struct rl_buffered *b, int n)
{
	for (int k = 0; b && k < n; k++)
		rl_rollout_free(&b[k].r);
	free(b);
}

/* One record (its head h, then `left` bytes of the file from p) into b:
 * must be step's. path and which (", rollout 2 of 3") name it. */
static int parse_record(const struct record_head *h, const unsigned char *p, size_t left,
                        const char *path, const char *which, int64_t step, int max_len,
                        int wire_version, struct rl_buffered *b, char *err, size_t errlen)
{
	char why[512];

	/* the episodes' report, read before the record, stays */
	struct rl_episodes_report episodes = b->episodes;
	memset(b, 0, sizeof *b);
	b->episodes = episodes;
	if (h->step != step) {
		snprintf(err, errlen,
		         "%s%s: holds the rollout of step %lld, but the checkpoint's next step "
		         "is %lld",
		         path, which, (long long)h->step, (long long)step);
		return -1;
	}
	if (h->prompts_bytes >= 0 && (uint64_t)h->prompts_bytes > left) {
		snprintf(err, errlen,
		         "%s%s: cut short: its head announces %lld bytes of prompts, %zu follow",
		         path, which, (long long)h->prompts_bytes, left);
		return -1;
	}
	if (h->n_groups < 1 || h->group_size < 1 || h->n_groups > (1 << 24) / h->group_size ||
	    h->prompts_bytes < 0 || h->samples_bytes < 0 || h->weights_step < 0 ||
	    h->weights_step >= h->step) {
		snprintf(err, errlen,
		         "%s%s: its head is damaged (%d prompts x %d samples, %lld bytes of "
		         "prompts, generated after step %lld for step %lld)",
		         path, which, h->n_groups, h->group_size, (long long)h->prompts_bytes,
		         (long long)h->weights_step, (long long)h->step);
		return -1;
	}
	if ((uint64_t)h->samples_bytes > left - (size_t)h->prompts_bytes) {
		snprintf(err, errlen,
		         "%s%s: cut short: %lld bytes of samples announced, %zu follow", path,
		         which, (long long)h->samples_bytes, left - (size_t)h->prompts_bytes);
		return -1;
	}
	if (rl_rollout_alloc(&b->r, h->n_groups, h->group_size)) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	b->step = h->step;
	b->weights_step = h->weights_step;
	if (rl_wire_unpack_prompts(p, (size_t)h->prompts_bytes, &b->r, why, sizeof why) ||
	    rl_wire_unpack_version(p + h->prompts_bytes, (size_t)h->samples_bytes, wire_version,
	                           &b->r, max_len, &b->info, why, sizeof why)) {
		snprintf(err, errlen, "%s%s: %s", path, which, why);
		rl_rollout_free(&b->r);
		return -1;
	}
	for (int i = 0; i < b->r.n; i++)
		if (!b->r.s[i].ids) {
			snprintf(err, errlen, "%s%s: sample %d of %d is missing", path, which, i,
			         b->r.n);
			rl_rollout_free(&b->r);
			return -1;
		}
	return 0;
}

/* A version 1 file: its one rollout, generated by the weights one step
 * older than the step before it trains (age 1, the only one then). */
static int parse_v1(const unsigned char *buf, size_t len, const char *path, int64_t step,
                    int max_len, struct rl_buffered *b, char *err, size_t errlen)
{
	struct head_v1 v;

	if (len < sizeof v) {
		snprintf(err, errlen, "%s: not a rollout buffer (%zu bytes without its head)", path,
		         len);
		return -1;
	}
	memcpy(&v, buf, sizeof v);
	size_t left = len - sizeof v;
	struct record_head h = {
	    .step = v.step,
	    .weights_step = v.step >= 2 ? v.step - 2 : 0,
	    .n_groups = v.n_groups,
	    .group_size = v.group_size,
	    .prompts_bytes = v.prompts_bytes,
	    .samples_bytes = v.prompts_bytes >= 0 && (uint64_t)v.prompts_bytes <= left
	                         ? (int64_t)(left - (size_t)v.prompts_bytes)
	                         : 0,
	};
	return parse_record(&h, buf + sizeof v, left, path, "", step, max_len, 1, b, err, errlen);
}

int rl_replay_buffer_parse(const unsigned char *buf, size_t len, const char *dir, int64_t step,
                           int max_len, struct rl_buffered **out, int *n, char *err, size_t errlen)
{
	char path[4200];
	struct file_head fh;

	*out = NULL;
	*n = 0;
	path_of(path, sizeof path, dir);
	if (len >= sizeof magic_v1 && memcmp(buf, magic_v1, sizeof magic_v1) == 0) {
		struct rl_buffered *b = calloc(1, sizeof *b);

		if (!b) {
			snprintf(err, errlen, "%s: out of memory", path);
			return -1;
		}
		if (parse_v1(buf, len, path, step, max_len, b, err, errlen)) {
			free(b);
			return -1;
		}
		*out = b;
		*n = 1;
		return 0;
	}
	bool v2 = len >= sizeof fh && memcmp(buf, magic_v2, sizeof magic_v2) == 0;
	if (len < sizeof fh || (!v2 && memcmp(buf, magic, sizeof magic) != 0)) {
		snprintf(err, errlen, "%s: not a rollout buffer (%zu bytes without its head)", path,
		         len);
		return -1;
	}
	memcpy(&fh, buf, sizeof fh);
	if (fh.count < 1 || (size_t)fh.count > len / sizeof(struct record_head)) {
		snprintf(err, errlen, "%s: its head is damaged (%d rollouts in %zu bytes)", path,
		         fh.count, len);
		return -1;
	}
	struct rl_buffered *b = calloc((size_t)fh.count, sizeof *b);
	if (!b) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	size_t at = sizeof fh;
	for (int k = 0; k < fh.count; k++) {
		struct record_head h;
		char which[64];

		snprintf(which, sizeof which, ", rollout %d of %d", k + 1, fh.count);
		if (len - at < sizeof h) {
			snprintf(err, errlen, "%s%s: cut short before its head", path, which);
			goto fail;
		}
		memcpy(&h, buf + at, sizeof h);
		at += sizeof h;
		if (!v2) {
			if (len - at < sizeof b[k].episodes) {
				snprintf(err, errlen, "%s%s: cut short in its episodes' report",
				         path, which);
				goto fail;
			}
			memcpy(&b[k].episodes, buf + at, sizeof b[k].episodes);
			b[k].episodes.first[sizeof b[k].episodes.first - 1] = '\0';
			at += sizeof b[k].episodes;
		}
		if (parse_record(&h, buf + at, len - at, path, which, step + k, max_len,
		                 v2 ? 1 : RL_WIRE_VERSION, &b[k], err, errlen))
			goto fail;
		at += (size_t)h.prompts_bytes + (size_t)h.samples_bytes;
		*n = k + 1;
	}
	if (at != len) {
		snprintf(err, errlen, "%s: %zu bytes after its last rollout", path, len - at);
		goto fail;
	}
	*out = b;
	return 0;
fail:
	rl_replay_buffer_free(b, *n);
	*n = 0;
	return -1;
}
