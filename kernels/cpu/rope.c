/* RoPE reference. Every step is a float operation in the order transformers
 * performs it (including torch's "a / t" being "reciprocal(t) * a"), so the
 * frequencies agree with transformers bit for bit and the rotations to an
 * ulp or two (torch's vectorized cos/sin); computing in double would be more
 * exact and further from what the Hugging Face model does. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu/typed.h"
#include "kernels/rope.h"

/* cos/sin are computed for this many frequencies at a time: a stack buffer,
 * shared by all heads of a token, whatever the head size. */
#define ROPE_CHUNK 128

void rl_rope_inv_freq(float *inv_freq, int head_dim, double theta,
                      const struct rl_rope_scaling *scaling)
{
	const int half = head_dim / 2;
	const float base = (float)theta;

	if (!inv_freq || head_dim <= 0)
		return;
	/* 1.0 / (base ** (arange(0, dim, 2).float() / dim)) */
	for (int i = 0; i < half; i++) {
		float e = (float)(2 * i) / (float)head_dim;
		inv_freq[i] = 1.0f / powf(base, e);
	}
	if (!scaling || scaling->type != RL_ROPE_LLAMA3)
		return;

	/* _compute_llama3_parameters: the Python scalars meet float32 tensors,
	 * so torch rounds them to float first. */
	const float factor = (float)scaling->factor;
	const float low = (float)scaling->low_freq_factor;
	const float old_len = (float)scaling->original_max_position_embeddings;
	const float low_wavelen =
	    (float)(scaling->original_max_position_embeddings / scaling->low_freq_factor);
	const float high_wavelen =
	    (float)(scaling->original_max_position_embeddings / scaling->high_freq_factor);
	const float span = (float)(scaling->high_freq_factor - scaling->low_freq_factor);
	const float two_pi = (float)(2.0 * 3.14159265358979323846);

	for (int i = 0; i < half; i++) {
		float f = inv_freq[i];
		float wavelen = (1.0f / f) * two_pi;

		if (wavelen > low_wavelen) {
			inv_freq[i] = f / factor;
		} else if (!(wavelen < high_wavelen)) {
			float smooth = ((1.0f / wavelen) * old_len - low) / span;
			inv_freq[i] = (1.0f - smooth) * f / factor + smooth * f;
		}
	}
}

/* One token: x[h][i] and x[h][i + half] rotated by +-angle for every head;
 * x's elements read widened and written rounded (typed.h). */
RL_TYPED_BODY void rope_token(void *x, int32_t pos, const float *inv_freq, int n_heads,
                              int head_dim, float sign, const bool bf16)
{
	const int half = head_dim / 2;
	const float p = (float)pos;
	float c[ROPE_CHUNK], s[ROPE_CHUNK];

	for (int i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
		int m = half - i0 < ROPE_CHUNK ? half - i0 : ROPE_CHUNK;

		for (int i = 0; i < m; i++) {
			float a = p * inv_freq[i0 + i];

			c[i] = cosf(a);
			s[i] = sign * sinf(a);
		}
		for (int h = 0; h < n_heads; h++) {
			size_t lo = (size_t)h * head_dim + i0, hi = lo + half;

			for (int i = 0; i < m; i++) {
				float a = rl_ld(x, bf16, lo + i), b = rl_ld(x, bf16, hi + i);

				rl_st(x, bf16, lo + i, a * c[i] - b * s[i]);
				rl_st(x, bf16, hi + i, b * c[i] + a * s[i]);
			}
		}
	}
}

RL_TYPED_BODY void rope_rows(void *x, const int32_t *pos, const float *inv_freq, int n, int n_heads,
                             int head_dim, float sign, const bool bf16)
{
	const size_t row = (size_t)n_heads * head_dim, es = bf16 ? 2 : 4;

#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((size_t)n * row > 32768)
#endif
	for (int t = 0; t < n; t++)
		rope_token((char *)x + (size_t)t * row * es, pos[t], inv_freq, n_heads, head_dim,
		           sign, bf16);
}

static int rope_apply(struct rl_buf x, const int32_t *pos, const float *inv_freq, int n,
                      int n_heads, int head_dim, float sign)
{
	if (n < 0 || n_heads <= 0 || head_dim <= 0 || head_dim % 2 || !rl_act_type_ok(x.t))
		return -1;
	if (n == 0)
		return 0;
	if (!x.p || !pos || !inv_freq)
		return -1;
	if (x.t == RL_BF16)
		rope_rows(x.p, pos, inv_freq, n, n_heads, head_dim, sign, true);
	else
		rope_rows(x.p, pos, inv_freq, n, n_heads, head_dim, sign, false);
	return 0;
}

int rl_rope_forward_cpu(struct rl_buf x, const int32_t *pos, const float *inv_freq, int n,
                        int n_heads, int head_dim, void *stream)
{
	(void)stream;
	return rope_apply(x, pos, inv_freq, n, n_heads, head_dim, 1.0f);
}

/* The rotation is orthogonal, so its transpose is the rotation by -angle. */
int rl_rope_backward_cpu(struct rl_buf dx, const int32_t *pos, const float *inv_freq, int n,
                         int n_heads, int head_dim, void *stream)
{
	(void)stream;
	return rope_apply(dx, pos, inv_freq, n, n_heads, head_dim, -1.0f);
}
