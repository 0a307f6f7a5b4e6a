#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/run_state.h"
#include "runtime/grpo/replay_buffer.h"

/* "slurm-rl rollout", version 1 */
static const char magic[8] = {'S', 'R', 'L', 'R', 'O', 'L', 'L', '1'};

struct head {
	char magic[8];
	int64_t step;
	int32_t n_groups, group_size;
	int64_t prompts_bytes;
};

int rl_replay_buffer_pack(struct rl_wire *w, const struct rl_rollout *r, int64_t step,
                          const struct rl_wire_info *info)
{
	struct head h = {.step = step, .n_groups = r->n_groups, .group_size = r->group_size};
	size_t at = w->len;

	memcpy(h.magic, magic, sizeof magic);
	/* the prompts' size is known once they are in: the head goes first
	 * and is filled in after */
	if (rl_wire_put(w, &h, sizeof h) || rl_wire_pack_prompts(w, r))
		return -1;
	h.prompts_bytes = (int64_t)(w->len - at - sizeof h);
	memcpy(w->buf + at, &h, sizeof h);
	return rl_wire_pack(w, r, 0, r->n, info);
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

int rl_replay_buffer_parse(const unsigned char *buf, size_t len, const char *dir, int64_t step,
                           int max_len, struct rl_rollout *r, struct rl_wire_info *info, char *err,
                           size_t errlen)
{
	char path[4200], why[512];
	struct head h;
	int rc = -1;

	memset(r, 0, sizeof *r);
	path_of(path, sizeof path, dir);
	if (len < sizeof h || memcmp(buf, magic, sizeof magic) != 0) {
		snprintf(err, errlen, "%s: not a rollout buffer (%zu bytes without its head)", path,
		         len);
		goto out;
	}
	memcpy(&h, buf, sizeof h);
	if (h.step != step) {
		snprintf(err, errlen,
		         "%s: holds the rollout of step %lld, but the checkpoint's next step is "
		         "%lld",
		         path, (long long)h.step, (long long)step);
		goto out;
	}
	if (h.prompts_bytes >= 0 && (uint64_t)h.prompts_bytes > len - sizeof h) {
		snprintf(err, errlen,
		         "%s: cut short: its head announces %lld bytes of prompts, %zu follow",
		         path, (long long)h.prompts_bytes, len - sizeof h);
		goto out;
	}
	if (h.n_groups < 1 || h.group_size < 1 || h.n_groups > (1 << 24) / h.group_size ||
	    h.prompts_bytes < 0) {
		snprintf(err, errlen,
		         "%s: its head is damaged (%d prompts x %d samples, %lld bytes of "
		         "prompts in %zu)",
		         path, h.n_groups, h.group_size, (long long)h.prompts_bytes, len);
		goto out;
	}
	if (rl_rollout_alloc(r, h.n_groups, h.group_size)) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	const unsigned char *prompts = buf + sizeof h, *samples = prompts + h.prompts_bytes;
	if (rl_wire_unpack_prompts(prompts, (size_t)h.prompts_bytes, r, why, sizeof why) ||
	    rl_wire_unpack(samples, len - sizeof h - (size_t)h.prompts_bytes, r, max_len, info, why,
	                   sizeof why)) {
		snprintf(err, errlen, "%s: %s", path, why);
		goto out;
	}
	for (int i = 0; i < r->n; i++)
		if (!r->s[i].ids) {
			snprintf(err, errlen, "%s: sample %d of %d is missing", path, i, r->n);
			goto out;
		}
	rc = 0;
out:
	if (rc)
		rl_rollout_free(r);
	return rc;
}
