/* The attention backward ops: one tile map, then the query side
 * (attention_backward_dq.cu) and the key side (attention_backward_dkdv.cu)
 * on the same stream. Neither uses atomics, so dq, dk and dv come out the
 * same bits on every run. */
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/attention.h"
#include "kernels/cuda/attention_common.cuh"

static int rl_attn_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out, const float *lse,
                            const struct rl_attn_src *src, const struct rl_attention_shape *sh,
                            void *stream)
{
	struct rl_attn_bwd b = {dq,
	                        dk,
	                        dv,
	                        dout,
	                        q,
	                        k,
	                        v,
	                        out,
	                        lse,
	                        *src,
	                        NULL,
	                        sh->n_heads,
	                        sh->n_kv_heads,
	                        sh->head_dim,
	                        sh->scale};
	const cudaStream_t st = rl_stream(stream);
	const int bq = rl_attn_dq_rpw(rl_attn_dc(b.D)) * RL_ATTN_WARPS;
	int *ts = rl_attn_build_map(&b.src, bq, st);

	if (!ts)
		return -1;
	b.ts = ts;

	int rc = rl_attn_dq_launch(&b, st);

	if (rc == 0)
		rc = rl_attn_dkdv_launch(&b, st);
	rl_attn_release_map(ts, st);
	return rc;
}

extern "C" int rl_attention_backward_cuda(float *dq, float *dk, float *dv, const float *dout,
                                          const float *q, const float *k, const float *v,
                                          const float *out, const float *lse,
                                          const int32_t *cu_seqlens, int n_seqs,
                                          const struct rl_attention_shape *shape, void *stream)
{
	if (n_seqs < 0 || !rl_attn_shape_ok(shape))
		return -1;
	if (n_seqs == 0)
		return 0;
	if (!cu_seqlens || !dq || !dk || !dv || !dout || !q || !k || !v || !out || !lse)
		return -1;

	const struct rl_attn_src src = rl_attn_seqs_src(cu_seqlens, n_seqs);

	return rl_attn_backward(dq, dk, dv, dout, q, k, v, out, lse, &src, shape, stream);
}

extern "C" int rl_attention_chunks_backward_cuda(float *dq, float *dk, float *dv, const float *dout,
                                                 const float *q, const float *k, const float *v,
                                                 const float *out, const float *lse,
                                                 const struct rl_attention_chunks *chunks,
                                                 const struct rl_attention_shape *shape,
                                                 void *stream)
{
	const int go = rl_attn_chunks_check(chunks, shape);

	if (go <= 0)
		return go;
	if (!dq || !dk || !dv || !dout || !q || !k || !v || !out || !lse)
		return -1;

	const struct rl_attn_src src = rl_attn_chunks_src(chunks);

	return rl_attn_backward(dq, dk, dv, dout, q, k, v, out, lse, &src, shape, stream);
}
