/* DAPO's dynamic sampling, the pure part (see dynamic_sampling.h). */
#include "runtime/grpo/dynamic_sampling.h"

#include <string.h>

#include "runtime/base/rng.h"

bool rl_ds_group_kept(const double *rewards, int n)
{
	for (int i = 1; i < n; i++)
		if (rewards[i] != rewards[0])
			return true;
	return false;
}

int rl_ds_begin(struct rl_ds_batch *b, int n_groups, int group_size)
{
	memset(b, 0, sizeof *b);
	return rl_rollout_alloc(&b->r, n_groups, group_size);
}

/* Group g of r into the batch's group `to`: pointers move, r keeps none. */
static void move_group(struct rl_rollout *dst, int to, struct rl_rollout *r, int g)
{
	int k = r->group_size;

	dst->prompts[to] = r->prompts[g];
	dst->problems[to] = r->problems[g];
	dst->answers[to] = r->answers[g];
	dst->metadata[to] = r->metadata[g];
	r->prompts[g] = r->problems[g] = r->answers[g] = r->metadata[g] = NULL;
	for (int i = 0; i < k; i++) {
		struct rl_sample *from = &r->s[g * k + i];

		dst->s[to * k + i] = *from;
		dst->s[to * k + i].group = to;
		memset(from, 0, sizeof *from);
	}
}

int rl_ds_take(struct rl_ds_batch *b, struct rl_rollout *r, const double *judge)
{
	int kept = 0;

	b->rounds++;
	for (int i = 0; i < r->n; i++) {
		b->reward_sum += r->s[i].reward;
		b->reward_sq += r->s[i].reward * r->s[i].reward;
	}
	b->n_generated += r->n;
	for (int g = 0; g < r->n_groups; g++) {
		if (!rl_ds_group_kept(judge + (size_t)g * (size_t)r->group_size, r->group_size)) {
			b->dropped_groups++;
			continue;
		}
		kept++;
		if (rl_ds_full(b))
			b->discarded_valid_samples += r->group_size;
		else
			move_group(&b->r, b->filled++, r, g);
	}
	return kept;
}

void rl_ds_free(struct rl_ds_batch *b)
{
	rl_rollout_free(&b->r);
	memset(b, 0, sizeof *b);
}

uint64_t rl_round_seed(uint64_t seed, int64_t step, int round)
{
	uint64_t state = rl_step_seed(seed, step);

	if (round == 0)
		return state;
	state ^= (uint64_t)round * 0xd1b54a32d192ed03ull;
	return rl_rng_splitmix64(&state);
}
