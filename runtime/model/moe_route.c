/* The router's host side. The softmax is taken in double and rounded once,
 * which agrees with torch's fp32 softmax to an ulp or so; what matters more
 * is that every rank routes a token alike, and each token is routed by one
 * rank only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/model/moe_route.h"

void rl_moe_route(const float *logits, int n, int E, int k, bool norm, float *probs,
                  int32_t *choice, float *weight)
{
	for (int t = 0; t < n; t++) {
		const float *z = logits + (size_t)t * E;
		float *p = probs + (size_t)t * E;
		int32_t *c = choice + (size_t)t * k;
		float *w = weight + (size_t)t * k;
		double most = -INFINITY, sum = 0, kept = 0;

		for (int e = 0; e < E; e++)
			most = z[e] > most ? z[e] : most;
		for (int e = 0; e < E; e++)
			sum += exp((double)z[e] - most);
		for (int e = 0; e < E; e++)
			p[e] = (float)(exp((double)z[e] - most) / sum);
		/* selection by repeated scan: k is small; ties go to the lower
		 * expert, as torch.topk on the CPU */
		for (int j = 0; j < k; j++) {
			int best = -1;

			for (int e = 0; e < E; e++) {
				bool taken = false;

				for (int i = 0; i < j && !taken; i++)
					taken = c[i] == e;
				if (!taken && (best < 0 || p[e] > p[best]))
					best = e;
			}
			c[j] = best;
			w[j] = p[best];
			kept += p[best];
		}
		if (norm)
			for (int j = 0; j < k; j++)
				w[j] = (float)(w[j] / (float)kept);
	}
}

int rl_moe_route_backward(const float *probs, const int32_t *choice, const float *weight,
                          const float *dweight, const float *dprob_all, const uint8_t *real, int n,
                          int E, int k, bool norm, float *dlogits)
{
	double *dp = malloc((size_t)E * sizeof *dp);

	if (!dp)
		return -1;
	for (int t = 0; t < n; t++) {
		const float *p = probs + (size_t)t * E, *w = weight + (size_t)t * k;
		const float *dw = dweight + (size_t)t * k;
		const int32_t *c = choice + (size_t)t * k;
		float *dz = dlogits + (size_t)t * E;
		double dot = 0, kept = 0, wdw = 0;

		for (int e = 0; e < E; e++)
			dp[e] = dprob_all && (!real || real[t]) ? dprob_all[e] : 0.0;
		/* w_j = p_j / S over the chosen: dL/dp_j = (dw_j - sum_i dw_i w_i) / S */
		for (int j = 0; j < k; j++) {
			kept += p[c[j]];
			wdw += (double)dw[j] * w[j];
		}
		for (int j = 0; j < k; j++)
			dp[c[j]] += norm ? (dw[j] - wdw) / kept : dw[j];
		for (int e = 0; e < E; e++)
			dot += (double)p[e] * dp[e];
		for (int e = 0; e < E; e++)
			dz[e] = (float)(p[e] * (dp[e] - dot));
	}
	free(dp);
	return 0;
}

void rl_moe_count(const float *probs, const int32_t *choice, const uint8_t *real, int n, int E,
                  int k, float *stats)
{
	for (int t = 0; t < n; t++) {
		if (real && !real[t])
			continue;
		for (int j = 0; j < k; j++)
			stats[choice[(size_t)t * k + j]] += 1.0f;
		for (int e = 0; e < E; e++)
			stats[E + e] += probs[(size_t)t * E + e];
		stats[2 * E] += 1.0f;
	}
}

void rl_moe_plan_free(struct rl_moe_plan *p)
{
	free(p->send_count);
	free(p->recv_count);
	free(p->slot);
	free(p->src);
	free(p->offsets);
	free(p->perm);
	free(p->inv);
	memset(p, 0, sizeof *p);
}

int rl_moe_plan_send(struct rl_moe_plan *p, const int32_t *choice, int n, int k, int first,
                     int ranks, int n_local)
{
	size_t buckets = (size_t)ranks * (size_t)n_local, copies = (size_t)n * (size_t)k;
	int32_t *start = calloc(buckets + 1, sizeof *start);

	rl_moe_plan_free(p);
	p->ranks = ranks;
	p->n_local = n_local;
	p->send_count = calloc(buckets, sizeof *p->send_count);
	p->recv_count = calloc(buckets, sizeof *p->recv_count);
	p->slot = malloc((copies ? copies : 1) * sizeof *p->slot);
	p->src = malloc((copies ? copies : 1) * sizeof *p->src);
	if (!start || !p->send_count || !p->recv_count || !p->slot || !p->src) {
		free(start);
		rl_moe_plan_free(p);
		return -1;
	}
	/* expert e is bucket e: rank e / n_local, its expert e % n_local */
	for (size_t i = 0; i < copies; i++)
		p->send_count[choice[i]]++;
	for (size_t b = 0; b < buckets; b++)
		start[b + 1] = start[b] + p->send_count[b];
	for (size_t i = 0; i < copies; i++) {
		int32_t at = start[choice[i]]++;

		p->slot[i] = at;
		p->src[at] = first + (int32_t)(i / (size_t)k);
	}
	p->n_send = (int)copies;
	free(start);
	return 0;
}

int rl_moe_plan_recv(struct rl_moe_plan *p)
{
	int R = p->ranks, L = p->n_local;
	int32_t *row0;

	if (R == 1)
		memcpy(p->recv_count, p->send_count, (size_t)L * sizeof *p->recv_count);
	p->n_recv = 0;
	for (int b = 0; b < R * L; b++)
		p->n_recv += p->recv_count[b];
	size_t nr = (size_t)(p->n_recv ? p->n_recv : 1);
	p->offsets = calloc((size_t)L + 1, sizeof *p->offsets);
	p->perm = malloc(nr * sizeof *p->perm);
	p->inv = malloc(nr * sizeof *p->inv);
	row0 = malloc((size_t)R * (size_t)L * sizeof *row0);
	if (!p->offsets || !p->perm || !p->inv || !row0) {
		free(row0);
		return -1;
	}
	/* the received rows come rank by rank, each rank's by expert */
	for (int r = 0, at = 0; r < R; r++)
		for (int e = 0; e < L; e++) {
			row0[r * L + e] = at;
			at += p->recv_count[r * L + e];
		}
	for (int e = 0; e < L; e++) {
		int q = p->offsets[e];

		for (int r = 0; r < R; r++)
			for (int i = 0; i < p->recv_count[r * L + e]; i++, q++) {
				p->perm[q] = row0[r * L + e] + i;
				p->inv[row0[r * L + e] + i] = q;
			}
		p->offsets[e + 1] = q;
	}
	free(row0);
	return 0;
}
