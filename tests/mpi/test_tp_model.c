/* A tensor-parallel model against the whole one, on real MPI ranks
 * (started by tests/mpi/tp_model_test.sh under mpiexec): every rank builds
 * the same random model twice, keeps one whole and cuts the other over the
 * world as its tensor-parallel group, and the two must agree on the
 * token log-probabilities, the full logits, every parameter's gradient
 * (put back together from the ranks' parts) and the logits of prefill and
 * decode through the KV cache. Variants cover GQA, the Qwen2/3 biases and
 * q/k norms, untied embeddings, a vocabulary that does not divide evenly
 * and sequence parallelism (with a batch that needs padding). Then the
 * world as pipeline stages of a deeper model, split unevenly: the 1F1B
 * schedule over several micro-batches (logprobs on the last stage,
 * every stage's gradients, the tied embedding's two copies) and decode
 * through the stages. And each rank's cut read from a model's files part
 * by part (rl_model_load_cut) is the whole model loaded then cut, to the
 * bit, over the world as tensor-parallel and as pipeline ranks, for the
 * fixtures under $RL_FIXTURES. Prints "N passed, M failed" on rank 0. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/comm.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/model.h"
#include "runtime/parallel/pipeline.h"
#include "runtime/parallel/pp_group.h"
#include "runtime/parallel/tp_group.h"
#include "tests/mpi/mpi_check.h"
#include "tests/mpi/random_model.h"
#include "tests/unit/decode_host.h"

#define TOL 1e-5

struct variant {
	const char *name;
	int n_heads, n_kv_heads, vocab;
	bool qkv_bias, o_bias, mlp_bias, qk_norm, tie, sp;
};

static void config_of(const struct variant *v, struct rl_model_config *c)
{
	memset(c, 0, sizeof *c);
	c->arch = v->qk_norm ? RL_ARCH_QWEN3 : RL_ARCH_LLAMA;
	c->vocab_size = v->vocab;
	c->hidden_size = 32;
	c->intermediate_size = 48;
	c->n_layers = 2;
	c->n_heads = v->n_heads;
	c->n_kv_heads = v->n_kv_heads;
	c->head_dim = 8;
	c->max_position_embeddings = 64;
	c->rms_norm_eps = 1e-6;
	c->rope_theta = 10000;
	c->tie_word_embeddings = v->tie;
	c->qkv_bias = v->qkv_bias;
	c->o_bias = v->o_bias;
	c->mlp_bias = v->mlp_bias;
	c->qk_norm = v->qk_norm;
	c->bos_token_id = -1;
	c->torch_dtype = RL_F32;
}

/* the same weights on every rank and in every call */
static struct rl_model *test_model(const struct rl_model_config *c)
{
	return random_model(c, 7, 99);
}

/* Three sequences, 19 tokens: sequence parallelism over 2 or 4 ranks pads. */
enum { T = 19, N_SEQS = 3 };
static const int32_t cu[N_SEQS + 1] = {0, 6, 15, T};

static void make_batch(int vocab, int32_t *ids, int32_t *targets, struct rl_batch *b)
{
	uint32_t s = 5;

	for (int t = 0; t < T; t++)
		ids[t] = (int32_t)(lcg(&s) % (uint32_t)vocab);
	for (int q = 0; q < N_SEQS; q++)
		for (int t = cu[q]; t < cu[q + 1]; t++)
			targets[t] = t + 1 < cu[q + 1] ? ids[t + 1] : -1;
	*b = (struct rl_batch){T, N_SEQS, ids, cu, targets};
}

