/* rl_cuda_gemm over cuBLASLt.
 *
 * Row-major to column-major: a row-major [r, c] matrix with row stride ld is,
 * byte for byte, the column-major [c, r] matrix with leading dimension ld,
 * its transpose. So the row-major C = op(A) op(B) is handed to cuBLASLt as
 * the column-major C^T = op(B)^T op(A)^T: the operands swap places (B first)
 * and each keeps its own transpose flag; the layouts stay CUBLASLT_ORDER_COL,
 * the order every cuBLASLt kernel supports (ORDER_ROW narrows the choice).
 * The bias epilogue adds bias[i] to row i of cuBLASLt's D, which after the
 * swap is [n, m]: row i of D is column i of our row-major C, as the contract
 * wants, and the bias has n elements.
 *
 * One handle per device and one workspace per (device, stream): two streams
 * that do not wait on each other would race in a shared workspace. The
 * algorithm is asked for once per shape, without split-K, and kept in a
 * small table; a full table replaces its entries in turn. Should no kernel
 * take the bias epilogue for a shape, a small kernel adds the bias after the
 * product. */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemm.h"

#define RL_GEMM_WORKSPACE   ((size_t)32 << 20)
#define RL_GEMM_DEVICES     16
#define RL_GEMM_STREAMS     8 /* per device */
#define RL_GEMM_CACHE       256
#define RL_GEMM_MAX_ALIGN   256 /* what cuBLASLt assumes when told nothing */
#define RL_GEMM_SCALE_BLOCK 256

struct rl_gemm_device {
	bool ready;
	cublasLtHandle_t handle;
	int nstreams;
	cudaStream_t streams[RL_GEMM_STREAMS];
	void *workspaces[RL_GEMM_STREAMS];
};

/* int fields only: no padding, so keys compare with memcmp. Pointer
 * alignments are part of the key because the heuristic excludes kernels
 * that need more alignment than the buffers have. */
struct rl_gemm_key {
	int device, m, n, k, lda, ldb, ldc;
	int trans_a, trans_b, ab_type, c_type, tf32, bias;
	int align_a, align_b, align_c, align_bias;
};

struct rl_gemm_entry {
	bool used;
	bool epilogue; /* the bias goes in cuBLASLt's epilogue */
	struct rl_gemm_key key;
	cublasLtMatmulAlgo_t algo;
};

static pthread_mutex_t rl_gemm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rl_gemm_device rl_gemm_devices[RL_GEMM_DEVICES];
static struct rl_gemm_entry rl_gemm_cache[RL_GEMM_CACHE];
static int rl_gemm_cache_next;

__attribute__((format(printf, 3, 4))) static int rl_gemm_fail(char *err, size_t errlen,
                                                              const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

size_t rl_cuda_gemm_workspace_bytes(void)
{
	return RL_GEMM_WORKSPACE;
}

static cudaDataType_t rl_gemm_cuda_type(int t)
{
	return t == RL_F32 ? CUDA_R_32F : t == RL_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* The largest power of two dividing the address, capped at what cuBLASLt
 * would assume anyway. */
static int rl_gemm_align(const void *p)
{
	uintptr_t u = (uintptr_t)p;
	int a = 1;

	while (a < RL_GEMM_MAX_ALIGN && !(u & (uintptr_t)a))
		a <<= 1;
	return a;
}

/* cuBLASLt's type table: fp32 inputs give fp32; bf16 and fp16 inputs give
 * their own type or fp32. */
static int rl_gemm_check(const struct rl_gemm *g, char *err, size_t errlen)
{
	if (!g)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: g is NULL");
	if (g->m < 0 || g->n < 0 || g->k < 0)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: negative size m %d n %d k %d", g->m,
		                    g->n, g->k);
	if ((unsigned)g->ab_type > RL_F16 || (unsigned)g->c_type > RL_F16)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: bad ab_type %d or c_type %d",
		                    (int)g->ab_type, (int)g->c_type);
	if (g->c_type != RL_F32 && g->c_type != g->ab_type)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: ab_type %s with c_type %s",
		                    rl_dtype_name(g->ab_type), rl_dtype_name(g->c_type));
	if (g->m == 0 || g->n == 0)
		return 0;
	if (!g->c)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: c is NULL");
	if (g->ldc < g->n)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: ldc %d < n %d", g->ldc, g->n);
	if (g->k == 0)
		return 0;
	if (!g->a || !g->b)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: %s is NULL", g->a ? "b" : "a");

	int a_cols = g->trans_a ? g->m : g->k, b_cols = g->trans_b ? g->k : g->n;

	if (g->lda < a_cols)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: lda %d < %d (%s)", g->lda, a_cols,
		                    g->trans_a ? "m, trans_a" : "k");
	if (g->ldb < b_cols)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: ldb %d < %d (%s)", g->ldb, b_cols,
		                    g->trans_b ? "k, trans_b" : "n");
	return 0;
}

