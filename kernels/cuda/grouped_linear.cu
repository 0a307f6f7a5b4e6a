/* The grouped GEMM of a mixture-of-experts layer: one launch for every
 * expert's rows, fp32 SIMT tiles in shared memory.
 *
 * The host knows the group offsets (the router ran there), so it cuts the
 * work into a table of tiles before the launch: for the forward and dx one
 * entry per 64-row tile of a group, for dW one entry per non-empty group.
 * Block x takes table entry x; the output's columns (and for dW its rows)
 * are grid y and z, walked in a loop when there are more than a grid
 * dimension holds. Every output element is one thread's sum over k in
 * order, so no atomics are needed and a repeated call gives the same bits;
 * the weight gradient sums its group's rows the same way, whatever their
 * number.
 *
 * The table travels as stream-ordered scratch from the memory pool
 * (rl_cuda_alloc_async): a cudaMalloc'ed buffer kept per stream would need
 * a per-(device, stream) cache and a size to outgrow, while the pool serves
 * a freed block again without a cudaMalloc and its release waits, in stream
 * order, for the kernel that reads it. The upload is from pageable memory,
 * which cudaMemcpyAsync has consumed (staged) when it returns, so the host
 * copy is freed at once and the op does not synchronise. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#include "kernels/cuda/common.cuh"
#include "kernels/memory.h"
#include "kernels/linear.h"
#include "kernels/moe.h"

#define GL_TM      64 /* output rows of a tile */
#define GL_TN      64 /* output columns of a tile */
#define GL_TK      16 /* the k chunk staged in shared memory */
#define GL_PAD     4  /* skews the shared rows off a common bank */
#define GL_THREADS 256
#define GL_SPAN    16 /* threads along a tile's side: each has 4 x 4 outputs */
#define GL_GRID_YZ 65535

static_assert(GL_SPAN * GL_SPAN == GL_THREADS && GL_SPAN * 4 == GL_TM && GL_SPAN * 4 == GL_TN,
              "16 x 16 threads of 4 x 4 outputs cover a 64 x 64 tile");
static_assert(GL_TM * GL_TK == 4 * GL_THREADS && GL_TN * GL_TK == 4 * GL_THREADS,
              "each thread stages 4 values of each operand per k chunk");

/* Rows [row0, row1) of x, y, dy go through weight group. */
struct gl_entry {
	int32_t group;
	int32_t row0;
	int32_t row1;
};

/* C[m, n] (+)= sum over k < k_len of A(m, k) B(k, n) for m0 <= m < m0 + 64,
 * n0 <= n < n0 + 64, bounded by m_len and n_len. A(m, k) is a[m lda + k]
 * when A_K (k contiguous), a[k lda + m] otherwise; B(k, n) is b[n ldb + k]
 * when B_K, b[k ldb + n] otherwise. Out-of-range operands are staged as 0,
 * and those zeros only meet each other or outputs that are not written. */
template <bool A_K, bool B_K, bool ADD>
static __device__ __forceinline__ void
gl_tile(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int m_len,
        int n_len, int k_len, int m0, int n0, float (*as)[GL_TM + GL_PAD],
        float (*bs)[GL_TN + GL_PAD])
{
	int tid = threadIdx.x, tx = tid % GL_SPAN, ty = tid / GL_SPAN;
	float acc[4][4];

#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++)
			acc[i][j] = 0.0f;

	for (int k0 = 0; k0 < k_len; k0 += GL_TK) {
		/* the contiguous index runs along consecutive threads: coalesced */
#pragma unroll
		for (int l = 0; l < 4; l++) {
			int idx = tid + l * GL_THREADS;
			int mm = A_K ? idx / GL_TK : idx % GL_TM;
			int kk = A_K ? idx % GL_TK : idx / GL_TM;
			int m = m0 + mm, k = k0 + kk;
			float v = 0.0f;

			if (m < m_len && k < k_len)
				v = A_K ? a[(int64_t)m * lda + k] : a[(int64_t)k * lda + m];
			as[kk][mm] = v;
		}
#pragma unroll
		for (int l = 0; l < 4; l++) {
			int idx = tid + l * GL_THREADS;
			int nn = B_K ? idx / GL_TK : idx % GL_TN;
			int kk = B_K ? idx % GL_TK : idx / GL_TN;
			int n = n0 + nn, k = k0 + kk;
			float v = 0.0f;

			if (n < n_len && k < k_len)
				v = B_K ? b[(int64_t)n * ldb + k] : b[(int64_t)k * ldb + n];
			bs[kk][nn] = v;
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < GL_TK; kk++) {
			float av[4], bv[4];

#pragma unroll
			for (int i = 0; i < 4; i++)
				av[i] = as[kk][ty + GL_SPAN * i];
#pragma unroll
			for (int j = 0; j < 4; j++)
				bv[j] = bs[kk][tx + GL_SPAN * j];
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++)
					acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
		}
		__syncthreads(); /* the next chunk (or tile) overwrites as, bs */
	}

