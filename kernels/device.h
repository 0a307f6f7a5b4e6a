/* Finding and opening the GPU a rank computes on, for the CUDA backend.
 * defines: rl_cuda_device_count, rl_cuda_device_open, rl_cuda_device_bus_id,
 * rl_cuda_host_alloc, rl_cuda_host_release */
#ifndef RL_KERNELS_DEVICE_H
#define RL_KERNELS_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Only defined when built --with-cuda (RL_HAVE_CUDA). */

/* The GPUs this process may use (after CUDA_VISIBLE_DEVICES); 0 when there
 * are none or the driver cannot be reached, with the reason in err. */
int rl_cuda_device_count(char *err, size_t errlen);

/* Makes GPU ordinal current for this thread and initialises its context, so
 * that a broken device fails here, named, and not in the first kernel.
 * Writes its name and memory to desc. 0, or -1 with err. */
int rl_cuda_device_open(int ordinal, char *desc, size_t desclen, char *err, size_t errlen);

/* The current device's PCI bus id ("0000:3b:00.0"): what tells two ranks
 * on one node that they share a GPU, whatever CUDA_VISIBLE_DEVICES each
 * was given. 0, or -1 with err. */
int rl_cuda_device_bus_id(char *out, size_t len, char *err, size_t errlen);

/* Pinned (page-locked) host memory, for buffers that copies to and from
 * the device stage through: NULL when CUDA refuses. */
void *rl_cuda_host_alloc(size_t bytes);
void rl_cuda_host_release(void *p);

#ifdef __cplusplus
}
#endif

#endif
