/* Linear layer on rl_cuda_gemm: one GEMM for the forward (the bias in its
 * epilogue), one per input-side and weight-side gradient, accumulating
 * (beta = 1). TF32 stays off, so fp32 operands give fp32 products, like the
 * CPU's; bf16 operands go through the tensor cores with fp32 accumulation,
 * the output rounded once (to a bf16 y or dx; dW stays fp32: main_grad).
 *
 * The bias gradient is a column sum of dy [n, out] in a fixed order: the
 * rows are cut into chunks, a block sums one chunk of 32 columns (8 row
 * lanes, then the lanes in order) into a per-chunk partial, and a second
 * kernel adds the partials in chunk order. No atomics, so the same inputs
 * give the same bits on every run. Sums are in double, as the CPU's are. */
#include <pthread.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/linear.h"

#define RL_BIAS_COLS    32 /* one warp of consecutive columns: coalesced rows */
#define RL_BIAS_LANES   8
#define RL_BIAS_CHUNKS  64        /* at most, per column */
#define RL_BIAS_ROWS    256       /* at least, per chunk */
#define RL_BIAS_SCRATCH (1 << 18) /* doubles per stream (2 MiB): the partials */
#define RL_BIAS_DEVICES 16
#define RL_BIAS_STREAMS 8 /* per device */

/* Partials per (device, stream), allocated on first use and kept: a shared
 * buffer would race between streams that do not wait on each other. */
struct rl_bias_scratch {
	int device;
	cudaStream_t stream;
	double *buf;
};

static pthread_mutex_t rl_bias_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rl_bias_scratch rl_bias_scratch[RL_BIAS_DEVICES * RL_BIAS_STREAMS];
static int rl_bias_nscratch;

static int bad_shape(int n, int in_dim, int out_dim)
{
	return n < 0 || in_dim <= 0 || out_dim <= 0;
}

extern "C" int rl_linear_forward_cuda(struct rl_buf y, struct rl_cbuf x, struct rl_cbuf w,
                                      struct rl_cbuf bias, int n, int in_dim, int out_dim,
                                      void *stream)
{
	if (!y.p || !x.p || !w.p || bad_shape(n, in_dim, out_dim) ||
	    !rl_linear_forward_types_ok(y, x, w, bias))
		return -1;
	if (n == 0)
		return 0;

	/* y [n, out] = x [n, in] (W [out, in])^T; the bias is y's type (a bias
	 * is only allowed where y is the inputs' type) */
	return rl_gemm_typed(n, out_dim, in_dim, false, x.p, in_dim, true, w.p, in_dim, y.p,
	                     out_dim, 1.0f, 0.0f, bias.p, x.t, y.t, stream);
}

/* partial[chunk][col] (or dbias[col] += it, with one chunk) = the sum of
 * dy[row][col] over the chunk's rows. Block (RL_BIAS_COLS, RL_BIAS_LANES):
 * lane ty takes rows ty, ty + LANES, ...; the lanes are added in order. */
static __device__ __forceinline__ double rl_bias_load(const float *p)
{
	return (double)*p;
}

static __device__ __forceinline__ double rl_bias_load(const __nv_bfloat16 *p)
{
	return (double)__bfloat162float(*p);
}

template <typename T>
static __global__ void __launch_bounds__(RL_BIAS_COLS *RL_BIAS_LANES)
    rl_bias_partial_kernel(double *partial, float *dbias, const T *__restrict__ dy, int n,
                           int out_dim, int rows_per_chunk)
{
	__shared__ double lane_sums[RL_BIAS_LANES][RL_BIAS_COLS];
	int col = blockIdx.x * RL_BIAS_COLS + threadIdx.x;
	int chunk = blockIdx.y;
	int64_t r0 = (int64_t)chunk * rows_per_chunk;
	int64_t r1 = r0 + rows_per_chunk < n ? r0 + rows_per_chunk : n;
	double acc = 0.0;

	if (col < out_dim)
		for (int64_t r = r0 + threadIdx.y; r < r1; r += RL_BIAS_LANES)
			acc += rl_bias_load(dy + r * out_dim + col);
	lane_sums[threadIdx.y][threadIdx.x] = acc;
	__syncthreads();
	if (threadIdx.y != 0 || col >= out_dim)
		return;
	for (int l = 1; l < RL_BIAS_LANES; l++)
		acc += lane_sums[l][threadIdx.x];
	if (partial)
		partial[(int64_t)chunk * out_dim + col] = acc;
	else
		dbias[col] += (float)acc;
}

static __global__ void rl_bias_finish_kernel(float *dbias, const double *partial, int out_dim,
                                             int chunks)
{
	int col = blockIdx.x * blockDim.x + threadIdx.x;

	if (col >= out_dim)
		return;
	double acc = 0.0;
	for (int c = 0; c < chunks; c++)
		acc += partial[(int64_t)c * out_dim + col];
	dbias[col] += (float)acc;
}

