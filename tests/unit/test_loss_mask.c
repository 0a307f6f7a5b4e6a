/* The loss mask of multi-turn episodes, proven: an episode's observation
 * tokens (its environment's) are context, never a target.
 *
 * The loss: episodes (prompt, model turn, observation, model turn, ...)
 * with their loss masks go through rl_packed_build into two packed
 * micro-batches of one step; for every loss variant (GRPO with the k3 KL,
 * token- and sequence-level, importance-sampling correction and its three
 * truncations, GSPO's sequence-level ratios, Dr. GRPO's
 * token_sum_normalizer, DAPO's clip-higher, the dual clip) the step's loss
 * and every statistic equal a reference written here from NeMo-RL's
 * formulas over each sample's model tokens alone (taken from the samples,
 * not from the packed batch), its gradient equals the reference's central
 * differences at every model token and is exactly 0.0f at every other
 * row, and garbage (NaN) at the observations' logprobs changes nothing.
 *
 * The model: the gradient of the loss with respect to the weights of the
 * built-in model is the same when the observation rows' TARGET ids are
 * changed (they are context, not targets), and not the same when one
 * model token's is. */
#include "tests/unit/helpers.h"

#include <math.h>

#include "runtime/grpo/loss.h"
#include "runtime/grpo/rollout.h"
#include "runtime/train/setup.h"

enum { N_SAMPLES = 6, GROUP = 2, VOCAB = 45 };

static uint32_t rng_state;
static double uni(double lo, double hi)
{
	rng_state = rng_state * 1664525u + 1013904223u;
	return lo + (hi - lo) * ((rng_state >> 8) / 16777216.0);
}
static int uni_int(int lo, int hi) /* [lo, hi] */
{
	return lo + (int)uni(0, hi - lo + 1 - 1e-9);
}

/* Per sample the policy's logprobs at its response positions (what the
 * trained model gives there), in the sample's own order. */
struct episodes {
	struct rl_rollout r;
	float *curr[N_SAMPLES];
};

/* Sample i: a prompt, then model turns and observations alternating
 * (model, obs, model[, obs, model]); sample 4 is excluded (loss_mult 0),
 * sample 5 is a single response (no mask: every response token counts). */
static void build(struct episodes *e, uint32_t seed)
{
	rng_state = seed;
	cr_assert_eq(rl_rollout_alloc(&e->r, N_SAMPLES / GROUP, GROUP), 0);
	for (int i = 0; i < N_SAMPLES; i++) {
		struct rl_sample *s = &e->r.s[i];
		int seg[5], n_seg = i % 2 ? 5 : 3, n_resp = 0;

		for (int k = 0; k < n_seg; k++)
			n_resp += seg[k] = k % 2 ? uni_int(2, 4) : uni_int(1, 3);
		if (i == 5)
			n_seg = 1, seg[0] = n_resp;
		s->prompt_len = uni_int(3, 5);
		s->len = s->prompt_len + n_resp;
		s->ids = malloc((size_t)s->len * sizeof *s->ids);
		s->gen_lp = calloc((size_t)n_resp + 1, sizeof(float));
		s->prev_lp = calloc((size_t)n_resp + 1, sizeof(float));
		s->ref_lp = calloc((size_t)n_resp + 1, sizeof(float));
		e->curr[i] = calloc((size_t)n_resp + 1, sizeof(float));
		cr_assert(s->ids && s->gen_lp && s->prev_lp && s->ref_lp && e->curr[i]);
		for (int t = 0; t < s->len; t++)
			s->ids[t] = uni_int(0, VOCAB - 1);
		if (i != 5) {
			s->loss_mask = calloc((size_t)s->len, 1);
			cr_assert_not_null(s->loss_mask);
		}
		for (int k = 0, t = s->prompt_len; k < n_seg; k++)
			for (int u = 0; u < seg[k]; u++, t++) {
				int j = t - s->prompt_len;
				bool model = k % 2 == 0;

				if (s->loss_mask)
					s->loss_mask[t] = model;
				/* the policy's and the reference's logprobs exist
				 * at every row (the model computes them); the
				 * generation engine's only for what it sampled */
				e->curr[i][j] = (float)uni(-3.0, -0.05);
				s->prev_lp[j] = e->curr[i][j] + (float)uni(-0.35, 0.35);
				s->ref_lp[j] = e->curr[i][j] + (float)uni(-0.5, 0.5);
				s->gen_lp[j] = model ? s->prev_lp[j] + (float)uni(-0.3, 0.3) : 0.0f;
			}
		s->turns = (n_seg + 1) / 2;
		s->advantage = (i % 3 - 1) * 0.8 + 0.3;
		s->loss_mult = i == 4 ? 0.0 : 1.0;
	}
}

