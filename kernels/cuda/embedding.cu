/* Token embedding on the device. The forward is a row gather that checks the
 * ids where they are, on the device, and raises a flag instead of returning
 * -1, so it never waits. The backward is a scatter-add made deterministic
 * without float atomics: the tokens are stably sorted by id, then one block
 * per (run of equal ids, column slice) adds the run's rows to dtable in token
 * order, which is exactly the CPU op's order, so the bits agree with it.
 *
 * Backward cost: a 32-bit radix sort of n (id, token) pairs (four passes over
 * 8 n bytes), one read of dout and one read and write of each touched dtable
 * row. A run of L equal ids is a chain of L additions per column: the most
 * frequent token bounds the time, about L dependent loads. */
#include <stdint.h>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/common.cuh"
#include "kernels/embedding.h"
#include "kernels/memory.h"

#define RL_EMB_THREADS 256
/* grid.y is at most 65535; wider rows loop over their slices */
#define RL_EMB_MAX_SLICES 65535
/* a grid-stride loop needs no more blocks than this to fill any GPU */
#define RL_EMB_MAX_BLOCKS 65536
/* every piece of the backward's scratch starts on this boundary */
#define RL_EMB_ALIGN 256

/* Set by a forward that met an id outside [-1, vocab); read and cleared by
 * rl_embedding_check_cuda. An int, so the only atomics are integer ones. */
static __device__ int rl_emb_bad_id;

/* -1, with CUDA's last error cleared: the ops read it after their launches
 * (rl_launched), and a failure handled here must not fail the next one. */
static int rl_emb_failed(void)
{
	(void)cudaGetLastError();
	return -1;
}

/* VEC (fp32 only): dim % 4 == 0 and out, table 16-byte aligned, so every
 * row is too. A bf16 table (T = uint16_t) is copied as its bits, +0 for a
 * zero row. */
template <bool VEC, typename T>
static __global__ void __launch_bounds__(RL_EMB_THREADS)
    rl_embedding_forward_kernel(T *__restrict__ out, const int32_t *__restrict__ ids,
                                const T *__restrict__ table, int dim, int vocab)
{
	size_t t = blockIdx.x;
	int32_t id = ids[t];
	T *dst = out + t * dim;
	/* -1 (another rank's token) and a bad id both give zeros */
	bool zero = id < 0 || id >= vocab;

	if (id != -1 && zero && threadIdx.x == 0)
		atomicExch(&rl_emb_bad_id, 1);
	if (VEC) {
		float4 *d4 = reinterpret_cast<float4 *>(dst);
		const float4 *s4 =
		    reinterpret_cast<const float4 *>(table + (size_t)(zero ? 0 : id) * dim);

		for (int i = threadIdx.x; i < dim / 4; i += RL_EMB_THREADS)
			d4[i] = zero ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : s4[i];
	} else {
		const T *src = table + (size_t)(zero ? 0 : id) * dim;

		for (int i = threadIdx.x; i < dim; i += RL_EMB_THREADS)
			dst[i] = zero ? T(0) : src[i];
	}
}

extern "C" int rl_embedding_forward_cuda(struct rl_buf out, const int32_t *ids,
                                         struct rl_cbuf table, int n, int dim, int vocab,
                                         void *stream)
{
	if (!out.p || !ids || !table.p || n < 0 || dim < 0 || vocab < 0 ||
	    !rl_act_type_ok(table.t) || out.t != table.t)
		return -1;
	if (n == 0)
		return 0;

	cudaStream_t st = rl_stream(stream);

	/* launched even when dim == 0: the ids must still be checked */
	if (table.t == RL_BF16) {
		rl_embedding_forward_kernel<false, uint16_t><<<n, RL_EMB_THREADS, 0, st>>>(
		    (uint16_t *)out.p, ids, (const uint16_t *)table.p, dim, vocab);
		return rl_launched();
	}

	float *o = (float *)out.p;
	const float *tab = (const float *)table.p;
	bool vec = dim % 4 == 0 && rl_aligned16(o) && rl_aligned16(tab);

	if (vec)
		rl_embedding_forward_kernel<true, float>
		    <<<n, RL_EMB_THREADS, 0, st>>>(o, ids, tab, dim, vocab);
	else
		rl_embedding_forward_kernel<false, float>
		    <<<n, RL_EMB_THREADS, 0, st>>>(o, ids, tab, dim, vocab);
	return rl_launched();
}

extern "C" int rl_embedding_check_cuda(void *stream)
{
	cudaStream_t st = rl_stream(stream);
	int bad = 0;
	void *flag = NULL;

	if (cudaMemcpyFromSymbolAsync(&bad, rl_emb_bad_id, sizeof(bad), 0, cudaMemcpyDeviceToHost,
	                              st) != cudaSuccess ||
	    cudaStreamSynchronize(st) != cudaSuccess)
		return rl_emb_failed();
	if (!bad)
		return 0;
	/* cleared on the same stream, after the forwards the caller ordered
	 * before this check, so a later forward's flag is not lost */
	if (cudaGetSymbolAddress(&flag, rl_emb_bad_id) != cudaSuccess ||
	    cudaMemsetAsync(flag, 0, sizeof(int), st) != cudaSuccess)
		return rl_emb_failed();
	return -1;
}