/* The stream's partials buffer, or NULL when none can be had. */
static double *rl_bias_partials(cudaStream_t st)
{
	int dev = 0;
	double *buf = NULL;

	if (cudaGetDevice(&dev) != cudaSuccess)
		return NULL;
	pthread_mutex_lock(&rl_bias_lock);
	for (int i = 0; i < rl_bias_nscratch && !buf; i++)
		if (rl_bias_scratch[i].device == dev && rl_bias_scratch[i].stream == st)
			buf = rl_bias_scratch[i].buf;
	if (!buf && rl_bias_nscratch < RL_BIAS_DEVICES * RL_BIAS_STREAMS) {
		if (cudaMalloc((void **)&buf, RL_BIAS_SCRATCH * sizeof(double)) == cudaSuccess) {
			rl_bias_scratch[rl_bias_nscratch].device = dev;
			rl_bias_scratch[rl_bias_nscratch].stream = st;
			rl_bias_scratch[rl_bias_nscratch].buf = buf;
			rl_bias_nscratch++;
		} else {
			/* a refused cudaMalloc also sets the last error: clear it, or
			 * the next op's rl_launched() reports it as its own failure */
			(void)cudaGetLastError();
			buf = NULL;
		}
	}
	pthread_mutex_unlock(&rl_bias_lock);
	return buf;
}

static int rl_bias_grad(float *dbias, struct rl_cbuf dy, int n, int out_dim, cudaStream_t st)
{
	/* The chunk count depends on the shape only, so the order of the sums
	 * (and the bits) does too. Chunks of >= RL_BIAS_ROWS rows keep the
	 * partials pass cheap next to the first; a wide out_dim gets fewer. */
	int64_t chunks = rl_ceil_div(n, RL_BIAS_ROWS);
	int64_t fit = RL_BIAS_SCRATCH / out_dim;

	if (chunks > RL_BIAS_CHUNKS)
		chunks = RL_BIAS_CHUNKS;
	if (chunks > fit)
		chunks = fit;
	if (chunks < 1)
		chunks = 1;

	int rows_per_chunk = (int)rl_ceil_div(n, chunks);
	double *partial = NULL;

	chunks = rl_ceil_div(n, rows_per_chunk); /* no empty chunk at the end */
	if (chunks > 1) {
		partial = rl_bias_partials(st);
		if (!partial)
			return -1;
	}

	dim3 block(RL_BIAS_COLS, RL_BIAS_LANES);
	dim3 grid((unsigned)rl_ceil_div(out_dim, RL_BIAS_COLS), (unsigned)chunks);

	if (dy.t == RL_BF16)
		rl_bias_partial_kernel<<<grid, block, 0, st>>>(
		    partial, dbias, (const __nv_bfloat16 *)dy.p, n, out_dim, rows_per_chunk);
	else
		rl_bias_partial_kernel<<<grid, block, 0, st>>>(partial, dbias, (const float *)dy.p,
		                                               n, out_dim, rows_per_chunk);
	if (rl_launched() != 0)
		return -1;
	if (!partial)
		return 0;
	rl_bias_finish_kernel<<<(unsigned)rl_ceil_div(out_dim, 256), 256, 0, st>>>(
	    dbias, partial, out_dim, (int)chunks);
	return rl_launched();
}

extern "C" int rl_linear_backward_cuda(struct rl_buf dx, float *dw, float *dbias, struct rl_cbuf dy,
                                       struct rl_cbuf x, struct rl_cbuf w, int n, int in_dim,
                                       int out_dim, void *stream)
{
	if (!dy.p || bad_shape(n, in_dim, out_dim) || (dx.p && !w.p) || (dw && !x.p) ||
	    !rl_linear_backward_types_ok(dx, dy, x, w))
		return -1;
	if (n == 0)
		return 0;

	/* dx [n, in] += dy [n, out] W [out, in], rounded to dx's type */
	if (dx.p && rl_gemm_typed(n, in_dim, out_dim, false, dy.p, out_dim, false, w.p, in_dim,
	                          dx.p, in_dim, 1.0f, 1.0f, NULL, dy.t, dx.t, stream))
		return -1;
	/* dW [out, in] += dy^T [out, n] x [n, in] in fp32; dy is stored [n, out] */
	if (dw && rl_gemm_typed(out_dim, in_dim, n, true, dy.p, out_dim, false, x.p, in_dim, dw,
	                        in_dim, 1.0f, 1.0f, NULL, dy.t, RL_F32, stream))
		return -1;
	if (dbias)
		return rl_bias_grad(dbias, dy, n, out_dim, rl_stream(stream));
	return 0;
}
