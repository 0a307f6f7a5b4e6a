/* The CPU ops behind the generation engine: the paged cache's append and
 * attention, the batch-invariant GEMM and logprobs, and Philox. Each is
 * held to an independent reference (the training attention, OpenBLAS, the
 * fused logprob op, Random123's known answers) within bounds from the
 * maths, and its invariance is checked bit for bit: a row computed alone,
 * among others, from blocks stored elsewhere, or at another place in the
 * batch. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/ops.h"
#include "kernels/philox.h"

static float *rnd(size_t n, unsigned seed)
{
	float *x = malloc(n * sizeof *x);

	srand(seed);
	for (size_t i = 0; i < n; i++)
		x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
	return x;
}

Test(paged, philox_known_answers)
{
	/* Random123's kat_vectors for philox4x32_10 */
	struct rl_philox_block z = {{0, 0, 0, 0}}, f = {{~0u, ~0u, ~0u, ~0u}},
	                       pi = {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
	struct rl_philox_block r = rl_philox4x32(z, 0, 0);
	cr_expect(r.v[0] == 0x6627e8d5u && r.v[1] == 0xe169c58du && r.v[2] == 0xbc57ac4cu &&
	          r.v[3] == 0x9b00dbd8u);
	r = rl_philox4x32(f, ~0u, ~0u);
	cr_expect(r.v[0] == 0x408f276du && r.v[1] == 0x41c83b0eu && r.v[2] == 0xa20bc7c6u &&
	          r.v[3] == 0x6d5451fdu);
	r = rl_philox4x32(pi, 0xa4093822u, 0x299f31d0u);
	cr_expect(r.v[0] == 0xd16cfe09u && r.v[1] == 0x94fdccebu && r.v[2] == 0x5001e420u &&
	          r.v[3] == 0x24126ea1u);
	double u = rl_philox_uniform(1, 2, 3);
	cr_expect(u >= 0 && u < 1);
	cr_expect(rl_philox_uniform(1, 2, 3) == u, "a pure function of its key");
	cr_expect(rl_philox_uniform(1, 2, 4) != u && rl_philox_uniform(1, 3, 3) != u);
}

Test(paged, append_scatters_rows)
{
	float kc[6 * 3] = {0}, vc[6 * 3] = {0}, k[2 * 3] = {1, 2, 3, 4, 5, 6},
	             v[2 * 3] = {7, 8, 9, 10, 11, 12};
	int32_t rows[2] = {4, 1};

	cr_assert_eq(rl_kv_append_cpu(kc, vc, k, v, rows, 2, 3, NULL), 0);
	cr_expect(kc[12] == 1 && kc[14] == 3 && kc[3] == 4 && kc[5] == 6 && kc[0] == 0);
	cr_expect(vc[12] == 7 && vc[3] == 10 && vc[6] == 0);
	cr_expect_eq(rl_kv_append_cpu(kc, vc, k, v, rows, -1, 3, NULL), -1);
}

/* Three sequences packed, attention by the training op and by the paged op
 * with the identity table, then the same keys in shuffled blocks of 4. */
