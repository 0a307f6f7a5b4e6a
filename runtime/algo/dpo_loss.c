/* DPO's loss per pair, in double: the sums over a sequence's tokens are
 * where fp32 would lose the small differences between policy and
 * reference that the loss is about. */
#include <math.h>
#include <stdlib.h>

#include "runtime/algo/dpo_loss.h"
#include "runtime/algo/seq_sums.h"

/* -log sigmoid(x) = softplus(-x), without overflow for large |x| */
static double neg_log_sigmoid(double x)
{
	return (x < 0 ? -x : 0) + log1p(exp(-fabs(x)));
}

/* sigmoid(-x), the slope of -log sigmoid(x) with its sign flipped */
static double sigmoid_neg(double x)
{
	return x >= 0 ? exp(-x) / (1 + exp(-x)) : 1 / (1 + exp(x));
}

static void fill_grad(const struct rl_loss_batch *b, int s, double g, float *dcurr)
{
	for (int t = b->cu_seqlens[s]; t < b->cu_seqlens[s + 1]; t++)
		dcurr[t] = b->token_mask[t] ? (float)g : 0.0f;
}

double rl_dpo_loss_compute(const struct rl_dpo_loss *l, const struct rl_loss_batch *b, double pairs,
                           float *dcurr, struct rl_dpo_stats *acc)
{
	struct rl_dpo_stats st = {0};

	if (b->n_seqs % 2 != 0 || !b->ref)
		return NAN;
	/* per sequence: the policy's and the reference's sums, the count */
	double *pi = malloc(3 * ((size_t)b->n_seqs + 1) * sizeof *pi);
	if (!pi)
		return NAN;
	double *ref = pi + b->n_seqs + 1, *cnt = ref + b->n_seqs + 1;
	rl_seq_token_sums(b, b->curr, pi, cnt);
	rl_seq_token_sums(b, b->ref, ref, NULL);
	for (int j = 0; j < b->n_seqs / 2; j++) {
		int c = 2 * j, r = 2 * j + 1;
		struct {
			double pi, ref, n;
		} sc = {pi[c], ref[c], cnt[c]}, sr = {pi[r], ref[r], cnt[r]};
		double m = b->sample_mask[c];
		double w = pairs > 0 ? m / pairs : 0;
		double pref_div_c = l->preference_average_log_probs ? fmax(sc.n, 1) : 1;
		double pref_div_r = l->preference_average_log_probs ? fmax(sr.n, 1) : 1;
		double sft_div = l->sft_average_log_probs ? fmax(sc.n, 1) : 1;
		double rc = (sc.pi - sc.ref) / pref_div_c, rr = (sr.pi - sr.ref) / pref_div_r;
		double x = l->beta * (rc - rr);
		double pref = neg_log_sigmoid(x);
		double sft = l->sft_loss_weight > 0 ? -sc.pi / sft_div : 0;
		double loss = l->preference_loss_weight * pref + l->sft_loss_weight * sft;

		st.loss += w * loss;
		st.preference_loss += w * pref;
		st.sft_loss += w * sft;
		st.accuracy += w * (rc > rr);
		st.rewards_chosen_mean += w * rc;
		st.rewards_rejected_mean += w * rr;
		st.rewards_margin_mean += w * (rc - rr);
		st.pairs += m;
		if (dcurr) {
			/* d pref / d x = -sigmoid(-x); x moves with r_c by beta
			 * and with r_r by -beta */
			double dx = -l->preference_loss_weight * sigmoid_neg(x) * l->beta;
			double gc = w * (dx / pref_div_c - l->sft_loss_weight / sft_div);
			double gr = w * (-dx / pref_div_r);
			fill_grad(b, c, gc, dcurr);
			fill_grad(b, r, gr, dcurr);
		}
	}
	free(pi);
	if (acc) {
		acc->loss += st.loss;
		acc->preference_loss += st.preference_loss;
		acc->sft_loss += st.sft_loss;
		acc->accuracy += st.accuracy;
		acc->rewards_chosen_mean += st.rewards_chosen_mean;
		acc->rewards_rejected_mean += st.rewards_rejected_mean;
		acc->rewards_margin_mean += st.rewards_margin_mean;
		acc->pairs += st.pairs;
	}
	return st.loss;
}
