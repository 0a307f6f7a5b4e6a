/* RL_GRAD_DUMP=FILE: the gradient of the run's first optimizer update, summed
 * over every rank and before clipping, with that batch's loss, written by
 * the first rank as safetensors (one tensor per parameter, by its Hugging
 * Face name, and "loss"). How the tests show that every layout computes
 * the single-process gradient; a debugging aid otherwise.
 * defines: rl_grad_dump_write */
#ifndef RL_TRAIN_GRAD_DUMP_H
#define RL_TRAIN_GRAD_DUMP_H

#include <stddef.h>

#include "runtime/train/trainer.h"

/* After the gradients are complete (reduced, with several ranks); a
 * collective with several ranks. */
int rl_grad_dump_write(struct rl_trainer *t, double loss, char *err, size_t errlen);

#endif
