/* ClippedPGLossFn: for every option a two-sequence case whose loss is worked
 * out by hand below (from NeMo-RL's formulas, on the literal inputs), the
 * gradient against central finite differences, and the split of a step into
 * micro-batches.
 *
 * The base case. Token 0 is a prompt token (masked); sequence 0 owns tokens
 * 0..2 with A = 1.5, sequence 1 tokens 3..4 with A = -0.75. Every input is a
 * multiple of 1/16 so that the floats hold the literals exactly.
 *   t   curr     prev     gen      ref     curr-prev  r        prev-gen  ref-curr
 *   1  -1.0     -1.3125  -1.1875  -1.125   0.3125    1.367    -0.125    -0.125
 *   2  -0.3125  -0.25    -0.375   -0.8125 -0.0625    0.939     0.125    -0.5
 *   3  -2.0     -1.6875  -1.625   -2.0625 -0.3125    0.732    -0.0625   -0.0625
 *   4  -0.75    -0.9375  -1.125   -0.125   0.1875    1.206     0.1875    0.625
 * With the default clip [0.8, 1.2]: t1 (A > 0, r > 1.2) takes the clipped
 * branch -1.5 * 1.2; t2 is inside; t3 (A < 0, r < 0.8) takes 0.75 * 0.8;
 * t4 (A < 0, r > 1.2) takes the unclipped 0.75 * r. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/grpo/loss.h"

#define MAXT 32
#define MAXS 8

struct fx {
	int n_tokens, n_seqs;
	int32_t cu[MAXS + 1];
	float curr[MAXT], prev[MAXT], gen[MAXT], ref[MAXT];
	uint8_t tm[MAXT];
	double adv[MAXS], sm[MAXS];
};

static struct fx base_fx(void)
{
	return (struct fx){
	    .n_tokens = 5,
	    .n_seqs = 2,
	    .cu = {0, 3, 5},
	    .curr = {-0.5f, -1.0f, -0.3125f, -2.0f, -0.75f},
	    .prev = {-0.375f, -1.3125f, -0.25f, -1.6875f, -0.9375f},
	    .gen = {-0.5f, -1.1875f, -0.375f, -1.625f, -1.125f},
	    .ref = {-0.5f, -1.125f, -0.8125f, -2.0625f, -0.125f},
	    .tm = {0, 1, 1, 1, 1},
	    .adv = {1.5, -0.75},
	    .sm = {1, 1},
	};
}

static struct rl_cfg_loss_fn base_cfg(void)
{
	return (struct rl_cfg_loss_fn){
	    .reference_policy_kl_penalty = 0.0,
	    .reference_policy_kl_type = "k3",
	    .ratio_clip_min = 0.2,
	    .ratio_clip_max = 0.2,
	    .token_level_loss = true,
	};
}

/* the base case's ratios and importance weights, from the table */
#define R1  exp(-1.0 - -1.3125)
#define R2  exp(-0.3125 - -0.25)
#define R3  exp(-2.0 - -1.6875)
#define R4  exp(-0.75 - -0.9375)
#define W1  exp(-1.3125 - -1.1875)
#define W2  exp(-0.25 - -0.375)
#define W3  exp(-1.6875 - -1.625)
#define W4  exp(-0.9375 - -1.125)
#define LR1 (-1.125 - -1.0)
#define LR2 (-0.8125 - -0.3125)
#define LR3 (-2.0625 - -2.0)
#define LR4 (-0.125 - -0.75)
/* the four clipped surrogates of the default clip, branches as above */
#define S1 (-1.5 * 1.2)
#define S2 (-1.5 * R2)
#define S3 (0.75 * 0.8)
#define S4 (0.75 * R4)

static double k3(double logr)
{
	return exp(logr) - 1 - logr;
}

static struct rl_loss_batch batch_of(const struct fx *f)
{
	return (struct rl_loss_batch){
	    .n_tokens = f->n_tokens,
	    .n_seqs = f->n_seqs,
	    .cu_seqlens = f->cu,
	    .curr = f->curr,
	    .prev = f->prev,
	    .gen = f->gen,
	    .ref = f->ref,
	    .token_mask = f->tm,
	    .advantage = f->adv,
	    .sample_mask = f->sm,
	};
}

