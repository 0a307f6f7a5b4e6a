/* The instructions the bf16 flash-attention kernels are made of, one inline
 * PTX wrapper each: the m16n8k16 bf16 tensor-core product with fp32
 * accumulation, ldmatrix (plain and transposed) and cp.async with zero fill.
 * Nothing here knows about tiles or attention; flash_tile.cuh builds on it.
 *
 * Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
 * g = lane / 4 and t = lane % 4; each 32-bit register holds two bf16, the
 * lower column (or k) index in the low half:
 *   A 16x16, 4 regs: (g, 2t) (g+8, 2t) (g, 2t+8) (g+8, 2t+8)
 *   B 16x8 (k x n), 2 regs: (k=2t, n=g) (k=2t+8, n=g)
 *   C 16x8 fp32, 4 floats: (g, 2t) (g, 2t+1) (g+8, 2t) (g+8, 2t+1)
 * So C tiles 2j and 2j+1, packed to bf16 pairs, are the A fragment of k
 * block j: the softmax output feeds the next product without a shuffle.
 * defines: fl_mma, fl_ldsm_x4, fl_ldsm_x4_t, fl_cp_async16, fl_cp_async4,
 * fl_cp_async_commit, fl_cp_async_wait_all, fl_smem_addr, fl_pack_bf16,
 * fl_exp2 */
#ifndef RL_KERNELS_CUDA_FLASH_MMA_CUH
#define RL_KERNELS_CUDA_FLASH_MMA_CUH

#include <stdint.h>

#include <cuda_runtime.h>

/* c += a * b over one 16x8x16 tile, fp32 accumulators. Not volatile: it
 * only reads and writes registers, and the compiler may schedule it. */
static __device__ __forceinline__ void fl_mma(float c[4], const uint32_t a[4], const uint32_t b[2])
{
	asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
	    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	    : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

static __device__ __forceinline__ uint32_t fl_smem_addr(const void *p)
{
	return (uint32_t)__cvta_generic_to_shared(p);
}

/* Four 8x8 bf16 matrices; lanes 8i .. 8i+7 give the 16-byte rows of matrix
 * i, and r[i] receives (row lane / 4, columns 2 (lane % 4), +1) of it.
 * volatile: it reads shared memory, so it must stay between the barriers
 * the kernels put around that memory. */
static __device__ __forceinline__ void fl_ldsm_x4(uint32_t r[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr));
}

/* The same, each matrix transposed: r[i] = rows 2 (lane % 4), +1 of column
 * lane / 4. */
static __device__ __forceinline__ void fl_ldsm_x4_t(uint32_t r[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(addr));
}

/* 16 bytes global -> shared, asynchronously, bypassing L1. With valid
 * false nothing is read and the 16 bytes are zeroed (src must still be a
 * mapped address: callers pass the tile's first row). */
static __device__ __forceinline__ void fl_cp_async16(uint32_t dst, const void *src, bool valid)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
	             "r"(valid ? 16 : 0)
	             : "memory");
}

/* 4 bytes, for the per-row floats (lse, rowsum(dO * O)), zero when !valid. */
static __device__ __forceinline__ void fl_cp_async4(uint32_t dst, const void *src, bool valid)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src),
	             "r"(valid ? 4 : 0)
	             : "memory");
}

static __device__ __forceinline__ void fl_cp_async_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* This thread's copies have landed; a __syncthreads() after it makes every
 * thread's copies visible to the block. */
static __device__ __forceinline__ void fl_cp_async_wait_all(void)
{
	asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* (lo, hi) rounded to nearest even, lo in the low half, as the fragments
 * want them. */
static __device__ __forceinline__ uint32_t fl_pack_bf16(float lo, float hi)
{
	uint32_t r;

	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

/* 2^x by the special-function unit (2 ulp); exp2(-inf) = 0, which the
 * masked scores rely on. */
static __device__ __forceinline__ float fl_exp2(float x)
{
	float y;

	asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
	return y;
}

#endif
