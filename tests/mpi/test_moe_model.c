/* Expert parallelism against the whole model, on real MPI ranks (started by
 * tests/mpi/moe_model_test.sh under mpiexec): every rank builds the same
 * random mixture-of-experts model twice, runs one copy whole over the whole
 * batch, and cuts the other as the layout says (Megatron's folding: EP x
 * EDP over the same ranks as TP x DP, expert tensor parallelism 1), each
 * data-parallel rank taking its share of the sequences. The cut model must
 * give the whole one's log-probabilities at every token, the same
 * load-balancing loss (balanced over the whole batch), and, once the
 * dense gradients are summed over DP and the experts' over EDP, the same
 * gradient for every parameter. The distributed optimizer, with the
 * experts in a region of their own reduced over EDP, must then take the
 * whole model's clipped AdamW step: the same gradient norm, each tensor
 * counted once, and the same new weights. Greedy generation through the
 * KV cache gives the whole model's tokens, with ranks that stop after
 * different numbers of steps (or have no prompt) serving the others'
 * experts until all are done. On 4 ranks, expert parallelism beside
 * pipeline parallelism too: micro-batches through 1F1B with idle passes
 * where a rank has fewer, and generation through the stages. Prints
 * "N passed, M failed" on rank 0. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/comm/comm.h"
#include "runtime/generate/generate.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/model.h"
#include "runtime/parallel/ep_group.h"
#include "runtime/parallel/pipeline.h"
#include "runtime/parallel/pp_group.h"
#include "runtime/parallel/tp_group.h"
#include "runtime/parallel/zero.h"
#include "topology/layout.h"
#include "tests/mpi/mpi_check.h"
#include "tests/mpi/random_model.h"

#define TOL 2e-5

struct variant {
	const char *name;
	enum rl_arch arch;
	int experts, top_k, shared, sparse_step;
	bool norm_topk;
};

static const struct variant variants[] = {
    /* both layers sparse, renormalised top-2 of 8, q/k norms */
    {"qwen3-moe", RL_ARCH_QWEN3_MOE, 8, 2, 0, 1, true},
    /* a dense layer, then a sparse one with a shared expert; raw top-2 of 4 */
    {"qwen2-moe", RL_ARCH_QWEN2_MOE, 4, 2, 24, 2, false},
};

static void config_of(const struct variant *v, struct rl_model_config *c)
{
	memset(c, 0, sizeof *c);
	c->arch = v->arch;
	c->vocab_size = 61;
	c->hidden_size = 32;
	c->intermediate_size = 40;
	c->n_layers = 2;
	c->n_heads = 4;
	c->n_kv_heads = 2;
	c->head_dim = 8;
	c->max_position_embeddings = 64;
	c->rms_norm_eps = 1e-6;
	c->rope_theta = 10000;
	c->qk_norm = v->arch == RL_ARCH_QWEN3_MOE;
	c->qkv_bias = v->arch == RL_ARCH_QWEN2_MOE;
	c->bos_token_id = -1;
	c->torch_dtype = RL_F32;
	c->moe.n_experts = v->experts;
	c->moe.top_k = v->top_k;
	c->moe.intermediate = 16;
	c->moe.shared_intermediate = v->shared;
	c->moe.norm_topk_prob = v->norm_topk;
	c->moe.sparse_step = v->sparse_step;
	/* large, so that a load-balancing gradient gone wrong shows */
	c->moe.aux_loss_coef = 0.3;
}

/* The same weights on every rank and in every call, with routers spread
 * wide enough that tokens pick clearly different experts. */
static struct rl_model *test_model(const struct rl_model_config *c)
{
	struct rl_model *m = random_model(c, 7, 99);

	for (int i = 0; i < m->n_params; i++) {
		struct rl_param *p = &m->params[i];

		if (strstr(p->name, "mlp.gate.weight"))
			for (int64_t k = 0; k < p->numel; k++)
				p->data[k] *= 5.0f;
	}
	return m;
}

/* Eight sequences, 45 tokens; data-parallel rank r takes sequences r,
 * r + dp, ... */
enum { T = 45, N_SEQS = 8 };
static const int32_t cu[N_SEQS + 1] = {0, 6, 13, 16, 24, 29, 33, 41, T};

struct batch {
	int32_t ids[T], targets[T], cu[N_SEQS + 1], origin[T];
	struct rl_batch b;
};