Test(paged, attention_matches_training_and_is_invariant)
{
	enum { H = 4, HKV = 2, D = 20, S = 3 };
	const int32_t cu[S + 1] = {0, 37, 38, 90};
	const int T = cu[S];
	struct rl_attention_shape sh = {H, HKV, D, 1.0f / sqrtf((float)D)};
	float *q = rnd((size_t)T * H * D, 1), *k = rnd((size_t)T * HKV * D, 2),
	      *v = rnd((size_t)T * HKV * D, 3);
	float *ref = malloc(sizeof(float) * T * H * D), *lse_ref = malloc(sizeof(float) * T * H);
	float *out = malloc(sizeof(float) * T * H * D), *lse = malloc(sizeof(float) * T * H);
	int32_t iota[90], off[90], pos[90];

	for (int s = 0; s < S; s++)
		for (int t = cu[s]; t < cu[s + 1]; t++) {
			iota[t] = t;
			pos[t] = t - cu[s];
			off[t] = cu[s];
		}
	cr_assert_eq(rl_attention_forward_cpu(ref, lse_ref, q, k, v, cu, S, &sh, NULL), 0);
	cr_assert_eq(rl_attention_paged_cpu(out, lse, q, k, v, iota, off, pos, T, 1, &sh, NULL), 0);
	/* fp32 softmax-weighted sums of |v| <= 0.5 over at most 52 keys: a few
	 * ulps of 0.5 per key */
	for (int i = 0; i < T * H * D; i++)
		cr_assert_leq(fabsf(out[i] - ref[i]), 64 * 0x1p-24f, "out[%d] %g vs %g", i,
		              (double)out[i], (double)ref[i]);
	for (int i = 0; i < T * H; i++)
		cr_assert_leq(fabsf(lse[i] - lse_ref[i]), 1e-5f);

	/* sequence 2's keys in blocks of 4 at shuffled places of a cache */
	enum { B = 4, NB = 16 };
	const int len = cu[3] - cu[2];
	float *kc = calloc((size_t)NB * B * HKV * D, sizeof(float)),
	      *vc = calloc((size_t)NB * B * HKV * D, sizeof(float));
	int32_t table[NB], rows[64], poff[64], ppos[64];
	for (int b = 0; b < NB; b++)
		table[b] = (b * 7 + 3) % NB;
	for (int j = 0; j < len; j++)
		rows[j] = table[j / B] * B + j % B;
	cr_assert_eq(rl_kv_append_cpu(kc, vc, k + (size_t)cu[2] * HKV * D,
	                              v + (size_t)cu[2] * HKV * D, rows, len, HKV * D, NULL),
	             0);
	float *o2 = malloc(sizeof(float) * 64 * H * D), *l2 = malloc(sizeof(float) * 64 * H);
	/* its rows in reverse order and one at a time: the same bits */
	for (int j = 0; j < len; j++) {
		poff[j] = 0;
		ppos[j] = len - 1 - j;
	}
	float *qr = malloc(sizeof(float) * 64 * H * D);
	for (int j = 0; j < len; j++)
		memcpy(qr + (size_t)j * H * D, q + (size_t)(cu[2] + ppos[j]) * H * D,
		       sizeof(float) * H * D);
	cr_assert_eq(
	    rl_attention_paged_cpu(o2, l2, qr, kc, vc, table, poff, ppos, len, B, &sh, NULL), 0);
	for (int j = 0; j < len; j++) {
		size_t t = (size_t)(cu[2] + ppos[j]);
		cr_assert_eq(memcmp(o2 + (size_t)j * H * D, out + t * H * D, sizeof(float) * H * D),
		             0, "row at position %d", ppos[j]);
		cr_assert_eq(memcmp(l2 + (size_t)j * H, lse + t * H, sizeof(float) * H), 0);
	}
	cr_assert_eq(
	    rl_attention_paged_cpu(o2, NULL, qr, kc, vc, table, poff, ppos, 1, B, &sh, NULL), 0);
	cr_assert_eq(memcmp(o2, out + (size_t)(cu[3] - 1) * H * D, sizeof(float) * H * D), 0,
	             "the last row alone");
	free(q), free(k), free(v), free(ref), free(lse_ref), free(out), free(lse);
	free(kc), free(vc), free(o2), free(l2), free(qr);
}

/* One sequence as generation runs it: a prefill, a step of several new
 * tokens, then one token at a time, each appending its keys to shuffled
 * blocks of a cache whose unwritten rows are NaN (read, they would poison
 * the output). Every row matches the training forward on the whole
 * sequence and has the bits of a prefill of all of it. */
