/* Token sampling on the host: the reference of the sample op (sample.h) and
 * of the host sampler (runtime/generate/sampler.c). vLLM's order
 * (temperature, top-k, top-p, draw) in fp32 with double normalizers, without
 * sorting the vocabulary: top-k is a bounded heap, top-p sorts only the
 * tokens a one-pass histogram of log-probabilities shows the nucleus can
 * reach. Errors are codes here (the op has no message channel): 1 a
 * non-finite logit, 2 one that overflows at the temperature, with the
 * index in *token. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "kernels/philox.h"
#include "kernels/sample.h"

/* Histogram buckets for top-p pruning, one nat wide; the last one takes
 * everything at least HIST_BUCKETS - 1 nats below the maximum. */
#define HIST_BUCKETS 64

struct scratch {
	float *z;     /* logits / temperature */
	float *e;     /* exp(z - max z) */
	int32_t *idx; /* candidate ids */
};

/* What rl_sample draws from: ids[0..n) in ranking order, or, when nothing
 * was truncated, every id in id order (ids unused). */
struct support {
	const int32_t *ids;
	int n;
	bool all;
	float zmax;
	double norm; /* sum of e over the whole vocabulary, in id order */
};

static int greedy(const float *logits, int vocab, int32_t *token, float *logprob)
{
	int best = 0;
	double norm = 0;

	for (int i = 0; i < vocab; i++) {
		if (!isfinite(logits[i])) {
			*token = i;
			return 1;
		}
		if (logits[i] > logits[best]) /* strict: ties stay with the lower id */
			best = i;
	}
	*token = best;
	if (!logprob)
		return 0;
	for (int i = 0; i < vocab; i++)
		norm += expf(logits[i] - logits[best]);
	*logprob = (float)(-log(norm));
	return 0;
}

/* z = logits / T, e = exp(z - max z) and their sum. */
static int scale(const float *logits, int vocab, float temperature, struct scratch *w,
                 struct support *sup, int32_t *bad)
{
	float zmax = -INFINITY;
	double norm = 0;

	for (int i = 0; i < vocab; i++) {
		if (!isfinite(logits[i])) {
			*bad = i;
			return 1;
		}
		w->z[i] = logits[i] / temperature;
		if (!isfinite(w->z[i])) {
			*bad = i;
			return 2;
		}
		if (w->z[i] > zmax)
			zmax = w->z[i];
	}
	for (int i = 0; i < vocab; i++) {
		w->e[i] = expf(w->z[i] - zmax);
		norm += w->e[i];
	}
	sup->zmax = zmax;
	sup->norm = norm;
	return 0;
}

/* The ranking: higher scaled logit first, then lower id. */
static inline bool ahead(const float *z, int32_t a, int32_t b)
{
	return z[a] > z[b] || (z[a] == z[b] && a < b);
}

/* A heap whose root is the token furthest behind in the ranking. */
static void sift_down(int32_t *h, int n, int i, const float *z)
{
	for (;;) {
		int c = 2 * i + 1;

		if (c >= n)
			return;
		if (c + 1 < n && ahead(z, h[c], h[c + 1]))
			c++;
		if (!ahead(z, h[i], h[c]))
			return;
		int32_t t = h[i];
		h[i] = h[c];
		h[c] = t;
		i = c;
	}
}

static void heapify(int32_t *h, int n, const float *z)
{
	for (int i = n / 2 - 1; i >= 0; i--)
		sift_down(h, n, i, z);
}

/* Heapsort: moving the root (the last in the ranking) to the end each time
 * leaves the array in ranking order. In place and O(n log n) worst case. */
static void sort_heap(int32_t *h, int n, const float *z)
{
	for (int end = n - 1; end > 0; end--) {
		int32_t t = h[0];
		h[0] = h[end];
		h[end] = t;
		sift_down(h, end, 0, z);
	}
}

