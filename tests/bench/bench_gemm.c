/* GEMM throughput: rl_cuda_gemm (the algorithm its cached heuristic picks)
 * beside the fastest of the algorithms cuBLASLt's heuristic offers for the
 * same product and the same workspace ("best"), for the shapes of a ~1B
 * Llama (hidden 2048, intermediate 8192, 8192 tokens) and two cubes, in
 * bf16 -> bf16 and fp32 -> fp32 with TF32 on and off. The product is the
 * linear layer's forward, row-major C [m, n] = A [m, k] B^T, B stored
 * [n, k]. Times come from CUDA events around a batch of back-to-back calls
 * (so the host's descriptor work overlaps the GPU's), the median of
 * SAMPLES batches after a warm-up. A ratio near 1 says the heuristic's
 * first choice is as good as cuBLASLt gets for the shape. */
#ifdef HAVE_CONFIG_H
#include "build_config.h"
#endif

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RL_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/gemm.h"
#include "kernels/dtype.h"

#define SAMPLES   9
#define MAX_ALGOS 16
#define BATCH_MS  2.0 /* a batch is at least this long, so event resolution is noise */

struct mode {
	const char *name;
	enum rl_dtype ab, c;
	bool tf32;
};

static const struct mode modes[] = {
    {"bf16->bf16", RL_BF16, RL_BF16, false},
    {"fp32 tf32", RL_F32, RL_F32, true},
    {"fp32", RL_F32, RL_F32, false},
};

/* m (tokens), n (out features), k (in features) */
static const int shapes[][3] = {
    {8192, 2048, 2048}, /* attention q / o projection */
    {8192, 8192, 2048}, /* MLP gate / up */
    {8192, 2048, 8192}, /* MLP down */
    {4096, 4096, 4096}, {8192, 8192, 8192},
};

typedef int (*call_fn)(void *ctx);

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Milliseconds per call, the median over SAMPLES batches; -1 when a call
 * or an event fails. */
static double time_ms(call_fn fn, void *ctx, cudaStream_t st)
{
	cudaEvent_t e0, e1;
	double samples[SAMPLES], ms = -1.0;
	float el = 0.0f;
	int batch = 1;

	if (cudaEventCreate(&e0) != cudaSuccess)
		return -1.0;
	if (cudaEventCreate(&e1) != cudaSuccess) {
		cudaEventDestroy(e0);
		return -1.0;
	}
	/* warm-up, which also sizes the batch */
	if (cudaEventRecord(e0, st) || fn(ctx) || fn(ctx) || cudaEventRecord(e1, st) ||
	    cudaEventSynchronize(e1) || cudaEventElapsedTime(&el, e0, e1))
		goto out;
	if (el > 0.0f)
		batch = (int)ceil(BATCH_MS / (el / 2.0));
	batch = batch < 1 ? 1 : batch > 100 ? 100 : batch;
	for (int s = 0; s < SAMPLES; s++) {
		if (cudaEventRecord(e0, st))
			goto out;
		for (int b = 0; b < batch; b++)
			if (fn(ctx))
				goto out;
		if (cudaEventRecord(e1, st) || cudaEventSynchronize(e1) ||
		    cudaEventElapsedTime(&el, e0, e1))
			goto out;
		samples[s] = (double)el / batch;
	}
	qsort(samples, SAMPLES, sizeof(samples[0]), cmp_double);
	ms = samples[SAMPLES / 2];
out:
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return ms;
}

struct ours {
	struct rl_gemm g;
	cudaStream_t st;
	char err[256];
};

static int call_ours(void *p)
{
	struct ours *o = p;
	return rl_cuda_gemm(&o->g, o->st, o->err, sizeof(o->err));
}

struct lt {
	cublasLtHandle_t handle;
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t la, lb, lc;
	cublasLtMatmulAlgo_t algo;
	const struct rl_gemm *g;
	void *ws;
	size_t ws_bytes;
	cudaStream_t st;
};

/* The same operand swap as rl_cuda_gemm: cuBLASLt's A is our B. */
static int call_lt(void *p)
{
	struct lt *l = p;
	const struct rl_gemm *g = l->g;

	return cublasLtMatmul(l->handle, l->desc, &g->alpha, g->b, l->la, g->a, l->lb, &g->beta,
	                      g->c, l->lc, g->c, l->lc, &l->algo, l->ws, l->ws_bytes,
	                      l->st) != CUBLAS_STATUS_SUCCESS;
}

