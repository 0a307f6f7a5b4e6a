/* The GRPO family's losses against their papers: GRPO, DAPO, GSPO and
 * Dr. GRPO, each as the config keys of rl-config(5)'s "GRPO FAMILY" section
 * make it. For each, the loss of rl_loss_compute equals the paper's
 * objective (negated: the optimizer minimises) written out below directly
 * from the paper's equation, on per-sequence arrays, with nothing taken
 * from loss.c; the same objective was also worked once by a separate
 * calculator and is kept as a literal (PAPER_* below), so a slip in the
 * tiny implementations fails too. Then dcurr against central finite
 * differences, the tokens a clip cuts off with exactly no gradient, and the
 * step split into two micro-batches summing to the whole.
 *
 * The three sequences (one group of G = 3 responses; response lengths
 * |o| = 4, 2, 3; a masked prompt token leads the first one). Every
 * log-probability is a multiple of 1/32 so the floats hold the literals
 * exactly. Token-level fixture: d = curr - prev = log r,
 *   seq  prev                           d (token-level cases)
 *   0    -1, -0.5, -0.75, -1.25          0.3125, 0.21875, -0.3125, 0.0625
 *   1    -1.5, -0.625                   -0.375, 0.3125
 *   2    -0.875, -2, -0.375              0.125, -0.125, 0
 * r = e^d = 1.3668, 1.2445, 0.7316, 1.0645 | 0.6873, 1.3668 | 1.1331, 0.8825, 1.
 * With eps = 0.2 ([0.8, 1.2]) and A_0 > 0 > A_1 = A_2 (rewards 1, 0, 0):
 * tokens 0.0 and 0.1 are clipped above (A > 0, r > 1.2), token 1.0 below
 * (A < 0, r < 0.8); token 0.2 (A > 0, r < 0.8) and 1.1 (A < 0, r > 1.2) take
 * the unclipped r A of the min, with gradient. Rewards 0, 1, 1 flip every
 * advantage and so every branch. DAPO's clip-higher, [0.8, 1.28], frees
 * token 0.1 (r = 1.2445). Every log r is at least 0.028 from a clip
 * boundary, far beyond the finite-difference step.
 *
 * GSPO fixture: same prev, d = (0.25, 0.125, 0.1875, 0.0625), (-0.25,
 * -0.125), (0.25, -0.0625, 0); the sequence ratios s = exp(mean d) are
 * 1.1691, 0.8290 and 1.0645. With [1 - 0.1, 1 + 0.15] and rewards 1, 0, 0,
 * sequence 0 is clipped above and sequence 1 below; rewards 0, 1, 1 put
 * both on the unclipped side of the min.
 *
 * ref (GRPO's KL): -0.8125, -0.5, -1, -1 | -1.625, -0.5 | -1, -2, -0.5;
 * gen = prev (no importance-sampling correction in any of the papers). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/grpo/advantage.h"
#include "runtime/grpo/loss.h"

#define G    3 /* responses in the group */
#define MAXO 4 /* longest response */
#define NTOK 10

static const int len_o[G] = {4, 2, 3};
static const double prev_o[G][MAXO] = {
    {-1.0, -0.5, -0.75, -1.25}, {-1.5, -0.625}, {-0.875, -2.0, -0.375}};
static const double ref_o[G][MAXO] = {
    {-0.8125, -0.5, -1.0, -1.0}, {-1.625, -0.5}, {-1.0, -2.0, -0.5}};
static const double d_token[G][MAXO] = {
    {0.3125, 0.21875, -0.3125, 0.0625}, {-0.375, 0.3125}, {0.125, -0.125, 0.0}};
static const double d_seq[G][MAXO] = {
    {0.25, 0.125, 0.1875, 0.0625}, {-0.25, -0.125}, {0.25, -0.0625, 0.0}};
static const double rewards_a[G] = {1, 0, 0}, rewards_b[G] = {0, 1, 1};

/* ---- the papers' equations, on the per-sequence arrays ---- */

