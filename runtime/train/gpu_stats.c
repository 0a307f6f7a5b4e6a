#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "runtime/model/backend.h"
#include "runtime/train/gpu_stats.h"
#include "runtime/train/trainer.h"

/* a rank's slot in the gathered readings: has one, node, index, memory
 * used, memory total, utilisation */
enum { SLOT = 6 };

/* The node the plugin placed the rank on (rlrun(1), RL_NODE_RANK); 0
 * outside Slurm, where a run is on one node. */
static int node_rank(void)
{
	const char *v = getenv("RL_NODE_RANK");

	return v && *v ? atoi(v) : 0;
}

int rl_trainer_gpu_watch_open(struct rl_trainer *t, char *err, size_t errlen)
{
	const struct rl_config *c = t->cfg;
	int ranks = rl_trainer_world_size(t);
	char bus[64], why[512];

	memset(&t->gpu, 0, sizeof t->gpu);
	if (!c->logger.monitor_gpus)
		return 0;
	t->gpu.node = node_rank();
	t->gpu.all = calloc((size_t)ranks * SLOT, sizeof *t->gpu.all);
	t->gpu.stats = calloc((size_t)ranks, sizeof *t->gpu.stats);
	if (!t->gpu.all || !t->gpu.stats) {
		snprintf(err, errlen, "logger.monitor_gpus: out of memory");
		return -1;
	}
	int on_gpu = rl_backend_gpu(t->model->ops, bus, sizeof bus, why, sizeof why);
	if (on_gpu == 0)
		snprintf(why, sizeof why, "the run computes on the %s backend, not on a GPU",
		         t->model->ops->name);
	else if (on_gpu > 0)
		t->gpu.monitor = rl_gpu_monitor_open(
		    bus, c->logger.gpu_monitoring.collection_interval, why, sizeof why);
	if (!t->gpu.monitor && t->progress)
		fprintf(
		    t->progress,
		    "rlrun train: note: logger.monitor_gpus: nothing to monitor: %s; the run goes "
		    "on without GPU readings\n",
		    why);
	else if (t->progress)
		fprintf(t->progress,
		        "rlrun train: logger.monitor_gpus: GPU memory and utilisation read every "
		        "%gs and at each step's end, logged with the step\n",
		        c->logger.gpu_monitoring.collection_interval);
	return 0;
}

void rl_trainer_gpu_stats(struct rl_trainer *t, struct rl_step_metrics *m)
{
	int ranks = rl_trainer_world_size(t), me = rl_trainer_rank(t);
	struct rl_gpu_reading r;
	double *all = t->gpu.all;
	char why[256];

	if (!all)
		return;
	memset(all, 0, (size_t)ranks * SLOT * sizeof *all);
	if (t->gpu.monitor) {
		if (rl_gpu_monitor_take(t->gpu.monitor, &r, why, sizeof why) == 0)
			memcpy(all + (size_t)me * SLOT,
			       (double[SLOT]){1, t->gpu.node, r.index, r.mem_used_gb,
			                      r.mem_total_gb, r.util},
			       sizeof(double[SLOT]));
		else if (t->progress && !t->gpu.noted) {
			/* once: a GPU NVML cannot read stays so */
			fprintf(t->progress, "rlrun train: note: logger.monitor_gpus: %s\n", why);
			t->gpu.noted = true;
		}
	}
	/* every training rank takes part, with or without its readings */
	if (t->dist)
		rl_comm_all_reduce(t->dist->g[RL_G_WORLD], all, (size_t)ranks * SLOT, RL_COMM_F64,
		                   RL_COMM_SUM, "GPU readings");
	if (!rl_trainer_is_main(t))
		return;
	t->gpu.n_stats = 0;
	for (int k = 0; k < ranks; k++) {
		const double *s = all + (size_t)k * SLOT;
		struct rl_gpu_stat g = {(int)s[1], (unsigned)s[2], s[3], s[4], s[5]};
		bool seen = false;

		if (s[0] != 1)
			continue;
		/* ranks that share a GPU read the same one */
		for (int j = 0; j < t->gpu.n_stats && !seen; j++)
			seen = t->gpu.stats[j].node == g.node && t->gpu.stats[j].index == g.index;
		if (!seen)
			t->gpu.stats[t->gpu.n_stats++] = g;
	}
	m->gpus = t->gpu.stats;
	m->n_gpus = t->gpu.n_stats;
}

void rl_trainer_gpu_watch_close(struct rl_trainer *t)
{
	rl_gpu_monitor_close(t->gpu.monitor);
	free(t->gpu.stats);
	free(t->gpu.all);
	memset(&t->gpu, 0, sizeof t->gpu);
}