static struct rl_loss make_loss(const struct rl_cfg_loss_fn *cfg)
{
	struct rl_loss l;
	char err[256] = "";

	cr_assert_eq(rl_loss_init(&l, cfg, err, sizeof(err)), 0, "%s", err);
	return l;
}

static double run(const struct rl_loss *l, const struct fx *f, float *dcurr,
                  struct rl_loss_stats *st)
{
	struct rl_loss_batch b = batch_of(f);
	struct rl_loss_norm n = {0};

	rl_loss_norm_add(&n, &b);
	return rl_loss_compute(l, &b, &n, dcurr, st);
}

static void expect_rel(const char *what, double got, double want)
{
	cr_expect(fabs(got - want) <= 1e-9 * fabs(want) + 1e-15, "%s: got %.17g, want %.17g", what,
	          got, want);
}

/* dcurr against central differences of the loss; corr[t] (or 0) is added to
 * the difference quotient for the parts that the loss holds constant
 * (stop-gradient) but a difference quotient sees move. */
static void check_grad(const struct rl_loss *l, const struct fx *f0, const double *corr)
{
	struct fx f = *f0;
	float g[MAXT];
	double norm = 0.0;

	run(l, &f, g, NULL);
	for (int t = 0; t < f.n_tokens; t++) {
		float x = f0->curr[t], xp = (float)(x + 1e-4), xm = (float)(x - 1e-4);
		double lp, lm, want;

		if (!isfinite(x)) { /* garbage in a token that does not count */
			cr_expect_eq(g[t], 0.0f, "dcurr[%d] of a garbage token is %g", t, g[t]);
			continue;
		}
		f.curr[t] = xp;
		lp = run(l, &f, NULL, NULL);
		f.curr[t] = xm;
		lm = run(l, &f, NULL, NULL);
		f.curr[t] = x;
		want = (lp - lm) / ((double)xp - (double)xm) + (corr ? corr[t] : 0.0);
		cr_expect(fabs(g[t] - want) <= 1e-4 * fabs(want) + 1e-6,
		          "dcurr[%d]: got %.9g, finite differences %.9g", t, g[t], want);
		if (!f.tm[t])
			cr_expect_eq(g[t], 0.0f, "dcurr[%d] of a masked token is %g", t, g[t]);
		norm += fabs(g[t]);
	}
	cr_expect(norm > 0.0, "the gradient is all zero");
}

/* the loss by hand, its split into actor and KL, and the gradient */
static void check_case(const struct rl_cfg_loss_fn *cfg, const struct fx *f, double actor,
                       double kl, const double *corr)
{
	struct rl_loss l = make_loss(cfg);
	struct rl_loss_stats st = {0};
	double loss = run(&l, f, NULL, &st);

	expect_rel("loss", loss, actor + kl);
	expect_rel("stats.loss", st.loss, actor + kl);
	expect_rel("stats.actor_loss", st.actor_loss, actor);
	expect_rel("stats.kl", st.kl, kl);
	check_grad(&l, f, corr);
}

Test(loss, token_level_ppo_clip_and_stats)
{
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	struct rl_loss l = make_loss(&cfg);
	struct rl_loss_stats st = {0};

	check_case(&cfg, &f, (-1.5 * 1.2 + -1.5 * R2 + 0.75 * 0.8 + 0.75 * R4) / 4.0, 0.0, NULL);
	/* stats add up: two runs give twice the values */
	run(&l, &f, NULL, &st);
	run(&l, &f, NULL, &st);
	expect_rel("probs_ratio", st.probs_ratio, 2 * (R1 + R2 + R3 + R4) / 4.0);
	expect_rel("probs_ratio_clamped", st.probs_ratio_clamped, 2 * (1.2 + R2 + 0.8 + 1.2) / 4.0);
	expect_rel("clip_fraction", st.clip_fraction, 2 * 2 / 4.0); /* t1, t3 */
	expect_rel("token_mult_prob_error", st.token_mult_prob_error,
	           2 * (exp(0.125) + exp(0.125) + exp(0.0625) + exp(0.1875)) / 4.0);
	expect_rel("importance_weight", st.importance_weight, 2 * 1.0);
}