static cudaDataType_t cuda_type(enum rl_dtype t)
{
	return t == RL_F32 ? CUDA_R_32F : t == RL_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* The fastest of the heuristic's offers, in ms; *tried gets how many ran. */
static double best_ms(struct lt *l, const struct mode *md, int *tried)
{
	const struct rl_gemm *g = l->g;
	cublasComputeType_t compute = md->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	int32_t op_a = CUBLAS_OP_T, op_b = CUBLAS_OP_N; /* our B^T, our A as stored */
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res[MAX_ALGOS];
	uint64_t ws = l->ws_bytes;
	int found = 0;
	double best = -1.0;

	*tried = 0;
	l->desc = NULL;
	l->la = l->lb = l->lc = NULL;
	if (cublasLtMatmulDescCreate(&l->desc, compute, CUDA_R_32F) ||
	    cublasLtMatmulDescSetAttribute(l->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a,
	                                   sizeof(op_a)) ||
	    cublasLtMatmulDescSetAttribute(l->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b,
	                                   sizeof(op_b)) ||
	    cublasLtMatrixLayoutCreate(&l->la, cuda_type(md->ab), g->k, g->n, g->ldb) ||
	    cublasLtMatrixLayoutCreate(&l->lb, cuda_type(md->ab), g->k, g->m, g->lda) ||
	    cublasLtMatrixLayoutCreate(&l->lc, cuda_type(md->c), g->n, g->m, g->ldc) ||
	    cublasLtMatmulPreferenceCreate(&pref) ||
	    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
	                                         &ws, sizeof(ws)) ||
	    cublasLtMatmulAlgoGetHeuristic(l->handle, l->desc, l->la, l->lb, l->lc, l->lc, pref,
	                                   MAX_ALGOS, res, &found))
		found = 0;
	for (int i = 0; i < found; i++) {
		if (res[i].state != CUBLAS_STATUS_SUCCESS)
			continue;
		l->algo = res[i].algo;
		double ms = time_ms(call_lt, l, l->st);
		if (ms <= 0.0)
			continue;
		++*tried;
		if (best < 0.0 || ms < best)
			best = ms;
	}
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	if (l->lc)
		cublasLtMatrixLayoutDestroy(l->lc);
	if (l->lb)
		cublasLtMatrixLayoutDestroy(l->lb);
	if (l->la)
		cublasLtMatrixLayoutDestroy(l->la);
	if (l->desc)
		cublasLtMatmulDescDestroy(l->desc);
	return best;
}

/* n elements of type t, uniform in [-1, 1), made on the host in one tile
 * and copied over the device buffer. */
static void *device_random(enum rl_dtype t, size_t n)
{
	enum { TILE = 1 << 20 };
	size_t es = rl_dtype_size(t), bytes = n * es, tile_bytes = TILE * es;
	unsigned char *tile = malloc(tile_bytes);
	unsigned char *dev = NULL;
	uint32_t s = 0x9e3779b9u;

	if (!tile || cudaMalloc((void **)&dev, bytes) != cudaSuccess) {
		free(tile);
		return NULL;
	}
	for (size_t i = 0; i < TILE; i++) {
		s ^= s << 13;
		s ^= s >> 17;
		s ^= s << 5;
		float v = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
		if (t == RL_F32) {
			memcpy(tile + i * 4, &v, 4);
		} else {
			uint16_t h = t == RL_BF16 ? rl_f32_to_bf16(v) : rl_f32_to_f16(v);
			memcpy(tile + i * 2, &h, 2);
		}
	}
	for (size_t off = 0; off < bytes; off += tile_bytes) {
		size_t len = bytes - off < tile_bytes ? bytes - off : tile_bytes;
		if (cudaMemcpy(dev + off, tile, len, cudaMemcpyHostToDevice) != cudaSuccess) {
			cudaFree(dev);
			dev = NULL;
			break;
		}
	}
	free(tile);
	return dev;
}

