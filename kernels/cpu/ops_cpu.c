#include "kernels/ops.h"

const struct rl_ops rl_ops_cpu = {
    .name = "cpu",
    .rmsnorm_forward = rl_rmsnorm_forward_cpu,
};
