/* Internal to runtime/model: the activations one forward pass keeps for the
 * backward pass, and the backward pass's scratch. All backend memory. */
#ifndef RL_MODEL_ACTS_H
#define RL_MODEL_ACTS_H

#include <stdbool.h>

#include "runtime/model/model.h"
#include "runtime/model/moe.h"
#include "runtime/model/split.h"

struct rl_layer_acts {
	float *x_in; /* [T, d] residual stream entering the layer */
	float *xn1, *rstd1;
	float *q, *k, *v;       /* after the q/k norms and the rotation */
	float *q_raw, *k_raw;   /* projections before the q/k norms (Qwen3) */
	float *q_rstd, *k_rstd; /* [T * heads] */
	float *att, *lse;       /* attention output [T, H*D], lse [T, H] */
	float *x_mid;           /* residual stream after attention */
	float *xn2, *rstd2;
	float *gate, *up, *h;    /* [T, intermediate] */
	struct rl_moe_acts *moe; /* a mixture-of-experts layer's, instead of gate/up/h */
};

struct rl_acts {
	int max_tokens;
	/* n_tokens: the batch's, padded with one sequence of n_tokens - n_real
	 * tokens to a multiple of the tensor-parallel group under sequence
	 * parallelism; rows: this rank's of them */
	int n_tokens, n_real;
	int n_seqs;
	struct rl_rows rows;
	/* ids and targets are this rank's vocabulary rows (-1: another
	 * rank's, or no target) */
	int32_t *ids, *pos, *cu_seqlens, *targets;
	/* the batch-invariant attention's view of the batch (kernels/paged.h):
	 * the identity table over the keys' rows (this rank's, or the padded
	 * whole batch's under context parallelism) and where each token's
	 * sequence starts in them */
	int32_t *key_rows, *key_off;
	int32_t *targets_host;
	float *target_mask; /* host: 1 where a target exists */
	/* host: 1 for the rows that are tokens, not padding (the routers'
	 * load statistics count only those); the load-balancing loss's
	 * coefficient in the backward pass */
	uint8_t *row_real;
	float aux_coef;
	/* activation checkpointing (rl_acts_new_recompute): every layer but
	 * its input shares the first layer's buffers, and the backward pass
	 * runs each layer's forward again, into recompute_out, before it */
	bool recompute;
	float *recompute_out;
	struct rl_layer_acts *layers;
	float *x_final, *hf, *rstd_f;
	float *lm_lse;
	int first_layer; /* the stage's: layers[] holds only the stage's */
	int logit_chunk;
	float logit_scale;
	/* the LM head's [T] vector on the backend: log-probs out of the forward,
	 * their gradient into the backward; and its host-side twin */
	float *lm_vec, *lm_vec_host;
	/* the chunked LM head's scratch, shared by its forward and backward and
	 * kept across steps; grown when a larger chunk asks for more */
	float *lm_work;
	long lm_work_floats;
	/* tensor parallelism: a whole [T, d] partial sum or gathered
	 * gradient, [n, d] of this rank's rows, and the host-side [(size + 1)
	 * x T] of the vocabulary-parallel log-softmax */
	float *tp_full, *tp_local, *tp_host;
	/* context parallelism (cp_pass.c): the chunk table of this rank's
	 * queries (backend memory); for each row of the group's all-gather
	 * (rank-major, cp x n_tokens), its row in the padded whole batch
	 * and its token in the caller's batch (-1: padding) (host); the keys
	 * and values of the padded whole batch, their gradients, the
	 * all-gather's buffer, the gathered log-probs (host) */
	struct rl_attention_chunks chunks;
	int32_t *chunk_q, *chunk_k, *chunk_off, *chunk_len;
	int32_t *chunk_host; /* the four, [4][2 x max_tokens], filled on the host */
	struct rl_attention_chunks chunks_host; /* the table over chunk_host */
	int32_t *cp_full_row, *cp_origin;
	/* the all-gather's maps as row gathers on the backend: gathered row
	 * of each padded whole-batch row, and cp_full_row itself */
	int32_t *cp_inv_dev, *cp_full_row_dev;
	float *k_full, *v_full, *dk_full, *dv_full, *cp_gather, *cp_lp;
	/* backward scratch */
	float *dres, *dhf, *dxn, *dq, *dk, *dv, *dq_raw, *dk_raw, *datt, *dgate, *dup, *dh;
	/* every allocation above, for release */
	void **owned;
	int n_owned, cap_owned;
};

static inline struct rl_param *rl_layer_param(const struct rl_model *m, int layer,
                                              enum rl_layer_param p)
{
	return m->layer[layer * RL_P_PER_LAYER + p];
}

#endif