static __device__ __forceinline__ float rl_gemm_load(const float *p)
{
	return *p;
}

static __device__ __forceinline__ float rl_gemm_load(const __nv_bfloat16 *p)
{
	return __bfloat162float(*p);
}

static __device__ __forceinline__ float rl_gemm_load(const __half *p)
{
	return __half2float(*p);
}

static __device__ __forceinline__ void rl_gemm_store(float *p, float v)
{
	*p = v;
}

static __device__ __forceinline__ void rl_gemm_store(__nv_bfloat16 *p, float v)
{
	*p = __float2bfloat16_rn(v);
}

static __device__ __forceinline__ void rl_gemm_store(__half *p, float v)
{
	*p = __float2half_rn(v);
}

/* C = beta C (+ bias): the k == 0 product, which cuBLASLt will not take,
 * and the bias where no epilogue could. beta == 0 does not read C, as BLAS
 * does not, so garbage or NaN there is overwritten. */
template <typename T>
static __global__ void __launch_bounds__(RL_GEMM_SCALE_BLOCK)
    rl_gemm_scale_kernel(T *c, int m, int n, int ldc, float beta, const T *bias)
{
	int64_t total = (int64_t)m * n;
	int64_t step = (int64_t)gridDim.x * blockDim.x;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
		int64_t r = i / n;
		int j = (int)(i - r * n);
		T *p = c + r * ldc + j;
		float v = beta == 0.0f ? 0.0f : beta * rl_gemm_load(p);

		if (bias)
			v += rl_gemm_load(bias + j);
		rl_gemm_store(p, v);
	}
}

/* C = beta C (+ bias) over the whole of C. */
static int rl_gemm_scale(const struct rl_gemm *g, float beta, cudaStream_t st, char *err,
                         size_t errlen)
{
	int64_t blocks = rl_ceil_div((int64_t)g->m * g->n, RL_GEMM_SCALE_BLOCK);
	unsigned grid = (unsigned)(blocks < 4096 ? blocks : 4096);

	if (g->c_type == RL_F32)
		rl_gemm_scale_kernel<float><<<grid, RL_GEMM_SCALE_BLOCK, 0, st>>>(
		    (float *)g->c, g->m, g->n, g->ldc, beta, (const float *)g->bias);
	else if (g->c_type == RL_BF16)
		rl_gemm_scale_kernel<__nv_bfloat16><<<grid, RL_GEMM_SCALE_BLOCK, 0, st>>>(
		    (__nv_bfloat16 *)g->c, g->m, g->n, g->ldc, beta,
		    (const __nv_bfloat16 *)g->bias);
	else
		rl_gemm_scale_kernel<__half><<<grid, RL_GEMM_SCALE_BLOCK, 0, st>>>(
		    (__half *)g->c, g->m, g->n, g->ldc, beta, (const __half *)g->bias);

	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: scale kernel: %s",
		                    cudaGetErrorString(e));
	return 0;
}

/* The bias after a product that could not take it in its epilogue: beta 1
 * is exact (1 * c == c), so this is c + bias[j]. */
static int rl_gemm_add_bias(const struct rl_gemm *g, cudaStream_t st, char *err, size_t errlen)
{
	return rl_gemm_scale(g, 1.0f, st, err, errlen);
}

/* The device's handle and the stream's workspace, made on first use. Called
 * with rl_gemm_lock held. */
