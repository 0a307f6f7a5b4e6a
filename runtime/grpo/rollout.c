#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "runtime/base/rng.h"
#include "runtime/grpo/rollout.h"

int rl_rollout_alloc(struct rl_rollout *r, int n_groups, int group_size)
{
	memset(r, 0, sizeof *r);
	r->n_groups = n_groups;
	r->group_size = group_size;
	r->n = n_groups * group_size;
	r->s = calloc((size_t)r->n, sizeof *r->s);
	r->prompts = calloc((size_t)n_groups, sizeof *r->prompts);
	r->problems = calloc((size_t)n_groups, sizeof *r->problems);
	r->answers = calloc((size_t)n_groups, sizeof *r->answers);
	r->metadata = calloc((size_t)n_groups, sizeof *r->metadata);
	if (!r->s || !r->prompts || !r->problems || !r->answers || !r->metadata) {
		rl_rollout_free(r);
		return -1;
	}
	for (int i = 0; i < r->n; i++) {
		r->s[i].group = i / group_size;
		r->s[i].loss_mult = 1.0;
	}
	return 0;
}

int rl_sample_loss_tokens(const struct rl_sample *s)
{
	int n = 0;

	if (!s->loss_mask)
		return s->len - s->prompt_len;
	for (int i = s->prompt_len; i < s->len; i++)
		n += s->loss_mask[i] != 0;
	return n;
}

void rl_rollout_free(struct rl_rollout *r)
{
	for (int i = 0; r->s && i < r->n; i++) {
		free(r->s[i].ids);
		free(r->s[i].gen_lp);
		free(r->s[i].prev_lp);
		free(r->s[i].ref_lp);
		free(r->s[i].response);
		free(r->s[i].loss_mask);
	}
	for (int g = 0; g < r->n_groups; g++) {
		if (r->prompts)
			free(r->prompts[g]);
		if (r->problems)
			free(r->problems[g]);
		if (r->answers)
			free(r->answers[g]);
		if (r->metadata)
			free(r->metadata[g]);
	}
	free(r->s);
	free(r->prompts);
	free(r->problems);
	free(r->metadata);
	free(r->answers);
	memset(r, 0, sizeof *r);
}

uint64_t rl_step_seed(uint64_t seed, int64_t step)
{
	uint64_t state = seed ^ 0x73616d706c696e67ull;

	state += (uint64_t)step * 0x9e3779b97f4a7c15ull;
	return rl_rng_splitmix64(&state);
}

static int grow(void **p, size_t elem, int cap)
{
	void *q = realloc(*p, elem * (size_t)cap);

	if (!q)
		return -1;
	*p = q;
	return 0;
}

static int reserve(struct rl_packed *p, int tokens, int seqs)
{
	if (tokens > p->cap_tokens) {
		if (grow((void **)&p->ids, sizeof *p->ids, tokens) ||
		    grow((void **)&p->targets, sizeof *p->targets, tokens) ||
		    grow((void **)&p->token_mask, sizeof *p->token_mask, tokens) ||
		    grow((void **)&p->gen, sizeof *p->gen, tokens) ||
		    grow((void **)&p->prev, sizeof *p->prev, tokens) ||
		    grow((void **)&p->ref, sizeof *p->ref, tokens))
			return -1;
		p->cap_tokens = tokens;
	}
	if (seqs > p->cap_seqs) {
		if (grow((void **)&p->cu_seqlens, sizeof *p->cu_seqlens, seqs + 1) ||
		    grow((void **)&p->advantage, sizeof *p->advantage, seqs) ||
		    grow((void **)&p->sample_mask, sizeof *p->sample_mask, seqs))
			return -1;
		p->cap_seqs = seqs;
	}
	return 0;
}

int rl_packed_build(struct rl_packed *p, const struct rl_rollout *r, const int *which, int n)
{
	int tokens = 0;

	for (int k = 0; k < n; k++)
		tokens += r->s[which[k]].len;
	if (reserve(p, tokens, n))
		return -1;
	int t = 0;
	p->cu_seqlens[0] = 0;
	for (int k = 0; k < n; k++) {
		const struct rl_sample *s = &r->s[which[k]];

		for (int i = 0; i < s->len; i++, t++) {
			/* row i predicts token i + 1; response token j sits at
			 * position prompt_len + j and is predicted by row
			 * prompt_len + j - 1 */
			int j = i + 1 - s->prompt_len;
			bool response = j >= 0 && i + 1 < s->len;
			bool counts = response && (!s->loss_mask || s->loss_mask[i + 1]);

			p->ids[t] = s->ids[i];
			p->targets[t] = i + 1 < s->len ? s->ids[i + 1] : -1;
			p->token_mask[t] = counts;
			p->gen[t] = response && s->gen_lp ? s->gen_lp[j] : 0.0f;
			p->prev[t] = response && s->prev_lp ? s->prev_lp[j] : 0.0f;
			p->ref[t] = response && s->ref_lp ? s->ref_lp[j] : 0.0f;
		}
		p->cu_seqlens[k + 1] = t;
		p->advantage[k] = s->advantage;
		p->sample_mask[k] = s->loss_mult;
	}
	p->batch.n_tokens = tokens;
	p->batch.n_seqs = n;
	p->batch.ids = p->ids;
	p->batch.cu_seqlens = p->cu_seqlens;
	p->batch.targets = p->targets;
	return 0;
}

void rl_packed_scatter(const struct rl_packed *p, struct rl_rollout *r, const int *which, int n,
                       const float *row_lp, size_t field_offset)
{
	for (int k = 0; k < n; k++) {
		struct rl_sample *s = &r->s[which[k]];
		float *dst = *(float **)((char *)s + field_offset);
		int base = p->cu_seqlens[k] + s->prompt_len - 1;

		for (int j = 0; j < s->len - s->prompt_len; j++)
			dst[j] = row_lp[base + j];
	}
}

void rl_packed_free(struct rl_packed *p)
{
	free(p->ids);
	free(p->cu_seqlens);
	free(p->targets);
	free(p->token_mask);
	free(p->gen);
	free(p->prev);
	free(p->ref);
	free(p->advantage);
	free(p->sample_mask);
	memset(p, 0, sizeof *p);
}
