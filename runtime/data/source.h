/* Where a run's prompts come from: a JSONL dataset (of prompts, or of DPO's
 * preference pairs) walked in shuffled epochs,
 * or a built-in synthetic task that makes fresh problems from the seed; in
 * both cases rendered through the prompt template.
 * defines: struct rl_data_source, rl_data_source_open, rl_data_source_next,
 * rl_data_source_next_indices, rl_data_source_last_batch,
 * rl_data_source_next_examples, rl_data_source_val_example,
 * rl_data_source_val, rl_data_source_close, struct rl_data_position,
 * rl_data_source_position, rl_data_source_restore */
#ifndef RL_DATA_SOURCE_H
#define RL_DATA_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/config/config.h"
#include "runtime/data/dataset.h"
#include "runtime/data/order.h"
#include "runtime/data/preference.h"
#include "runtime/data/prompt.h"
#include "runtime/data/synthetic.h"

struct rl_data_source {
	bool synthetic;
	enum rl_task_kind task;
	uint64_t seed;
	int64_t next_problem; /* synthetic: problems handed out so far */
	struct rl_dataset train, val;
	bool has_val;
	struct rl_data_order order;
	struct rl_prompt prompt;
	size_t *batch_idx;
};

int rl_data_source_open(struct rl_data_source *d, const struct rl_config *cfg, size_t per_step,
                        char *err, size_t errlen);
/* The next n problems, their answers (entries may be NULL), rendered
 * prompts and, when metadata is not NULL, their rows' extra_env_info
 * (JSON text; NULL for a row without and for a built-in task), each
 * malloc'd. 1: filled; 0: the epochs are exhausted; -1: error. */
int rl_data_source_next(struct rl_data_source *d, int n, char **problems, char **answers,
                        char **prompts, char **metadata, char *err, size_t errlen);
/* SFT: the next step's examples as indices into d->train.ex (*idx holds
 * the per_step given to open, valid until the next call). 1: filled; 0:
 * the epochs are exhausted (or a synthetic task, which has no examples). */
int rl_data_source_next_indices(struct rl_data_source *d, const size_t **idx);
/* Whether the batch just handed out was the epochs' last one. */
bool rl_data_source_last_batch(const struct rl_data_source *d);
/* The next n examples of a data set (not a built-in task), borrowed from
 * the source, and their rendered prompts (malloc'd): what DPO takes, whose
 * examples are preference pairs (preference.h). 1: filled; 0: the epochs
 * are exhausted; -1: error. It moves the same order as rl_data_source_next,
 * so the checkpointed position covers it. */
int rl_data_source_next_examples(struct rl_data_source *d, int n, const struct rl_example **ex,
                                 char **prompts, char *err, size_t errlen);
/* Validation example k (k < rl_data_source_val_count) and its rendered
 * prompt (malloc'd), or -1. */
int rl_data_source_val_example(struct rl_data_source *d, size_t k, const struct rl_example **ex,
                               char **prompt, char *err, size_t errlen);
/* Validation problem k (k < the count returned through *n_val), with its
 * row's extra_env_info when metadata is not NULL (as rl_data_source_next),
 * or -1. Synthetic tasks draw validation problems from their own stream,
 * apart from the training ones. */
size_t rl_data_source_val_count(const struct rl_data_source *d, size_t max);
int rl_data_source_val(struct rl_data_source *d, size_t k, char **problem, char **answer,
                       char **prompt, char **metadata, char *err, size_t errlen);
void rl_data_source_close(struct rl_data_source *d);

/* Where the loader stands, for a checkpoint: a dataset's size, epoch and
 * position in it, or a synthetic task's next problem number. */
struct rl_data_position {
	uint64_t examples; /* 0 for a synthetic task */
	int64_t epoch;
	uint64_t position;
	int64_t next_problem;
};

void rl_data_source_position(const struct rl_data_source *d, struct rl_data_position *p);
/* Moves a freshly opened source to p, so that the next batches are the ones
 * the saved source would have given. Refuses a dataset of another size,
 * which would make the saved position meaningless. */
int rl_data_source_restore(struct rl_data_source *d, const struct rl_data_position *p, char *err,
                           size_t errlen);

#endif