static void compare_passes(const struct variant *v, struct rl_model *whole, struct rl_model *part)
{
	int V = v->vocab;
	int32_t ids[T], targets[T];
	struct rl_batch b;
	struct rl_acts *aw = rl_acts_new(whole, T), *ap = rl_acts_new(part, T);
	float lw[T], lp[T], dlp[T];
	float *logits_w = malloc((size_t)T * (size_t)V * sizeof(float));
	float *logits_p = malloc((size_t)T * (size_t)V * sizeof(float));
	char err[512];
	uint32_t s = 11;

	make_batch(V, ids, targets, &b);
	/* chunks of 8 walk a vocabulary slice in several steps */
	must(rl_model_forward(whole, aw, &b, err, sizeof err) ||
	         rl_model_logprobs(whole, aw, lw, 1.3f, 8, err, sizeof err),
	     "whole forward", err);
	must(rl_model_forward(part, ap, &b, err, sizeof err) ||
	         rl_model_logprobs(part, ap, lp, 1.3f, 8, err, sizeof err),
	     "split forward", err);
	check(rel_diff(lp, lw, T) <= TOL, "%s: logprobs differ by %.3g", v->name,
	      rel_diff(lp, lw, T));
	must(rl_model_logits(whole, aw, logits_w, err, sizeof err), "whole logits", err);
	must(rl_model_logits(part, ap, logits_p, err, sizeof err), "split logits", err);
	check(rel_diff(logits_p, logits_w, (size_t)T * V) <= TOL, "%s: logits differ by %.3g",
	      v->name, rel_diff(logits_p, logits_w, (size_t)T * V));

	for (int t = 0; t < T; t++)
		dlp[t] = uniform(&s);
	must(rl_model_zero_grad(whole) || rl_model_zero_grad(part), "zero", "");
	must(rl_model_backward(whole, aw, dlp, err, sizeof err), "whole backward", err);
	must(rl_model_backward(part, ap, dlp, err, sizeof err) ||
	         rl_model_reduce_grads(part, err, sizeof err),
	     "split backward", err);
	for (int i = 0; i < part->n_params; i++) {
		const struct rl_param *w = &whole->params[i];
		float *full = malloc((size_t)w->numel * sizeof(float));

		must(rl_model_gather_param(part, i, part->params[i].grad, full, err, sizeof err),
		     "gather", err);
		double rel = rel_diff(full, w->grad, (size_t)w->numel);
		double norm = 0;
		for (int64_t k = 0; k < w->numel; k++)
			norm += fabs(w->grad[k]);
		check(norm > 0, "%s: %s: the whole model's gradient is 0", v->name, w->name);
		check(rel <= TOL, "%s: gradient of %s differs by %.3g", v->name, w->name, rel);
		free(full);
	}
	rl_acts_free(whole, aw);
	rl_acts_free(part, ap);
	free(logits_w);
	free(logits_p);
}

/* Prefill of two prompts, then one decode step each. */
static void compare_decode(const struct variant *v, struct rl_model *whole, struct rl_model *part)
{
	int V = v->vocab, slots[2] = {0, 1}, n_new[2] = {5, 3}, one[2] = {1, 1};
	int32_t ids[8] = {1, 4, 2, 7, 3, 5, 0, 6}, next[2] = {9 % V, 2};
	struct rl_kv_cache *kw = rl_kv_cache_new(whole, 2, 16, 8, 16, 0);
	struct rl_kv_cache *kp = rl_kv_cache_new(part, 2, 16, 8, 16, 0);
	float *lw = malloc(2 * (size_t)V * sizeof(float)),
	      *lp = malloc(2 * (size_t)V * sizeof(float));
	char err[512];

	if (!kw || !kp || !lw || !lp)
		must(1, "decode", "out of memory");
	must(decode_host(whole, kw, 2, slots, n_new, ids, lw, err, sizeof err), "whole prefill",
	     err);
	must(decode_host(part, kp, 2, slots, n_new, ids, lp, err, sizeof err), "split prefill",
	     err);
	check(rel_diff(lp, lw, 2 * (size_t)V) <= TOL, "%s: prefill logits differ by %.3g", v->name,
	      rel_diff(lp, lw, 2 * (size_t)V));
	must(decode_host(whole, kw, 2, slots, one, next, lw, err, sizeof err), "whole decode", err);
	must(decode_host(part, kp, 2, slots, one, next, lp, err, sizeof err), "split decode", err);
	check(rel_diff(lp, lw, 2 * (size_t)V) <= TOL, "%s: decode logits differ by %.3g", v->name,
	      rel_diff(lp, lw, 2 * (size_t)V));
	rl_kv_cache_free(whole, kw);
	rl_kv_cache_free(part, kp);
	free(lw);
	free(lp);
}

/* ---- pipeline parallelism ---- */

enum { N_MB = 3 };

struct pipe_test {
	struct rl_model *m;
	struct rl_batch *b;
	float lp[N_MB][T], dlp[N_MB][T];
};

static int pipe_tokens(void *ctx, int mb)
{
	(void)ctx;
	(void)mb;
	return T;
}

static int pipe_forward(void *ctx, int mb, struct rl_acts *a, char *err, size_t errlen)
{
	struct pipe_test *p = ctx;

	if (rl_model_forward(p->m, a, p->b, err, errlen))
		return -1;
	return rl_model_last_stage(p->m)
	           ? rl_model_logprobs(p->m, a, p->lp[mb], 1.0f, 8, err, errlen)
	           : 0;
}

static int pipe_backward(void *ctx, int mb, struct rl_acts *a, char *err, size_t errlen)
{
	struct pipe_test *p = ctx;

	return rl_model_backward(p->m, a, rl_model_last_stage(p->m) ? p->dlp[mb] : NULL, err,
	                         errlen);
}

static const struct rl_param *param_named(const struct rl_model *m, const char *name)
{
	for (int i = 0; i < m->n_params; i++)
		if (strcmp(m->params[i].name, name) == 0)
			return &m->params[i];
	return NULL;
}