Test(loss, sequence_level)
{
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	/* token 0 counts too, so the sequences differ in length (3 and 2):
	 * r0 = exp(-0.5 - -0.375) = 0.882 is inside */
	f.tm[0] = 1;
	cfg.token_level_loss = false;
	check_case(&cfg, &f,
	           ((-1.5 * exp(-0.5 - -0.375) + -1.5 * 1.2 + -1.5 * R2) / 3 +
	            (0.75 * 0.8 + 0.75 * R4) / 2) /
	               2.0,
	           0.0, NULL);
}

Test(loss, asymmetric_ratio_clip)
{
	/* [0.9, 1.4]: t1 (1.367) and t4 (1.206) now inside; t3 (0.732) below */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	cfg.ratio_clip_min = 0.1;
	cfg.ratio_clip_max = 0.4;
	check_case(&cfg, &f, (-1.5 * R1 + -1.5 * R2 + 0.75 * 0.9 + 0.75 * R4) / 4.0, 0.0, NULL);
}

Test(loss, dual_clip)
{
	/* c = 1.1: t4 (A < 0) had 0.75 * 1.206 > 0.75 * 1.1, so it is capped
	 * (no gradient); t3's 0.6 stays */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	struct rl_loss l;
	struct rl_loss_stats st = {0};

	cfg.ratio_clip_c = (struct rl_opt_float){.set = true, .value = 1.1};
	check_case(&cfg, &f, (-1.5 * 1.2 + -1.5 * R2 + 0.75 * 0.8 + 0.75 * 1.1) / 4.0, 0.0, NULL);
	l = make_loss(&cfg);
	run(&l, &f, NULL, &st);
	expect_rel("clip_fraction", st.clip_fraction, 3 / 4.0);
	/* c = 3 binds nowhere */
	cfg.ratio_clip_c.value = 3.0;
	check_case(&cfg, &f, (S1 + S2 + S3 + S4) / 4.0, 0.0, NULL);
}

Test(loss, kl_k1)
{
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	cfg.reference_policy_kl_penalty = 0.1;
	cfg.reference_policy_kl_type = "k1";
	check_case(&cfg, &f, (S1 + S2 + S3 + S4) / 4.0, 0.1 * (0.125 + 0.5 + 0.0625 + -0.625) / 4.0,
	           NULL);
}

Test(loss, kl_k2)
{
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	cfg.reference_policy_kl_penalty = 0.1;
	cfg.reference_policy_kl_type = "k2";
	check_case(
	    &cfg, &f, (S1 + S2 + S3 + S4) / 4.0,
	    0.1 * (0.125 * 0.125 / 2 + 0.5 * 0.5 / 2 + 0.0625 * 0.0625 / 2 + 0.625 * 0.625 / 2) /
	        4.0,
	    NULL);
}

Test(loss, kl_k3)
{
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	cfg.reference_policy_kl_penalty = 0.1;
	check_case(&cfg, &f, (S1 + S2 + S3 + S4) / 4.0,
	           0.1 * (k3(LR1) + k3(LR2) + k3(LR3) + k3(LR4)) / 4.0, NULL);
}

Test(loss, kl_input_clamp)
{
	/* v = 0.25: t2's -0.5 becomes -0.25, t4's 0.625 becomes 0.25 */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	cfg.reference_policy_kl_penalty = 0.1;
	cfg.kl_input_clamp_value = (struct rl_opt_float){.set = true, .value = 0.25};
	check_case(&cfg, &f, (S1 + S2 + S3 + S4) / 4.0,
	           0.1 * (k3(-0.125) + k3(-0.25) + k3(-0.0625) + k3(0.25)) / 4.0, NULL);
}