static void whole_batch(int vocab, struct batch *w)
{
	uint32_t s = 5;

	for (int t = 0; t < T; t++)
		w->ids[t] = (int32_t)(lcg(&s) % (uint32_t)vocab);
	for (int q = 0; q < N_SEQS; q++)
		for (int t = cu[q]; t < cu[q + 1]; t++)
			w->targets[t] = t + 1 < cu[q + 1] ? w->ids[t + 1] : -1;
	for (int t = 0; t < T; t++)
		w->origin[t] = t;
	memcpy(w->cu, cu, sizeof cu);
	w->b = (struct rl_batch){T, N_SEQS, w->ids, w->cu, w->targets};
}

/* Sequences seqs[0..n) of the whole batch; origin: their tokens in it */
static void pick(const struct batch *w, const int *seqs, int n_seqs, struct batch *out)
{
	int n = 0;

	out->cu[0] = 0;
	for (int i = 0; i < n_seqs; i++) {
		for (int t = cu[seqs[i]]; t < cu[seqs[i] + 1]; t++, n++) {
			out->ids[n] = w->ids[t];
			out->targets[n] = w->targets[t];
			out->origin[n] = t;
		}
		out->cu[i + 1] = n;
	}
	out->b = (struct rl_batch){n, n_seqs, out->ids, out->cu, out->targets};
}

/* This data-parallel rank's sequences (r, r + dp, ...) into seqs; their
 * number */
static int seqs_of(int dp_rank, int dp, int *seqs)
{
	int n = 0;

	for (int q = dp_rank; q < N_SEQS; q += dp)
		seqs[n++] = q;
	return n;
}

static void share_of(const struct batch *w, int dp_rank, int dp, struct batch *mine)
{
	int seqs[N_SEQS];

	pick(w, seqs, seqs_of(dp_rank, dp, seqs), mine);
}

static struct rl_comm *group_of(struct rl_comm *world, const struct rl_layout *l, const char *mask,
                                int expert)
{
	int ranks[64], size, color = -1, key = -1;
	int n = rl_layout_groups(l, mask, expert, ranks, &size);
	struct rl_comm *c;
	char err[256];

	for (int i = 0; n > 0 && i < l->world; i++)
		if (ranks[i] == me) {
			color = i / size;
			key = i % size;
		}
	must(color < 0, mask, "rank in no group");
	must(rl_comm_split(world, color, key, mask, &c, err, sizeof err), mask, err);
	return c;
}

struct layout {
	int tp, ep;
	bool sp;
};

static bool is_expert(const char *name)
{
	return strstr(name, ".mlp.experts.") != NULL;
}

static const struct rl_param *find(const struct rl_model *m, const char *name)
{
	for (int i = 0; i < m->n_params; i++)
		if (!strcmp(m->params[i].name, name))
			return &m->params[i];
	return NULL;
}

/* The whole model over the whole batch: log-probs, aux loss, gradients
 * of sum_t c_t logprob_t + aux. */
struct reference {
	float lp[T], c[T];
	double aux;
	struct rl_model *m;
	/* the gradient without the load-balancing loss, which each
	 * micro-batch would balance on its own */
	float *grad_no_aux;
	/* one clipped AdamW step of the whole model on its gradient: the
	 * gradient norm and the new weights */
	double norm;
	float *updated;
};

/* eps as large as the gradients, so that the step follows their size
 * (and a clipping coefficient gone wrong shows), not only their sign */
static const struct rl_adamw_hparams adamw = {
    .lr = 0.05f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-2f, .weight_decay = 0.1f};

static double max_norm_of(double norm)
{
	return 0.5 * norm; /* the clipping takes part */
}

static void reference_update(struct reference *ref)
{
	struct rl_model *m = ref->m;
	size_t n = (size_t)m->n_elems;
	float *grad = malloc(n * sizeof *grad), *mom1 = calloc(n, sizeof *mom1),
	      *mom2 = calloc(n, sizeof *mom2);
	double ss = 0;

	ref->updated = malloc(n * sizeof *ref->updated);
	must(!grad || !mom1 || !mom2 || !ref->updated, "reference update", "out of memory");
	memcpy(grad, m->flat_grad, n * sizeof *grad);
	memcpy(ref->updated, m->flat, n * sizeof *grad);
	for (size_t k = 0; k < n; k++)
		ss += (double)grad[k] * grad[k];
	ref->norm = sqrt(ss);
	float coef = (float)max_norm_of(ref->norm) / ((float)ref->norm + 1e-6f);
	for (size_t k = 0; k < n; k++)
		grad[k] *= coef;
	must(rl_adamw_step_cpu(ref->updated, grad, mom1, mom2, (int64_t)n, &adamw, 1, NULL),
	     "reference update", "adamw");
	free(grad);
	free(mom1);
	free(mom2);
}

