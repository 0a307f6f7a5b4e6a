/* Which op table a run computes with: policy.backend (auto | cpu | cuda)
 * resolved against this build and this machine, once, before any model
 * memory exists.
 * defines: rl_backend_pick, rl_backend_gpu, rl_backend_memory_left */
#ifndef RL_MODEL_BACKEND_H
#define RL_MODEL_BACKEND_H

#include <stddef.h>

#include "kernels/ops.h"

/* want: "auto", "cpu" or "cuda". On success
 * *ops is the table and desc says what was chosen ("cpu", "cuda: GPU 0:
 * NVIDIA H100 ..."). cuda that this build or this machine cannot give is an
 * error, never a quiet fall back to the CPU; auto falls back, and says so in
 * desc. RL_OPS_FENCED=1 in the environment puts the fenced table
 * (kernels/fenced.h) in place of the CPU one. 0, or -1 with err. */
int rl_backend_pick(const char *want, const struct rl_ops **ops, char *desc, size_t desclen,
                    char *err, size_t errlen);

/* The PCI bus id of the GPU the table computes on: 1 and bus_id, 0 for a
 * backend without one (bus_id ""), -1 with err. */
int rl_backend_gpu(const struct rl_ops *ops, char *bus_id, size_t len, char *err, size_t errlen);

/* Bytes that a share util of the device's memory leaves once what this
 * process holds now is counted (vLLM's gpu_memory_utilization): 1 and
 * *bytes (0 when nothing is left) on a GPU; 0 on a backend whose memory is
 * the host's, where the share means nothing; -1 when the device cannot
 * say. */
int rl_backend_memory_left(const struct rl_ops *ops, double util, size_t *bytes);

#endif