Test(loss, kl_output_clamp)
{
	/* k1 = -logr = 0.125, 0.5, 0.0625, -0.625 -> 0.1, 0.1, 0.0625, -0.1 */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	cfg.reference_policy_kl_penalty = 0.1;
	cfg.reference_policy_kl_type = "k1";
	cfg.kl_output_clamp_value = (struct rl_opt_float){.set = true, .value = 0.1};
	check_case(&cfg, &f, (S1 + S2 + S3 + S4) / 4.0, 0.1 * (0.1 + 0.1 + 0.0625 + -0.1) / 4.0,
	           NULL);
	/* k3 = 0.0075, 0.1065, 0.0019, 0.2432: t2 and t4 clamped to 0.1 */
	cfg.reference_policy_kl_type = "k3";
	check_case(&cfg, &f, (S1 + S2 + S3 + S4) / 4.0, 0.1 * (k3(LR1) + 0.1 + k3(LR3) + 0.1) / 4.0,
	           NULL);
}

Test(loss, on_policy_kl_approximation)
{
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	double wkl[5] = {0, exp(-1.0 - -1.1875), exp(-0.3125 - -0.375), exp(-2.0 - -1.625),
	                 exp(-0.75 - -1.125)};
	double kl[5] = {0, k3(LR1), k3(LR2), k3(LR3), k3(LR4)};
	double corr[5];

	/* the weight exp(curr - gen) is a constant to the gradient, but the
	 * difference quotient sees d wkl / d curr = wkl: take that part out */
	for (int t = 0; t < 5; t++)
		corr[t] = -0.1 * wkl[t] * kl[t] / 4.0;
	cfg.reference_policy_kl_penalty = 0.1;
	cfg.use_on_policy_kl_approximation = true;
	check_case(&cfg, &f, (S1 + S2 + S3 + S4) / 4.0,
	           0.1 * (wkl[1] * kl[1] + wkl[2] * kl[2] + wkl[3] * kl[3] + wkl[4] * kl[4]) / 4.0,
	           corr);
}

Test(loss, importance_sampling_correction)
{
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	struct rl_loss l;
	struct rl_loss_stats st = {0};

	cfg.use_importance_sampling_correction = true;
	check_case(&cfg, &f, (W1 * S1 + W2 * S2 + W3 * S3 + W4 * S4) / 4.0, 0.0, NULL);
	l = make_loss(&cfg);
	run(&l, &f, NULL, &st);
	expect_rel("importance_weight", st.importance_weight, (W1 + W2 + W3 + W4) / 4.0);
}

Test(loss, tis)
{
	/* w = 0.882, 1.133, 0.939, 1.206 truncated at 1 */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	cfg.use_importance_sampling_correction = true;
	cfg.truncated_importance_sampling_type = "tis";
	cfg.truncated_importance_sampling_ratio = (struct rl_opt_float){.set = true, .value = 1.0};
	check_case(&cfg, &f, (W1 * S1 + 1.0 * S2 + W3 * S3 + 1.0 * S4) / 4.0, 0.0, NULL);
}

Test(loss, icepop)
{
	/* [0.9, 1.15]: t1 (0.882) and t4 (1.206) drop out */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	cfg.use_importance_sampling_correction = true;
	cfg.truncated_importance_sampling_type = "icepop";
	cfg.truncated_importance_sampling_ratio = (struct rl_opt_float){.set = true, .value = 1.15};
	cfg.truncated_importance_sampling_ratio_min =
	    (struct rl_opt_float){.set = true, .value = 0.9};
	check_case(&cfg, &f, (0.0 * S1 + W2 * S2 + W3 * S3 + 0.0 * S4) / 4.0, 0.0, NULL);
}

Test(loss, seq_mask_tis)
{
	/* geometric means: sequence 0 exp((-0.125 + 0.125) / 2) = 1 is kept,
	 * sequence 1 exp((-0.0625 + 0.1875) / 2) = 1.065 is outside [0.95, 1.05];
	 * kept tokens keep their untruncated weights */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	cfg.use_importance_sampling_correction = true;
	cfg.truncated_importance_sampling_type = "seq-mask-tis";
	cfg.truncated_importance_sampling_ratio = (struct rl_opt_float){.set = true, .value = 1.05};
	cfg.truncated_importance_sampling_ratio_min =
	    (struct rl_opt_float){.set = true, .value = 0.95};
	check_case(&cfg, &f, (W1 * S1 + W2 * S2 + 0.0 * S3 + 0.0 * S4) / 4.0, 0.0, NULL);
}

