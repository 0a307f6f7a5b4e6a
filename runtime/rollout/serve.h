/* Non-colocated generation, the generation ranks' side: a generation rank
 * does nothing but serve training rank 0's commands, in order, until it
 * says stop (bridge.h says how the two ends speak).
 * defines: struct rl_serve, rl_generation_serve */
#ifndef RL_ROLLOUT_SERVE_H
#define RL_ROLLOUT_SERVE_H

#include <stddef.h>

#include "runtime/comm/dist.h"
#include "runtime/model/model.h"
#include "runtime/rollout/generate.h"
#include "runtime/tokenizer/tokenizer.h"

struct rl_episodes; /* rollout/episodes.h */

/* What a generation rank serves with: the model cut for its own tensor
 * parallelism, which refits take the training weights into. */
struct rl_serve {
	struct rl_model *model;
	const struct rl_tokenizer *tok;
	const struct rl_gen_settings *gen;
	struct rl_dist *dist; /* this rank's: dist->generation, with the bridge */
	/* multi-turn: the run's episodes, played here (rollout/episodes.h);
	 * NULL: single responses */
	struct rl_episodes *episodes;
};

/* Serves until training rank 0 says stop. Returns 0, or -1 with err. */
int rl_generation_serve(const struct rl_serve *v, char *err, size_t errlen);

#endif
