/* What the three kernels of the bf16 attention backward share: their
 * parameters and their launchers. flash_bwd.cu runs them in order:
 * rowsum(dO * O) into the workspace, then dK and dV (flash_bwd_dkdv.cu),
 * then dQ (flash_bwd_dq.cu). Splitting dQ from dK/dV costs recomputing
 * S and dP once more, and buys a backward without atomics: each output row
 * is summed by one block in a fixed order, so it is the same bits on every
 * run.
 * defines: struct fl_bwd_params, rl_flash_bwd_dkdv_launch, rl_flash_bwd_dq_launch */
#ifndef RL_KERNELS_CUDA_FLASH_BWD_CUH
#define RL_KERNELS_CUDA_FLASH_BWD_CUH

#include <stdint.h>

struct fl_bwd_params {
	uint16_t *dq, *dk, *dv;
	const uint16_t *dout, *q, *k, *v, *out;
	const float *lse;
	float *dsum; /* [T, n_heads]: rowsum(dO * O), the workspace */
	const int32_t *cu;
	int n_heads, n_kv_heads, rep, ldq, ldkv; /* ld*: elements between tokens */
	float scale, scale_log2;
	int n_seqs, max_seqlen;
};

/* Both return 0 or -1 (launch failure); head_dim is 64 or 128. */
int rl_flash_bwd_dkdv_launch(const struct fl_bwd_params *p, int head_dim, void *stream);
int rl_flash_bwd_dq_launch(const struct fl_bwd_params *p, int head_dim, void *stream);

#endif
