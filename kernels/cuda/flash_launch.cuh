/* The host side the bf16 flash-attention entry points share: argument
 * checks (all before any CUDA call, so they are testable without a GPU),
 * the grid and the opt-in to more than 48 KB of shared memory.
 *
 * Every kernel's grid is (n_seqs * heads, row blocks): x is the large one
 * (up to 2^31 - 1; y and z stop at 65535). A block is one (sequence, head)
 * and row blocks blockIdx.y, + gridDim.y, ... of it, so y can be clamped
 * and max_seqlen is a hint, never a correctness condition.
 * defines: fl_shape_ok, fl_bf16_ok, fl_f32_ok, fl_grid, fl_smem_optin, FL_LOG2E, FL_LN2 */
#ifndef RL_KERNELS_CUDA_FLASH_LAUNCH_CUH
#define RL_KERNELS_CUDA_FLASH_LAUNCH_CUH

#include <limits.h>
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "kernels/attention.h"

#define FL_LOG2E 1.4426950408889634f
#define FL_LN2   0.6931471805599453f

/* Shapes the kernels exist for; n_seqs * n_heads must also fit the grid. */
static inline bool fl_shape_ok(const struct rl_attention_shape *sh, int n_seqs)
{
	return sh && sh->n_heads > 0 && sh->n_kv_heads > 0 && sh->n_heads % sh->n_kv_heads == 0 &&
	       (sh->head_dim == 64 || sh->head_dim == 128) && isfinite(sh->scale) &&
	       (int64_t)n_seqs * sh->n_heads <= INT_MAX;
}

/* cp.async moves 16 bytes, and a head's row is a multiple of 16 bytes. */
static inline bool fl_bf16_ok(const void *p)
{
	return p && ((uintptr_t)p & 15) == 0;
}

static inline bool fl_f32_ok(const void *p)
{
	return p && ((uintptr_t)p & 3) == 0;
}

static inline dim3 fl_grid(int n_bh, int max_seqlen, int rows_per_block)
{
	int64_t y = ((int64_t)max_seqlen + rows_per_block - 1) / rows_per_block;

	y = y < 1 ? 1 : y > 65535 ? 65535 : y;
	return dim3((unsigned)n_bh, (unsigned)y, 1);
}

/* Above 48 KB a kernel needs the opt-in, per device; asked on every call,
 * which costs little and stays right when the caller switches devices. */
template <typename K> static inline int fl_smem_optin(K *kernel, int bytes)
{
	if (bytes <= 48 * 1024)
		return 0;
	return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) ==
	               cudaSuccess
	           ? 0
	           : -1;
}

#endif