#pragma unroll
	for (int i = 0; i < 4; i++) {
		int m = m0 + ty + GL_SPAN * i;

		if (m >= m_len)
			continue;
#pragma unroll
		for (int j = 0; j < 4; j++) {
			int n = n0 + tx + GL_SPAN * j;

			if (n >= n_len)
				continue;
			float *p = c + (int64_t)m * ldc + n;
			*p = ADD ? *p + acc[i][j] : acc[i][j];
		}
	}
}

/* y[r, :] = x[r, :] W_g^T over the entry's rows; columns of out_dim in y. */
static __global__ void __launch_bounds__(GL_THREADS)
    gl_forward_kernel(float *y, const float *__restrict__ x, const float *__restrict__ w,
                      const struct gl_entry *__restrict__ table, int in_dim, int out_dim)
{
	__shared__ float as[GL_TK][GL_TM + GL_PAD];
	__shared__ float bs[GL_TK][GL_TN + GL_PAD];
	struct gl_entry e = table[blockIdx.x];
	int64_t r0 = e.row0;
	const float *wg = w + (int64_t)e.group * out_dim * in_dim;

	for (int64_t n0 = (int64_t)blockIdx.y * GL_TN; n0 < out_dim;
	     n0 += (int64_t)gridDim.y * GL_TN)
		gl_tile<true, true, false>(y + r0 * out_dim, out_dim, x + r0 * in_dim, in_dim, wg,
		                           in_dim, e.row1 - e.row0, out_dim, in_dim, 0, (int)n0, as,
		                           bs);
}

/* dx[r, :] += dy[r, :] W_g over the entry's rows; columns of in_dim in y. */
static __global__ void __launch_bounds__(GL_THREADS)
    gl_dx_kernel(float *dx, const float *__restrict__ dy, const float *__restrict__ w,
                 const struct gl_entry *__restrict__ table, int in_dim, int out_dim)
{
	__shared__ float as[GL_TK][GL_TM + GL_PAD];
	__shared__ float bs[GL_TK][GL_TN + GL_PAD];
	struct gl_entry e = table[blockIdx.x];
	int64_t r0 = e.row0;
	const float *wg = w + (int64_t)e.group * out_dim * in_dim;

	for (int64_t n0 = (int64_t)blockIdx.y * GL_TN; n0 < in_dim;
	     n0 += (int64_t)gridDim.y * GL_TN)
		gl_tile<true, false, true>(dx + r0 * in_dim, in_dim, dy + r0 * out_dim, out_dim, wg,
		                           in_dim, e.row1 - e.row0, in_dim, out_dim, 0, (int)n0, as,
		                           bs);
}

/* dW_g [out, in] += dy_g^T x_g: the k of the product is the group's rows,
 * summed in order by each output's thread. Columns of in_dim in y, rows of
 * out_dim in z. */
