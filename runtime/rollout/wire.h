/* Samples as bytes, for the hand-over between the generation ranks and the
 * training ranks (non-colocated generation): what generation made of each
 * sample (tokens, generation logprobs, flags, the decoded response) in a
 * self-describing buffer that is checked as it is read back.
 * defines: struct rl_wire, struct rl_wire_info, rl_wire_pack, rl_wire_unpack, rl_wire_put,
 * rl_wire_pack_prompts, rl_wire_unpack_prompts, rl_wire_free */
#ifndef RL_ROLLOUT_WIRE_H
#define RL_ROLLOUT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/grpo/rollout.h"

struct rl_wire {
	unsigned char *buf;
	size_t len, cap;
};

/* What a packet says of the rollout besides its samples. */
struct rl_wire_info {
	int64_t prompts_truncated; /* how many of the step's prompts were cut */
	double generation_s;       /* how long the sender generated */
};

/* Samples [lo, hi) of r and info, appended to w. Returns 0, or -1 out of
 * memory. */
int rl_wire_pack(struct rl_wire *w, const struct rl_rollout *r, int lo, int hi,
                 const struct rl_wire_info *info);
/* One packet of rl_wire_pack (buf, len) into r's samples, which must not
 * hold tokens yet; *info gets the packet's. max_len
 * bounds a sample (policy.max_total_sequence_length). Returns 0, or -1
 * with err for a packet that does not fit r or is cut short. */
int rl_wire_unpack(const unsigned char *buf, size_t len, struct rl_rollout *r, int max_len,
                   struct rl_wire_info *info, char *err, size_t errlen);
/* n bytes of p appended to w. Returns 0, or -1 out of memory. */
int rl_wire_put(struct rl_wire *w, const void *p, size_t n);
/* r's prompts, each as its length and its bytes, appended to w. Returns
 * 0, or -1 out of memory. */
int rl_wire_pack_prompts(struct rl_wire *w, const struct rl_rollout *r);
/* Exactly r->n_groups prompts of rl_wire_pack_prompts (buf, len) into
 * r->prompts, which must be empty. Returns 0, or -1 with err. */
int rl_wire_unpack_prompts(const unsigned char *buf, size_t len, struct rl_rollout *r, char *err,
                           size_t errlen);
void rl_wire_free(struct rl_wire *w);

#endif