Test(loss, sequence_level_ratios)
{
	/* one ratio per sequence: exp((0.3125 - 0.0625) / 2) = 1.133 and
	 * exp((-0.3125 + 0.1875) / 2) = 0.939, both inside [0.8, 1.2] */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	double rs0 = exp((0.3125 + -0.0625) / 2), rs1 = exp((-0.3125 + 0.1875) / 2);

	cfg.token_level_loss = false;
	cfg.sequence_level_importance_ratios = true;
	check_case(&cfg, &f, ((-1.5 * rs0 * 2) / 2 + (0.75 * rs1 * 2) / 2) / 2.0, 0.0, NULL);
	/* with [0.8, 1.1] sequence 0 (A > 0, 1.133) takes the clipped branch */
	cfg.ratio_clip_max = 0.1;
	check_case(&cfg, &f, ((-1.5 * 1.1 * 2) / 2 + (0.75 * rs1 * 2) / 2) / 2.0, 0.0, NULL);
}

Test(loss, sequence_level_ratios_with_weights)
{
	/* GSPO weights are per sequence: exp of the summed prev - gen,
	 * exp(-0.125 + 0.125) = 1 and exp(-0.0625 + 0.1875) = 1.133, truncated
	 * at 1.1; a KL term on top, averaged per sequence */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	struct rl_loss l;
	struct rl_loss_stats st = {0};
	double rs0 = exp((0.3125 + -0.0625) / 2), rs1 = exp((-0.3125 + 0.1875) / 2);

	cfg.token_level_loss = false;
	cfg.sequence_level_importance_ratios = true;
	cfg.use_importance_sampling_correction = true;
	cfg.truncated_importance_sampling_type = "tis";
	cfg.truncated_importance_sampling_ratio = (struct rl_opt_float){.set = true, .value = 1.1};
	cfg.reference_policy_kl_penalty = 0.1;
	check_case(&cfg, &f, ((1.0 * -1.5 * rs0 * 2) / 2 + (1.1 * 0.75 * rs1 * 2) / 2) / 2.0,
	           (0.1 * (k3(LR1) + k3(LR2)) / 2 + 0.1 * (k3(LR3) + k3(LR4)) / 2) / 2.0, NULL);
	l = make_loss(&cfg);
	run(&l, &f, NULL, &st);
	expect_rel("importance_weight", st.importance_weight, (1.0 + 1.0 + 1.1 + 1.1) / 4.0);
	expect_rel("probs_ratio", st.probs_ratio, (rs0 + rs0 + rs1 + rs1) / 4.0);
}

Test(loss, disable_ppo_ratio)
{
	/* REINFORCE: -A * curr */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	struct rl_loss l;
	float g[5];
	const float want[5] = {0, -1.5f / 4, -1.5f / 4, 0.75f / 4, 0.75f / 4};

	cfg.disable_ppo_ratio = true;
	check_case(&cfg, &f, (-1.5 * -1.0 + -1.5 * -0.3125 + 0.75 * -2.0 + 0.75 * -0.75) / 4.0, 0.0,
	           NULL);
	l = make_loss(&cfg);
	run(&l, &f, g, NULL);
	for (int t = 0; t < 5; t++)
		cr_expect_float_eq(g[t], want[t], 1e-7, "dcurr[%d]", t);
}

