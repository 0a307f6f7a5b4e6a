/* The op table. Every op has a CPU reference and a CUDA kernel with one
 * signature, so a caller picks a backend once and the tests hold each kernel
 * to its reference field by field. New ops are added as fields here.
 * defines: struct rl_ops, rl_ops_cpu, rl_ops_cuda (RL_HAVE_CUDA only) */
#ifndef RL_KERNELS_OPS_H
#define RL_KERNELS_OPS_H

#include "kernels/rmsnorm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rl_ops {
	const char *name;
	rl_rmsnorm_forward_fn rmsnorm_forward;
};

extern const struct rl_ops rl_ops_cpu;
#ifdef RL_HAVE_CUDA
extern const struct rl_ops rl_ops_cuda;
#endif

#ifdef __cplusplus
}
#endif

#endif