static void free_episodes(struct episodes *e)
{
	for (int i = 0; i < N_SAMPLES; i++)
		free(e->curr[i]);
	rl_rollout_free(&e->r);
}

/* Whether response position j of s is a target of the loss. */
static bool model_token(const struct rl_sample *s, int j)
{
	return !s->loss_mask || s->loss_mask[s->prompt_len + j];
}

/* Every observation's logprobs (policy, before, reference, generation)
 * made NaN: what the loss must never read. */
static void poison_observations(struct episodes *e)
{
	for (int i = 0; i < N_SAMPLES; i++) {
		struct rl_sample *s = &e->r.s[i];
		for (int j = 0; j < s->len - s->prompt_len; j++)
			if (!model_token(s, j))
				e->curr[i][j] = s->prev_lp[j] = s->ref_lp[j] = s->gen_lp[j] = NAN;
	}
}

/* ---- the reference, over model tokens only ---- */

struct variant {
	const char *name;
	double beta;             /* k3 KL weight */
	double lo, hi;           /* ratio clip: [1 - lo, 1 + hi] */
	double dual_c;           /* 0: off */
	bool is;                 /* importance-sampling correction */
	int tis;                 /* 0 none, 1 tis, 2 icepop, 3 seq-mask-tis */
	double tis_min, tis_max; /* */
	bool token_level;
	bool gspo;
	double token_sum; /* Dr. GRPO's C; 0: off */
};

static struct rl_cfg_loss_fn cfg_of(const struct variant *v)
{
	static const char *const tis_names[] = {NULL, "tis", "icepop", "seq-mask-tis"};
	struct rl_cfg_loss_fn c = {
	    .reference_policy_kl_penalty = v->beta,
	    .reference_policy_kl_type = "k3",
	    .ratio_clip_min = v->lo,
	    .ratio_clip_max = v->hi,
	    .use_importance_sampling_correction = v->is,
	    .token_level_loss = v->token_level,
	    .sequence_level_importance_ratios = v->gspo,
	    .truncated_importance_sampling_type = (char *)tis_names[v->tis],
	};
	if (v->dual_c > 0)
		c.ratio_clip_c = (struct rl_opt_float){true, v->dual_c};
	if (v->tis) {
		c.truncated_importance_sampling_ratio = (struct rl_opt_float){true, v->tis_max};
		c.truncated_importance_sampling_ratio_min = (struct rl_opt_float){true, v->tis_min};
	}
	if (v->token_sum > 0)
		c.token_sum_normalizer = (struct rl_opt_float){true, v->token_sum};
	return c;
}

struct ref_stats {
	double loss, actor, kl, prob_error, ratio, ratio_clamped, weight, tokens, seqs;
};

/* The step's loss as NeMo-RL's ClippedPGLossFn defines it, sample by
 * sample over the model's tokens: c, p, g, f the policy's, the old
 * policy's, the generation's and the reference's logprobs. */
