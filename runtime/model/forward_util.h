/* Internal to runtime/model: the shorthand the passes are written in. */
#ifndef RL_MODEL_FORWARD_UTIL_H
#define RL_MODEL_FORWARD_UTIL_H

#include <stdio.h>

#include "runtime/model/acts.h"
#include "runtime/model/split.h"

/* An op that fails turns into a message naming where it happened. Needs err
 * and errlen in scope. */
#define RL_TRY(call, ...)                                                                          \
	do {                                                                                       \
		if ((call) != 0) {                                                                 \
			int rl_try_n_ = snprintf(err, errlen, __VA_ARGS__);                        \
			if (rl_try_n_ >= 0 && (size_t)rl_try_n_ < errlen)                          \
				snprintf(err + rl_try_n_, errlen - (size_t)rl_try_n_, " failed");  \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

static inline float *rl_param_data(const struct rl_model *m, int l, enum rl_layer_param p)
{
	struct rl_param *x = rl_layer_param(m, l, p);
	return x ? x->data : NULL;
}

static inline float *rl_param_grad(const struct rl_model *m, int l, enum rl_layer_param p)
{
	struct rl_param *x = rl_layer_param(m, l, p);
	return x ? x->grad : NULL;
}

/* The weight and the gradient of layer l's parameter, NULL when absent. */
#define P(name) rl_param_data(m, l, RL_P_##name)
#define G(name) rl_param_grad(m, l, RL_P_##name)

/* Where the q/k/v projections go. Without q/k norms, q == q_proj and
 * k == k_proj; with them, q and k receive the normed heads (rstd saved when
 * q_rstd / k_rstd are not NULL). The rotation is applied to q and k. */
struct rl_qkv_out {
	float *q_proj, *k_proj, *v;
	float *q, *k;
	float *q_rstd, *k_rstd;
};

/* forward.c: layer l of the batch in a (uploaded by rl_model_forward),
 * from its input a->layers[l].x_in to x_out; the backward pass of a
 * checkpointed model runs it again. */
int rl_layer_forward(struct rl_model *m, struct rl_acts *a, int l, float *x_out, char *err,
                     size_t errlen);

/* blocks.c: the layer pieces forward.c and kv_cache.c share; out may alias
 * xn in rl_block_mlp (xn is read before out is written). */
int rl_block_qkv(struct rl_model *m, int l, const float *xn, const int32_t *pos, int T,
                 const struct rl_qkv_out *o, char *err, size_t errlen);
int rl_block_mlp(struct rl_model *m, int l, const float *xn, float *gate, float *up, float *h,
                 float *out, int T, char *err, size_t errlen);

#endif