static double clip(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

/* GRPO's group-relative advantage (DeepSeekMath eq. 3's A_i,t = (r_i -
 * mean r) / std r). The paper does not say which std; NeMo-RL and slurm-rl
 * take the sample std (n - 1). Dr. GRPO (Liu et al. 2025, eq. 4): r_i -
 * mean r, no std. */
static void paper_advantages(const double *r, bool by_std, double *a)
{
	double mean = (r[0] + r[1] + r[2]) / G, var = 0.0;

	for (int i = 0; i < G; i++)
		var += (r[i] - mean) * (r[i] - mean);
	for (int i = 0; i < G; i++)
		a[i] = by_std ? (r[i] - mean) / sqrt(var / (G - 1)) : r[i] - mean;
}

/* min(r A, clip(r, 1 - eps_low, 1 + eps_high) A): PPO's clipped surrogate */
static double surrogate(double r, double a, double eps_low, double eps_high)
{
	return fmin(r * a, clip(r, 1 - eps_low, 1 + eps_high) * a);
}

/* DeepSeekMath (Shao et al. 2024) eq. 3, the GRPO objective:
 *   J = 1/G sum_i 1/|o_i| sum_t [ min(r A_i, clip(r, 1-eps, 1+eps) A_i)
 *                                 - beta D_KL ]
 * with eq. 4's estimator D_KL = pi_ref/pi - log(pi_ref/pi) - 1 (k3). */
static double paper_grpo(const double d[G][MAXO], const double *a, double eps, double beta)
{
	double j = 0.0;

	for (int i = 0; i < G; i++) {
		double per_o = 0.0;

		for (int t = 0; t < len_o[i]; t++) {
			double curr = prev_o[i][t] + d[i][t], q = ref_o[i][t] - curr;

			per_o += surrogate(exp(d[i][t]), a[i], eps, eps) - beta * (exp(q) - q - 1);
		}
		j += per_o / len_o[i] / G;
	}
	return -j;
}

/* DAPO (Yu et al. 2025) eq. 8: clip-higher (eps_low != eps_high) and the
 * token-level loss, one sum over all tokens of all responses divided by
 * their total count; no KL term.
 *   J = 1/(sum_i |o_i|) sum_i sum_t min(r A_i, clip(r, 1-eps_low, 1+eps_high) A_i) */
static double paper_dapo(const double d[G][MAXO], const double *a, double eps_low, double eps_high)
{
	double j = 0.0;
	int n = 0;

	for (int i = 0; i < G; i++)
		for (int t = 0; t < len_o[i]; t++, n++)
			j += surrogate(exp(d[i][t]), a[i], eps_low, eps_high);
	return -j / n;
}

/* GSPO (Zheng et al. 2025) eq. 5-7: one ratio per response,
 *   s_i = (pi(y_i) / pi_old(y_i))^(1/|y_i|) = exp(1/|y_i| sum_t log r_t),
 *   J = 1/G sum_i min(s_i A_i, clip(s_i, 1-eps_low, 1+eps_high) A_i). */
static double paper_gspo(const double d[G][MAXO], const double *a, double eps_low, double eps_high)
{
	double j = 0.0;

	for (int i = 0; i < G; i++) {
		double mean_log_r = 0.0;

		for (int t = 0; t < len_o[i]; t++)
			mean_log_r += d[i][t] / len_o[i];
		j += surrogate(exp(mean_log_r), a[i], eps_low, eps_high) / G;
	}
	return -j;
}

/* Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training", eq. 4
 * and its implementation note): GRPO without the 1/|o_i| (and without the
 * std of the advantage); the token sum is divided by a constant, the
 * generation budget C, instead.
 *   J = 1/G sum_i 1/C sum_t min(r A_i, clip(r, 1-eps, 1+eps) A_i) */
static double paper_dr_grpo(const double d[G][MAXO], const double *a, double eps, double budget)
{
	double j = 0.0;

	for (int i = 0; i < G; i++)
		for (int t = 0; t < len_o[i]; t++)
			j += surrogate(exp(d[i][t]), a[i], eps, eps) / budget / G;
	return -j;
}

/* The same objectives worked once outside this file (Python, the formulas
 * above), to 17 digits. For GRPO with rewards 1, 0, 0: A = 2/sqrt(3),
 * -1/sqrt(3), -1/sqrt(3) (mean 1/3, sample std 1/sqrt(3)); the per-token
 * surrogates are 1.2 A_0 (clipped), 1.2 A_0 (clipped), 0.7316 A_0,
 * 1.0645 A_0 | 0.8 A_1 (clipped), 1.3668 A_1 | 1.1331 A_2, 0.8825 A_2, A_2
 *   = 1.385641, 1.385641, 0.844797, 1.229172 | -0.461880, -0.789144 |
 *     -0.654224, -0.509510, -0.577350;
 * the k3 terms 0.007497, 0.022273, 0.001994, 0.018730 | 0.034025, 0.016529 |
 * 0.028801, 0.008148, 0.007497; per response the sums 4.845251 and 0.050494,
 * -1.251024 and 0.050554, -1.741084 and 0.044446; with beta = 0.04,
 *   J = 1/3 ((4.845251 - 0.04 * 0.050494) / 4 + (-1.251024 - 0.04 * 0.050554) / 2
 *            + (-1.741084 - 0.04 * 0.044446) / 3)
 *     = 1/3 (1.210808 - 0.626523 - 0.580954) = 0.0011103, loss = -J. */
#define PAPER_GRPO_A   -0.0011101810201293028
#define PAPER_GRPO_B   0.056333755665298912
#define PAPER_DAPO_A   -0.22188065405994686
#define PAPER_DAPO_B   0.25459673866442684
#define PAPER_GSPO_A   -0.064568071486128378
#define PAPER_GSPO_B   0.085585117422152357
#define PAPER_DRGRPO_A -0.089159357747327375
#define PAPER_DRGRPO_B 0.11246584392425299

/* ---- the same data as rl_loss_compute's packed batch ---- */

struct packed {
	int32_t cu[G + 1];
	float curr[NTOK], prev[NTOK], gen[NTOK], ref[NTOK];
	uint8_t tm[NTOK];
	double adv[G], sm[G];
	int seq_of[NTOK], pos_of[NTOK]; /* -1: the prompt token */
};

static struct packed pack(const double d[G][MAXO], const double *adv)
{
	struct packed p = {.cu = {0, 5, 7, 10}};
	int k = 0;

	/* the prompt token: masked, so nothing of it may be read */
	p.curr[k] = p.prev[k] = p.gen[k] = p.ref[k] = NAN;
	p.seq_of[k] = p.pos_of[k] = -1;
	k++;
	for (int i = 0; i < G; i++) {
		p.adv[i] = adv[i];
		p.sm[i] = 1.0;
		for (int t = 0; t < len_o[i]; t++, k++) {
			p.prev[k] = p.gen[k] = (float)prev_o[i][t];
			p.curr[k] = (float)(prev_o[i][t] + d[i][t]);
			p.ref[k] = (float)ref_o[i][t];
			p.tm[k] = 1;
			p.seq_of[k] = i;
			p.pos_of[k] = t;
		}
	}
	cr_assert_eq(k, NTOK);
	return p;
}

/* sequences [s0, s1) of p as a micro-batch of their own */
static struct rl_loss_batch slice(const struct packed *p, int s0, int s1, int32_t *cu)
{
	int32_t t0 = p->cu[s0];

	for (int s = s0; s <= s1; s++)
		cu[s - s0] = p->cu[s] - t0;
	return (struct rl_loss_batch){
	    .n_tokens = p->cu[s1] - t0,
	    .n_seqs = s1 - s0,
	    .cu_seqlens = cu,
	    .curr = p->curr + t0,
	    .prev = p->prev + t0,
	    .gen = p->gen + t0,
	    .ref = p->ref + t0,
	    .token_mask = p->tm + t0,
	    .advantage = p->adv + s0,
	    .sample_mask = p->sm + s0,
	};
}

static struct rl_loss make_loss(const struct rl_cfg_loss_fn *cfg)
{
	struct rl_loss l;
	char err[256] = "";

	cr_assert_eq(rl_loss_init(&l, cfg, err, sizeof(err)), 0, "%s", err);
	return l;
}

/* the whole step as one micro-batch */
static double whole(const struct rl_loss *l, const struct packed *p, float *dcurr)
{
	int32_t cu[G + 1];
	struct rl_loss_batch b = slice(p, 0, G, cu);
	struct rl_loss_norm n = {0};

	rl_loss_norm_add(&n, &b);
	return rl_loss_compute(l, &b, &n, dcurr, NULL);
}

static void expect_close(const char *what, double got, double want)
{
	/* both sides are a few dozen double operations on O(1) values: 1e-12
	 * is a thousand times their rounding and far below any real slip */
	cr_expect(fabs(got - want) <= 1e-12 * fmax(1.0, fabs(want)), "%s: got %.17g, want %.17g",
	          what, got, want);
}

/* dcurr against central differences of rl_loss_compute's loss.
 *
 * Step h = 2^-12: every curr is a multiple of 1/32 below 4 in magnitude,
 * so curr +- h is exact in float and the quotient has no input rounding.
 * Truncation error: h^2 / 6 * |L'''|. Each term of these losses is
 * c * A * exp(linear in curr) (or beta * k3, whose third derivative is
 * -beta * e^(ref - curr)), so |L'''| <= |L'| plus at most
 * c * beta * e^0.5 here: below 1 in every case, h^2 / 6 < 1e-8. The loss
 * is summed in double from about 30 terms of size <= 1.5: rounding
 * 30 * 1.5 * 2^-53 = 5e-15, over 2h = 5e-4 gives 1e-11. dcurr itself is
 * a float: relative error 2^-24. Tolerance 1e-8 + 2^-22 |fd| leaves a
 * margin of several times over each, and a wrong factor, sign or branch
 * misses by 1e-3 or more. */
static void check_grad(const struct rl_loss *l, const struct packed *p0)
{
	struct packed p = *p0;
	float g[NTOK];
	const double h = 0x1p-12;
	double norm = 0.0;

	whole(l, &p, g);
	for (int t = 0; t < NTOK; t++) {
		float x = p0->curr[t];
		double lp, lm, fd;

		if (!p.tm[t]) {
			cr_expect_eq(g[t], 0.0f, "dcurr[%d] of the prompt token is %g", t, g[t]);
			continue;
		}
		p.curr[t] = (float)(x + h);
		cr_assert_eq((double)p.curr[t], (double)x + h, "step not exact at %d", t);
		lp = whole(l, &p, NULL);
		p.curr[t] = (float)(x - h);
		lm = whole(l, &p, NULL);
		p.curr[t] = x;
		fd = (lp - lm) / (2 * h);
		cr_expect(fabs(g[t] - fd) <= 1e-8 + 0x1p-22 * fabs(fd),
		          "dcurr[%d] (sequence %d, token %d): got %.9g, finite differences %.9g", t,
		          p.seq_of[t], p.pos_of[t], g[t], fd);
		norm += fabs(g[t]);
	}
	cr_expect(norm > 1e-3, "the gradient is (nearly) all zero: %g", norm);
}

/* a token the clip cuts off carries exactly no actor gradient */
static void expect_cut(const struct rl_loss *l, const struct packed *p, int seq, int tok, bool cut)
{
	float g[NTOK];
	int t = p->cu[seq] + tok + (seq == 0); /* the prompt token leads sequence 0 */

	whole(l, p, g);
	if (cut)
		cr_expect_eq(g[t], 0.0f, "token %d of sequence %d is clipped but has gradient %g",
		             tok, seq, g[t]);
	else
		cr_expect_neq(g[t], 0.0f,
		              "token %d of sequence %d is not clipped but has no gradient", tok,
		              seq);
}

/* the step as two micro-batches, [0] and [1, 2], with the step's
 * denominators: the losses add up to the whole and each token's gradient
 * is the whole's (the same arithmetic on the same numbers: exactly). */
static void check_split(const struct rl_loss *l, const struct packed *p)
{
	int32_t cu_all[G + 1], cu_a[2], cu_b[3];
	struct rl_loss_batch all = slice(p, 0, G, cu_all), a = slice(p, 0, 1, cu_a),
	                     b = slice(p, 1, G, cu_b);
	struct rl_loss_norm n = {0}, n_parts = {0};
	float g_all[NTOK], g_split[NTOK];
	double whole_loss, parts;

	rl_loss_norm_add(&n, &all);
	rl_loss_norm_add(&n_parts, &a);
	rl_loss_norm_add(&n_parts, &b);
	cr_expect_eq(n_parts.valid_tokens, n.valid_tokens);
	cr_expect_eq(n_parts.valid_seqs, n.valid_seqs);
	whole_loss = rl_loss_compute(l, &all, &n, g_all, NULL);
	parts = rl_loss_compute(l, &a, &n, g_split, NULL);
	parts += rl_loss_compute(l, &b, &n, g_split + p->cu[1], NULL);
	expect_close("micro-batch losses summed", parts, whole_loss);
	for (int t = 0; t < NTOK; t++)
		cr_expect_eq(g_split[t], g_all[t], "dcurr[%d]: %g split, %g whole", t, g_split[t],
		             g_all[t]);
}

static struct rl_cfg_loss_fn cfg_base(void)
{
	return (struct rl_cfg_loss_fn){
	    .reference_policy_kl_type = "k3", .ratio_clip_min = 0.2, .ratio_clip_max = 0.2};
}

/* GRPO as DeepSeekMath writes it: sequence-level mean, symmetric clip,
 * k3 KL with beta = 0.04 (the paper's), advantages by the group's std. */
static struct rl_cfg_loss_fn cfg_grpo(void)
{
	struct rl_cfg_loss_fn c = cfg_base();

	c.reference_policy_kl_penalty = 0.04;
	c.token_level_loss = false;
	return c;
}

/* DAPO: eps_low 0.2, eps_high 0.28 (the paper's), token-level, no KL */
static struct rl_cfg_loss_fn cfg_dapo(void)
{
	struct rl_cfg_loss_fn c = cfg_base();

	c.ratio_clip_max = 0.28;
	c.token_level_loss = true;
	return c;
}

/* GSPO: sequence-level ratios, sequence mean, no KL. The paper's eps are
 * 3e-4 and 4e-4 for its long responses; these short ones use 0.1 and 0.15,
 * still asymmetric, so that the clip has room around the fixture. */
static struct rl_cfg_loss_fn cfg_gspo(void)
{
	struct rl_cfg_loss_fn c = cfg_base();

	c.ratio_clip_min = 0.1;
	c.ratio_clip_max = 0.15;
	c.token_level_loss = false;
	c.sequence_level_importance_ratios = true;
	return c;
}

/* Dr. GRPO: sequence sum over the budget C = 4 (the longest response), no KL */
static struct rl_cfg_loss_fn cfg_dr_grpo(void)
{
	struct rl_cfg_loss_fn c = cfg_base();

	c.token_level_loss = false;
	c.token_sum_normalizer = (struct rl_opt_float){.set = true, .value = 4.0};
	return c;
}

/* ---- the advantages ---- */

static const struct rl_opt_float unset = {.set = false, .value = 0.0};

Test(loss_papers, grpo_advantage_is_group_normalised)
{
	double want[G], got[G];

	/* rewards 1, 0, 0: mean 1/3, sample std sqrt((4/9 + 1/9 + 1/9) / 2) =
	 * 1/sqrt(3): A = 2/sqrt(3), -1/sqrt(3), -1/sqrt(3) */
	paper_advantages(rewards_a, true, want);
	expect_close("paper A_0", want[0], 2 / sqrt(3));
	expect_close("paper A_1", want[1], -1 / sqrt(3));
	rl_grpo_advantages(rewards_a, 1, G, false, true, &unset, &unset, got, NULL, NULL);
	for (int i = 0; i < G; i++)
		expect_close("grpo.normalize_rewards: true advantage", got[i], want[i]);
}

Test(loss_papers, dr_grpo_advantage_has_no_std)
{
	double want[G], got[G];

	/* rewards 1, 0, 0 less their mean 1/3 */
	paper_advantages(rewards_a, false, want);
	expect_close("paper A_0", want[0], 2.0 / 3);
	expect_close("paper A_2", want[2], -1.0 / 3);
	rl_grpo_advantages(rewards_a, 1, G, false, false, &unset, &unset, got, NULL, NULL);
	for (int i = 0; i < G; i++)
		expect_close("grpo.normalize_rewards: false advantage", got[i], want[i]);
}

/* ---- the losses ---- */

static void check_paper(const struct rl_cfg_loss_fn *cfg, const double d[G][MAXO],
                        const double *adv, double paper, double literal)
{
	struct rl_loss l = make_loss(cfg);
	struct packed p = pack(d, adv);

	expect_close("the paper's equation against its literal", paper, literal);
	expect_close("rl_loss_compute against the paper", whole(&l, &p, NULL), paper);
	check_grad(&l, &p);
	check_split(&l, &p);
}

Test(loss_papers, grpo)
{
	struct rl_cfg_loss_fn c = cfg_grpo();
	struct rl_loss l = make_loss(&c);
	double a[G], b[G];

	paper_advantages(rewards_a, true, a);
	paper_advantages(rewards_b, true, b);
	check_paper(&c, d_token, a, paper_grpo(d_token, a, 0.2, 0.04), PAPER_GRPO_A);
	check_paper(&c, d_token, b, paper_grpo(d_token, b, 0.2, 0.04), PAPER_GRPO_B);

	/* the clipped tokens keep only the KL's gradient: with beta = 0 none */
	c.reference_policy_kl_penalty = 0.0;
	l = make_loss(&c);
	struct packed p = pack(d_token, a);
	expect_cut(&l, &p, 0, 0, true);  /* A > 0, r = 1.37 > 1.2 */
	expect_cut(&l, &p, 0, 1, true);  /* A > 0, r = 1.24 > 1.2 */
	expect_cut(&l, &p, 0, 2, false); /* A > 0, r = 0.73 < 0.8: r A is the min */
	expect_cut(&l, &p, 1, 0, true);  /* A < 0, r = 0.69 < 0.8 */
	expect_cut(&l, &p, 1, 1, false); /* A < 0, r = 1.37 > 1.2: r A is the min */
	p = pack(d_token, b);
	expect_cut(&l, &p, 0, 0, false); /* the flipped advantages: the other branches */
	expect_cut(&l, &p, 0, 2, true);
	expect_cut(&l, &p, 1, 0, false);
	expect_cut(&l, &p, 1, 1, true);
}

Test(loss_papers, dapo)
{
	struct rl_cfg_loss_fn c = cfg_dapo();
	struct rl_loss l = make_loss(&c);
	double a[G], b[G];

	paper_advantages(rewards_a, true, a);
	paper_advantages(rewards_b, true, b);
	check_paper(&c, d_token, a, paper_dapo(d_token, a, 0.2, 0.28), PAPER_DAPO_A);
	check_paper(&c, d_token, b, paper_dapo(d_token, b, 0.2, 0.28), PAPER_DAPO_B);

	/* clip-higher: r = 1.24 is inside [0.8, 1.28], r = 1.37 is not */
	struct packed p = pack(d_token, a);
	expect_cut(&l, &p, 0, 0, true);
	expect_cut(&l, &p, 0, 1, false);
	expect_cut(&l, &p, 1, 0, true);
	/* the token-level loss is not the sequence mean: the literal differs
	 * from the same clip averaged per sequence */
	c.token_level_loss = false;
	l = make_loss(&c);
	cr_expect(fabs(whole(&l, &p, NULL) - PAPER_DAPO_A) > 1e-3,
	          "the token-level and sequence-level losses should differ here");
}

Test(loss_papers, gspo)
{
	struct rl_cfg_loss_fn c = cfg_gspo();
	struct rl_loss l = make_loss(&c);
	double a[G], b[G];

	paper_advantages(rewards_a, true, a);
	paper_advantages(rewards_b, true, b);
	check_paper(&c, d_seq, a, paper_gspo(d_seq, a, 0.1, 0.15), PAPER_GSPO_A);
	check_paper(&c, d_seq, b, paper_gspo(d_seq, b, 0.1, 0.15), PAPER_GSPO_B);

	/* clipping is per sequence: every token of a clipped sequence has no
	 * gradient, even token 0.3 whose own ratio e^0.0625 is inside */
	struct packed p = pack(d_seq, a);
	for (int t = 0; t < 4; t++)
		expect_cut(&l, &p, 0, t, true); /* A > 0, s = 1.169 > 1.15 */
	for (int t = 0; t < 2; t++)
		expect_cut(&l, &p, 1, t, true); /* A < 0, s = 0.829 < 0.9 */
	expect_cut(&l, &p, 2, 0, false);
	p = pack(d_seq, b);
	expect_cut(&l, &p, 0, 0, false); /* A < 0, s > 1.15: s A is the min */
	expect_cut(&l, &p, 1, 1, false); /* A > 0, s < 0.9: s A is the min */
}

Test(loss_papers, dr_grpo)
{
	struct rl_cfg_loss_fn c = cfg_dr_grpo();
	double a[G], b[G];

	paper_advantages(rewards_a, false, a);
	paper_advantages(rewards_b, false, b);
	check_paper(&c, d_token, a, paper_dr_grpo(d_token, a, 0.2, 4.0), PAPER_DRGRPO_A);
	check_paper(&c, d_token, b, paper_dr_grpo(d_token, b, 0.2, 4.0), PAPER_DRGRPO_B);
}

/* What Dr. GRPO needed a key for: neither existing mean is its constant.
 * token_level_loss: true divides by the step's token count (9 here, and it
 * changes from step to step), false by each response's own length. */
Test(loss_papers, dr_grpo_is_neither_existing_mean)
{
	double a[G];
	struct rl_cfg_loss_fn c = cfg_dr_grpo();

	paper_advantages(rewards_a, false, a);
	struct packed p = pack(d_token, a);
	c.token_sum_normalizer = unset;
	for (int token_level = 0; token_level < 2; token_level++) {
		c.token_level_loss = token_level;
		struct rl_loss l = make_loss(&c);
		cr_expect(fabs(whole(&l, &p, NULL) - PAPER_DRGRPO_A) > 1e-3,
		          "token_level_loss %d already gives Dr. GRPO's loss", token_level);
	}
	/* with C = 9 (this step's token count) Dr. GRPO's loss is the
	 * token-level mean over G = 3: within one step the two differ by a
	 * factor only, across steps the token count moves and C does not */
	c.token_level_loss = true;
	struct rl_loss tok = make_loss(&c);
	c = cfg_dr_grpo();
	c.token_sum_normalizer.value = 9.0;
	struct rl_loss dr = make_loss(&c);
	expect_close("C = 9, G = 3 against token-level / 3", whole(&dr, &p, NULL),
	             whole(&tok, &p, NULL) / 3.0);
}

/* RLOO (Ahmadian et al. 2024, "Back to Basics", eq. 10): the whole
 * response is one action, its baseline the mean reward of the group's
 * other k - 1 responses:
 *   grad J = 1/k sum_i (R_i - 1/(k-1) sum_{j != i} R_j) grad log pi(y_i),
 * log pi(y_i) = sum_t log pi(y_i,t). With disable_ppo_ratio that is the
 * token sum over the constant 1: token_sum_normalizer 1. By hand, rewards
 * 1, 0, 0: A = 1, -1/2, -1/2; log pi(y) = -0.6875 - 0.28125 - 1.0625 -
 * 1.1875 = -3.21875, -1.875 - 0.3125 = -2.1875, -0.75 - 2.125 - 0.375 =
 * -3.25; J = 1/3 (-3.21875 + 1.09375 + 1.625) = -1/6, loss 1/6; and every
 * token's gradient is -A_i / 3. */
Test(loss_papers, rloo)
{
	const double want_adv[G] = {1, -0.5, -0.5};
	double adv[G];
	struct rl_cfg_loss_fn c = cfg_base();

	rl_grpo_advantages(rewards_a, 1, G, true, false, &unset, &unset, adv, NULL, NULL);
	for (int i = 0; i < G; i++)
		expect_close("grpo.use_leave_one_out_baseline advantage", adv[i], want_adv[i]);
	c.disable_ppo_ratio = true;
	c.token_level_loss = false;
	c.token_sum_normalizer = (struct rl_opt_float){.set = true, .value = 1.0};
	struct rl_loss l = make_loss(&c);
	struct packed p = pack(d_token, adv);
	float g[NTOK];

	expect_close("rl_loss_compute against RLOO by hand", whole(&l, &p, g), 1.0 / 6);
	for (int t = 1; t < NTOK; t++)
		cr_expect_eq(g[t], (float)(-adv[p.seq_of[t]] / 3), "dcurr[%d] = %g", t, g[t]);
	check_grad(&l, &p);
	check_split(&l, &p);
}

static void expect_init_error(const struct rl_cfg_loss_fn *cfg, const char *want)
{
	struct rl_loss l;
	char err[256] = "";

	cr_expect_eq(rl_loss_init(&l, cfg, err, sizeof(err)), -1, "accepted, want %s", want);
	cr_expect(strstr(err, want) != NULL, "error \"%s\" does not say \"%s\"", err, want);
}

Test(loss_papers, token_sum_normalizer_errors)
{
	struct rl_cfg_loss_fn c = cfg_dr_grpo();

	c.token_level_loss = true;
	expect_init_error(&c, "loss_fn.token_sum_normalizer: needs token_level_loss: false");
	c = cfg_dr_grpo();
	c.sequence_level_importance_ratios = true;
	expect_init_error(&c, "loss_fn.token_sum_normalizer: does not go with");
	c = cfg_dr_grpo();
	c.token_sum_normalizer.value = 0.0;
	expect_init_error(&c, "loss_fn.token_sum_normalizer: must be a finite number > 0");
	c.token_sum_normalizer.value = INFINITY;
	expect_init_error(&c, "loss_fn.token_sum_normalizer: must be a finite number > 0");
}