Test(loss, force_on_policy_ratio)
{
	/* r = 1 in value, dr / dcurr = 1: the loss is -A per token and the
	 * gradient -A / 4 (finite differences would see no slope at all) */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	struct rl_loss l;
	struct rl_loss_stats st = {0};
	float g[5];
	const float want[5] = {0, -1.5f / 4, -1.5f / 4, 0.75f / 4, 0.75f / 4};

	cfg.force_on_policy_ratio = true;
	l = make_loss(&cfg);
	expect_rel("loss", run(&l, &f, g, &st), (-1.5 + -1.5 + 0.75 + 0.75) / 4.0);
	for (int t = 0; t < 5; t++)
		cr_expect_float_eq(g[t], want[t], 1e-7, "dcurr[%d]", t);
	expect_rel("probs_ratio", st.probs_ratio, 1.0);
	expect_rel("clip_fraction", st.clip_fraction + 1.0, 1.0);
	/* with the KL term: its gradient is the only slope finite differences see */
	cfg.reference_policy_kl_penalty = 0.1;
	{
		double corr[5];

		for (int t = 0; t < 5; t++)
			corr[t] = want[t];
		check_case(&cfg, &f, (-1.5 + -1.5 + 0.75 + 0.75) / 4.0,
		           0.1 * (k3(LR1) + k3(LR2) + k3(LR3) + k3(LR4)) / 4.0, corr);
	}
}

Test(loss, overlong_sample_excluded)
{
	/* sequence 1 is filtered out: not counted, not read (its logprobs are
	 * garbage), no gradient */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	struct rl_loss_norm n = {0};
	struct rl_loss_batch b = batch_of(&f);

	f.sm[1] = 0.0;
	f.prev[3] = NAN;
	f.gen[4] = INFINITY;
	f.ref[3] = -INFINITY;
	rl_loss_norm_add(&n, &b);
	expect_rel("valid_tokens", n.valid_tokens, 2.0);
	expect_rel("valid_seqs", n.valid_seqs, 1.0);
	cfg.reference_policy_kl_penalty = 0.1;
	check_case(&cfg, &f, (S1 + S2) / 2.0, 0.1 * (k3(LR1) + k3(LR2)) / 2.0, NULL);
}

Test(loss, sample_mask_sequence_level)
{
	/* sequence 0 out: valid_seqs = 1 */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	f.sm[0] = 0.0;
	cfg.token_level_loss = false;
	check_case(&cfg, &f, ((0.75 * 0.8 + 0.75 * R4) / 2) / 1.0, 0.0, NULL);
}

Test(loss, sequence_level_empty_sequence)
{
	/* a third sequence with no response token counts in valid_seqs (3) and
	 * adds 0; its own tokens hold garbage that must not be read */
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();

	f.n_tokens = 7;
	f.n_seqs = 3;
	f.cu[3] = 7;
	f.curr[5] = f.curr[6] = NAN;
	f.adv[2] = 2.0;
	f.sm[2] = 1.0;
	cfg.token_level_loss = false;
	cfg.reference_policy_kl_penalty = 0.1;
	check_case(&cfg, &f, ((S1 + S2) / 2 + (S3 + S4) / 2 + 0.0) / 3.0,
	           (0.1 * (k3(LR1) + k3(LR2)) / 2 + 0.1 * (k3(LR3) + k3(LR4)) / 2) / 3.0, NULL);
}

Test(loss, zero_denominators)
{
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	struct rl_loss l = make_loss(&cfg);
	struct rl_loss_batch b = batch_of(&f);
	struct rl_loss_norm n = {0};
	struct rl_loss_stats st = {0};
	float g[5];

	for (int tl = 0; tl < 2; tl++) {
		l.token_level = tl;
		cr_expect_eq(rl_loss_compute(&l, &b, &n, g, &st), 0.0);
		for (int t = 0; t < 5; t++)
			cr_expect_eq(g[t], 0.0f);
		cr_expect_eq(st.loss, 0.0);
		cr_expect_eq(st.token_mult_prob_error, 0.0);
	}
}

Test(loss, missing_reference_is_nan)
{
	struct rl_cfg_loss_fn cfg = base_cfg();
	struct fx f = base_fx();
	struct rl_loss_batch b = batch_of(&f);
	struct rl_loss_norm n = {0};
	struct rl_loss l;

	cfg.reference_policy_kl_penalty = 0.1;
	l = make_loss(&cfg);
	b.ref = NULL;
	rl_loss_norm_add(&n, &b);
	cr_expect(isnan(rl_loss_compute(&l, &b, &n, NULL, NULL)));
}