/* The world as pipeline stages of a model with layers layers, the first
 * stage given first_layers of them (the rest split evenly): N_MB
 * micro-batches through 1F1B against the whole model run N_MB times. */
static void compare_pipeline(struct rl_comm *world, int layers, int first_layers,
                             const struct variant *v)
{
	int stages = rl_comm_size(world), stage = rl_comm_rank(world);
	struct rl_comm *embedding;
	struct rl_model_config c;
	struct rl_model_cut cut = {0};
	struct pipe_test pt = {0};
	int32_t ids[T], targets[T];
	struct rl_batch b;
	char err[512];
	uint32_t s = 23;

	must(rl_comm_split(world, stage == 0 || stage == stages - 1 ? 0 : -1, stage, "embedding",
	                   &embedding, err, sizeof err),
	     "embedding group", err);
	config_of(v, &c);
	c.n_layers = layers;
	struct rl_model *whole = test_model(&c), *part = test_model(&c);
	cut.tp.size = 1;
	cut.cp.size = 1;
	cut.first_stage_layers = first_layers;
	rl_pp_group_bind(&cut.pp, world, embedding);
	must(rl_model_split(&part, &cut, err, sizeof err), "pipeline split", err);
	make_batch(v->vocab, ids, targets, &b);
	pt.m = part;
	pt.b = &b;
	for (int mb = 0; mb < N_MB; mb++)
		for (int t = 0; t < T; t++)
			pt.dlp[mb][t] = uniform(&s);

	/* the whole model, micro-batch by micro-batch */
	struct rl_acts *aw = rl_acts_new(whole, T);
	float lw[T];
	must(rl_model_zero_grad(whole), "zero", "");
	for (int mb = 0; mb < N_MB; mb++) {
		must(rl_model_forward(whole, aw, &b, err, sizeof err) ||
		         rl_model_logprobs(whole, aw, lw, 1.0f, 8, err, sizeof err) ||
		         rl_model_backward(whole, aw, pt.dlp[mb], err, sizeof err),
		     "whole passes", err);
	}

	int n_acts = stages - stage;
	struct rl_acts **acts = calloc((size_t)n_acts, sizeof *acts);
	for (int i = 0; acts && i < n_acts; i++)
		acts[i] = rl_acts_new(part, T);
	struct rl_pipeline pl = {.pp = world,
	                         .m = part,
	                         .acts = acts,
	                         .n_acts = n_acts,
	                         .ctx = &pt,
	                         .tokens = pipe_tokens,
	                         .forward = pipe_forward,
	                         .backward = pipe_backward};
	must(rl_model_zero_grad(part) || rl_pipeline_1f1b(&pl, N_MB, err, sizeof err) ||
	         rl_model_reduce_grads(part, err, sizeof err),
	     "pipeline 1F1B", err);
	if (rl_model_last_stage(part))
		for (int mb = 0; mb < N_MB; mb++)
			check(rel_diff(pt.lp[mb], lw, T) <= TOL,
			      "pipeline: micro-batch %d's logprobs differ by %.3g", mb,
			      rel_diff(pt.lp[mb], lw, T));
	int expect = stage == 0 ? first_layers : (layers - first_layers) / (stages - 1);
	check(part->shard.n_layers == expect, "pipeline: stage %d holds %d layers, not %d", stage,
	      part->shard.n_layers, expect);
	for (int i = 0; i < part->n_params; i++) {
		const struct rl_param *p = &part->params[i], *w = param_named(whole, p->name);

		check(w && w->numel == p->numel, "pipeline: %s is not the whole model's", p->name);
		if (w && w->numel == p->numel)
			check(rel_diff(p->grad, w->grad, (size_t)w->numel) <= TOL,
			      "pipeline: gradient of %s%s differs by %.3g", p->name,
			      p->tied_copy ? " (the last stage's copy)" : "",
			      rel_diff(p->grad, w->grad, (size_t)w->numel));
	}
	compare_decode(v, whole, part);
	for (int i = 0; acts && i < n_acts; i++)
		rl_acts_free(part, acts[i]);
	free(acts);
	rl_acts_free(whole, aw);
	rl_model_free(whole);
	rl_model_free(part);
	rl_comm_free(embedding);
}

/* The cut read from dir's files part by part against the whole model
 * loaded and cut: the same tensors at the same offsets, bit for bit. */