static double reference(const struct variant *v, const struct episodes *e, struct ref_stats *st)
{
	double n_tok = 0, n_seq = 0;
	struct ref_stats z = {0};

	for (int i = 0; i < N_SAMPLES; i++) {
		const struct rl_sample *s = &e->r.s[i];
		for (int j = 0; j < s->len - s->prompt_len; j++)
			n_tok += s->loss_mult * model_token(s, j);
		n_seq += s->loss_mult;
	}
	z.tokens = n_tok;
	z.seqs = n_seq;
	for (int i = 0; i < N_SAMPLES; i++) {
		const struct rl_sample *s = &e->r.s[i];
		double sm = s->loss_mult, a = s->advantage, c[64], p[64], g[64], f[64];
		int n = 0;

		if (sm == 0)
			continue;
		for (int j = 0; j < s->len - s->prompt_len; j++)
			if (model_token(s, j)) {
				c[n] = e->curr[i][j];
				p[n] = s->prev_lp[j];
				g[n] = s->gen_lp[j];
				f[n] = s->ref_lp[j];
				n++;
			}
		double mean_lr = 0, sum_pg = 0, mean_pg = 0;
		for (int k = 0; k < n; k++) {
			mean_lr += (c[k] - p[k]) / n;
			sum_pg += p[k] - g[k];
			mean_pg += (p[k] - g[k]) / n;
		}
		double coef = v->token_level ? sm / n_tok
		              : v->token_sum ? sm / (v->token_sum * n_seq)
		                             : sm / (n * n_seq);
		for (int k = 0; k < n; k++) {
			double r = v->gspo ? exp(mean_lr) : exp(c[k] - p[k]);
			double rc = fmin(fmax(r, 1 - v->lo), 1 + v->hi);
			double surr = fmax(-a * r, -a * rc);
			if (v->dual_c > 0 && a < 0)
				surr = fmin(surr, -a * v->dual_c);
			double w = 1;
			if (v->is) {
				w = v->gspo ? exp(sum_pg) : exp(p[k] - g[k]);
				if (v->tis == 1)
					w = fmin(w, v->tis_max);
				else if (v->tis == 2 && !(w >= v->tis_min && w <= v->tis_max))
					w = 0;
				else if (v->tis == 3 && !(exp(mean_pg) >= v->tis_min &&
				                          exp(mean_pg) <= v->tis_max))
					w = 0;
			}
			double logr = f[k] - c[k];
			z.actor += coef * w * surr;
			z.kl += coef * v->beta * (exp(logr) - 1 - logr);
			z.prob_error += sm / n_tok * exp(fabs(g[k] - p[k]));
			z.ratio += sm / n_tok * r;
			z.ratio_clamped += sm / n_tok * rc;
			z.weight += sm / n_tok * w;
		}
	}
	z.loss = z.actor + z.kl;
	if (st)
		*st = z;
	return z.loss;
}

/* ---- the code under test, on packed micro-batches ---- */

static const int mb_samples[2][3] = {{0, 1, 2}, {3, 4, 5}};

struct step {
	struct rl_packed p[2];
	float *curr[2], *dcurr[2];
	double loss;
	struct rl_loss_stats st;
	struct rl_loss_norm norm;
};

/* The step's loss over both micro-batches, the policy's logprobs put at
 * the rows that predict each response token (row prompt_len + j - 1, as
 * rl_packed_scatter reads them); rows of no response token hold NaN. */