static void reference_of(const struct variant *v, struct reference *ref)
{
	struct rl_model_config c;
	struct batch w;
	char err[512];
	uint32_t s = 11;

	config_of(v, &c);
	ref->m = test_model(&c);
	whole_batch(c.vocab_size, &w);
	struct rl_acts *a = rl_acts_new(ref->m, T);
	for (int t = 0; t < T; t++)
		ref->c[t] = uniform(&s);
	rl_acts_set_aux_loss_coef(a, 0);
	must(rl_model_forward(ref->m, a, &w.b, err, sizeof err) ||
	         rl_model_logprobs(ref->m, a, ref->lp, 1.0f, 16, err, sizeof err) ||
	         rl_model_zero_grad(ref->m) ||
	         rl_model_backward(ref->m, a, ref->c, err, sizeof err),
	     "whole model without the load-balancing loss", err);
	ref->grad_no_aux = malloc((size_t)ref->m->n_elems * sizeof(float));
	must(!ref->grad_no_aux, "whole model", "out of memory");
	memcpy(ref->grad_no_aux, ref->m->flat_grad, (size_t)ref->m->n_elems * sizeof(float));
	rl_acts_set_aux_loss_coef(a, (float)c.moe.aux_loss_coef);
	must(rl_model_forward(ref->m, a, &w.b, err, sizeof err) ||
	         rl_model_logprobs(ref->m, a, ref->lp, 1.0f, 16, err, sizeof err) ||
	         rl_model_zero_grad(ref->m) ||
	         rl_model_backward(ref->m, a, ref->c, err, sizeof err),
	     "whole model", err);
	ref->aux = rl_acts_aux_loss(ref->m, a);
	rl_acts_free(ref->m, a);
	reference_update(ref);
}

/* Generation: data-parallel rank r decodes prompts r, r + dp, ... of
 * G_PROMPTS (none on some ranks of dp4), greedily, 2 + 3r new tokens each:
 * the ranks of an ep group stop after different numbers of steps. */
enum { G_PROMPTS = 3 };

static void prompt_of(int i, int vocab, int32_t *ids, int *len)
{
	uint32_t s = 31u + (uint32_t)i;

	*len = 3 + i;
	for (int t = 0; t < *len; t++)
		ids[t] = (int32_t)(lcg(&s) % (uint32_t)vocab);
}

/* This rank's prompts generated by m, which must then drain (under ep). */
static int generate_mine(struct rl_model *m, int dp_rank, int dp, struct rl_gen_output *out,
                         int *n_out, char *err, size_t errlen)
{
	int32_t ids[G_PROMPTS][16];
	const int32_t *prompts[G_PROMPTS];
	int lens[G_PROMPTS], n = 0;
	struct rl_gen_params p = {.sampling = {0.0f, -1, 1.0f},
	                          .stop = {.max_new_tokens = (size_t)(2 + 3 * dp_rank)}};

	for (int i = dp_rank; i < G_PROMPTS; i += dp, n++) {
		prompt_of(i, m->cfg.vocab_size, ids[n], &lens[n]);
		prompts[n] = ids[n];
	}
	*n_out = n;
	if (n > 0 && rl_generate(m, NULL, n, prompts, lens, &p, out, err, errlen))
		return -1;
	return rl_model_decode_drain(m, err, errlen);
}

static void compare_generation(const char *name, struct rl_model *part, struct rl_model *whole,
                               int dp_rank, int dp)
{
	struct rl_gen_output got[G_PROMPTS], want[G_PROMPTS];
	char err[512];
	int n, n_want;

	must(generate_mine(part, dp_rank, dp, got, &n, err, sizeof err), name, err);
	must(generate_mine(whole, dp_rank, dp, want, &n_want, err, sizeof err), name, err);
	for (int i = 0; i < n; i++) {
		bool same =
		    got[i].n_tokens == want[i].n_tokens &&
		    !memcmp(got[i].tokens, want[i].tokens, got[i].n_tokens * sizeof *got[i].tokens);
		check(same, "%s: prompt %d: the tokens generated differ from the whole model's",
		      name, dp_rank + i * dp);
		if (same)
			check(rel_diff(got[i].logprobs, want[i].logprobs, got[i].n_tokens) <= 1e-4,
			      "%s: prompt %d: generation logprobs differ by %.3g", name,
			      dp_rank + i * dp,
			      rel_diff(got[i].logprobs, want[i].logprobs, got[i].n_tokens));
	}
	if (n > 0) {
		rl_gen_outputs_free(got, n);
		rl_gen_outputs_free(want, n_want);
	}
}

