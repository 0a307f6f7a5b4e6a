/* Resuming a run from its newest complete checkpoint.
 * defines: rl_trainer_resume */
#ifndef RL_TRAIN_RESUME_H
#define RL_TRAIN_RESUME_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/train/trainer.h"

/* checkpointing.resume: finds the newest complete checkpoint, verifies it,
 * checks that it belongs to this model and data, and loads every rank's
 * part of it, whatever layout wrote it, with the rollouts it had in flight.
 * *done_steps: the steps it holds (0 when the run starts fresh).
 * Collective. */
int rl_trainer_resume(struct rl_trainer *t, int64_t *done_steps, char *err, size_t errlen);

#endif
