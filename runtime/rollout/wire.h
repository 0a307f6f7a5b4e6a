/* Samples as bytes, for the hand-over between the generation ranks and the
 * training ranks (non-colocated generation) and for the replay buffer of a
 * checkpoint: what generation made of each sample (tokens, generation
 * logprobs, flags, the decoded response; an episode's loss mask, its
 * turns and the reward its environment gave) in a self-describing buffer
 * that is checked as it is read back.
 * defines: struct rl_wire, struct rl_wire_info, rl_wire_pack, rl_wire_unpack, rl_wire_put,
 * rl_wire_unpack_version, rl_wire_pack_prompts, rl_wire_unpack_prompts,
 * rl_wire_pack_groups, rl_wire_unpack_groups, rl_wire_free,
 * RL_WIRE_VERSION */
#ifndef RL_ROLLOUT_WIRE_H
#define RL_ROLLOUT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/grpo/rollout.h"

/* The sample encoding rl_wire_pack writes: 2 since multi-turn episodes
 * (a loss mask, turns, env_scored and its reward, each only when the
 * sample has it: a single response is the same bytes as in 1); 1 before
 * them. */
#define RL_WIRE_VERSION 2

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
/* The same for a packet of sample encoding `version` (1 or 2; a version 1
 * sample has no loss mask, 0 turns and is not env_scored). Every size in
 * it is checked against the bytes that follow before it sizes an
 * allocation; a loss mask must be 0 or 1 and 0 over the prompt. */
int rl_wire_unpack_version(const unsigned char *buf, size_t len, int version, struct rl_rollout *r,
                           int max_len, struct rl_wire_info *info, char *err, size_t errlen);
/* n bytes of p appended to w. Returns 0, or -1 out of memory. */
int rl_wire_put(struct rl_wire *w, const void *p, size_t n);
/* r's prompts, each as its length and its bytes, appended to w. Returns
 * 0, or -1 out of memory. */
int rl_wire_pack_prompts(struct rl_wire *w, const struct rl_rollout *r);
/* Exactly r->n_groups prompts of rl_wire_pack_prompts (buf, len) into
 * r->prompts, which must be empty. Returns 0, or -1 with err. */
int rl_wire_unpack_prompts(const unsigned char *buf, size_t len, struct rl_rollout *r, char *err,
                           size_t errlen);
/* r's groups as generation ranks need them to play episodes: each
 * group's prompt, problem, answer and metadata (what its environment is
 * given), appended to w. Returns 0, or -1 out of memory. */
int rl_wire_pack_groups(struct rl_wire *w, const struct rl_rollout *r);
/* Exactly r->n_groups groups of rl_wire_pack_groups into r's prompts,
 * problems, answers and metadata, which must be empty (a length is checked
 * against the bytes left before it sizes anything). Returns 0, or -1 with
 * err. */
int rl_wire_unpack_groups(const unsigned char *buf, size_t len, struct rl_rollout *r, char *err,
                          size_t errlen);
void rl_wire_free(struct rl_wire *w);

#endif
