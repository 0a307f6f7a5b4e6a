/* Internal to runtime/model: a mixture-of-experts layer's forward and
 * backward pass (Qwen2-MoE / Qwen3-MoE), with expert parallelism.
 *
 * Each tensor-parallel rank routes its share of the rows
 * (rl_split_range), so a token is routed once; the copies go to the rank
 * of their expert by all-to-all over ep, through one grouped GEMM per
 * projection over the rank's experts, and back; the weighted sum lands in
 * the rank's rows of out, zeros elsewhere, which is the partial sum the
 * tensor-parallel reduction after the MLP expects.
 * defines: struct rl_moe_acts, rl_moe_forward, rl_moe_backward, rl_moe_acts_free */
#ifndef RL_MODEL_MOE_H
#define RL_MODEL_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/model/model.h"
#include "runtime/model/moe_route.h"

/* What one pass keeps for its backward pass; sized by the routing, so
 * allocated by each pass and released by the next. */
struct rl_moe_acts {
	int T, first, n; /* rows of the pass; this rank routes [first, first + n) */
	int kk;          /* copies combined per token: top-k, + 1 with a shared expert */
	struct rl_moe_plan plan;
	/* host */
	float *probs, *weight_h, *sig;
	int32_t *choice;
	uint8_t *real;  /* [n] rows that are tokens, not padding */
	float *f;       /* [E] each expert's share of the routed copies over the batch */
	float aux;      /* this layer's load-balancing loss, without the coefficient */
	double n_batch; /* the tokens of the batch the statistics are over */
	bool stats;
	/* backend: the combine's slots and weights; expert-order inputs, the
	 * SwiGLU's, the expert outputs in send order followed by the shared
	 * expert's rows */
	int32_t *slot, *src, *perm, *inv;
	float *weight;
	float *xp, *gate, *up, *h, *ys;
	float *sh_gate, *sh_up, *sh_h;
	/* what this pass allocated: backend memory, then host memory */
	void **owned, **host_owned;
	int n_owned, cap_owned, n_host, cap_host;
};

/* The layer's MLP on xn [T, d] (whole, backend memory) into out [T, d]:
 * this rank's rows routed, the other rows zero. real [T] (host, may be
 * NULL: all) marks the rows that count in the load-balancing statistics;
 * train: gather them over the batch (collective over shard.tokens). */
int rl_moe_forward(struct rl_model *m, int l, struct rl_moe_acts *s, const float *xn, int T,
                   const uint8_t *real, float *out, bool train, char *err, size_t errlen);
/* After rl_moe_forward with train: dout [T, d] (whole) back into dxn
 * (added; this rank's rows) and the layer's parameter gradients; the
 * load-balancing loss enters with aux_coef. */
int rl_moe_backward(struct rl_model *m, int l, struct rl_moe_acts *s, const float *dout,
                    const float *xn, float *dxn, float aux_coef, char *err, size_t errlen);
void rl_moe_acts_free(const struct rl_ops *ops, struct rl_moe_acts *s);

#endif