/* ---- micro-batches ---- */

static uint32_t lcg(uint32_t *s)
{
	*s = *s * 1664525u + 1013904223u;
	return *s >> 8;
}

static double uni(uint32_t *s, double lo, double hi)
{
	return lo + (hi - lo) * (lcg(s) / 16777216.0);
}

/* six sequences of 2..5 tokens; the first token of each is a prompt token,
 * one sequence is filtered out */
static struct fx six_seqs(void)
{
	static const int len[6] = {3, 4, 2, 5, 3, 4};
	struct fx f = {.n_seqs = 6};
	uint32_t s = 12345;

	for (int q = 0; q < 6; q++) {
		f.cu[q + 1] = f.cu[q] + len[q];
		f.adv[q] = uni(&s, -1.5, 1.5);
		f.sm[q] = q == 4 ? 0.0 : 1.0;
		for (int t = f.cu[q]; t < f.cu[q + 1]; t++) {
			f.curr[t] = (float)uni(&s, -2.0, -0.1);
			f.prev[t] = f.curr[t] + (float)uni(&s, -0.3, 0.3);
			f.gen[t] = f.prev[t] + (float)uni(&s, -0.2, 0.2);
			f.ref[t] = f.curr[t] + (float)uni(&s, -0.5, 0.5);
			f.tm[t] = t != f.cu[q];
		}
	}
	f.n_tokens = f.cu[6];
	return f;
}

static struct rl_loss_batch slice(const struct fx *f, int s0, int s1, int32_t *cu)
{
	struct rl_loss_batch b = batch_of(f);
	int32_t t0 = f->cu[s0];

	for (int q = s0; q <= s1; q++)
		cu[q - s0] = f->cu[q] - t0;
	b.n_seqs = s1 - s0;
	b.n_tokens = f->cu[s1] - t0;
	b.cu_seqlens = cu;
	b.curr += t0;
	b.prev += t0;
	b.gen += t0;
	b.ref += t0;
	b.token_mask += t0;
	b.advantage += s0;
	b.sample_mask += s0;
	return b;
}

static void check_splits(const struct rl_cfg_loss_fn *cfg)
{
	struct fx f = six_seqs();
	struct rl_loss l = make_loss(cfg);
	float whole[MAXT];
	double whole_loss = run(&l, &f, whole, NULL);
	static const int sizes[4] = {1, 2, 3, 6};

	for (int k = 0; k < 4; k++) {
		struct rl_loss_norm n = {0};
		float g[MAXT];
		double loss = 0.0;
		int32_t cu[MAXS + 1];

		for (int s0 = 0; s0 < 6; s0 += sizes[k]) {
			struct rl_loss_batch b = slice(&f, s0, s0 + sizes[k], cu);

			rl_loss_norm_add(&n, &b);
		}
		for (int s0 = 0; s0 < 6; s0 += sizes[k]) {
			struct rl_loss_batch b = slice(&f, s0, s0 + sizes[k], cu);

			loss += rl_loss_compute(&l, &b, &n, g + f.cu[s0], NULL);
		}
		cr_expect(fabs(loss - whole_loss) <= 1e-12 * fabs(whole_loss),
		          "micro-batches of %d: loss %.17g, whole batch %.17g", sizes[k], loss,
		          whole_loss);
		for (int t = 0; t < f.n_tokens; t++)
			cr_expect(fabsf(g[t] - whole[t]) <= 1e-6f * fabsf(whole[t]),
			          "micro-batches of %d: dcurr[%d] %.9g, whole batch %.9g", sizes[k],
			          t, g[t], whole[t]);
	}
	/* and against a fixed value of the whole batch's denominators */
	{
		struct rl_loss_batch b = batch_of(&f);
		struct rl_loss_norm n = {0};

		rl_loss_norm_add(&n, &b);
		expect_rel("valid_tokens", n.valid_tokens, (2 + 3 + 1 + 4 + 3) * 1.0);
		expect_rel("valid_seqs", n.valid_seqs, 5.0);
	}
}

