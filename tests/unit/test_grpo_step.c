/* One GRPO step's policy passes on the built-in model, checked against
 * references that do not share their code path: the same gradients from
 * packed and unpacked micro-batches of any size, the generation engine's
 * logprobs against the training forward, and the gradient of the whole
 * chain (logprobs -> loss -> backward) against finite differences. */
#include "tests/unit/helpers.h"

#include <math.h>

#include "runtime/train/policy_pass.h"
#include "runtime/train/score.h"
#include "runtime/train/setup.h"

struct fx {
	char *dir;
	struct rl_config packed, unpacked;
	struct rl_trainer t;
	struct rl_rollout r;
};

static void load(struct rl_config *c, const char *dir, const char *extra)
{
	char *text;
	struct rl_diags d = {0};

	cr_assert_geq(asprintf(&text,
	                       "grpo: {num_prompts_per_step: 4, num_generations_per_prompt: 4, "
	                       "seed: 11}\n"
	                       "policy:\n"
	                       "  model_name: builtin:tiny-llama\n"
	                       "  precision: float32\n"
	                       "  train_global_batch_size: 16\n"
	                       "  max_total_sequence_length: 24\n"
	                       "  generation: {max_new_tokens: 6}\n"
	                       "%s"
	                       "checkpointing: {enabled: false}\n"
	                       "data: {dataset_name: copy}\n"
	                       "loss_fn: {reference_policy_kl_penalty: 0.25, ratio_clip_min: 0.01, "
	                       "ratio_clip_max: 0.01}\n"
	                       "logger: {log_dir: %s/logs}\n",
	                       extra, dir),
	              0);
	cr_assert_eq(rl_config_load_text("step.yaml", text, strlen(text), NULL, NULL, 0, c, &d), 0,
	             "%s", d.n ? d.v[0].msg : "");
	rl_diags_free(&d);
	free(text);
}

/* Moves the weights a little, deterministically, so that the policy, the
 * policy before the update and the reference all differ. */
static void nudge(struct rl_model *m, double scale)
{
	for (int64_t i = 0; i < m->n_elems; i++)
		m->flat[i] += (float)(scale * sin(0.37 * (double)i));
}

static void setup(struct fx *f)
{
	char err[512];
	int64_t truncated = 0, failures = 0;

	f->dir = tmp_dir();
	load(&f->packed, f->dir,
	     "  train_micro_batch_size: 4\n  logprob_batch_size: 4\n"
	     "  sequence_packing: {enabled: true, train_mb_tokens: 50, logprob_mb_tokens: 30, "
	     "sequence_length_round: 1}\n");
	load(&f->unpacked, f->dir,
	     "  train_micro_batch_size: 2\n  logprob_batch_size: 16\n"
	     "  sequence_packing: {enabled: false}\n");
	cr_assert_eq(rl_trainer_setup(&f->t, &f->packed, NULL, NULL, err, sizeof err), 0, "%s",
	             err);
	cr_assert_eq(rl_rollout_alloc(&f->r, 4, 4), 0);
	cr_assert_eq(rl_data_source_next(&f->t.data, 4, f->r.problems, f->r.answers, f->r.prompts,
	                                 NULL, err, sizeof err),
	             1, "%s", err);
	cr_assert_eq(rl_rollout_generate(&f->t.rollouts, &f->r, 5, &truncated, err, sizeof err), 0,
	             "%s", err);
	cr_assert_eq(rl_trainer_score(&f->t, &f->r, &failures, err, sizeof err), 0, "%s", err);
	for (int i = 0; i < f->r.n; i++)
		f->r.s[i].advantage = (i % 3) - 1.0 + 0.25 * i / f->r.n;
}

static void teardown(struct fx *f)
{
	rl_rollout_free(&f->r);
	rl_trainer_free(&f->t);
	rl_config_free(&f->packed);
	rl_config_free(&f->unpacked);
	remove_tree(f->dir);
	free(f->dir);
}

static struct fx F;
static void set_up(void)
{
	setup(&F);
}
static void tear_down(void)
{
	teardown(&F);
}

TestSuite(grpo_step, .init = set_up, .fini = tear_down);

Test(grpo_step, generation_logprobs_are_the_training_logprobs)
{
	char err[512];
	double max_diff = 0;

	cr_assert_eq(rl_policy_logprobs(&F.t, &F.r, false, err, sizeof err), 0, "%s", err);
	cr_assert_eq(rl_policy_logprobs(&F.t, &F.r, true, err, sizeof err), 0, "%s", err);
	for (int i = 0; i < F.r.n; i++) {
		const struct rl_sample *s = &F.r.s[i];
		cr_assert_gt(s->len, s->prompt_len);
		for (int j = 0; j < s->len - s->prompt_len; j++) {
			double d = fabs((double)s->gen_lp[j] - (double)s->prev_lp[j]);
			max_diff = d > max_diff ? d : max_diff;
			/* the reference is the same weights at the start, through the
			 * training pass's kernels (it meets only those, in the KL):
			 * the same to their rounding */
			cr_expect_leq(fabs((double)s->ref_lp[j] - (double)s->prev_lp[j]), 1e-5);
		}
	}
	/* batch-invariant kernels on both sides (policy.generation.batch_invariant's
	 * default): the same bits */
	cr_expect_eq(max_diff, 0.0, "generation and training disagree by %g", max_diff);
}

