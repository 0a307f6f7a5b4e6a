/* AdamW, step for step what torch.optim.AdamW (single-tensor, the default on
 * CPU) computes on fp32 tensors:
 *   param.mul_(1 - lr * wd)
 *   exp_avg.lerp_(grad, 1 - beta1)
 *   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
 *   denom = (exp_avg_sq.sqrt() / sqrt(1 - beta2**step)).add_(eps)
 *   param.addcdiv_(exp_avg, denom, value=-lr / (1 - beta1**step))
 * The scalars are Python floats there: computed in double, rounded to float
 * when they meet a float tensor. PyTorch's kernels are compiled with FMA
 * contraction, so lerp and addcmul round once; fma() is emulated in double
 * (the product of two floats is exact in double), which keeps the loop
 * vectorisable without -mfma. What is left between the two is PyTorch's
 * sqrt (MKL's, not always correctly rounded): about one ulp. */
#include <math.h>
#include <stdint.h>

#include "kernels/adamw.h"

#define PAR_MIN ((int64_t)1 << 15)

/* a * b + c rounded once (but for rare double-rounding ties) */
static inline float fma_f(float a, float b, float c)
{
	return (float)((double)a * (double)b + (double)c);
}

int rl_adamw_step_cpu(float *param, const float *grad, float *m, float *v, int64_t n,
                      const struct rl_adamw_hparams *hp, int64_t step, void *stream)
{
	(void)stream;
	if (!param || !grad || !m || !v || !hp || n < 0 || step < 1)
		return -1;

	double lr = hp->lr, beta1 = hp->beta1, beta2 = hp->beta2;
	float decay = (float)(1.0 - lr * (double)hp->weight_decay);
	/* torch's lerp: self + w (end - self) for |w| < 0.5, else
	 * end - (end - self)(1 - w); both as one fma */
	float w1 = (float)(1.0 - beta1);
	int small = fabsf(w1) < 0.5f;
	float lerp_coef = small ? w1 : w1 - 1.0f;
	float b2 = hp->beta2, w2 = (float)(1.0 - beta2);
	double bc1 = 1.0 - pow(beta1, (double)step);
	double bc2 = 1.0 - pow(beta2, (double)step);
	float neg_step_size = (float)(-(lr / bc1));
	float bc2_sqrt = (float)sqrt(bc2);
	float eps = hp->eps;

#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
	for (int64_t i = 0; i < n; i++) {
		float g = grad[i], mi = m[i];
		float p = param[i] * decay;

		mi = fma_f(lerp_coef, g - mi, small ? mi : g);
		float vi = fma_f(w2 * g, g, v[i] * b2);
		float denom = sqrtf(vi) / bc2_sqrt + eps;

		param[i] = p + neg_step_size * mi / denom;
		m[i] = mi;
		v[i] = vi;
	}
	return 0;
}