/* Micro-batches in step: data-parallel rank r runs its sequences as
 * 1 + r micro-batches, and the ranks with fewer run idle passes until
 * every rank of the group has run the most; the summed gradient is the
 * whole batch's (both without the load-balancing loss). */
static void compare_microbatches(const char *name, struct rl_model *part,
                                 const struct reference *ref, int dp_rank, int dp,
                                 struct rl_comm *world, struct rl_comm *dp_group,
                                 struct rl_comm *edp)
{
	struct batch w, mb;
	int seqs[N_SEQS], n = seqs_of(dp_rank, dp, seqs);
	int k = 1 + dp_rank < n ? 1 + dp_rank : n, most = k;
	char err[512];
	float lp[T], dlp[T];

	whole_batch(part->cfg.vocab_size, &w);
	/* every rank of the routers' token group runs as many passes */
	rl_comm_all_reduce(world, &most, 1, RL_COMM_I32, RL_COMM_MAX, "micro-batches");
	struct rl_acts *a = rl_acts_new(part, T);
	must(!a, name, "out of memory");
	rl_acts_set_aux_loss_coef(a, 0);
	must(rl_model_zero_grad(part), name, "zero_grad");
	for (int i = 0; i < most; i++) {
		if (i >= k) {
			must(rl_model_idle_forward(part, a, err, sizeof err) ||
			         rl_model_idle_backward(part, a, err, sizeof err),
			     name, err);
			continue;
		}
		/* micro-batch i: an even share of this rank's sequences */
		int lo = n * i / k, hi = n * (i + 1) / k;
		pick(&w, seqs + lo, hi - lo, &mb);
		for (int t = 0; t < mb.b.n_tokens; t++)
			dlp[t] = ref->c[mb.origin[t]];
		must(rl_model_forward(part, a, &mb.b, err, sizeof err) ||
		         rl_model_logprobs(part, a, lp, 1.0f, 16, err, sizeof err) ||
		         rl_model_backward(part, a, dlp, err, sizeof err),
		     name, err);
	}
	must(rl_model_reduce_grads(part, err, sizeof err), name, err);
	double worst = 0;
	for (int i = 0; i < part->n_params; i++) {
		struct rl_param *p = &part->params[i];
		const struct rl_param *wp = find(ref->m, p->name);
		bool by_edp = is_expert(p->name);

		rl_comm_all_reduce(by_edp ? edp : dp_group, p->grad, (size_t)p->numel, RL_COMM_F32,
		                   RL_COMM_SUM, "micro-batch grads");
		float *full = wp ? malloc((size_t)wp->numel * sizeof(float)) : NULL;
		if (!full)
			continue;
		must(rl_model_gather_param(part, i, p->grad, full, err, sizeof err), "gather", err);
		double rel = rel_diff(full, ref->grad_no_aux + wp->offset, (size_t)wp->numel);
		worst = rel > worst ? rel : worst;
		check(rel <= TOL, "%s: micro-batches in step: gradient of %s differs by %.3g", name,
		      p->name, rel);
		free(full);
	}
	if (me == 0)
		printf("# %s: %d micro-batches at most, the gradient within %.2g\n", name, most,
		       worst);
	rl_acts_free(part, a);
}

/* The pipeline's part of a pass of pipeline_microbatches: micro-batch i
 * of this rank's, and the idle passes. */
struct pipe_pass {
	struct rl_model *m;
	struct batch mb[N_SEQS];
	float lp[T], dlp[N_SEQS][T];
	const float *want; /* the whole model's logprobs (pipe_logprobs) */
	double *lp_worst;  /* the largest difference from them */
};

static int pipe_tokens(void *ctx, int mb)
{
	return ((struct pipe_pass *)ctx)->mb[mb].b.n_tokens;
}

static int pipe_forward(void *ctx, int mb, struct rl_acts *a, char *err, size_t errlen)
{
	struct pipe_pass *p = ctx;

	if (rl_model_forward(p->m, a, &p->mb[mb].b, err, errlen))
		return -1;
	return rl_model_last_stage(p->m) ? rl_model_logprobs(p->m, a, p->lp, 1.0f, 16, err, errlen)
	                                 : 0;
}