Test(paged, prefill_then_decode_matches_training)
{
	enum { LEN = 75, H = 4, HKV = 2, D = 16, B = 8, NB = 12, ROW = HKV * D };
	const int32_t cu[2] = {0, LEN};
	static const int steps[] = {37, 6};
	struct rl_attention_shape sh = {H, HKV, D, 0.25f};
	float *q = rnd((size_t)LEN * H * D, 11), *k = rnd((size_t)LEN * ROW, 12),
	      *v = rnd((size_t)LEN * ROW, 13);
	float *ref = malloc(sizeof(float) * LEN * H * D),
	      *lse_ref = malloc(sizeof(float) * LEN * H);
	float *out = malloc(sizeof(float) * LEN * H * D), *lse = malloc(sizeof(float) * LEN * H);
	float *all = malloc(sizeof(float) * LEN * H * D),
	      *lse_all = malloc(sizeof(float) * LEN * H);
	float *kc = malloc(sizeof(float) * NB * B * ROW),
	      *vc = malloc(sizeof(float) * NB * B * ROW);
	int32_t table[NB], rows[LEN], off[LEN], pos[LEN];

	for (int i = 0; i < NB * B * ROW; i++)
		kc[i] = vc[i] = NAN;
	for (int b = 0; b < NB; b++)
		table[b] = (b * 5 + 7) % NB;
	for (int j = 0; j < LEN; j++) {
		rows[j] = table[j / B] * B + j % B;
		off[j] = 0;
		pos[j] = j;
	}
	cr_assert_eq(rl_attention_forward_cpu(ref, lse_ref, q, k, v, cu, 1, &sh, NULL), 0);

	for (int len = 0, s = 0; len < LEN; s++) {
		const int n = s < 2 ? steps[s] : 1;
		const size_t qo = (size_t)len * H * D;

		cr_assert_eq(rl_kv_append_cpu(kc, vc, k + (size_t)len * ROW, v + (size_t)len * ROW,
		                              rows + len, n, ROW, NULL),
		             0);
		cr_assert_eq(rl_attention_paged_cpu(out + qo, lse + (size_t)len * H, q + qo, kc, vc,
		                                    table, off + len, pos + len, n, B, &sh, NULL),
		             0);
		len += n;
	}
	/* fp32 softmax-weighted sums of |v| <= 0.5 over at most 75 keys, as
	 * in attention_matches_training_and_is_invariant */
	for (int i = 0; i < LEN * H * D; i++)
		cr_assert_leq(fabsf(out[i] - ref[i]), 128 * 0x1p-24f, "out[%d] %g vs %g", i,
		              (double)out[i], (double)ref[i]);
	for (int i = 0; i < LEN * H; i++)
		cr_assert_leq(fabsf(lse[i] - lse_ref[i]), 1e-5f);

	cr_assert_eq(
	    rl_attention_paged_cpu(all, lse_all, q, kc, vc, table, off, pos, LEN, B, &sh, NULL), 0);
	cr_assert_eq(memcmp(all, out, sizeof(float) * LEN * H * D), 0, "out: not the same bits");
	cr_assert_eq(memcmp(lse_all, lse, sizeof(float) * LEN * H), 0, "lse: not the same bits");
	free(q), free(k), free(v), free(ref), free(lse_ref), free(out), free(lse);
	free(all), free(lse_all), free(kc), free(vc);
}

Test(paged, attention_rejects_bad_arguments)
{
	static const int32_t idx[2] = {0, 1}, negative[1] = {-1};
	const struct rl_attention_shape ok = {2, 1, 4, 0.5f}, uneven = {3, 2, 4, 0.5f},
	                                no_dim = {2, 1, 0, 0.5f}, no_heads = {0, 1, 4, 0.5f};
	float x[16] = {0}, l[4] = {0};

	cr_expect_eq(rl_attention_paged_cpu(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 16,
	                                    &ok, NULL),
	             0, "n == 0");
	cr_expect_eq(rl_attention_paged_cpu(x, l, x, x, x, idx, idx, idx, 1, 16, NULL, NULL), -1);
	cr_expect_eq(rl_attention_paged_cpu(x, l, x, x, x, idx, idx, idx, 1, 16, &uneven, NULL),
	             -1);
	cr_expect_eq(rl_attention_paged_cpu(x, l, x, x, x, idx, idx, idx, 1, 16, &no_dim, NULL),
	             -1);
	cr_expect_eq(rl_attention_paged_cpu(x, l, x, x, x, idx, idx, idx, 1, 16, &no_heads, NULL),
	             -1);
	cr_expect_eq(rl_attention_paged_cpu(x, l, x, x, x, idx, idx, idx, -1, 16, &ok, NULL), -1);
	cr_expect_eq(rl_attention_paged_cpu(x, l, x, x, x, idx, idx, idx, 1, 0, &ok, NULL), -1,
	             "block 0");
	cr_expect_eq(rl_attention_paged_cpu(NULL, l, x, x, x, idx, idx, idx, 1, 16, &ok, NULL), -1);
	cr_expect_eq(rl_attention_paged_cpu(x, l, x, NULL, x, idx, idx, idx, 1, 16, &ok, NULL), -1);
	cr_expect_eq(rl_attention_paged_cpu(x, l, x, x, x, NULL, idx, idx, 1, 16, &ok, NULL), -1);
	cr_expect_eq(rl_attention_paged_cpu(x, l, x, x, x, idx, idx, negative, 1, 16, &ok, NULL),
	             -1, "a negative position");
	cr_expect_eq(rl_attention_paged_cpu(x, l, x, x, x, idx, negative, idx, 1, 16, &ok, NULL),
	             -1, "a negative offset");
}