static __global__ void __launch_bounds__(GL_THREADS)
    gl_dw_kernel(float *dw, const float *__restrict__ dy, const float *__restrict__ x,
                 const struct gl_entry *__restrict__ table, int in_dim, int out_dim)
{
	__shared__ float as[GL_TK][GL_TM + GL_PAD];
	__shared__ float bs[GL_TK][GL_TN + GL_PAD];
	struct gl_entry e = table[blockIdx.x];
	int64_t r0 = e.row0;
	float *dwg = dw + (int64_t)e.group * out_dim * in_dim;

	for (int64_t m0 = (int64_t)blockIdx.z * GL_TM; m0 < out_dim;
	     m0 += (int64_t)gridDim.z * GL_TM)
		for (int64_t n0 = (int64_t)blockIdx.y * GL_TN; n0 < in_dim;
		     n0 += (int64_t)gridDim.y * GL_TN)
			gl_tile<false, false, true>(dwg, in_dim, dy + r0 * out_dim, out_dim,
			                            x + r0 * in_dim, in_dim, out_dim, in_dim,
			                            e.row1 - e.row0, (int)m0, (int)n0, as, bs);
}

static unsigned gl_grid_dim(int dim, int tile)
{
	int64_t t = rl_ceil_div(dim, tile);

	return (unsigned)(t < GL_GRID_YZ ? t : GL_GRID_YZ);
}

/* The row tiles of every group (when rows), then one entry per non-empty
 * group (when whole); *n_rows and *n_whole count them. NULL when malloc
 * fails, or with both counts 0 (nothing to do). */
static struct gl_entry *gl_table(const int32_t *offsets, int groups, bool rows, bool whole,
                                 int64_t *n_rows, int64_t *n_whole)
{
	int64_t nr = 0, nw = 0, i = 0;
	struct gl_entry *t;

	for (int g = 0; g < groups; g++) {
		int64_t len = (int64_t)offsets[g + 1] - offsets[g];

		nr += rows ? rl_ceil_div(len, GL_TM) : 0;
		nw += whole && len > 0;
	}
	*n_rows = nr;
	*n_whole = nw;
	if (nr + nw == 0)
		return NULL;
	t = (struct gl_entry *)malloc((size_t)(nr + nw) * sizeof(*t));
	if (!t)
		return NULL;
	for (int g = 0; rows && g < groups; g++)
		for (int64_t r = offsets[g]; r < offsets[g + 1]; r += GL_TM) {
			t[i].group = g;
			t[i].row0 = (int32_t)r;
			t[i].row1 =
			    (int32_t)(r + GL_TM < offsets[g + 1] ? r + GL_TM : offsets[g + 1]);
			i++;
		}
	for (int g = 0; whole && g < groups; g++)
		if (offsets[g + 1] > offsets[g]) {
			t[i].group = g;
			t[i].row0 = offsets[g];
			t[i].row1 = offsets[g + 1];
			i++;
		}
	return t;
}

/* count entries of host in fresh pool scratch on stream, or NULL. */
static struct gl_entry *gl_upload(const struct gl_entry *host, int64_t count, void *stream)
{
	size_t bytes = (size_t)count * sizeof(*host);
	struct gl_entry *dev = (struct gl_entry *)rl_cuda_alloc_async(bytes, stream);

	if (!dev)
		return NULL;
	if (cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, rl_stream(stream)) !=
	    cudaSuccess) {
		(void)cudaGetLastError(); /* not the next launch's failure */
		rl_cuda_release_async(dev, stream);
		return NULL;
	}
	return dev;
}

