/* Token sampling for generation. vLLM's order (temperature, top-k, top-p,
 * draw) in fp32 with double normalizers, without sorting the vocabulary:
 * top-k is a bounded heap, top-p sorts only the tokens a one-pass histogram
 * of log-probabilities shows the nucleus can reach. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "runtime/generate/sampler.h"

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

size_t rl_sample_work_bytes(int vocab)
{
	return vocab > 0 ? (size_t)vocab * (2 * sizeof(float) + sizeof(int32_t)) : 0;
}

static int check_args(const float *logits, int vocab, const struct rl_sampling *s, char *err,
                      size_t errlen)
{
	if (!logits || !s) {
		snprintf(err, errlen, "sampler: %s is NULL", !logits ? "logits" : "sampling");
		return -1;
	}
	if (vocab < 1) {
		snprintf(err, errlen, "sampler: vocab %d must be >= 1", vocab);
		return -1;
	}
	if (!isfinite(s->temperature) || s->temperature < 0) {
		snprintf(err, errlen, "sampler: temperature %g must be finite and >= 0",
		         (double)s->temperature);
		return -1;
	}
	if (s->top_k < -1) {
		snprintf(err, errlen, "sampler: top_k %d must be >= 1, or 0 or -1 for off",
		         s->top_k);
		return -1;
	}
	if (!(s->top_p > 0 && s->top_p <= 1)) {
		snprintf(err, errlen, "sampler: top_p %g must be in (0, 1]", (double)s->top_p);
		return -1;
	}
	return 0;
}

static int not_finite(const float *logits, int i, char *err, size_t errlen)
{
	snprintf(err, errlen, "sampler: logits[%d] = %g is not finite", i, (double)logits[i]);
	return -1;
}

static bool is_greedy(const struct rl_sampling *s)
{
	return s->temperature < RL_SAMPLING_GREEDY_EPS;
}

static int greedy(const float *logits, int vocab, int32_t *token, float *logprob, char *err,
                  size_t errlen)
{
	int best = 0;
	double norm = 0;

	for (int i = 0; i < vocab; i++) {
		if (!isfinite(logits[i]))
			return not_finite(logits, i, err, errlen);
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
                 struct support *sup, char *err, size_t errlen)
{
	float zmax = -INFINITY;
	double norm = 0;

	for (int i = 0; i < vocab; i++) {
		if (!isfinite(logits[i]))
			return not_finite(logits, i, err, errlen);
		w->z[i] = logits[i] / temperature;
		if (!isfinite(w->z[i])) {
			snprintf(err, errlen,
			         "sampler: logits[%d] = %g overflows at temperature %g", i,
			         (double)logits[i], (double)temperature);
			return -1;
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

static int find_support(const float *logits, int vocab, const struct rl_sampling *s, float *work,
                        struct support *sup, char *err, size_t errlen)
{
	struct scratch w;
	bool top_k = s->top_k > 0 && s->top_k < vocab, top_p = s->top_p < 1;

	if (!work) {
		snprintf(err, errlen, "sampler: work is NULL (need rl_sample_work_bytes(%d))",
		         vocab);
		return -1;
	}
	w.z = work;
	w.e = work + vocab;
	w.idx = (int32_t *)(work + 2 * (size_t)vocab);
	if (scale(logits, vocab, s->temperature, &w, sup, err, errlen))
		return -1;
	sup->ids = w.idx;
	sup->all = !top_k && !top_p;
	if (sup->all) {
		sup->n = vocab;
	} else if (top_k) {
		sup->n = select_top_k(w.z, vocab, s->top_k, w.idx);
		if (top_p) {
			double mass = 0;

			for (int j = 0; j < sup->n; j++)
				mass += w.e[w.idx[j]];
			/* top_p < 1, so the target is at most the mass summed in
			 * this same order and is always reached. */
			int keep = nucleus(w.idx, sup->n, w.e, (double)s->top_p * mass);

			if (keep > 0)
				sup->n = keep;
		}
	} else {
		sup->n =
		    top_p_pruned(w.z, w.e, vocab, sup->zmax, (double)s->top_p * sup->norm, w.idx);
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

int rl_sample(const float *logits, int vocab, const struct rl_sampling *s, struct rl_rng *rng,
              int32_t *token, float *logprob, float *work, char *err, size_t errlen)
{
	struct support sup;
	const float *z, *e;

	if (check_args(logits, vocab, s, err, errlen))
		return -1;
	if (!token) {
		snprintf(err, errlen, "sampler: token is NULL");
		return -1;
	}
	if (is_greedy(s))
		return greedy(logits, vocab, token, logprob, err, errlen);
	if (!rng) {
		snprintf(err, errlen, "sampler: rng is NULL at temperature %g",
		         (double)s->temperature);
		return -1;
	}
	if (find_support(logits, vocab, s, work, &sup, err, errlen))
		return -1;
	z = work;
	e = work + vocab;
	*token = draw(&sup, e, rl_rng_uniform(rng));
	if (logprob)
		*logprob = (float)((double)(z[*token] - sup.zmax) - log(sup.norm));
	return 0;
}

int rl_sample_support(const float *logits, int vocab, const struct rl_sampling *s, int32_t *ids,
                      int *n, float *work, char *err, size_t errlen)
{
	struct support sup;

	if (check_args(logits, vocab, s, err, errlen))
		return -1;
	if (!ids || !n) {
		snprintf(err, errlen, "sampler: %s is NULL", !ids ? "ids" : "n");
		return -1;
	}
	if (is_greedy(s)) {
		if (greedy(logits, vocab, ids, NULL, err, errlen))
			return -1;
		*n = 1;
		return 0;
	}
	if (find_support(logits, vocab, s, work, &sup, err, errlen))
		return -1;
	for (int j = 0; j < sup.n; j++)
		ids[j] = sup.all ? j : sup.ids[j];
	*n = sup.n;
	return 0;
}
