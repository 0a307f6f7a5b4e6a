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
 * pass at the price of a rows x dim scratch or atomics. */
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

static __global__ void __launch_bounds__(RL_RMSB_THREADS)
    rl_rmsnorm_backward_dx_kernel(float *__restrict__ dx, const float *__restrict__ dy,
                                  const float *__restrict__ x, const float *__restrict__ w,
                                  const float *__restrict__ rstd, int dim)
{
	size_t off = (size_t)blockIdx.x * dim;
	const float *dyr = dy + off, *xr = x + off;
	float *dxr = dx + off;
	float r = rstd[blockIdx.x];
	double s = 0.0;

	for (int i = threadIdx.x; i < dim; i += RL_RMSB_THREADS)
		s += (double)dyr[i] * (double)w[i] * (double)xr[i];
	s = rl_block_sum<RL_RMSB_THREADS>(s);

	float c = (float)((double)r * (double)r * s / dim);

	for (int i = threadIdx.x; i < dim; i += RL_RMSB_THREADS) {
		float g = __fsub_rn(__fmul_rn(dyr[i], w[i]), __fmul_rn(xr[i], c));

		dxr[i] = __fadd_rn(dxr[i], __fmul_rn(r, g));
	}
}

/* partial[chunk][col] = sum over the chunk's rows of dy x r, in row order */
static __global__ void __launch_bounds__(RL_RMSB_COLS)
    rl_rmsnorm_backward_dw_kernel(double *__restrict__ partial, const float *__restrict__ dy,
                                  const float *__restrict__ x, const float *__restrict__ rstd,
                                  int rows, int dim, int chunk_rows)
{
	int col = blockIdx.x * RL_RMSB_COLS + threadIdx.x;
	int r0 = blockIdx.y * chunk_rows;
	int r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
	double acc = 0.0;

	if (col >= dim)
		return;
	for (int r = r0; r < r1; r++) {
		size_t i = (size_t)r * dim + col;

		acc += (double)dy[i] * (double)x[i] * (double)rstd[r];
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

extern "C" int rl_rmsnorm_backward_cuda(float *dx, float *dweight, const float *dy, const float *x,
                                        const float *weight, const float *rstd, int rows, int dim,
                                        void *stream)
{
	if (!dx || !dy || !x || !weight || !rstd || rows < 0 || dim <= 0)
		return -1;
	if (rows == 0)
		return 0;

	cudaStream_t st = rl_stream(stream);

	rl_rmsnorm_backward_dx_kernel<<<rows, RL_RMSB_THREADS, 0, st>>>(dx, dy, x, weight, rstd,
	                                                                dim);
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
	rl_rmsnorm_backward_dw_kernel<<<dim3(col_blocks, (unsigned)nchunk), RL_RMSB_COLS, 0, st>>>(
	    partial, dy, x, rstd, rows, dim, chunk_rows);
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