static int bench_one(const struct mode *md, const int *shape, cublasLtHandle_t handle, void *ws,
                     cudaStream_t st)
{
	int m = shape[0], n = shape[1], k = shape[2];
	struct ours o;
	struct lt l;
	int tried = 0, rc = 1;

	memset(&o, 0, sizeof(o));
	o.st = st;
	o.g.m = m;
	o.g.n = n;
	o.g.k = k;
	o.g.trans_b = true;
	o.g.lda = k;
	o.g.ldb = k;
	o.g.ldc = n;
	o.g.alpha = 1.0f;
	o.g.beta = 0.0f;
	o.g.ab_type = md->ab;
	o.g.c_type = md->c;
	o.g.tf32 = md->tf32;
	o.g.a = device_random(md->ab, (size_t)m * k);
	o.g.b = device_random(md->ab, (size_t)n * k);
	if (cudaMalloc(&o.g.c, (size_t)m * n * rl_dtype_size(md->c)) != cudaSuccess)
		o.g.c = NULL;
	if (!o.g.a || !o.g.b || !o.g.c) {
		fprintf(stderr, "bench_gemm: out of device memory for %dx%dx%d\n", m, n, k);
		goto out;
	}

	double t_ours = time_ms(call_ours, &o, st);
	if (t_ours <= 0.0) {
		fprintf(stderr, "bench_gemm: rl_cuda_gemm %s %dx%dx%d failed: %s\n", md->name, m, n,
		        k, o.err[0] ? o.err : "event error");
		goto out;
	}
	memset(&l, 0, sizeof(l));
	l.handle = handle;
	l.g = &o.g;
	l.ws = ws;
	l.ws_bytes = rl_cuda_gemm_workspace_bytes();
	l.st = st;

	double t_best = best_ms(&l, md, &tried);
	double flop = 2.0 * m * n * (double)k;

	if (t_best > 0.0)
		printf("%-10s %5d %5d %5d %10.1f %10.1f %7.3f %6d\n", md->name, m, n, k,
		       flop / (t_ours * 1e-3) / 1e12, flop / (t_best * 1e-3) / 1e12,
		       t_best / t_ours, tried);
	else
		printf("%-10s %5d %5d %5d %10.1f %10s %7s %6d\n", md->name, m, n, k,
		       flop / (t_ours * 1e-3) / 1e12, "-", "-", tried);
	rc = 0;
out:
	cudaFree((void *)o.g.a);
	cudaFree((void *)o.g.b);
	cudaFree(o.g.c);
	return rc;
}

int main(void)
{
	int count = 0;
	cudaError_t err = cudaGetDeviceCount(&count);
	struct cudaDeviceProp prop;
	cublasLtHandle_t handle = NULL;
	cudaStream_t st = NULL;
	void *ws = NULL;
	int rc = 1;

	if (err != cudaSuccess || count == 0) {
		printf("bench_gemm: skipped: no CUDA device (%s)\n",
		       err != cudaSuccess ? cudaGetErrorString(err)
		                          : "cudaGetDeviceCount found none");
		return 0;
	}
	if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
	    cudaStreamCreate(&st) != cudaSuccess ||
	    cudaMalloc(&ws, rl_cuda_gemm_workspace_bytes()) != cudaSuccess ||
	    cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "bench_gemm: CUDA setup failed\n");
		goto out;
	}
	printf("bench_gemm: %s, C = A B^T row-major, workspace %zu MiB, median of %d batches\n",
	       prop.name, rl_cuda_gemm_workspace_bytes() >> 20, SAMPLES);
	printf("%-10s %5s %5s %5s %10s %10s %7s %6s\n", "mode", "m", "n", "k", "ours TF/s",
	       "best TF/s", "ratio", "algos");
	rc = 0;
	for (size_t md = 0; md < sizeof(modes) / sizeof(modes[0]); md++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			rc |= bench_one(&modes[md], shapes[s], handle, ws, st);
out:
	if (handle)
		cublasLtDestroy(handle);
	if (ws)
		cudaFree(ws);
	if (st)
		cudaStreamDestroy(st);
	return rc;
}

#else

int main(void)
{
	printf("bench_gemm: skipped: built without --with-cuda\n");
	return 0;
}

#endif