static int rl_gemm_resources(int dev, cudaStream_t st, cublasLtHandle_t *handle, void **ws,
                             char *err, size_t errlen)
{
	struct rl_gemm_device *d = &rl_gemm_devices[dev];

	if (!d->ready) {
		cublasStatus_t s = cublasLtCreate(&d->handle);
		if (s != CUBLAS_STATUS_SUCCESS)
			return rl_gemm_fail(err, errlen, "rl_cuda_gemm: cublasLtCreate: %s",
			                    cublasLtGetStatusString(s));
		d->ready = true;
	}
	*handle = d->handle;
	for (int i = 0; i < d->nstreams; i++) {
		if (d->streams[i] == st) {
			*ws = d->workspaces[i];
			return 0;
		}
	}
	if (d->nstreams == RL_GEMM_STREAMS)
		return rl_gemm_fail(err, errlen,
		                    "rl_cuda_gemm: more than %d streams on device %d, each with "
		                    "its own workspace",
		                    RL_GEMM_STREAMS, dev);

	cudaError_t e = cudaMalloc(ws, RL_GEMM_WORKSPACE);
	if (e != cudaSuccess) {
		/* not left for the next op's rl_launched() to report as its own */
		(void)cudaGetLastError();
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: cudaMalloc(workspace, %zu): %s",
		                    RL_GEMM_WORKSPACE, cudaGetErrorString(e));
	}
	d->streams[d->nstreams] = st;
	d->workspaces[d->nstreams] = *ws;
	d->nstreams++;
	return 0;
}

static struct rl_gemm_key rl_gemm_key_of(const struct rl_gemm *g, int dev)
{
	struct rl_gemm_key key;
	bool f32 = g->ab_type == RL_F32;

	memset(&key, 0, sizeof(key));
	key.device = dev;
	key.m = g->m;
	key.n = g->n;
	key.k = g->k;
	key.lda = g->lda;
	key.ldb = g->ldb;
	key.ldc = g->ldc;
	key.trans_a = g->trans_a;
	key.trans_b = g->trans_b;
	key.ab_type = g->ab_type;
	key.c_type = g->c_type;
	key.tf32 = f32 && g->tf32; /* only fp32 inputs have a TF32 path */
	key.bias = g->bias != NULL;
	key.align_a = rl_gemm_align(g->a);
	key.align_b = rl_gemm_align(g->b);
	key.align_c = rl_gemm_align(g->c);
	key.align_bias = key.bias ? rl_gemm_align(g->bias) : 0;
	return key;
}

/* The heuristic's first choice for desc as it stands: CUBLAS_STATUS_SUCCESS,
 * or the failing call's status (and its name in *what). */
static cublasStatus_t rl_gemm_heuristic(const struct rl_gemm_key *key, cublasLtHandle_t handle,
                                        cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                                        cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                                        cublasLtMatmulAlgo_t *algo, const char **what)
{
	/* cuBLASLt's A is our B and its B our A (see the top); D is C. */
	const struct {
		cublasLtMatmulPreferenceAttributes_t attr;
		uint32_t bytes;
	} aligns[4] = {
	    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, (uint32_t)key->align_b},
	    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, (uint32_t)key->align_a},
	    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, (uint32_t)key->align_c},
	    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, (uint32_t)key->align_c},
	};
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res;
	uint64_t ws = RL_GEMM_WORKSPACE;
	/* No split-K. cuBLAS promises the same bits run to run on one GPU
	 * model and the in-place scheme serialises its partial sums, but
	 * training is compared bit for bit (checkpoint resume), so no order
	 * of partial sums is left to trust: this mask is what NVIDIA advises
	 * for fixed results (NVIDIA/CUDALibrarySamples#243). It costs speed
	 * only when m and n are small next to k, rare in a transformer. */
	uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
	int found = 0;
	cublasStatus_t s;

	*what = "cublasLtMatmulPreferenceCreate";
	s = cublasLtMatmulPreferenceCreate(&pref);
	if (s != CUBLAS_STATUS_SUCCESS)
		return s;
	*what = "cublasLtMatmulPreferenceSetAttribute";
	s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
	                                         &ws, sizeof(ws));
	for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++)
		s = cublasLtMatmulPreferenceSetAttribute(pref, aligns[i].attr, &aligns[i].bytes,
		                                         sizeof(aligns[i].bytes));
	if (s == CUBLAS_STATUS_SUCCESS)
		s = cublasLtMatmulPreferenceSetAttribute(pref,
		                                         CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
		                                         &reduction, sizeof(reduction));
	if (s == CUBLAS_STATUS_SUCCESS) {
		*what = "cublasLtMatmulAlgoGetHeuristic";
		memset(&res, 0, sizeof(res));
		s = cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, lc, pref, 1, &res,
		                                   &found);
		if (s == CUBLAS_STATUS_SUCCESS && (found < 1 || res.state != CUBLAS_STATUS_SUCCESS))
			s = CUBLAS_STATUS_NOT_SUPPORTED;
	}
	cublasLtMatmulPreferenceDestroy(pref);
	if (s == CUBLAS_STATUS_SUCCESS)
		*algo = res.algo;
	return s;
}