static double *gradients(struct fx *f, const struct rl_config *c, double *loss)
{
	char err[512];
	int which[16];
	struct rl_loss_stats st = {0};
	double *g = malloc((size_t)f->t.model->n_elems * sizeof *g);

	for (int i = 0; i < 16; i++)
		which[i] = i;
	f->t.cfg = c;
	cr_assert_eq(rl_policy_gradients(&f->t, &f->r, which, 16, &st, err, sizeof err), 0, "%s",
	             err);
	for (int64_t i = 0; i < f->t.model->n_elems; i++)
		g[i] = f->t.model->flat_grad[i];
	*loss = st.loss;
	return g;
}

/* reference before the nudge, policy-before-update after one, the trained
 * policy after another: every term of the loss is live */
static void three_policies(struct fx *f)
{
	char err[512];

	cr_assert_eq(rl_policy_logprobs(&f->t, &f->r, true, err, sizeof err), 0, "%s", err);
	nudge(f->t.model, 2e-3);
	cr_assert_eq(rl_policy_logprobs(&f->t, &f->r, false, err, sizeof err), 0, "%s", err);
	nudge(f->t.model, 1e-3);
}

Test(grpo_step, packed_and_unpacked_give_the_same_loss_and_gradients)
{
	double lp, lu, norm = 0, diff = 0;

	three_policies(&F);
	double *gp = gradients(&F, &F.packed, &lp);
	double *gu = gradients(&F, &F.unpacked, &lu);
	/* The loss is a mean of ratio x advantage terms that largely cancel:
	 * packing moves each token's fp32 logprob by a few 1e-7 (other GEMM
	 * shapes), so the loss by that times the advantages' size, not times
	 * the loss's own. */
	double adv = 0;
	for (int i = 0; i < F.r.n; i++)
		adv += fabs(F.r.s[i].advantage) / F.r.n;
	cr_expect(fabs(lp - lu) <= 1e-6 * adv + 1e-9,
	          "loss %.9g packed, %.9g unpacked (mean |A| %g)", lp, lu, adv);
	cr_expect_neq(lp, 0.0);
	for (int64_t i = 0; i < F.t.model->n_elems; i++) {
		norm += gp[i] * gp[i];
		diff += (gp[i] - gu[i]) * (gp[i] - gu[i]);
	}
	cr_expect_gt(norm, 0.0);
	cr_expect_lt(sqrt(diff), 1e-5 * sqrt(norm), "gradients differ by %g of %g", sqrt(diff),
	             sqrt(norm));
	free(gp);
	free(gu);
}

/* The step's loss at the current weights (the gradient pass computes the
 * loss it differentiates; only its value is used here). */
static double loss_at(struct fx *f)
{
	double loss;

	free(gradients(f, &f->packed, &loss));
	return loss;
}

Test(grpo_step, chain_gradient_matches_finite_differences)
{
	double l0;

	three_policies(&F);
	double *g = gradients(&F, &F.packed, &l0);
	struct rl_model *m = F.t.model;
	/* in the embedding, a first-layer projection and the last norm (the
	 * loss reaches each through a different path), the weight with the
	 * largest gradient, so that its effect stands out of fp32 rounding */
	const struct rl_param *where[3] = {m->embed, m->layer[RL_P_Q], m->final_norm};
	int64_t probes[3];
	for (int k = 0; k < 3; k++) {
		probes[k] = where[k]->offset;
		for (int64_t i = where[k]->offset; i < where[k]->offset + where[k]->numel; i++)
			if (fabs(g[i]) > fabs(g[probes[k]]))
				probes[k] = i;
	}
	for (int k = 0; k < 3; k++) {
		int64_t i = probes[k];
		float w = m->flat[i];
		double h = 1e-2 * (fabs(w) > 0.1 ? fabs(w) : 0.1);

		m->flat[i] = (float)(w + h);
		double up = loss_at(&F);
		m->flat[i] = (float)(w - h);
		double down = loss_at(&F);
		m->flat[i] = w;
		double fd = (up - down) / (2 * h);
		cr_expect(fabs(fd - g[i]) <= 0.05 * fabs(g[i]) + 1e-6,
		          "weight %lld: finite difference %g, backward %g", (long long)i, fd, g[i]);
	}
	free(g);
}
