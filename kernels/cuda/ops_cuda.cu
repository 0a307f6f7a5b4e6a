/* extern "C" on the definition itself: nvcc may compile this without
 * config.h, and a namespace-scope const would otherwise have internal
 * linkage in C++. */
#include "kernels/ops.h"

extern "C" const struct rl_ops rl_ops_cuda = {
    /* .name = */ "cuda",
    /* .rmsnorm_forward = */ rl_rmsnorm_forward_cuda,
};