/* The first k of the ranking, in ranking order, in O(vocab log k). */
static int select_top_k(const float *z, int vocab, int k, int32_t *idx)
{
	for (int i = 0; i < k; i++)
		idx[i] = i;
	heapify(idx, k, z);
	for (int i = k; i < vocab; i++) {
		if (ahead(z, i, idx[0])) {
			idx[0] = i;
			sift_down(idx, k, 0, z);
		}
	}
	sort_heap(idx, k, z);
	return k;
}

/* Length of the smallest prefix of ids whose mass reaches target, or -1. */
static int nucleus(const int32_t *ids, int n, const float *e, double target)
{
	double cum = 0;

	for (int j = 0; j < n; j++) {
		cum += e[ids[j]];
		if (cum >= target)
			return j + 1;
	}
	return -1;
}

static int sort_all(const float *z, int vocab, int32_t *idx)
{
	for (int i = 0; i < vocab; i++)
		idx[i] = i;
	heapify(idx, vocab, z);
	sort_heap(idx, vocab, z);
	return vocab;
}

/* Top-p over the whole vocabulary. The tokens within d nats of the maximum
 * are a prefix of the ranking (ties fall in the same bucket), so once their
 * mass reaches the target the nucleus lies inside them and only they need
 * sorting. A peaked distribution leaves a handful; a flat one sorts what
 * its nucleus needs anyway. */
static int top_p_pruned(const float *z, const float *e, int vocab, float zmax, double target,
                        int32_t *idx)
{
	double mass[HIST_BUCKETS] = {0}, cum = 0;
	int last = HIST_BUCKETS - 1, n = 0, keep;

	for (int i = 0; i < vocab; i++) {
		float d = zmax - z[i];
		int b = d < (float)(HIST_BUCKETS - 1) ? (int)d : HIST_BUCKETS - 1;

		mass[b] += e[i];
	}
	for (int b = 0; b < HIST_BUCKETS; b++) {
		cum += mass[b];
		if (cum >= target) {
			last = b;
			break;
		}
	}
	if (last < HIST_BUCKETS - 1) {
		for (int i = 0; i < vocab; i++)
			if (zmax - z[i] < (float)(last + 1))
				idx[n++] = i;
		heapify(idx, n, z);
		sort_heap(idx, n, z);
		keep = nucleus(idx, n, e, target);
		if (keep > 0)
			return keep;
		/* The histogram's sum and the sorted one rounded apart. */
	}
	n = sort_all(z, vocab, idx);
	keep = nucleus(idx, n, e, target);
	return keep > 0 ? keep : n;
}

/* What is drawn from, with the codes of rl_sample_row_cpu. */
static int find_support(const float *logits, int vocab, float temperature, int top_k_, float top_p_,
                        float *work, struct support *sup, int32_t *bad)
{
	struct scratch w;
	bool top_k = top_k_ > 0 && top_k_ < vocab, top_p = top_p_ < 1;
	int rc;

	w.z = work;
	w.e = work + vocab;
	w.idx = (int32_t *)(work + 2 * (size_t)vocab);
	if ((rc = scale(logits, vocab, temperature, &w, sup, bad)))
		return rc;
	sup->ids = w.idx;
	sup->all = !top_k && !top_p;
	if (sup->all) {
		sup->n = vocab;
	} else if (top_k) {
		sup->n = select_top_k(w.z, vocab, top_k_, w.idx);
		if (top_p) {
			double mass = 0;

			for (int j = 0; j < sup->n; j++)
				mass += w.e[w.idx[j]];
			/* top_p < 1, so the target is at most the mass summed in
			 * this same order and is always reached. */
			int keep = nucleus(w.idx, sup->n, w.e, (double)top_p_ * mass);

			if (keep > 0)
				sup->n = keep;
		}
	} else {
		sup->n =
		    top_p_pruned(w.z, w.e, vocab, sup->zmax, (double)top_p_ * sup->norm, w.idx);
	}
	return 0;
}

