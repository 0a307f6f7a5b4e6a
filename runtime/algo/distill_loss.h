/* On-policy distillation's loss: the per-token reverse KL of the trained
 * policy (the student) to a frozen teacher, on the student's own samples,
 * and its gradient with respect to the student's token log-probabilities.
 * NeMo-RL's DistillationLossFn under loss_fn.kl_type: reverse, estimated
 * on the sampled token instead of over the teacher's top-k logits.
 * defines: struct rl_distill_loss, rl_distill_loss_init, rl_distill_loss_compute */
#ifndef RL_ALGO_DISTILL_LOSS_H
#define RL_ALGO_DISTILL_LOSS_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/grpo/loss.h"

/* loss_fn.kl_type; only the reverse KL exists here (see distill_loss.c) */
enum rl_distill_kl { RL_DISTILL_KL_REVERSE };

struct rl_distill_loss {
	enum rl_distill_kl kl;
};

/* Checks NeMo-RL's loss_fn keys of distillation and fills *l: kl_type
 * "reverse" (NULL is the default, reverse); "forward" and "mixed" need the
 * teacher's top-k logits and are refused as not implemented, as is
 * zero_outside_topk: true (it corrects a top-k sum this loss does not
 * take). mixed_kl_weight only weighs "mixed": it must be in [0, 1], as
 * NeMo-RL checks, and is otherwise unused. Returns 0, or -1 with a message
 * naming the key in err. */
int rl_distill_loss_init(struct rl_distill_loss *l, const char *kl_type, double mixed_kl_weight,
                         bool zero_outside_topk, char *err, size_t errlen);

/* One micro-batch's share of the step's loss, as rl_loss_compute takes it
 * (see runtime/grpo/loss.h for the batch, the denominators and the
 * statistics): b->ref holds the teacher's log-probs of the sampled tokens,
 * b->prev the student's before this step's updates, b->curr the student's
 * now; advantage is not read. Token-level: each token that counts weighs
 * sample_mask / norm->valid_tokens.
 *
 * Returns the surrogate whose gradient is written to dcurr (when not NULL,
 * 0 where a token does not count): sum_t c_t * r_t * (prev_t - ref_t), r_t
 * = exp(curr_t - prev_t). acc (when not NULL) is added to: loss and
 * actor_loss take that surrogate, which at the step's first update (curr
 * = prev) is the mean reverse KL; kl takes the mean of curr_t - ref_t, the
 * reverse KL of the student as it is now; probs_ratio and
 * probs_ratio_clamped the mean r_t (no clip), token_mult_prob_error the
 * mean exp(|gen - prev|), importance_weight 1 per token. Returns NAN (and
 * touches nothing) when b->ref is NULL. */
double rl_distill_loss_compute(const struct rl_distill_loss *l, const struct rl_loss_batch *b,
                               const struct rl_loss_norm *norm, float *dcurr,
                               struct rl_loss_stats *acc);

#endif