static cublasStatus_t rl_gemm_no_epilogue(cublasLtMatmulDesc_t desc)
{
	uint32_t none = CUBLASLT_EPILOGUE_DEFAULT;

	return cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &none,
	                                      sizeof(none));
}

/* The cached algorithm, or the heuristic's first choice, cached. Called with
 * rl_gemm_lock held. Should no kernel take the bias epilogue for a shape,
 * the product goes without it (desc is changed) and *epilogue says so: the
 * caller then adds the bias itself. */
static int rl_gemm_algo(const struct rl_gemm_key *key, cublasLtHandle_t handle,
                        cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                        cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                        cublasLtMatmulAlgo_t *algo, bool *epilogue, char *err, size_t errlen)
{
	const char *what = "";
	cublasStatus_t s;

	*epilogue = key->bias;
	for (int i = 0; i < RL_GEMM_CACHE; i++) {
		struct rl_gemm_entry *e = &rl_gemm_cache[i];

		if (!e->used || memcmp(&e->key, key, sizeof(*key)))
			continue;
		*algo = e->algo;
		*epilogue = e->epilogue;
		if (!key->bias || e->epilogue)
			return 0;
		s = rl_gemm_no_epilogue(desc);
		if (s == CUBLAS_STATUS_SUCCESS)
			return 0;
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: cublasLtMatmulDescSetAttribute: %s",
		                    cublasLtGetStatusString(s));
	}

	s = rl_gemm_heuristic(key, handle, desc, la, lb, lc, algo, &what);
	if (s != CUBLAS_STATUS_SUCCESS && key->bias) {
		*epilogue = false;
		what = "cublasLtMatmulDescSetAttribute";
		s = rl_gemm_no_epilogue(desc);
		if (s == CUBLAS_STATUS_SUCCESS)
			s = rl_gemm_heuristic(key, handle, desc, la, lb, lc, algo, &what);
	}
	if (s != CUBLAS_STATUS_SUCCESS)
		return rl_gemm_fail(
		    err, errlen, "rl_cuda_gemm: %s (m %d n %d k %d %s x %s -> %s): %s", what,
		    key->m, key->n, key->k, rl_dtype_name((enum rl_dtype)key->ab_type),
		    rl_dtype_name((enum rl_dtype)key->ab_type),
		    rl_dtype_name((enum rl_dtype)key->c_type), cublasLtGetStatusString(s));

	struct rl_gemm_entry *e = &rl_gemm_cache[rl_gemm_cache_next];
	rl_gemm_cache_next = (rl_gemm_cache_next + 1) % RL_GEMM_CACHE;
	e->used = true;
	e->key = *key;
	e->algo = *algo;
	e->epilogue = *epilogue;
	return 0;
}

