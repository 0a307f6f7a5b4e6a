/* extern "C" on the definition itself: nvcc may compile this without
 * config.h, and a namespace-scope const would otherwise have internal
 * linkage in C++. Positional, in the order of struct rl_ops: only the ops
 * written so far are set, and rl_ops_missing() names the first gap. */
#include "kernels/ops.h"

extern "C" const struct rl_ops rl_ops_cuda = {
    /* name */ "cuda",
    /* alloc, release, zero, to_host, from_host, copy */
    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
    /* embedding_forward, embedding_backward */ nullptr, nullptr,
    /* rmsnorm_forward */ rl_rmsnorm_forward_cuda,
};