static void run_step(const struct variant *v, const struct episodes *e, struct step *x)
{
	struct rl_cfg_loss_fn cfg = cfg_of(v);
	struct rl_loss l;
	char err[256] = "";

	memset(x, 0, sizeof *x);
	cr_assert_eq(rl_loss_init(&l, &cfg, err, sizeof err), 0, "%s: %s", v->name, err);
	for (int b = 0; b < 2; b++) {
		cr_assert_eq(rl_packed_build(&x->p[b], &e->r, mb_samples[b], 3), 0);
		int n = x->p[b].batch.n_tokens;
		x->curr[b] = malloc((size_t)n * sizeof(float));
		x->dcurr[b] = malloc((size_t)n * sizeof(float));
		for (int t = 0; t < n; t++)
			x->curr[b][t] = NAN;
		for (int k = 0; k < 3; k++) {
			const struct rl_sample *s = &e->r.s[mb_samples[b][k]];
			for (int j = 0; j < s->len - s->prompt_len; j++)
				x->curr[b][x->p[b].cu_seqlens[k] + s->prompt_len + j - 1] =
				    e->curr[mb_samples[b][k]][j];
		}
		struct rl_loss_batch lb = rl_packed_loss_batch(&x->p[b], x->curr[b]);
		rl_loss_norm_add(&x->norm, &lb);
	}
	for (int b = 0; b < 2; b++) {
		struct rl_loss_batch lb = rl_packed_loss_batch(&x->p[b], x->curr[b]);
		x->loss += rl_loss_compute(&l, &lb, &x->norm, x->dcurr[b], &x->st);
	}
}

static void free_step(struct step *x)
{
	for (int b = 0; b < 2; b++) {
		rl_packed_free(&x->p[b]);
		free(x->curr[b]);
		free(x->dcurr[b]);
	}
}

static void expect_close(const char *v, const char *what, double got, double want)
{
	cr_expect(fabs(got - want) <= 1e-12 * fabs(want) + 1e-14, "%s: %s %.17g, reference %.17g",
	          v, what, got, want);
}

static void check_variant(const struct variant *v)
{
	struct episodes e, e_nan;
	struct step x, y;
	struct ref_stats want;
	int model_rows = 0, other_rows = 0;

	build(&e, 12345);
	run_step(v, &e, &x);
	double ref = reference(v, &e, &want);

	/* the denominators count the model's tokens (of counted samples) only */
	cr_expect_eq(x.norm.valid_tokens, want.tokens, "%s: valid_tokens", v->name);
	cr_expect_eq(x.norm.valid_seqs, want.seqs, "%s: valid_seqs", v->name);
	/* the loss and every statistic: the reference's, to double rounding
	 * (fp32 inputs, the same terms summed in another order) */
	expect_close(v->name, "loss", x.loss, ref);
	expect_close(v->name, "actor_loss", x.st.actor_loss, want.actor);
	expect_close(v->name, "kl", x.st.kl, want.kl);
	expect_close(v->name, "token_mult_prob_error", x.st.token_mult_prob_error, want.prob_error);
	expect_close(v->name, "probs_ratio", x.st.probs_ratio, want.ratio);
	expect_close(v->name, "probs_ratio_clamped", x.st.probs_ratio_clamped, want.ratio_clamped);
	expect_close(v->name, "importance_weight", x.st.importance_weight, want.weight);

	/* the gradient: the reference's central differences at the model's
	 * tokens, exactly zero at every other row */
	for (int b = 0; b < 2; b++)
		for (int k = 0; k < 3; k++) {
			int i = mb_samples[b][k];
			const struct rl_sample *s = &e.r.s[i];
			int base = x.p[b].cu_seqlens[k];

			for (int row = base; row < x.p[b].cu_seqlens[k + 1]; row++) {
				int j = row - base + 1 - s->prompt_len;
				bool target = j >= 0 && j < s->len - s->prompt_len &&
				              model_token(s, j) && s->loss_mult != 0;
				if (!target) {
					cr_expect(
					    x.dcurr[b][row] == 0.0f,
					    "%s: sample %d row %d (response position %d, not the "
					    "model's) has gradient %g",
					    v->name, i, row - base, j, x.dcurr[b][row]);
					other_rows++;
					continue;
				}
				float c0 = e.curr[i][j];
				double h = 1e-6;
				e.curr[i][j] = (float)(c0 + h);
				double up = reference(v, &e, NULL);
				e.curr[i][j] = (float)(c0 - h);
				double down = reference(v, &e, NULL);
				double dh = ((double)(float)(c0 + h) - (double)(float)(c0 - h));
				e.curr[i][j] = c0;
				double fd = (up - down) / dh;
				cr_expect(fabs(x.dcurr[b][row] - fd) <= 1e-4 * fabs(fd) + 1e-7,
				          "%s: sample %d response position %d: gradient %.9g, "
				          "reference %.9g",
				          v->name, i, j, x.dcurr[b][row], fd);
				model_rows++;
			}
		}
	cr_expect_gt(model_rows, 20);
	cr_expect_gt(other_rows, 20);

	/* NaN in every observation's logprobs: not one bit moves */
	build(&e_nan, 12345);
	poison_observations(&e_nan);
	run_step(v, &e_nan, &y);
	cr_expect(y.loss == x.loss, "%s: NaN observations move the loss (%.17g, %.17g)", v->name,
	          y.loss, x.loss);
	cr_expect_eq(memcmp(&y.st, &x.st, sizeof x.st), 0, "%s: NaN observations move a statistic",
	             v->name);
	for (int b = 0; b < 2; b++)
		cr_expect_eq(
		    memcmp(y.dcurr[b], x.dcurr[b], (size_t)x.p[b].batch.n_tokens * sizeof(float)),
		    0, "%s: NaN observations move the gradient", v->name);
	free_step(&x);
	free_step(&y);
	free_episodes(&e);
	free_episodes(&e_nan);
}