static int rl_gemm_lt(const struct rl_gemm *g, cudaStream_t st, char *err, size_t errlen)
{
	int dev = 0;
	cudaError_t ce = cudaGetDevice(&dev);

	if (ce != cudaSuccess)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: cudaGetDevice: %s",
		                    cudaGetErrorString(ce));
	if (dev < 0 || dev >= RL_GEMM_DEVICES)
		return rl_gemm_fail(err, errlen, "rl_cuda_gemm: device %d beyond the %d supported",
		                    dev, RL_GEMM_DEVICES);

	struct rl_gemm_key key = rl_gemm_key_of(g, dev);
	cublasComputeType_t compute = key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	cudaDataType_t abt = rl_gemm_cuda_type(g->ab_type), ct = rl_gemm_cuda_type(g->c_type);
	int32_t op_a = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A: our B */
	int32_t op_b = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's B: our A */
	uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
	const void *bias = g->bias;
	cublasLtMatmulDesc_t desc = NULL;
	cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
	cublasLtHandle_t handle = NULL;
	cublasLtMatmulAlgo_t algo;
	bool epi = false;
	void *ws = NULL;
	const char *what = "cublasLtMatmulDescCreate";
	cublasStatus_t s;
	int rc = -1;

	memset(&algo, 0, sizeof(algo));
	s = cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F);
	if (s != CUBLAS_STATUS_SUCCESS)
		goto lt_fail;
	what = "cublasLtMatmulDescSetAttribute";
	s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
	if (s == CUBLAS_STATUS_SUCCESS)
		s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b,
		                                   sizeof(op_b));
	/* The bias type defaults to D's, which is C's here: the contract's
	 * (gemm.h). The pointer goes in before the heuristic, which reads its
	 * alignment. */
	if (s == CUBLAS_STATUS_SUCCESS && bias)
		s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
		                                   sizeof(epilogue));
	if (s == CUBLAS_STATUS_SUCCESS && bias)
		s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
		                                   sizeof(bias));
	if (s != CUBLAS_STATUS_SUCCESS)
		goto lt_fail;

	/* Stored shapes, column-major: our B [k, n] (trans_b: [n, k]) reads as
	 * [n, k] ([k, n]); our A [m, k] ([k, m]) as [k, m] ([m, k]); C as [n, m]. */
	what = "cublasLtMatrixLayoutCreate";
	s = cublasLtMatrixLayoutCreate(&la, abt, g->trans_b ? g->k : g->n, g->trans_b ? g->n : g->k,
	                               g->ldb);
	if (s == CUBLAS_STATUS_SUCCESS)
		s = cublasLtMatrixLayoutCreate(&lb, abt, g->trans_a ? g->m : g->k,
		                               g->trans_a ? g->k : g->m, g->lda);
	if (s == CUBLAS_STATUS_SUCCESS)
		s = cublasLtMatrixLayoutCreate(&lc, ct, g->n, g->m, g->ldc);
	if (s != CUBLAS_STATUS_SUCCESS)
		goto lt_fail;

	pthread_mutex_lock(&rl_gemm_lock);
	rc = rl_gemm_resources(dev, st, &handle, &ws, err, errlen);
	if (rc == 0)
		rc = rl_gemm_algo(&key, handle, desc, la, lb, lc, &algo, &epi, err, errlen);
	pthread_mutex_unlock(&rl_gemm_lock);
	if (rc != 0)
		goto lt_done;

	what = "cublasLtMatmul";
	s = cublasLtMatmul(handle, desc, &g->alpha, g->b, la, g->a, lb, &g->beta, g->c, lc, g->c,
	                   lc, &algo, ws, RL_GEMM_WORKSPACE, st);
	if (s != CUBLAS_STATUS_SUCCESS)
		goto lt_fail;
	rc = bias && !epi ? rl_gemm_add_bias(g, st, err, errlen) : 0;
	goto lt_done;

lt_fail:
	rc = rl_gemm_fail(err, errlen, "rl_cuda_gemm: %s (m %d n %d k %d): %s", what, g->m, g->n,
	                  g->k, cublasLtGetStatusString(s));
lt_done:
	if (lc)
		cublasLtMatrixLayoutDestroy(lc);
	if (lb)
		cublasLtMatrixLayoutDestroy(lb);
	if (la)
		cublasLtMatrixLayoutDestroy(la);
	if (desc)
		cublasLtMatmulDescDestroy(desc);
	return rc;
}

extern "C" int rl_cuda_gemm(const struct rl_gemm *g, void *stream, char *err, size_t errlen)
{
	if (rl_gemm_check(g, err, errlen) != 0)
		return -1;
	if (g->m == 0 || g->n == 0)
		return 0;

	cudaStream_t st = rl_stream(stream);

	if (g->k == 0)
		return rl_gemm_scale(g, g->beta, st, err, errlen);
	return rl_gemm_lt(g, st, err, errlen);
}
