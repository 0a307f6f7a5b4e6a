/* The one way CUDA code multiplies matrices: a row-major description of the
 * product handed to cuBLASLt, with the algorithm chosen once per shape and
 * cached. The linear layer, the fused logprob and the benches call it; no
 * kernel of ours multiplies matrices by hand.
 * C-callable, so the C benches and tests can use it too.
 * defines: struct rl_gemm, rl_cuda_gemm, rl_cuda_gemm_workspace_bytes */
#ifndef RL_KERNELS_CUDA_GEMM_H
#define RL_KERNELS_CUDA_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Row-major: C [m, n] = alpha * op(A) op(B) + beta * C, then + bias[j] on
 * column j when bias is not NULL. op(A) is [m, k]: A is stored [m, k] with
 * row stride lda >= k, or, with trans_a, [k, m] with lda >= m; likewise
 * op(B) is [k, n] from B stored [k, n] (ldb >= n) or, with trans_b, [n, k]
 * (ldb >= k). beta = 1 accumulates into C, as the backward ops need.
 * ab_type is the element type of A and B, c_type that of C; the product is
 * always accumulated in fp32. bias has C's element type (cuBLASLt's default
 * bias type is D's) and is added in fp32 before C is rounded.
 * tf32 lets fp32 inputs go through the tensor cores as TF32 (about 10 bits
 * of mantissa): off, the product is the fp32 one the C reference computes. */
struct rl_gemm {
	int m, n, k;
	bool trans_a, trans_b;
	const void *a;
	int lda;
	const void *b;
	int ldb;
	void *c;
	int ldc;
	float alpha, beta;
	const void *bias;
	enum rl_dtype ab_type, c_type;
	bool tf32;
};

/* 0, or -1 with a message in err (NULL err: none) naming the cuBLASLt call
 * and its status, or the argument that is wrong. Runs on stream (NULL: the
 * legacy default stream) and does not synchronise. m, n or k of 0 is a valid
 * empty product (k == 0 scales C by beta). Thread-safe. */
int rl_cuda_gemm(const struct rl_gemm *g, void *stream, char *err, size_t errlen);

/* The workspace given to cuBLASLt, for the benches' comparison with it. */
size_t rl_cuda_gemm_workspace_bytes(void);

#ifdef __cplusplus
}
#endif

#endif