static const struct variant variants[] = {
    {"GRPO, k3 KL, token-level", .beta = 0.05, .lo = 0.2, .hi = 0.2, .token_level = true},
    {"GRPO, k3 KL, sequence-level", .beta = 0.05, .lo = 0.2, .hi = 0.2},
    {"importance sampling", .beta = 0.05, .lo = 0.2, .hi = 0.2, .is = true, .token_level = true},
    {"tis", .beta = 0.05, .lo = 0.2, .hi = 0.2, .is = true, .tis = 1, .tis_max = 1.1,
     .token_level = true},
    {"icepop", .beta = 0.05, .lo = 0.2, .hi = 0.2, .is = true, .tis = 2, .tis_min = 0.9,
     .tis_max = 1.1, .token_level = true},
    {"seq-mask-tis", .beta = 0.05, .lo = 0.2, .hi = 0.2, .is = true, .tis = 3, .tis_min = 0.97,
     .tis_max = 1.03},
    {"GSPO", .beta = 0.05, .lo = 0.05, .hi = 0.06, .is = true, .gspo = true},
    {"Dr. GRPO", .beta = 0.05, .lo = 0.2, .hi = 0.2, .token_sum = 12},
    {"DAPO clip-higher", .lo = 0.2, .hi = 0.28, .token_level = true},
    {"dual clip", .beta = 0.05, .lo = 0.2, .hi = 0.2, .dual_c = 1.1, .token_level = true},
};

Test(loss_mask, every_variant_counts_the_model_tokens_only)
{
	for (size_t k = 0; k < sizeof variants / sizeof *variants; k++)
		check_variant(&variants[k]);
}

/* The reference is not the code's echo: it sees the masks. Were the
 * observations targets, the loss would differ. */
Test(loss_mask, the_reference_sees_the_observations_left_out)
{
	struct episodes e;
	struct step x;

	build(&e, 777);
	run_step(&variants[0], &e, &x);
	double with_mask = reference(&variants[0], &e, NULL);
	for (int i = 0; i < N_SAMPLES; i++) {
		free(e.r.s[i].loss_mask);
		e.r.s[i].loss_mask = NULL;
	}
	double without = reference(&variants[0], &e, NULL);
	cr_expect(fabs(with_mask - without) > 1e-3, "%g vs %g", with_mask, without);
	expect_close("base", "loss", x.loss, with_mask);
	free_step(&x);
	free_episodes(&e);
}

/* ---- the model: observation targets are not targets ---- */

struct model_fx {
	char *dir;
	struct rl_config cfg;
	struct rl_trainer t;
};

