/* The bf16 attention backward's entry point: checks the arguments, then
 * runs rowsum(dO * O) into the workspace (here), dK and dV
 * (flash_bwd_dkdv.cu), dQ (flash_bwd_dq.cu), all on one stream, so each
 * kernel sees the previous one's writes. */
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/attention_bf16.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/flash_bwd.cuh"
#include "kernels/cuda/flash_launch.cuh"

#define FL_DSUM_ROWS    64 /* rows per block and step: 8 warps, 8 rows each */
#define FL_DSUM_THREADS 256

static __device__ __forceinline__ float fl_bf16_lo(uint32_t x)
{
	return __uint_as_float(x << 16);
}

static __device__ __forceinline__ float fl_bf16_hi(uint32_t x)
{
	return __uint_as_float(x & 0xffff0000u);
}

/* D_i = sum_d dO[i, d] O[i, d] for one (sequence, head), a warp per row;
 * the bf16 O the forward stored, as FlashAttention does, accumulated in
 * fp32 in a fixed order. */
template <int D>
static __global__ void __launch_bounds__(FL_DSUM_THREADS)
    fl_dsum_kernel(const struct fl_bwd_params p)
{
	const int seq = (int)blockIdx.x / p.n_heads, h = (int)blockIdx.x % p.n_heads;
	const int64_t row0 = p.cu[seq];
	const int len = p.cu[seq + 1] - p.cu[seq];
	const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;

	for (int base = (int)blockIdx.y * FL_DSUM_ROWS; base < len;
	     base += (int)gridDim.y * FL_DSUM_ROWS) {
		for (int r = base + warp; r < base + FL_DSUM_ROWS && r < len;
		     r += FL_DSUM_THREADS / 32) {
			const int64_t o = (row0 + r) * p.ldq + (int64_t)h * D;
			const uint32_t *a = (const uint32_t *)(p.dout + o);
			const uint32_t *b = (const uint32_t *)(p.out + o);
			float acc = 0.0f;

#pragma unroll
			for (int c = lane; c < D / 2; c += 32) {
				const uint32_t x = a[c], y = b[c];

				acc = fmaf(fl_bf16_lo(x), fl_bf16_lo(y), acc);
				acc = fmaf(fl_bf16_hi(x), fl_bf16_hi(y), acc);
			}
			acc = rl_warp_sum(acc);
			if (lane == 0)
				p.dsum[(row0 + r) * p.n_heads + h] = acc;
		}
	}
}

extern "C" size_t rl_attention_backward_bf16_workspace_size(int64_t n_tokens,
                                                            const struct rl_attention_shape *shape)
{
	if (n_tokens < 0 || !fl_shape_ok(shape, 0))
		return 0;

	const size_t bytes = (size_t)n_tokens * (size_t)shape->n_heads * sizeof(float);

	return bytes < 256 ? 256 : bytes;
}

extern "C" int
rl_attention_backward_bf16_cuda(uint16_t *dq, uint16_t *dk, uint16_t *dv, const uint16_t *dout,
                                const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                const uint16_t *out, const float *lse, const int32_t *cu_seqlens,
                                int n_seqs, int max_seqlen, const struct rl_attention_shape *shape,
                                float *workspace, void *stream)
{
	if (n_seqs < 0 || max_seqlen < 0 || !fl_shape_ok(shape, n_seqs) || !cu_seqlens)
		return -1;
	if (!fl_bf16_ok(dq) || !fl_bf16_ok(dk) || !fl_bf16_ok(dv) || !fl_bf16_ok(dout) ||
	    !fl_bf16_ok(q) || !fl_bf16_ok(k) || !fl_bf16_ok(v) || !fl_bf16_ok(out) ||
	    !fl_f32_ok(lse) || !fl_f32_ok(workspace))
		return -1;
	if (n_seqs == 0)
		return 0;

	const int D = shape->head_dim;
	struct fl_bwd_params p;

	p.dq = dq;
	p.dk = dk;
	p.dv = dv;
	p.dout = dout;
	p.q = q;
	p.k = k;
	p.v = v;
	p.out = out;
	p.lse = lse;
	p.dsum = workspace;
	p.cu = cu_seqlens;
	p.n_heads = shape->n_heads;
	p.n_kv_heads = shape->n_kv_heads;
	p.rep = shape->n_heads / shape->n_kv_heads;
	p.ldq = shape->n_heads * D;
	p.ldkv = shape->n_kv_heads * D;
	p.scale = shape->scale;
	p.scale_log2 = shape->scale * FL_LOG2E;
	p.n_seqs = n_seqs;
	p.max_seqlen = max_seqlen;

	const dim3 grid = fl_grid(n_seqs * shape->n_heads, max_seqlen, FL_DSUM_ROWS);

	if (D == 64)
		fl_dsum_kernel<64><<<grid, FL_DSUM_THREADS, 0, rl_stream(stream)>>>(p);
	else
		fl_dsum_kernel<128><<<grid, FL_DSUM_THREADS, 0, rl_stream(stream)>>>(p);
	if (rl_launched())
		return -1;
	if (rl_flash_bwd_dkdv_launch(&p, D, stream))
		return -1;
	return rl_flash_bwd_dq_launch(&p, D, stream);
}