/* A forward-only pass: the last stage checks micro-batch mb's logprobs
 * against the whole model's. */
static int pipe_logprobs(void *ctx, int mb, struct rl_acts *a, char *err, size_t errlen)
{
	struct pipe_pass *p = ctx;
	const struct batch *b = &p->mb[mb];
	float want[T];

	if (pipe_forward(ctx, mb, a, err, errlen))
		return -1;
	if (!rl_model_last_stage(p->m))
		return 0;
	for (int t = 0; t < b->b.n_tokens; t++)
		want[t] = p->want[b->origin[t]];
	double d = rel_diff(p->lp, want, (size_t)b->b.n_tokens);
	*p->lp_worst = d > *p->lp_worst ? d : *p->lp_worst;
	return 0;
}

static int pipe_backward(void *ctx, int mb, struct rl_acts *a, char *err, size_t errlen)
{
	struct pipe_pass *p = ctx;

	return rl_model_backward(p->m, a, rl_model_last_stage(p->m) ? p->dlp[mb] : NULL, err,
	                         errlen);
}

static int pipe_idle_forward(void *ctx, struct rl_acts *a, char *err, size_t errlen)
{
	return rl_model_idle_forward(((struct pipe_pass *)ctx)->m, a, err, errlen);
}

static int pipe_idle_backward(void *ctx, struct rl_acts *a, char *err, size_t errlen)
{
	return rl_model_idle_backward(((struct pipe_pass *)ctx)->m, a, err, errlen);
}

/* Expert parallelism beside pipeline parallelism (4 ranks: pp2 x dp2,
 * ep2 over the data-parallel ranks of each stage): data-parallel rank r
 * runs its sequences as 1 + r micro-batches through 1F1B, the ranks with
 * fewer finishing the schedule with idle passes, so that each stage's ep
 * group meets in every exchange; the summed gradient is the whole
 * batch's (without the load-balancing loss). The same micro-batches
 * forward only give the whole model's logprobs, and greedy generation, as
 * compare_layout's, its tokens through the stages. */