static __global__ void rl_iota_kernel(int32_t *v, int n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		v[i] = (int32_t)i;
}

/* Block (i, y): if sorted position i starts a run of one id, columns
 * y * THREADS + threadIdx.x (+ every gridDim.y * THREADS) of that id's row get
 * the run's dout rows added in token order (the sort is stable). A block
 * that does not start a run, or whose id is negative, returns at once. */
template <typename T>
static __global__ void __launch_bounds__(RL_EMB_THREADS)
    rl_embedding_backward_kernel(float *__restrict__ dtable, const T *__restrict__ dout,
                                 const int32_t *__restrict__ keys,
                                 const int32_t *__restrict__ tokens, int n, int dim)
{
	int i = blockIdx.x;
	int32_t id = keys[i];

	if (id < 0 || (i > 0 && keys[i - 1] == id))
		return;
	int end = i + 1;

	while (end < n && keys[end] == id)
		end++;
	for (int c = blockIdx.y * RL_EMB_THREADS + threadIdx.x; c < dim;
	     c += gridDim.y * RL_EMB_THREADS) {
		float *dst = dtable + (size_t)id * dim + c;
		/* starting from dtable's value, as the CPU's dst += src does */
		float acc = *dst;

#pragma unroll 4
		for (int j = i; j < end; j++)
			acc += rl_widen(dout[(size_t)tokens[j] * dim + c]);
		*dst = acc;
	}
}

static size_t rl_emb_round_up(size_t bytes)
{
	return (bytes + RL_EMB_ALIGN - 1) / RL_EMB_ALIGN * RL_EMB_ALIGN;
}

/* The sort and the run pass, on scratch of 3 * vec_bytes + sort_bytes. */
static int rl_embedding_backward_launch(float *dtable, struct rl_cbuf dout, const int32_t *ids,
                                        int n, int dim, char *scratch, size_t vec_bytes,
                                        size_t sort_bytes, cudaStream_t st)
{
	int32_t *keys = (int32_t *)scratch;
	int32_t *tokens_in = (int32_t *)(scratch + vec_bytes);
	int32_t *tokens = (int32_t *)(scratch + 2 * vec_bytes);
	int64_t blocks = rl_ceil_div(n, RL_EMB_THREADS);
	int64_t slices = rl_ceil_div(dim, RL_EMB_THREADS);

	rl_iota_kernel<<<(unsigned)(blocks < RL_EMB_MAX_BLOCKS ? blocks : RL_EMB_MAX_BLOCKS),
	                 RL_EMB_THREADS, 0, st>>>(tokens_in, n);
	if (rl_launched())
		return -1;
	/* radix sort is stable: equal ids keep their token order */
	if (cub::DeviceRadixSort::SortPairs(scratch + 3 * vec_bytes, sort_bytes, ids, keys,
	                                    (const int32_t *)tokens_in, tokens, n, 0, 32,
	                                    st) != cudaSuccess)
		return rl_emb_failed();

	dim3 grid((unsigned)n, (unsigned)(slices < RL_EMB_MAX_SLICES ? slices : RL_EMB_MAX_SLICES));

	if (dout.t == RL_BF16)
		rl_embedding_backward_kernel<uint16_t><<<grid, RL_EMB_THREADS, 0, st>>>(
		    dtable, (const uint16_t *)dout.p, keys, tokens, n, dim);
	else
		rl_embedding_backward_kernel<float><<<grid, RL_EMB_THREADS, 0, st>>>(
		    dtable, (const float *)dout.p, keys, tokens, n, dim);
	return rl_launched();
}

extern "C" int rl_embedding_backward_cuda(float *dtable, struct rl_cbuf dout, const int32_t *ids,
                                          int n, int dim, void *stream)
{
	if (!dtable || !dout.p || !ids || n < 0 || dim < 0 || !rl_act_type_ok(dout.t))
		return -1;
	if (n == 0 || dim == 0)
		return 0;

	cudaStream_t st = rl_stream(stream);
	size_t sort_bytes = 0;

	/* a size query: with a NULL temp pointer CUB touches no memory */
	if (cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, ids, (int32_t *)nullptr,
	                                    (const int32_t *)nullptr, (int32_t *)nullptr, n, 0, 32,
	                                    st) != cudaSuccess)
		return rl_emb_failed();

	size_t vec_bytes = rl_emb_round_up((size_t)n * sizeof(int32_t));
	char *scratch =
	    (char *)rl_cuda_alloc_async(3 * vec_bytes + rl_emb_round_up(sort_bytes), stream);

	if (!scratch)
		return -1;

	int rc = rl_embedding_backward_launch(dtable, dout, ids, n, dim, scratch, vec_bytes,
	                                      sort_bytes, st);

	/* ordered on the stream: not reused before the kernels above are done */
	rl_cuda_release_async(scratch, stream);
	return rc;
}