/* The first kept token whose cumulative mass exceeds u * (kept mass). The
 * kept mass is summed in the walking order, so u < 1 always stops inside;
 * the fallback only guards against that reasoning being wrong. */
static int32_t draw(const struct support *sup, const float *e, double u)
{
	double mass = 0, cum = 0, x;
	int32_t last = -1;

	if (sup->all) {
		x = u * sup->norm;
		for (int32_t i = 0; i < sup->n; i++) {
			cum += e[i];
			if (e[i] > 0)
				last = i;
			if (x < cum)
				return i;
		}
		return last;
	}
	for (int j = 0; j < sup->n; j++)
		mass += e[sup->ids[j]];
	x = u * mass;
	for (int j = 0; j < sup->n; j++) {
		int32_t id = sup->ids[j];

		cum += e[id];
		if (e[id] > 0)
			last = id;
		if (x < cum)
			return id;
	}
	return last;
}

size_t rl_sample_row_work_bytes(int vocab)
{
	return vocab > 0 ? (size_t)vocab * (2 * sizeof(float) + sizeof(int32_t)) : 0;
}

static bool params_ok(int vocab, float temperature, int top_k, float top_p)
{
	return vocab >= 1 && isfinite(temperature) && temperature >= 0 && top_k >= -1 &&
	       top_p > 0 && top_p <= 1;
}

int rl_sample_row_cpu(const float *logits, int vocab, float temperature, int top_k, float top_p,
                      double u, int32_t *token, float *logprob, void *work)
{
	struct support sup;
	float *w = work;
	int rc;

	if (!logits || !token || !params_ok(vocab, temperature, top_k, top_p))
		return -1;
	if (temperature < RL_SAMPLE_GREEDY_EPS)
		return greedy(logits, vocab, token, logprob);
	if (!work)
		return -1;
	if ((rc = find_support(logits, vocab, temperature, top_k, top_p, w, &sup, token)))
		return rc;
	*token = draw(&sup, w + vocab, u);
	if (logprob)
		*logprob = (float)((double)(w[*token] - sup.zmax) - log(sup.norm));
	return 0;
}

int rl_sample_support_cpu(const float *logits, int vocab, float temperature, int top_k, float top_p,
                          int32_t *ids, int *n, void *work)
{
	struct support sup;
	int rc;

	if (!logits || !ids || !n || !params_ok(vocab, temperature, top_k, top_p))
		return -1;
	if (temperature < RL_SAMPLE_GREEDY_EPS) {
		*n = 1;
		return greedy(logits, vocab, ids, NULL);
	}
	if (!work)
		return -1;
	if ((rc = find_support(logits, vocab, temperature, top_k, top_p, work, &sup, ids)))
		return rc;
	for (int j = 0; j < sup.n; j++)
		ids[j] = sup.all ? j : sup.ids[j];
	*n = sup.n;
	return 0;
}

int rl_sample_cpu(int32_t *tokens, const float *logits, int n, int vocab, int ld,
                  const struct rl_sample_params *p, const int64_t *counters, void *stream)
{
	(void)stream;
	if (!tokens || !logits || !p || !counters || n < 0 || ld < vocab ||
	    !params_ok(vocab, p->temperature, p->top_k, p->top_p))
		return -1;
	if (n == 0)
		return 0;

	void *work = malloc(rl_sample_row_work_bytes(vocab));

	if (!work)
		return -1;
	for (int r = 0; r < n; r++) {
		double u = rl_philox_uniform(p->seed, (uint64_t)counters[2 * r],
		                             (uint64_t)counters[2 * r + 1]);

		if (rl_sample_row_cpu(logits + (size_t)r * (size_t)ld, vocab, p->temperature,
		                      p->top_k, p->top_p, u, &tokens[r], NULL, work))
			tokens[r] = -1;
	}
	free(work);
	return 0;
}
