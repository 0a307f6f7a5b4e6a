/* Internal to runtime/model: the router of a mixture-of-experts layer on
 * the host (softmax in fp32 over the experts, top-k, optional
 * renormalisation, as transformers' Qwen MoE routers), its backward pass,
 * the load-balancing statistics, and the dispatch plan that orders the
 * routed copies of the tokens by the rank and the expert that take them.
 * defines: struct rl_moe_plan, rl_moe_route, rl_moe_route_backward,
 * rl_moe_count, rl_moe_plan_send, rl_moe_plan_recv */
#ifndef RL_MODEL_MOE_ROUTE_H
#define RL_MODEL_MOE_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* probs [n, E] = softmax(logits); choice [n, k] the k most probable experts,
 * most probable first; weight [n, k] their probabilities, divided by their
 * sum when norm. */
void rl_moe_route(const float *logits, int n, int E, int k, bool norm, float *probs,
                  int32_t *choice, float *weight);
/* dlogits [n, E] (written) from dweight [n, k], the loss gradient of the
 * weights, and dprob_all [E] (may be NULL), a gradient every token's
 * probabilities get alike (the load-balancing loss's); rows where real[t]
 * is 0 get none of dprob_all. -1 when out of memory. */
int rl_moe_route_backward(const float *probs, const int32_t *choice, const float *weight,
                          const float *dweight, const float *dprob_all, const uint8_t *real, int n,
                          int E, int k, bool norm, float *dlogits);
/* Adds to stats [2E + 1] this rank's share of the batch: the copies routed
 * to each expert [0, E), the sum of each expert's probability [E, 2E),
 * the tokens [2E]; padding rows (real[t] 0) are left out. */
void rl_moe_count(const float *probs, const int32_t *choice, const uint8_t *real, int n, int E,
                  int k, float *stats);

/* Where each routed copy goes. Copies are sent in the order (rank,
 * expert, token, j); a rank holds n_local experts, rank r those from
 * r x n_local. */
struct rl_moe_plan {
	int ranks, n_local, n_send, n_recv;
	int32_t *send_count; /* [ranks x n_local] copies to each rank's expert */
	int32_t *recv_count; /* [ranks x n_local] copies from each rank for our experts */
	int32_t *slot;       /* [n x k] the copy's place in the send order */
	int32_t *src;        /* [n_send] the token row (first + t) each copy is of */
	int32_t *offsets;    /* [n_local + 1] rows of each of our experts, expert order */
	/* [n_recv]: received row (rank-major) of the expert-order row q,
	 * and its inverse */
	int32_t *perm, *inv;
};

/* The send side from the choices of rows [first, first + n); -1 when out
 * of memory. */
int rl_moe_plan_send(struct rl_moe_plan *p, const int32_t *choice, int n, int k, int first,
                     int ranks, int n_local);
/* The receive side once recv_count is filled (ranks == 1: our own sends);
 * -1 when out of memory. */
int rl_moe_plan_recv(struct rl_moe_plan *p);
void rl_moe_plan_free(struct rl_moe_plan *p);

#endif
