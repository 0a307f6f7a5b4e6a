/* checkpointing.keep_top_k: which committed checkpoints stay.
 * defines: struct rl_ckpt_rank, rl_ckpt_choose_removals, rl_ckpt_retain */
#ifndef RL_CKPT_RETAIN_H
#define RL_CKPT_RETAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rl_ckpt_rank {
	int64_t step;
	bool has_metric; /* the run state holds the metric, as a number */
	double metric;
};

/* Sets remove[i] for every checkpoint that is neither among the keep_top_k
 * best nor the newest. by_metric: best by metric (higher or lower is
 * better; a checkpoint without the metric ranks last, ties go to the newer
 * one), otherwise the newest keep_top_k. keep_top_k <= 0 keeps all. */
void rl_ckpt_choose_removals(const struct rl_ckpt_rank *c, int n, int keep_top_k, bool by_metric,
                             bool higher_is_better, bool *remove);

/* Applies the choice to ROOT's committed checkpoints, reading each one's
 * metric from its run state. metric_name NULL: by step. */
int rl_ckpt_retain(const char *root, int keep_top_k, const char *metric_name, bool higher_is_better,
                   char *err, size_t errlen);

#endif