static void compare_load_cut(const char *dir, const struct rl_model_cut *cut, const char *what)
{
	struct rl_model *split, *read;
	char err[512];

	must(rl_model_load(&split, dir, &rl_ops_cpu, err, sizeof err), what, err);
	must(rl_model_split(&split, cut, err, sizeof err), what, err);
	must(rl_model_load_cut(&read, dir, &rl_ops_cpu, cut, err, sizeof err), what, err);
	check(split->n_params == read->n_params && split->n_elems == read->n_elems,
	      "%s: %d tensors of %lld floats read, %d of %lld cut", what, read->n_params,
	      (long long)read->n_elems, split->n_params, (long long)split->n_elems);
	for (int i = 0; i < split->n_params && i < read->n_params; i++) {
		const struct rl_param *a = &split->params[i], *b = &read->params[i];

		check(strcmp(a->name, b->name) == 0 && a->offset == b->offset &&
		          a->numel == b->numel &&
		          memcmp(a->master, b->master, (size_t)a->numel * sizeof(float)) == 0,
		      "%s: %s read part by part differs from the whole model's cut", what, a->name);
	}
	rl_model_free(split);
	rl_model_free(read);
}

static void compare_load_cuts(struct rl_comm *world, const struct rl_tp_group *tp)
{
	const char *fixtures = getenv("RL_FIXTURES");
	static const char *const models[] = {"llama", "llama-tied-rope3", "qwen2", "qwen3"};
	struct rl_model_cut cut = {0};
	struct rl_pp_group pp;
	struct rl_comm *embedding = NULL;
	char dir[4096], err[512];
	int stage = rl_comm_rank(world), stages = rl_comm_size(world);

	if (!fixtures)
		return;
	must(rl_comm_split(world, stage == 0 || stage == stages - 1 ? 0 : -1, stage, "embedding",
	                   &embedding, err, sizeof err),
	     "embedding group", err);
	rl_pp_group_bind(&pp, world, embedding);
	for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
		snprintf(dir, sizeof dir, "%s/%s", fixtures, models[i]);
		/* every fixture has 4 heads and 1 or 2 key/value heads, 2 layers */
		if (tp->size <= 2 && i != 1) {
			cut = (struct rl_model_cut){.tp = *tp, .pp.size = 1};
			compare_load_cut(dir, &cut, models[i]);
			cut.sequence_parallel = true;
			compare_load_cut(dir, &cut, models[i]);
		}
		if (stages <= 2) {
			cut = (struct rl_model_cut){.tp.size = 1, .pp = pp};
			compare_load_cut(dir, &cut, models[i]);
		}
	}
	rl_comm_free(embedding);
}

int main(void)
{
	static const struct variant variants[] = {
	    {"llama, tied", 8, 8, 37, false, false, false, false, true, false},
	    {"llama GQA, untied, all biases", 8, 4, 37, true, true, true, false, false, false},
	    {"qwen3 q/k norms, GQA", 8, 4, 41, false, false, false, true, true, false},
	    {"llama GQA + sequence parallel", 8, 4, 37, true, true, true, false, false, true},
	    {"qwen3 + sequence parallel", 8, 4, 41, true, false, false, true, false, true},
	};
	struct rl_comm_world *w;
	struct rl_comm *world;
	struct rl_model_cut cut = {0};
	struct rl_tp_group tp;
	char err[512];

	start_ranks(&w, &world, 0, "test_tp_model");
	rl_tp_group_bind(&tp, world);
	cut.tp = tp;
	cut.pp.size = 1;
	for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
		const struct variant *v = &variants[i];
		struct rl_model_config c;

		config_of(v, &c);
		struct rl_model *whole = test_model(&c), *part = test_model(&c);
		cut.sequence_parallel = v->sp;
		must(rl_model_split(&part, &cut, err, sizeof err), v->name, err);
		compare_passes(v, whole, part);
		compare_decode(v, whole, part);
		rl_model_free(whole);
		rl_model_free(part);
	}

	/* heads that do not divide are refused, by name, and leave the
	 * model whole */
	if (tp.size > 1) {
		struct variant odd = {"odd", 8, 1, 37, false, false, false, false, true, false};
		struct rl_model_config c;

		config_of(&odd, &c);
		struct rl_model *m = test_model(&c), *before = m;
		cut.sequence_parallel = false;
		check(rl_model_split(&m, &cut, err, sizeof err) == -1 && m == before &&
		          strstr(err, "does not divide") != NULL,
		      "1 key/value head over %d ranks was not refused (%s)", tp.size, err);
		rl_model_free(m);
	}

	/* 2 stages of 3 layers: 2 and 1; 4 stages of 6: 3, then 1 each */
	if (tp.size > 1) {
		struct variant tied = {"pipeline", 8,     4,     37,   true,
		                       false,      false, false, true, false};

		compare_pipeline(world, tp.size == 2 ? 3 : 6, tp.size == 2 ? 2 : 3, &tied);
	}

	compare_load_cuts(world, &tp);
	return finish_ranks(w, world, "test_tp_model");
}
