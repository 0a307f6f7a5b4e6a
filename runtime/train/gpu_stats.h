/* logger.monitor_gpus on the training ranks: each reads its own GPU
 * (runtime/logger/gpu_monitor.c), and each step's readings are gathered
 * onto the first rank for metrics.jsonl, TensorBoard and the progress line.
 * defines: struct rl_gpu_watch, rl_trainer_gpu_watch_open,
 * rl_trainer_gpu_stats, rl_trainer_gpu_watch_close */
#ifndef RL_TRAIN_GPU_STATS_H
#define RL_TRAIN_GPU_STATS_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/logger/gpu_monitor.h"
#include "runtime/train/metrics.h"

struct rl_trainer;

struct rl_gpu_watch {
	struct rl_gpu_monitor *monitor; /* NULL: this rank reads no GPU */
	int node;
	double *all;               /* each training rank's slot of a step's readings */
	struct rl_gpu_stat *stats; /* the first rank's, one per GPU */
	int n_stats;
	bool noted; /* a failed reading was told */
};

/* Starts the rank's reading when logger.monitor_gpus is on; when the run
 * is on the CPU backend or NVML cannot read the GPU, the first rank
 * prints one note saying so, and the run goes on without readings.
 * -1 with err only when out of memory. */
int rl_trainer_gpu_watch_open(struct rl_trainer *t, char *err, size_t errlen);
/* The step's readings of every training rank into m (on the first rank;
 * m->gpus points into t's watch). Collective over the training ranks
 * when monitor_gpus is on; nothing otherwise. */
void rl_trainer_gpu_stats(struct rl_trainer *t, struct rl_step_metrics *m);
void rl_trainer_gpu_watch_close(struct rl_trainer *t);

#endif