static void pipeline_microbatches(struct rl_comm *world, const struct variant *v,
                                  const struct reference *ref)
{
	struct rl_layout l;
	struct rl_coords co;
	struct rl_model_config c;
	struct rl_model_cut cut = {0};
	struct pipe_pass *pp_pass = calloc(1, sizeof *pp_pass);
	char err[512], name[96];

	snprintf(name, sizeof name, "%s ep2 pp2 dp2", v->name);
	must(!pp_pass, name, "out of memory");
	must(rl_layout_init(&l, 4, 1, 2, 1, 2, 1, err, sizeof err), name, err);
	rl_layout_coords(&l, me, &co);
	struct rl_comm *tp = group_of(world, &l, "tp", 0), *dp = group_of(world, &l, "dp", 0);
	struct rl_comm *pp = group_of(world, &l, "pp", 0),
	               *embedding = group_of(world, &l, "pp", 0);
	struct rl_comm *ep = group_of(world, &l, "ep", 1), *edp = group_of(world, &l, "dp", 1);
	struct rl_comm *tokens = group_of(world, &l, "tp-dp", 0);

	rl_tp_group_bind(&cut.tp, tp);
	rl_ep_group_bind(&cut.ep, ep);
	rl_tp_group_bind(&cut.tokens, tokens);
	rl_pp_group_bind(&cut.pp, pp, embedding);
	cut.cp.size = 1;
	config_of(v, &c);
	struct rl_model *part = test_model(&c);
	must(rl_model_split(&part, &cut, err, sizeof err), name, err);
	pp_pass->m = part;
	pp_pass->want = ref->lp;

	struct batch w;
	int dp_rank = co.rank[RL_AXIS_DP], seqs[N_SEQS];
	int n = seqs_of(dp_rank, l.size[RL_AXIS_DP], seqs);
	int k = 1 + dp_rank < n ? 1 + dp_rank : n, most = k;
	whole_batch(c.vocab_size, &w);
	for (int i = 0; i < k; i++) {
		int lo = n * i / k, hi = n * (i + 1) / k;

		pick(&w, seqs + lo, hi - lo, &pp_pass->mb[i]);
		for (int t = 0; t < pp_pass->mb[i].b.n_tokens; t++)
			pp_pass->dlp[i][t] = ref->c[pp_pass->mb[i].origin[t]];
	}
	rl_comm_all_reduce(world, &most, 1, RL_COMM_I32, RL_COMM_MAX, "micro-batches");
	int stages = rl_comm_size(pp), n_acts = stages - rl_comm_rank(pp);
	struct rl_acts *acts[2] = {0};
	for (int i = 0; i < n_acts; i++) {
		acts[i] = rl_acts_new(part, T);
		must(!acts[i], name, "out of memory");
		rl_acts_set_aux_loss_coef(acts[i], 0);
	}
	struct rl_pipeline pl = {.pp = pp,
	                         .m = part,
	                         .acts = acts,
	                         .n_acts = n_acts,
	                         .ctx = pp_pass,
	                         .tokens = pipe_tokens,
	                         .forward = pipe_forward,
	                         .backward = pipe_backward,
	                         .idle = most - k,
	                         .idle_forward = pipe_idle_forward,
	                         .idle_backward = pipe_idle_backward};
	must(rl_model_zero_grad(part) || rl_pipeline_1f1b(&pl, k, err, sizeof err) ||
	         rl_model_reduce_grads(part, err, sizeof err),
	     name, err);
	double worst = 0;
	int compared = 0;
	for (int i = 0; i < part->n_params; i++) {
		struct rl_param *p = &part->params[i];
		const struct rl_param *wp = find(ref->m, p->name);

		rl_comm_all_reduce(is_expert(p->name) ? edp : dp, p->grad, (size_t)p->numel,
		                   RL_COMM_F32, RL_COMM_SUM, "micro-batch grads");
		float *full = wp ? malloc((size_t)wp->numel * sizeof(float)) : NULL;
		check(full != NULL, "%s: %s is not in the whole model", name, p->name);
		if (!full)
			continue;
		must(rl_model_gather_param(part, i, p->grad, full, err, sizeof err), "gather", err);
		double rel = rel_diff(full, ref->grad_no_aux + wp->offset, (size_t)wp->numel);
		worst = rel > worst ? rel : worst;
		compared++;
		check(rel <= TOL, "%s: gradient of %s differs by %.3g", name, p->name, rel);
		free(full);
	}
	rl_comm_all_reduce(world, &compared, 1, RL_COMM_I32, RL_COMM_SUM, "tensors compared");
	if (me == 0)
		printf("# %s: 1F1B with %d micro-batches at most, %d tensors' gradients within "
		       "%.2g\n",
		       name, most, compared, worst);
	/* forward only (the logprob passes), in the same micro-batches: the
	 * last stage's logprobs are the whole model's */
	pl.forward = pipe_logprobs;
	double lp_worst = 0;
	pp_pass->lp_worst = &lp_worst;
	must(rl_pipeline_forward(&pl, k, err, sizeof err), name, err);
	if (rl_model_last_stage(part))
		check(lp_worst <= TOL, "%s: forward only: logprobs differ by %.3g", name, lp_worst);
	/* generation: each stage's ep group in step, the ranks that are done
	 * serving their stage's experts */
	compare_generation(name, part, ref->m, dp_rank, l.size[RL_AXIS_DP]);
	for (int i = 0; i < n_acts; i++)
		rl_acts_free(part, acts[i]);
	rl_model_free(part);
	free(pp_pass);
	rl_comm_free(tp);
	rl_comm_free(dp);
	rl_comm_free(pp);
	rl_comm_free(embedding);
	rl_comm_free(ep);
	rl_comm_free(edp);
	rl_comm_free(tokens);
}

