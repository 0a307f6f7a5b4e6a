/* metrics.jsonl as `rlrun train` writes it into logger.log_dir: one JSON
 * object per GRPO (or SFT) step. The reader keeps what the plots and reports need.
 * defines: struct rl_metric_row, rl_metrics_read */
#ifndef RL_CLI_METRICS_READ_H
#define RL_CLI_METRICS_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rl_metric_row {
	int64_t step; /* 1-based */
	double reward_mean, reward_std;
	/* seconds; total_step_time also holds what the named timers miss */
	double total_step_time, generation, reward_calculation, policy_and_reference_logprobs,
	    policy_training, refit, checkpointing;
	bool has_val; /* a validation step */
	double val_reward;
	/* rlrun sft's line (no reward_mean; loss or val_loss): reward_mean
	 * holds its loss (NaN on the line of sft.val_at_start), val_reward its
	 * val_loss */
	bool supervised;
	double data_processing;
};

/* Reads PATH into a malloc'd array sorted by step. `step` (an integer >= 1)
 * and `reward_mean` are required, but on SFT's lines (`loss` or `val_loss`
 * and no reward_mean: supervised); reward_mean null (a non-finite value, as
 * `rlrun train` writes it) is NaN. reward_std, the timers and val_reward may
 * be absent or null (0, 0 and has_val = false). Other keys are ignored. A
 * resumed run appends steps again: the later line wins. A last line without
 * its newline that does not parse is a write in progress and is skipped.
 * Returns -1 with "PATH:LINE: why" (or "PATH: why") in err; *rows is then
 * NULL. An empty file is an error ("no steps yet"). */
int rl_metrics_read(const char *path, struct rl_metric_row **rows, size_t *n, char *err,
                    size_t errlen);

#endif