static void model_setup(struct model_fx *f)
{
	char err[512], *text;
	struct rl_diags d = {0};

	f->dir = tmp_dir();
	cr_assert_geq(asprintf(&text,
	                       "grpo: {num_prompts_per_step: 3, num_generations_per_prompt: 2, "
	                       "seed: 5}\n"
	                       "policy:\n"
	                       "  model_name: builtin:tiny-llama\n"
	                       "  precision: float32\n"
	                       "  train_global_batch_size: 6\n"
	                       "  train_micro_batch_size: 6\n"
	                       "  logprob_batch_size: 6\n"
	                       "  max_total_sequence_length: 32\n"
	                       "  sequence_packing: {enabled: true, sequence_length_round: 1}\n"
	                       "checkpointing: {enabled: false}\n"
	                       "data: {dataset_name: calculator}\n"
	                       "loss_fn: {reference_policy_kl_penalty: 0.05}\n"
	                       "logger: {log_dir: %s/logs}\n",
	                       f->dir),
	              0);
	cr_assert_eq(
	    rl_config_load_text("mask.yaml", text, strlen(text), NULL, NULL, 0, &f->cfg, &d), 0,
	    "%s", d.n ? d.v[0].msg : "");
	rl_diags_free(&d);
	free(text);
	cr_assert_eq(rl_trainer_setup(&f->t, &f->cfg, NULL, NULL, err, sizeof err), 0, "%s", err);
}

static void model_teardown(struct model_fx *f)
{
	rl_trainer_free(&f->t);
	rl_config_free(&f->cfg);
	remove_tree(f->dir);
	free(f->dir);
}

/* The gradient of the step's loss over the packed episodes with respect
 * to every weight, the model's own passes: forward, logprobs of the
 * targets, the loss's gradient, backward. */
static double *weight_gradient(struct rl_trainer *t, struct rl_packed *p, const float *gen,
                               double *loss)
{
	char err[512] = "";
	struct rl_acts *a = t->acts[0];
	struct rl_loss_norm norm = {0};
	struct rl_loss_batch lb;

	cr_assert_eq(rl_model_zero_grad(t->model), 0);
	cr_assert_eq(rl_model_forward(t->model, a, &p->batch, err, sizeof err), 0, "%s", err);
	cr_assert_eq(
	    rl_model_logprobs(t->model, a, t->row_lp, 1.0f, t->logprob_chunk, err, sizeof err), 0,
	    "%s", err);
	/* the old policy and the generation a little off the policy, the
	 * reference further: every term of the loss is live */
	for (int r = 0; r < p->batch.n_tokens; r++) {
		p->prev[r] = t->row_lp[r] + gen[r];
		p->gen[r] = t->row_lp[r] - gen[r];
		p->ref[r] = t->row_lp[r] + 3 * gen[r];
	}
	lb = rl_packed_loss_batch(p, t->row_lp);
	rl_loss_norm_add(&norm, &lb);
	*loss = rl_loss_compute(&t->loss, &lb, &norm, t->row_grad, NULL);
	cr_assert_eq(rl_model_backward(t->model, a, t->row_grad, err, sizeof err), 0, "%s", err);
	double *g = malloc((size_t)t->model->n_elems * sizeof *g);
	for (int64_t i = 0; i < t->model->n_elems; i++)
		g[i] = t->model->flat_grad[i];
	return g;
}