static void compare_layout(struct rl_comm *world, const struct variant *v,
                           const struct reference *ref, const struct layout *lay)
{
	int W = rl_comm_size(world);
	struct rl_layout l;
	struct rl_coords co;
	struct rl_model_config c;
	char err[512], name[96];

	snprintf(name, sizeof name, "%s ep%d tp%d%s dp%d", v->name, lay->ep, lay->tp,
	         lay->sp ? " sp" : "", W / lay->tp);
	must(rl_layout_init(&l, W, lay->tp, 1, 1, lay->ep, 1, err, sizeof err), name, err);
	rl_layout_coords(&l, me, &co);
	struct rl_comm *tp = group_of(world, &l, "tp", 0), *dp = group_of(world, &l, "dp", 0);
	struct rl_comm *ep = group_of(world, &l, "ep", 1), *edp = group_of(world, &l, "dp", 1);
	struct rl_comm *tokens = group_of(world, &l, "tp-dp", 0);
	struct rl_model_cut cut = {0};

	rl_tp_group_bind(&cut.tp, tp);
	rl_ep_group_bind(&cut.ep, ep);
	rl_tp_group_bind(&cut.tokens, tokens);
	cut.pp.size = 1;
	cut.cp.size = 1;
	cut.sequence_parallel = lay->sp;
	config_of(v, &c);
	struct rl_model *part = test_model(&c);
	must(rl_model_split(&part, &cut, err, sizeof err), name, err);

	struct batch w, mine;
	whole_batch(c.vocab_size, &w);
	share_of(&w, co.rank[RL_AXIS_DP], l.size[RL_AXIS_DP], &mine);
	struct rl_acts *a = rl_acts_new(part, mine.b.n_tokens);
	float lp[T], want[T], dlp[T];
	must(rl_model_forward(part, a, &mine.b, err, sizeof err) ||
	         rl_model_logprobs(part, a, lp, 1.0f, 16, err, sizeof err),
	     name, err);
	for (int t = 0; t < mine.b.n_tokens; t++) {
		want[t] = ref->lp[mine.origin[t]];
		dlp[t] = ref->c[mine.origin[t]];
	}
	check(rel_diff(lp, want, (size_t)mine.b.n_tokens) <= TOL, "%s: logprobs differ by %.3g",
	      name, rel_diff(lp, want, (size_t)mine.b.n_tokens));
	double aux = rl_acts_aux_loss(part, a);
	check(fabs(aux - ref->aux) <= 1e-5 * fabs(ref->aux) && ref->aux > 0,
	      "%s: load-balancing loss %.9g, whole %.9g", name, aux, ref->aux);

	must(rl_model_zero_grad(part) || rl_model_backward(part, a, dlp, err, sizeof err) ||
	         rl_model_reduce_grads(part, err, sizeof err),
	     name, err);
	for (int i = 0; i < part->n_params; i++) {
		const struct rl_param *p = &part->params[i], *wp = find(ref->m, p->name);
		bool expert = is_expert(p->name);

		/* the experts' holders saw every token of the ep group; without
		 * expert parallelism they are dense tensors like the others */
		bool by_edp = expert && lay->ep > 1;
		rl_comm_all_reduce(by_edp ? edp : dp, p->grad, (size_t)p->numel, RL_COMM_F32,
		                   RL_COMM_SUM, by_edp ? "expert grads" : "dense grads");
		check(wp != NULL, "%s: %s is not in the whole model", name, p->name);
		if (!wp)
			continue;
		float *full = malloc((size_t)wp->numel * sizeof(float));
		must(rl_model_gather_param(part, i, p->grad, full, err, sizeof err), "gather", err);
		double rel = rel_diff(full, wp->grad, (size_t)wp->numel), norm = 0;
		for (int64_t k = 0; k < wp->numel; k++)
			norm += fabs(wp->grad[k]);
		check(norm > 0, "%s: %s: the whole model's gradient is 0", name, p->name);
		check(rel <= TOL, "%s: gradient of %s differs by %.3g", name, p->name, rel);
		free(full);
	}
	/* each expert is on exactly one rank of the expert-parallel group */
	int held = 0;
	for (int i = 0; i < part->n_params; i++)
		held += is_expert(part->params[i].name);
	rl_comm_all_reduce(ep, &held, 1, RL_COMM_I32, RL_COMM_SUM, "experts held");
	int total = 0;
	for (int i = 0; i < ref->m->n_params; i++)
		total += is_expert(ref->m->params[i].name);
	check(held == total, "%s: the ep group holds %d expert tensors of %d", name, held, total);

	compare_generation(name, part, ref->m, co.rank[RL_AXIS_DP], l.size[RL_AXIS_DP]);
	if (lay->ep > 1)
		compare_microbatches(name, part, ref, co.rank[RL_AXIS_DP], l.size[RL_AXIS_DP],
		                     world, dp, edp);

	/* The distributed optimizer: the dense tensors over dp, the experts
	 * (their own region under expert parallelism) over edp; the norm
	 * counts each tensor once, and the step is the whole model's. */
	struct rl_comm *expert_mp = group_of(world, &l, "tp-ep-pp", 1);
	struct rl_zero dense, experts;
	bool apart = part->expert_start < part->n_elems;
	check(apart == (lay->ep > 1), "%s: the experts %s a region of their own", name,
	      apart ? "have" : "do not have");
	must(rl_model_forward(part, a, &mine.b, err, sizeof err) ||
	         rl_model_logprobs(part, a, lp, 1.0f, 16, err, sizeof err) ||
	         rl_model_zero_grad(part) || rl_model_backward(part, a, dlp, err, sizeof err) ||
	         rl_model_reduce_grads(part, err, sizeof err),
	     name, err);
	/* buckets of 100 floats: many of them, the last one padded */
	must(rl_zero_init(&dense, dp, tp, part, 0, part->expert_start, &adamw, 100, err,
	                  sizeof err) ||
	         (apart &&
	          rl_zero_init(&experts, edp, expert_mp, part, part->expert_start,
	                       part->n_elems - part->expert_start, &adamw, 100, err, sizeof err)),
	     name, err);
	double norm = 0;
	must(rl_zero_reduce_grads(&dense, part, err, sizeof err) ||
	         (apart && rl_zero_reduce_grads(&experts, part, err, sizeof err)) ||
	         rl_zero_update(&dense, apart ? &experts : NULL, part, max_norm_of(ref->norm),
	                        &norm, err, sizeof err),
	     name, err);
	check(fabs(norm - ref->norm) <= 1e-5 * ref->norm, "%s: gradient norm %.9g, whole %.9g",
	      name, norm, ref->norm);
	double worst = 0;
	for (int i = 0; i < part->n_params; i++) {
		const struct rl_param *p = &part->params[i], *wp = find(ref->m, p->name);
		float *full = wp ? malloc((size_t)wp->numel * sizeof(float)) : NULL;

		if (!full)
			continue;
		must(rl_model_gather_param(part, i, p->data, full, err, sizeof err), "gather", err);
		/* what the step moved, against what the whole model's moved */
		const float *before = wp->data, *after = ref->updated + wp->offset;
		for (int64_t k = 0; k < wp->numel; k++)
			full[k] -= before[k];
		float *want = malloc((size_t)wp->numel * sizeof(float));
		for (int64_t k = 0; k < wp->numel; k++)
			want[k] = after[k] - before[k];
		double rel = rel_diff(full, want, (size_t)wp->numel);
		worst = rel > worst ? rel : worst;
		check(rel <= 1e-4, "%s: the step of %s differs by %.3g", name, p->name, rel);
		free(want);
		free(full);
	}
	if (me == 0)
		printf("# %s: gradient norm %.6g, the step within %.2g of the whole model's\n",
		       name, norm, worst);
	rl_zero_free(&dense);
	if (apart)
		rl_zero_free(&experts);
	rl_comm_free(expert_mp);

	rl_acts_free(part, a);
	rl_model_free(part);
	rl_comm_free(tp);
	rl_comm_free(dp);
	rl_comm_free(ep);
	rl_comm_free(edp);
	rl_comm_free(tokens);
}