Test(paged, invariant_linear_matches_and_ignores_the_batch)
{
	enum { K = 203, O = 77, M = 130 };
	float *x = rnd((size_t)M * K, 4), *w = rnd((size_t)O * K, 5), *b = rnd(O, 6);
	float *y = malloc(sizeof(float) * M * O), *ref = malloc(sizeof(float) * M * O),
	      *one = malloc(sizeof(float) * O);

	cr_assert_eq(rl_linear_forward_invariant_cpu(rl_buf_f32(y), rl_cbuf_f32(x), rl_cbuf_f32(w),
	                                             rl_cbuf_f32(b), M, K, O, NULL),
	             0);
	cr_assert_eq(rl_linear_forward_cpu(rl_buf_f32(ref), rl_cbuf_f32(x), rl_cbuf_f32(w),
	                                   rl_cbuf_f32(b), M, K, O, NULL),
	             0);
	/* two fp32 sums of K products of |.| <= 0.25: each within K ulps of
	 * sum |x w| <= K / 4 */
	for (int i = 0; i < M * O; i++)
		cr_assert_leq(fabsf(y[i] - ref[i]), 2.0f * K * K / 4 * 0x1p-24f);
	int rows[] = {0, 1, 64, 129};
	for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
		const int t = rows[r];
		cr_assert_eq(
		    rl_linear_forward_invariant_cpu(rl_buf_f32(one), rl_cbuf_f32(x + (size_t)t * K),
		                                    rl_cbuf_f32(w), rl_cbuf_f32(b), 1, K, O, NULL),
		    0);
		cr_assert_eq(memcmp(one, y + (size_t)t * O, sizeof(float) * O), 0, "row %d", t);
		/* three rows with t among them, at another place */
		const int t0 = t >= 2 ? t - 2 : 0;
		cr_assert_eq(rl_linear_forward_invariant_cpu(
		                 rl_buf_f32(ref), rl_cbuf_f32(x + (size_t)t0 * K), rl_cbuf_f32(w),
		                 rl_cbuf_f32(b), 3, K, O, NULL),
		             0);
		cr_assert_eq(
		    memcmp(ref + (size_t)(t - t0) * O, y + (size_t)t * O, sizeof(float) * O), 0,
		    "row %d of three", t);
	}
	free(x), free(w), free(b), free(y), free(ref), free(one);
}

Test(paged, logits_logprobs_is_the_invariant_fused_op)
{
	enum { DIM = 48, V = 1003, NT = 9 };
	float *h = rnd((size_t)NT * DIM, 7), *w = rnd((size_t)V * DIM, 8);
	float *logits = malloc(sizeof(float) * NT * V), *work = malloc(sizeof(float) * NT * V);
	float lp1[NT], lse1[NT], lp2[NT], lse2[NT], lp3[NT], lse3[NT];
	int32_t tg[NT];

	for (int t = 0; t < NT; t++)
		tg[t] = t == 3 ? -1 : (t * 131) % V;
	cr_assert_eq(rl_linear_forward_invariant_cpu(rl_buf_f32(logits), rl_cbuf_f32(h),
	                                             rl_cbuf_f32(w), rl_cbuf_f32(NULL), NT, DIM, V,
	                                             NULL),
	             0);
	const int chunks[] = {100, V, 4096};
	for (size_t c = 0; c < 3; c++) {
		struct rl_lm_logprobs_shape s = {NT, DIM, V, chunks[c], 1.0f / 0.7f};

		cr_assert_eq(rl_logits_logprobs_cpu(lp1, lse1, logits, V, tg, &s, work, NULL), 0);
		cr_assert_eq(rl_lm_logprobs_forward_invariant_cpu(
		                 lp2, lse2, rl_cbuf_f32(h), rl_cbuf_f32(w), tg, &s, work, NULL),
		             0);
		cr_assert_eq(memcmp(lp1, lp2, sizeof lp1), 0, "chunk %d: logprobs", chunks[c]);
		cr_assert_eq(memcmp(lse1, lse2, sizeof lse1), 0, "chunk %d: lse", chunks[c]);
		cr_assert_eq(rl_lm_logprobs_forward_cpu(lp3, lse3, rl_cbuf_f32(h), rl_cbuf_f32(w),
		                                        tg, &s, work, NULL),
		             0);
		for (int t = 0; t < NT; t++)
			cr_assert_leq(fabsf(lp1[t] - lp3[t]), 1e-5f);
		/* a row alone: the same bits */
		s.n = 1;
		cr_assert_eq(
		    rl_lm_logprobs_forward_invariant_cpu(lp3, lse3, rl_cbuf_f32(h + 5 * DIM),
		                                         rl_cbuf_f32(w), tg + 5, &s, work, NULL),
		    0);
		cr_assert_eq(memcmp(&lp3[0], &lp2[5], sizeof(float)), 0);
	}
	free(h), free(w), free(logits), free(work);
}
