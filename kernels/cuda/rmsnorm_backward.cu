/* RMSNorm backward, the math of kernels/cpu/rmsnorm_backward.c: with
 * r = rstd, dx += r (dy w - x c) where c = r^2 sum(dy w x) / dim, and
 * dweight += sum over rows of dy x r. Sums are taken in double as the CPU
 * does, and the elementwise float steps are the CPU's, unfused (__f*_rn), so
 * the two backends differ only where a double sum, added in another order,
 * rounds to another float.
 *
 * dx: one block per row. dweight: thread per column over a chunk of rows,
 * each chunk's double partial in scratch, then one pass adds the chunks in
 * order. The chunks depend only on the shape, so the bits do not depend on
 * the GPU. This reads dy and x twice (once per kernel); fusing would save a
 * pass at the price of a rows x dim scratch or atomics. bf16 buffers
 * (T = uint16_t) are widened on load; dx is rounded once, after its add. */
#include <stdint.h>

#include "kernels/cuda/common.cuh"
#include "kernels/memory.h"
#include "kernels/rmsnorm.h"

#define RL_RMSB_THREADS 256
/* columns per block of the dweight kernels */
#define RL_RMSB_COLS 128
/* a dweight chunk has at least CHUNK_MIN rows and there are at most
 * MAX_CHUNKS of them: 8 * MAX_CHUNKS * dim bytes of scratch at most */
#define RL_RMSB_CHUNK_MIN  32
#define RL_RMSB_MAX_CHUNKS 256

template <typename T>
static __global__ void __launch_bounds__(RL_RMSB_THREADS)
    rl_rmsnorm_backward_dx_kernel(T *__restrict__ dx, const T *__restrict__ dy,
                                  const T *__restrict__ x, const T *__restrict__ w,
                                  const float *__restrict__ rstd, int dim)
{
	size_t off = (size_t)blockIdx.x * dim;
	const T *dyr = dy + off, *xr = x + off;
	T *dxr = dx + off;
	float r = rstd[blockIdx.x];
	double s = 0.0;

	for (int i = threadIdx.x; i < dim; i += RL_RMSB_THREADS)
		s += (double)rl_widen(dyr[i]) * (double)rl_widen(w[i]) * (double)rl_widen(xr[i]);
	s = rl_block_sum<RL_RMSB_THREADS>(s);

	float c = (float)((double)r * (double)r * s / dim);

	for (int i = threadIdx.x; i < dim; i += RL_RMSB_THREADS) {
		float g = __fsub_rn(__fmul_rn(rl_widen(dyr[i]), rl_widen(w[i])),
		                    __fmul_rn(rl_widen(xr[i]), c));

		rl_narrow_store(dxr + i, __fadd_rn(rl_widen(dxr[i]), __fmul_rn(r, g)));
	}
}

/* partial[chunk][col] = sum over the chunk's rows of dy x r, in row order */
template <typename T>
static __global__ void __launch_bounds__(RL_RMSB_COLS)
    rl_rmsnorm_backward_dw_kernel(double *__restrict__ partial, const T *__restrict__ dy,
                                  const T *__restrict__ x, const float *__restrict__ rstd, int rows,
                                  int dim, int chunk_rows)
{
	int col = blockIdx.x * RL_RMSB_COLS + threadIdx.x;
	int r0 = blockIdx.y * chunk_rows;
	int r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
	double acc = 0.0;

	if (col >= dim)
		return;
	for (int r = r0; r < r1; r++) {
		size_t i = (size_t)r * dim + col;

		acc += (double)rl_widen(dy[i]) * (double)rl_widen(x[i]) * (double)rstd[r];
	}
	partial[(size_t)blockIdx.y * dim + col] = acc;
}

static __global__ void __launch_bounds__(RL_RMSB_COLS)
    rl_rmsnorm_backward_dw_sum_kernel(float *__restrict__ dweight,
                                      const double *__restrict__ partial, int nchunk, int dim)
{
	int col = blockIdx.x * RL_RMSB_COLS + threadIdx.x;
	double acc = 0.0;

	if (col >= dim)
		return;
	for (int k = 0; k < nchunk; k++)
		acc += partial[(size_t)k * dim + col];
	dweight[col] = __fadd_rn(dweight[col], (float)acc);
}

template <typename T>
static int rl_rmsnorm_backward_typed(T *dx, float *dweight, const T *dy, const T *x,
                                     const T *weight, const float *rstd, int rows, int dim,
                                     void *stream)
{
	cudaStream_t st = rl_stream(stream);

	rl_rmsnorm_backward_dx_kernel<T>
	    <<<rows, RL_RMSB_THREADS, 0, st>>>(dx, dy, x, weight, rstd, dim);
	if (rl_launched())
		return -1;
	if (!dweight)
		return 0;

	int chunk_rows = (int)rl_ceil_div(rows, RL_RMSB_MAX_CHUNKS);

	if (chunk_rows < RL_RMSB_CHUNK_MIN)
		chunk_rows = RL_RMSB_CHUNK_MIN;

	int nchunk = (int)rl_ceil_div(rows, chunk_rows);
	unsigned col_blocks = (unsigned)rl_ceil_div(dim, RL_RMSB_COLS);
	double *partial =
	    (double *)rl_cuda_alloc_async((size_t)nchunk * dim * sizeof(double), stream);

	if (!partial)
		return -1;
	rl_rmsnorm_backward_dw_kernel<T>
	    <<<dim3(col_blocks, (unsigned)nchunk), RL_RMSB_COLS, 0, st>>>(partial, dy, x, rstd,
	                                                                  rows, dim, chunk_rows);
	int rc = rl_launched();

	if (rc == 0) {
		rl_rmsnorm_backward_dw_sum_kernel<<<col_blocks, RL_RMSB_COLS, 0, st>>>(
		    dweight, partial, nchunk, dim);
		rc = rl_launched();
	}
	/* ordered on the stream: not reused before the kernels above are done */
	rl_cuda_release_async(partial, stream);
	return rc;
}

extern "C" int rl_rmsnorm_backward_cuda(struct rl_buf dx, float *dweight, struct rl_cbuf dy,
                                        struct rl_cbuf x, struct rl_cbuf weight, const float *rstd,
                                        int rows, int dim, void *stream)
{
	if (!dx.p || !dy.p || !x.p || !weight.p || !rstd || rows < 0 || dim <= 0 ||
	    !rl_rmsnorm_types_ok(dx.t, x.t, weight.t) || dy.t != x.t)
		return -1;
	if (rows == 0)
		return 0;
	if (x.t == RL_BF16)
		return rl_rmsnorm_backward_typed((uint16_t *)dx.p, dweight, (const uint16_t *)dy.p,
		                                 (const uint16_t *)x.p, (const uint16_t *)weight.p,
		                                 rstd, rows, dim, stream);
	return rl_rmsnorm_backward_typed((float *)dx.p, dweight, (const float *)dy.p,
	                                 (const float *)x.p, (const float *)weight.p, rstd, rows,
	                                 dim, stream);
}
