/* A GPU's memory and utilisation, read from NVML (libnvidia-ml.so.1,
 * opened with dlopen at run time: the build needs no NVIDIA library, and
 * a machine without the driver gets a reason instead of a failed start).
 * A thread reads the GPU every collection interval; each take sums up the
 * readings since the one before.
 * defines: struct rl_gpu_reading, struct rl_gpu_monitor, rl_gpu_monitor_open,
 * rl_gpu_monitor_take, rl_gpu_monitor_close */
#ifndef RL_LOGGER_GPU_MONITOR_H
#define RL_LOGGER_GPU_MONITOR_H

#include <stddef.h>

struct rl_gpu_reading {
	unsigned index;      /* NVML's index of the GPU on its node (nvidia-smi's) */
	double mem_used_gb;  /* the most memory in use at any reading (GiB) */
	double mem_total_gb; /* GiB */
	double util;         /* mean of the readings' utilisation, percent */
	int readings;
};

struct rl_gpu_monitor;

/* Starts reading the GPU at PCI bus id ("0000:3b:00.0", as CUDA gives
 * it) every interval_s seconds. NULL, with why, when NVML cannot be
 * loaded or does not know the GPU. */
struct rl_gpu_monitor *rl_gpu_monitor_open(const char *bus_id, double interval_s, char *why,
                                           size_t whylen);
/* Reads the GPU once more, then sums up every reading since the last
 * take into r and starts afresh. 0, or -1 when NVML failed at each
 * reading (why says how). */
int rl_gpu_monitor_take(struct rl_gpu_monitor *m, struct rl_gpu_reading *r, char *why,
                        size_t whylen);
void rl_gpu_monitor_close(struct rl_gpu_monitor *m);

#endif