int main(void)
{
	struct rl_comm_world *w;
	struct rl_comm *world;
	char err[512];

	start_ranks(&w, &world, 0, "test_moe_model");
	int W = rl_comm_size(world);
	const struct layout on2[] = {{1, 2, false}, {2, 2, false}, {2, 2, true}, {2, 1, false}};
	const struct layout on4[] = {{1, 2, false}, {1, 4, false}, {2, 2, false},
	                             {2, 2, true},  {2, 1, true},  {1, 1, false}};
	const struct layout *lays = W == 4 ? on4 : on2;
	size_t n_lays = W == 4 ? sizeof on4 / sizeof *on4 : sizeof on2 / sizeof *on2;

	for (size_t i = 0; i < sizeof variants / sizeof *variants; i++) {
		struct reference ref;

		reference_of(&variants[i], &ref);
		for (size_t j = 0; j < n_lays; j++)
			compare_layout(world, &variants[i], &ref, &lays[j]);
		if (W == 4)
			pipeline_microbatches(world, &variants[i], &ref);
		rl_model_free(ref.m);
		free(ref.updated);
		free(ref.grad_no_aux);
	}
	/* experts that do not divide are refused by name */
	{
		struct rl_model_config c;
		struct rl_model_cut cut = {0};
		config_of(&variants[1], &c);
		struct rl_model *m = test_model(&c), *before = m;
		cut.tp.size = cut.pp.size = cut.cp.size = 1;
		cut.ep.size = 3;
		check(rl_model_split(&m, &cut, err, sizeof err) == -1 && m == before &&
		          strstr(err, "does not divide the model's 4 experts") != NULL,
		      "4 experts over 3 ranks were not refused (%s)", err);
		rl_model_free(m);
	}
	return finish_ranks(w, world, "test_moe_model");
}