extern "C" int rl_grouped_linear_forward_cuda(struct rl_buf yb, struct rl_cbuf xb,
                                              struct rl_cbuf wb, const int32_t *offsets, int groups,
                                              int in_dim, int out_dim, void *stream)
{
	int64_t n_rows, n_whole;
	struct gl_entry *host, *dev;
	int rc;

	if (!yb.p || !xb.p || !wb.p ||
	    rl_grouped_linear_bad_groups(offsets, groups, in_dim, out_dim) ||
	    !rl_grouped_linear_types_ok(yb, xb, wb))
		return -1;
	/* bf16: group by group on the tensor cores (bf16 cuBLASLt) */
	if (xb.t == RL_BF16)
		return rl_grouped_linear_per_group(rl_linear_forward_cuda, yb, xb, wb, offsets,
		                                   groups, in_dim, out_dim, stream);

	float *y = (float *)yb.p;
	const float *x = (const float *)xb.p, *w = (const float *)wb.p;

	host = gl_table(offsets, groups, true, false, &n_rows, &n_whole);
	if (n_rows == 0)
		return 0; /* every group empty */
	if (!host)
		return -1;
	if (n_rows > INT_MAX) {
		free(host);
		return -1;
	}
	dev = gl_upload(host, n_rows, stream);
	free(host);
	if (!dev)
		return -1;
	gl_forward_kernel<<<dim3((unsigned)n_rows, gl_grid_dim(out_dim, GL_TN)), GL_THREADS, 0,
	                    rl_stream(stream)>>>(y, x, w, dev, in_dim, out_dim);
	rc = rl_launched();
	rl_cuda_release_async(dev, stream);
	return rc;
}

/* One invariant linear forward per group (kernels/cuda/linear_invariant.cu):
 * a row's outputs are one fixed-order sum each, whatever its expert's row
 * count. The offsets are host memory, so the loop needs no sync. */
extern "C" int rl_grouped_linear_forward_invariant_cuda(struct rl_buf y, struct rl_cbuf x,
                                                        struct rl_cbuf w, const int32_t *offsets,
                                                        int groups, int in_dim, int out_dim,
                                                        void *stream)
{
	return rl_grouped_linear_per_group(rl_linear_forward_invariant_cuda, y, x, w, offsets,
	                                   groups, in_dim, out_dim, stream);
}

extern "C" int rl_grouped_linear_backward_cuda(struct rl_buf dxb, float *dw, struct rl_cbuf dyb,
                                               struct rl_cbuf xb, struct rl_cbuf wb,
                                               const int32_t *offsets, int groups, int in_dim,
                                               int out_dim, void *stream)
{
	int64_t n_rows, n_whole;
	struct gl_entry *host, *dev;
	cudaStream_t st = rl_stream(stream);
	int rc = 0;

	if (!dyb.p || (dxb.p && !wb.p) || (dw && !xb.p) ||
	    rl_grouped_linear_bad_groups(offsets, groups, in_dim, out_dim) ||
	    !rl_linear_backward_types_ok(dxb, dyb, xb, wb))
		return -1;
	/* bf16: group by group on the tensor cores (bf16 cuBLASLt) */
	if (dyb.t == RL_BF16)
		return rl_grouped_linear_backward_per_group(rl_linear_backward_cuda, dxb, dw, dyb,
		                                            xb, wb, offsets, groups, in_dim,
		                                            out_dim, stream);

	float *dx = (float *)dxb.p;
	const float *dy = (const float *)dyb.p, *x = (const float *)xb.p, *w = (const float *)wb.p;

	if (!dx && !dw)
		return 0;
	host = gl_table(offsets, groups, dx != NULL, dw != NULL, &n_rows, &n_whole);
	if (n_rows + n_whole == 0)
		return 0;
	if (!host)
		return -1;
	if (n_rows > INT_MAX || n_whole > INT_MAX) {
		free(host);
		return -1;
	}
	dev = gl_upload(host, n_rows + n_whole, stream);
	free(host);
	if (!dev)
		return -1;
	if (dx) {
		gl_dx_kernel<<<dim3((unsigned)n_rows, gl_grid_dim(in_dim, GL_TN)), GL_THREADS, 0,
		               st>>>(dx, dy, w, dev, in_dim, out_dim);
		rc = rl_launched();
	}
	if (dw && rc == 0) {
		gl_dw_kernel<<<dim3((unsigned)n_whole, gl_grid_dim(in_dim, GL_TN),
		                    gl_grid_dim(out_dim, GL_TM)),
		               GL_THREADS, 0, st>>>(dw, dy, x, dev + n_rows, in_dim, out_dim);
		rc = rl_launched();
	}
	rl_cuda_release_async(dev, stream);
	return rc;
}
