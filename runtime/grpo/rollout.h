/* The samples of one GRPO step and how they become the model's packed
 * batches: prompt and response tokens, the three logprobs of every response
 * token (generation, policy before the update, reference), reward and
 * advantage.
 * defines: struct rl_sample, struct rl_rollout, struct rl_packed,
 * rl_rollout_alloc, rl_sample_loss_tokens, rl_rollout_free, rl_step_seed, rl_packed_build, rl_packed_scatter,
 * rl_packed_free */
#ifndef RL_GRPO_ROLLOUT_H
#define RL_GRPO_ROLLOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/model/model.h"

struct rl_sample {
	int group;      /* the prompt it answers */
	int32_t *ids;   /* prompt then response tokens */
	int prompt_len; /* tokens of the prompt */
	int len;        /* prompt + response */
	float *gen_lp;  /* len - prompt_len: what generation reported */
	float *prev_lp; /* the policy before this step's updates */
	float *ref_lp;  /* the reference policy */
	char *response; /* decoded text */
	bool truncated; /* stopped by the token budget, not by EOS or a stop */
	double reward;
	double advantage;
	double loss_mult; /* 0 excludes it from the loss (overlong filtering) */
	/* len entries: loss_mask[i] is 1 when token i is a target the loss
	 * counts, 0 elsewhere (SFT's assistant turns); all of them at or after
	 * prompt_len. NULL: every response token counts (GRPO). A
	 * multi-turn episode's marks the model's own tokens: its
	 * environment's observations are context, never a target. */
	uint8_t *loss_mask;
	/* multi-turn (rollout/episodes.h): the model's turns in the episode
	 * (0 for a single response), and whether the reward came with the
	 * episode from its environment, so that nothing scores it again */
	int turns;
	bool env_scored;
};

struct rl_rollout {
	int n_groups, group_size, n; /* n = n_groups * group_size */
	struct rl_sample *s;
	char **prompts;  /* per group: the text given to the model */
	char **problems; /* per group */
	char **answers;  /* per group; entries may be NULL */
	/* per group: what the data gives an environment besides (NeMo-RL's
	 * extra_env_info), a JSON text; entries may be NULL */
	char **metadata;
};

int rl_rollout_alloc(struct rl_rollout *r, int n_groups, int group_size);
/* The tokens of s that the loss counts (loss_mult aside): its response,
 * or those loss_mask marks. */
int rl_sample_loss_tokens(const struct rl_sample *s);
void rl_rollout_free(struct rl_rollout *r);

/* The sampling seed of a step: the run's seed and the step, mixed, so that
 * a step's samples depend on nothing else (a resumed run redraws them).
 * Validation uses negative steps. */
uint64_t rl_step_seed(uint64_t seed, int64_t step);

/* A micro-batch in the model's packed layout, with the per-token arrays the
 * loss needs. Row t predicts ids[t + 1] of its sequence: token_mask[t] is 1
 * when that token is part of the response, and the logprob arrays hold the
 * sample's values for it (0 elsewhere). */
struct rl_packed {
	struct rl_batch batch;
	int32_t *ids, *cu_seqlens, *targets;
	uint8_t *token_mask;
	float *gen, *prev, *ref;
	double *advantage, *sample_mask; /* per sequence */
	int cap_tokens, cap_seqs;
};

/* Packs samples which[0..n) of r into p (grown as needed). */
int rl_packed_build(struct rl_packed *p, const struct rl_rollout *r, const int *which, int n);
/* After the model's logprobs of a packed batch: copies row values of the
 * response tokens back into each sample's array (prev_lp or ref_lp, chosen
 * by offset: offsetof(struct rl_sample, prev_lp) or ..ref_lp). */
void rl_packed_scatter(const struct rl_packed *p, struct rl_rollout *r, const int *which, int n,
                       const float *row_lp, size_t field_offset);
void rl_packed_free(struct rl_packed *p);

#endif