Test(loss, micro_batches_token_level)
{
	struct rl_cfg_loss_fn cfg = base_cfg();

	cfg.reference_policy_kl_penalty = 0.05;
	cfg.use_importance_sampling_correction = true;
	cfg.ratio_clip_c = (struct rl_opt_float){.set = true, .value = 3.0};
	check_splits(&cfg);
}

Test(loss, micro_batches_sequence_level)
{
	struct rl_cfg_loss_fn cfg = base_cfg();

	cfg.token_level_loss = false;
	cfg.reference_policy_kl_penalty = 0.05;
	check_splits(&cfg);
	cfg.sequence_level_importance_ratios = true;
	check_splits(&cfg);
}

/* ---- options that do not go together ---- */

static void expect_init_error(const struct rl_cfg_loss_fn *cfg, const char *key)
{
	struct rl_loss l;
	char err[256] = "";

	cr_expect_eq(rl_loss_init(&l, cfg, err, sizeof(err)), -1, "accepted (want %s)", key);
	cr_expect(strstr(err, key) != NULL, "\"%s\" does not name %s", err, key);
}

Test(loss, init_errors)
{
	struct rl_cfg_loss_fn c;
	const struct rl_opt_float one = {.set = true, .value = 1.0};
	const struct rl_opt_float half = {.set = true, .value = 0.5};

	c = base_cfg();
	c.sequence_level_importance_ratios = true;
	expect_init_error(&c, "sequence_level_importance_ratios");
	c = base_cfg();
	c.ratio_clip_c = one;
	expect_init_error(&c, "ratio_clip_c");
	c = base_cfg();
	c.truncated_importance_sampling_type = "tis";
	c.truncated_importance_sampling_ratio = one;
	expect_init_error(&c, "use_importance_sampling_correction");
	c.use_importance_sampling_correction = true;
	c.truncated_importance_sampling_ratio.set = false;
	expect_init_error(&c, "truncated_importance_sampling_ratio");
	c = base_cfg();
	c.use_importance_sampling_correction = true;
	c.truncated_importance_sampling_ratio = one;
	expect_init_error(&c, "truncated_importance_sampling_type");
	c.truncated_importance_sampling_type = "icepop";
	expect_init_error(&c, "truncated_importance_sampling_ratio_min");
	c.truncated_importance_sampling_type = "seq-mask-tis";
	expect_init_error(&c, "truncated_importance_sampling_ratio_min");
	c.truncated_importance_sampling_ratio_min = half;
	c.token_level_loss = false;
	c.sequence_level_importance_ratios = true;
	expect_init_error(&c, "seq-mask-tis");
	c.truncated_importance_sampling_type = "nope";
	expect_init_error(&c, "truncated_importance_sampling_type");
	c = base_cfg();
	c.disable_ppo_ratio = true;
	c.force_on_policy_ratio = true;
	expect_init_error(&c, "force_on_policy_ratio");
	c = base_cfg();
	c.reference_policy_kl_penalty = 0.1;
	c.reference_policy_kl_type = "k4";
	expect_init_error(&c, "reference_policy_kl_type");
}

Test(loss, init_accepts_consistent_options)
{
	struct rl_cfg_loss_fn c = base_cfg();
	struct rl_loss l;
	char err[256] = "";

	c.use_importance_sampling_correction = true;
	c.truncated_importance_sampling_type = "icepop";
	c.truncated_importance_sampling_ratio = (struct rl_opt_float){.set = true, .value = 5};
	c.truncated_importance_sampling_ratio_min =
	    (struct rl_opt_float){.set = true, .value = 0.5};
	c.ratio_clip_c = (struct rl_opt_float){.set = true, .value = 3};
	c.token_level_loss = false;
	c.sequence_level_importance_ratios = true;
	cr_expect_eq(rl_loss_init(&l, &c, err, sizeof(err)), 0, "%s", err);
	c.reference_policy_kl_type = NULL; /* penalty 0: no estimator needed */
	cr_expect_eq(rl_loss_init(&l, &c, err, sizeof(err)), 0, "%s", err);
}