Test(loss_mask, observation_targets_do_not_reach_the_weights)
{
	struct model_fx f;
	struct episodes e;
	int which[N_SAMPLES] = {0, 1, 2, 3, 4, 5};
	double l0, l1, l2;

	model_setup(&f);
	build(&e, 4242);
	struct rl_packed *p = &f.t.packed;
	cr_assert_eq(rl_packed_build(p, &e.r, which, N_SAMPLES), 0);
	int n = p->batch.n_tokens;
	float *offset = calloc((size_t)n + 1, sizeof *offset);
	cr_assert_not_null(offset);
	for (int r = 0; r < n; r++)
		offset[r] = (float)(0.02 * sin(1.7 * r));
	double *g0 = weight_gradient(&f.t, p, offset, &l0);

	/* every row that predicts an observation token gets another target
	 * (the ids, the context, stay) */
	int changed = 0, model_row = -1;
	for (int r = 0; r < n; r++) {
		if (p->targets[r] < 0)
			continue;
		int k = 0;
		while (p->cu_seqlens[k + 1] <= r)
			k++;
		const struct rl_sample *s = &e.r.s[which[k]];
		bool response = r - p->cu_seqlens[k] + 1 >= s->prompt_len;
		if (response && !p->token_mask[r]) {
			if (s->loss_mult != 0) {
				p->targets[r] = (p->targets[r] + 7) % VOCAB;
				changed++;
			}
		} else if (response && model_row < 0) {
			model_row = r;
		}
	}
	cr_assert_gt(changed, 10);
	double *g1 = weight_gradient(&f.t, p, offset, &l1);
	int64_t differ = 0;
	double norm = 0;
	for (int64_t i = 0; i < f.t.model->n_elems; i++) {
		differ += g0[i] != g1[i];
		norm += g0[i] * g0[i];
	}
	cr_expect_gt(norm, 0.0, "no gradient at all");
	cr_expect_eq(l1, l0, "the loss moved with the observations' targets");
	cr_expect_eq(differ, 0, "%lld weights' gradients moved with the observations' targets",
	             (long long)differ);

	/* one model token's target: the gradient moves */
	cr_assert_geq(model_row, 0);
	p->targets[model_row] = (p->targets[model_row] + 7) % VOCAB;
	double *g2 = weight_gradient(&f.t, p, offset, &l2);
	differ = 0;
	for (int64_t i = 0; i < f.t.model->n_elems; i++)
		differ += g0[i] != g2[i];
	cr_expect_gt(differ, 1000, "a model token's target moved only %lld gradients",
	             (long long)differ);
	cr_expect_neq(l2, l0);
	free(g0);
	free(g1);
	free(g2);
	free(offset);
	free_episodes(&e);
	model_teardown(&f);
}

/* What a step reports of its rollout (rl_step_rollout_stats): generation's
 * distance from the policy and the generated length count the model's
 * tokens; an observation, which generation never sampled (its gen_lp is
 * 0), would otherwise read as an error of exp(|logprob|). */
#include "runtime/train/step.h"

Test(loss_mask, rollout_statistics_count_the_model_tokens)
{
	struct episodes e;
	struct rl_step_metrics m = {0};
	double err = 0, max_diff = 0, gen_tokens = 0;
	int n_tok = 0;

	build(&e, 99);
	for (int i = 0; i < N_SAMPLES; i++) {
		const struct rl_sample *s = &e.r.s[i];
		for (int j = 0; j < s->len - s->prompt_len; j++) {
			if (!model_token(s, j))
				continue;
			double d = fabs((double)s->gen_lp[j] - s->prev_lp[j]);
			err += exp(d);
			max_diff = fmax(max_diff, d);
			n_tok++;
			gen_tokens++;
		}
	}
	rl_step_rollout_stats(&e.r, &m);
	cr_expect(fabs(m.token_mult_prob_error - err / n_tok) <= 1e-12,
	          "generation's error %.17g, over the model's tokens %.17g",
	          m.token_mult_prob_error, err / n_tok);
	cr_expect_eq(m.gen_logprob_max_diff, max_diff);
	cr_expect(m.gen_logprob_max_diff < 0.7, "an observation counted: %g",
	          m.gen_logprob_max_diff);
	cr_expect(fabs(m.response_tokens_mean - gen_tokens / N_SAMPLES) <= 1e-12, "%g, want %g",
	          m.response_tokens_mean, gen_tokens / N_SAMPLES);
	free_episodes(&e);
}
