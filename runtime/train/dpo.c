#define _GNU_SOURCE
/* direct preference optimisation's step, validation and loss on the trainer every algorithm
 * shares. Not written yet: the run is refused before its first step. */
#include <stdio.h>

#include "runtime/train/trainer.h"

static int refuse(struct rl_trainer *t, char *err, size_t errlen)
{
	(void)t;
	snprintf(err, errlen, "direct preference optimisation (rlrun dpo) is not implemented yet");
	return -1;
}

const struct rl_trainer_algo rl_trainer_algo_dpo = {
    .name = "DPO",
    .setup = refuse,
};
